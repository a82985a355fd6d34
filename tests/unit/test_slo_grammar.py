"""SLO grammar gaps closed for issue 4: exact lines and keys, multipliers, aliases, duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.core.errors import SLOSyntaxError
from pytest_brokerperf.judge.slo import load_slo_file, merge_slos, parse_slo


def load(tmp_path: Path, text: str) -> list:
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    return load_slo_file(path)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(SLOSyntaxError) as exc:
        load(tmp_path, text)
    return str(exc.value)


@pytest.mark.parametrize(("expr", "threshold", "shown"), [
    ("ack_rate >= 5k msg/s", 5000, "ack_rate >= 5000 msg/s"),
    ("ack_rate >= 1.5kmsg/s", 1500, "ack_rate >= 1500 msg/s"),
    ("consume_rate > 2M", 2e6, "consume_rate > 2000000"),
    ("lost < 1k", 1000, "lost < 1000"),
    ("publish_mib_s >= 1 MiB/s", 1, "publish_mib_s >= 1 MiB/s"),
])
def test_rate_and_count_multipliers(expr: str, threshold: float, shown: str) -> None:
    slo = parse_slo(expr)
    assert slo.threshold == threshold and str(slo) == shown


def test_no_multiplier_on_time_metrics() -> None:
    with pytest.raises(SLOSyntaxError, match="not accepted"):
        parse_slo("e2e_response.p99 < 5k ms")


def test_nested_selector_errors_cite_their_own_line_and_key(tmp_path: Path) -> None:
    text = error(tmp_path, """slos:
  - expr: "e2e_response.p99 < 50 ms"
    when:
      broker: kafka
      params:
        partitions: [4, 8]
        rate: {a: 1}
""")
    assert text.startswith(f"{tmp_path / 'slo.yaml'}:7: slos[0].when.params.rate = ")
    assert "write e.g. `rate: 4`" in text


def test_unit_errors_cite_the_value_line(tmp_path: Path) -> None:
    text = error(tmp_path, """slos:
  - metric: lost
    op: "<"
    value: 5 parsecs
""")
    assert ":4: slos[0].value = " in text and "unit 'parsecs'" in text
    text = error(tmp_path, """slos:
  - metric: e2e_response.p99
    op: "<"
    value: 5
    unit: parsecs
""")
    assert ":5: slos[0].unit = " in text


def test_duplicate_keys_are_errors_not_silently_dropped(tmp_path: Path) -> None:
    text = error(tmp_path, """slos:
  - expr: "lost == 0"
    when: {broker: kafka}
    when: {broker: pulsar}
""")
    assert ":4: slos[0].when = " in text and "appears twice" in text
    text = error(tmp_path, """slos:
  - expr: "lost == 0"
    when:
      env: ci
      env: local
""")
    assert ":5: slos[0].when.env" in text


def test_selector_aliases_and_environment_label(tmp_path: Path) -> None:
    (slo,) = load(tmp_path, """slos:
  - expr: "ack_rate >= 1k msg/s"
    when: {environment: ci-2core, parameters: {partitions: 4}, scenario: "tail*"}
""")
    assert slo.when.env == ("ci-2core",) and slo.when.params == (("partitions", (4,)),)
    assert slo.applies_to("kafka", "tailread", {"partitions": 4}, "ci-2core")
    assert not slo.applies_to("kafka", "tailread", {"partitions": 4}, "laptop")
    text = error(tmp_path, """slos:
  - expr: "lost == 0"
    when: {env: ci, environment: local}
""")
    assert "given twice" in text


def test_file_slo_replaces_only_the_shipped_bound_of_its_metric(tmp_path: Path) -> None:
    user = load(tmp_path, """slos:
  - metric: lost
    op: "<="
    value: 0.1 %
    when: {broker: kafka}
  - "e2e_response.p99.9 < 200 ms"
""")
    shipped = [parse_slo("lost == 0"), parse_slo("e2e_response.p99 < 5 s")]
    merged = merge_slos(shipped, user, broker="kafka", scenario="tailread", env="ci")
    assert [str(s) for s in merged] == [
        "e2e_response.p99 < 5 s", "lost <= 0.1%", "e2e_response.p99.9 < 200 ms"]
    other = merge_slos(shipped, user, broker="pulsar", scenario="tailread", env="ci")
    assert "lost == 0" in [str(s) for s in other]
