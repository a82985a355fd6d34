"""SLO grammar, units, selectors, files, evaluation (incl. inconclusive) and precedence."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.core.errors import ConfigError, SLOSyntaxError
from pytest_brokerperf.judge.slo import (
    METRICS,
    SCALARS,
    SLO,
    TAIL_READ_SANITY_SLOS,
    Selector,
    SLOStatus,
    evaluate,
    load_slo_file,
    merge_slos,
    parse_slo,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slos.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ grammar and units


@pytest.mark.parametrize(
    ("expr", "metric", "op", "threshold"),
    [
        ("e2e_response.p99 < 50ms", "e2e_response.p99", "<", 50_000.0),
        ("e2e_response.p99 < 50 ms", "e2e_response.p99", "<", 50_000.0),
        ("  publish_latency.p99.9<=2.5 s ", "publish_latency.p99.9", "<=", 2_500_000.0),
        ("publish_delay.max > 100 us", "publish_delay.max", ">", 100.0),
        ("publish_delay.mean >= 100 µs", "publish_delay.mean", ">=", 100.0),
        ("e2e_latency.p99.99 != 1 μs", "e2e_latency.p99.99", "!=", 1.0),
        ("publish_response.p50 == 1e3 us", "publish_response.p50", "==", 1000.0),
        ("ack_rate >= 900 msg/s", "ack_rate", ">=", 900.0),
        ("consume_rate >= 900", "consume_rate", ">=", 900.0),
        ("publish_mib_s > 0.9 MiB/s", "publish_mib_s", ">", 0.9),
        ("consume_mib_s > 1", "consume_mib_s", ">", 1.0),
        ("lost == 0", "lost", "==", 0.0),
        ("duplicates <= 10", "duplicates", "<=", 10.0),
        ("reordered == 0", "reordered", "==", 0.0),
        ("send_errors < 1", "send_errors", "<", 1.0),
        ("lost <= 0.1%", "lost", "<=", 0.1),
        ("lost <= 0.1 %", "lost", "<=", 0.1),
    ],
)
def test_parse(expr: str, metric: str, op: str, threshold: float) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.op) == (metric, op)
    assert slo.threshold == pytest.approx(threshold)
    assert SLO.parse(str(slo)) == slo  # str() is a canonical, parseable form


def test_every_metric_parses() -> None:
    for metric in METRICS:
        # scalars may be dotted (``mixed.publish_p99_ratio``): only the views take a time
        unit = "" if metric in SCALARS else " ms"
        assert parse_slo(f"{metric} < 1{unit}").metric == metric


def test_str_is_normalized() -> None:
    assert str(parse_slo("e2e_response.p99<50ms")) == "e2e_response.p99 < 50 ms"
    assert str(parse_slo("lost<=0.1 %")) == "lost <= 0.1%"


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("e2e_response.p99 < 50", "a time bound needs a unit"),
        ("e2e_respons.p99 < 5 ms", "did you mean 'e2e_response.p99'"),
        ("e2e_response.p999 < 5 ms", "did you mean 'e2e_response.p99.9'"),
        ("lost = 0", "write '=='"),
        ("lost =< 0", "cannot parse"),
        ("publish_mib_s > 3 MB/s", "MiB/s"),
        ("e2e_response.p99 < 5 MS", "write ms"),
        ("ack_rate > 5 msgs/s", "write msg/s"),
        ("duplicates <= 1%", "remove the unit"),
        ("lost > -1", "negative"),
        ("lost < ten", "cannot parse"),
        ("", "cannot parse"),
    ],
)
def test_parse_errors_name_expression_and_fix(expr: str, fragment: str) -> None:
    with pytest.raises(SLOSyntaxError) as info:
        parse_slo(expr, source="--brokerperf-slo")
    msg = str(info.value)
    assert msg.startswith(f"--brokerperf-slo: expr = {expr!r}: ")
    assert "Fix:" in msg and fragment in msg
    assert isinstance(info.value, ConfigError)


def test_slo_is_frozen_hashable_picklable() -> None:
    slo = parse_slo("e2e_response.p99 < 50 ms", when={"broker": ["kafka", "redpanda"]})
    assert pickle.loads(pickle.dumps(slo)) == slo
    assert (
        len({slo, parse_slo("e2e_response.p99 < 50 ms", when={"broker": ["kafka", "redpanda"]})})
        == 1
    )


# ------------------------------------------------------------------ selectors


def test_selector_matching() -> None:
    sel = Selector.from_mapping(
        {
            "broker": "kafka",
            "scenario": "tail*",
            "params": {"partitions": [4, 8]},
            "env": "ci-small",
        }
    )
    assert sel.matches("kafka", "tailread", {"partitions": 4, "size": 1024}, "ci-small")
    assert sel.matches("kafka", "tailread", {"partitions": "8"}, "ci-small")  # text equality
    assert not sel.matches("pulsar", "tailread", {"partitions": 4}, "ci-small")
    assert not sel.matches("kafka", "catchup", {"partitions": 4}, "ci-small")
    assert not sel.matches("kafka", "tailread", {"partitions": 16}, "ci-small")
    assert not sel.matches("kafka", "tailread", {}, "ci-small")  # parameter absent
    assert not sel.matches("kafka", "tailread", {"partitions": 4}, None)  # env unknown
    assert sel.describe() == "broker=kafka scenario=tail* partitions=4|8 env=ci-small"
    assert Selector().matches(None, None)


def test_applies_to() -> None:
    slo = parse_slo("lost == 0", when={"broker": ["kafka", "redpanda"], "params": {"acks": True}})
    assert slo.applies_to("redpanda", "x", {"acks": True})
    assert slo.applies_to("kafka", "x", {"acks": "true"})
    assert not slo.applies_to("kafka", "x", {"acks": False})
    assert parse_slo("lost == 0").applies_to("anything", "any")


@pytest.mark.parametrize(
    ("when", "fragment"),
    [
        ({"brokers": "kafka"}, "did you mean 'broker'"),
        ({"params": [1]}, "expected a mapping of parameter"),
        ({"broker": {"a": 1}}, "expected a value or a list"),
        ("kafka", "expected a mapping"),
    ],
)
def test_selector_errors(when: Any, fragment: str) -> None:
    with pytest.raises(SLOSyntaxError, match=fragment):
        Selector.from_mapping(when, source="x.yaml:3")


# ------------------------------------------------------------------ SLO files

FILE = """\
slos:
  - expr: "e2e_response.p99 < 50 ms"
    when: {broker: kafka, scenario: tailread, params: {partitions: 4}, env: ci-small}
  - metric: lost
    op: "=="
    value: 0
  - metric: e2e_response.p99.9
    op: "<"
    value: 200
    unit: ms
    description: tail
  - metric: publish_latency.p99
    op: "<="
    value: 20 ms
  - "ack_rate >= 900 msg/s"
"""


def test_load_slo_file(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    slos = load_slo_file(path)
    assert [str(s) for s in slos] == [
        "e2e_response.p99 < 50 ms",
        "lost == 0",
        "e2e_response.p99.9 < 200 ms",
        "publish_latency.p99 <= 20 ms",
        "ack_rate >= 900 msg/s",
    ]
    assert slos[0].when.describe() == "broker=kafka scenario=tailread partitions=4 env=ci-small"
    assert slos[0].source == f"{path}:2"
    assert slos[1].source == f"{path}:4"
    assert slos[2].description == "tail"
    assert slos[4].source == f"{path}:15"


def test_top_level_list_and_empty_files(tmp_path: Path) -> None:
    assert [s.metric for s in load_slo_file(write(tmp_path, "- expr: lost == 0\n"))] == ["lost"]
    for empty in ("", "slos:\n"):  # refused (issue 24): tests/unit/test_input_bounds.py
        with pytest.raises(SLOSyntaxError, match="Fix: write `slos:`"):
            load_slo_file(write(tmp_path, empty))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            'slos:\n  - expr: "e2e_response.p99 < 50"\n',
            r"slos\.yaml:2: slos\[0\]\.expr = .*needs a unit",
        ),
        (
            "slos:\n  - metric: lost\n    op: '='\n    value: 0\n",
            r"slos\.yaml:3: slos\[0\]\.op = '='",
        ),
        (
            "slos:\n  - metric: lost\n    op: '=='\n",
            r"slos\.yaml:2: slos\[0\]\.value = None: missing value",
        ),
        (
            "slos:\n  - expr: lost == 0\n    whne: {broker: kafka}\n",
            r"slos\.yaml:3: slos\[0\]\.whne = .*did you mean 'when'",
        ),
        (
            "slos:\n  - expr: lost == 0\n    when: {brokr: kafka}\n",
            r"slos\.yaml:3: slos\[0\]\.when\.brokr = 'kafka'.*did you mean 'broker'",
        ),
        (
            "slos:\n  - expr: lost == 0\n    metric: lost\n",
            r"slos\.yaml:3: slos\[0\]\.metric = 'lost': an entry has either",
        ),
        (
            "slos:\n  - metric: e2e_response.p99\n    op: '<'\n    value: 5 ms\n    unit: ms\n",
            r"slos\.yaml:4: slos\[0\]\.value = '5 ms': the unit is given twice",
        ),
        (
            "slos:\n  - metric: e2e_response.p99\n    op: '<'\n    value: fast\n",
            r"slos\.yaml:4: slos\[0\]\.value = 'fast'",
        ),
        ("slo:\n  - expr: lost == 0\n", r"slos\.yaml:1: slo = .*unknown top-level key"),
        ("slos: lost == 0\n", r"slos\.yaml:1: slos = 'lost == 0': expected a list"),
        ("slos:\n  - 42\n", r"slos\.yaml:2: slos\[0\] = 42"),
        ("slos:\n  - expr: [\n", r"slos\.yaml:\d+:\d+: invalid YAML"),
    ],
)
def test_file_errors_name_file_line_key(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(SLOSyntaxError, match=pattern) as info:
        load_slo_file(write(tmp_path, text))
    assert "Fix:" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SLOSyntaxError, match="not found"):
        load_slo_file(tmp_path / "none.yaml")


# ------------------------------------------------------------------ evaluation


def test_fail_message_in_slo_unit_with_context() -> None:
    (r,) = evaluate(
        [parse_slo("e2e_response.p99 < 50 ms")],
        {"e2e_response.p99": 73_200.0},
        context={"broker": "kafka", "scenario": "tailread"},
    )
    assert r.status is SLOStatus.FAIL and r.failed
    assert r.observed == pytest.approx(73.2)
    assert r.message == "e2e_response.p99 = 73.2 ms, SLO < 50 ms (broker=kafka scenario=tailread)"


def test_pass_and_boundaries() -> None:
    figures = {"e2e_response.p99": 50_000.0, "ack_rate": 900.0, "lost": 0.0}
    results = evaluate(
        [
            parse_slo("e2e_response.p99 < 50 ms"),
            parse_slo("e2e_response.p99 <= 50 ms"),
            parse_slo("ack_rate >= 900 msg/s"),
            parse_slo("lost == 0"),
            parse_slo("lost != 0"),
        ],
        figures,
    )
    assert [r.status for r in results] == ["fail", "pass", "pass", "pass", "fail"]
    assert results[2].message == "ack_rate = 900 msg/s, SLO >= 900 msg/s"


@pytest.mark.parametrize("value", [None, math.nan])
def test_undersampled_figure_is_inconclusive_never_pass(value: float | None) -> None:
    (r,) = evaluate(
        [parse_slo("e2e_response.p99.99 < 5 s")],
        {"e2e_response.p99.99": value},
        reasons={"e2e_response.p99.99": "undersampled: n=800 < 100000"},
    )
    assert r.status is SLOStatus.INCONCLUSIVE and r.inconclusive and not r.passed
    assert r.observed is None
    assert "n/a (undersampled: n=800 < 100000)" in r.message


def test_missing_figure_is_inconclusive() -> None:
    (r,) = evaluate([parse_slo("reordered == 0")], {})
    assert r.status is SLOStatus.INCONCLUSIVE
    assert "reordered = n/a (not measured)" in r.message


def test_lost_percent_of_acked() -> None:
    slo = parse_slo("lost <= 0.1%")
    (ok,) = evaluate([slo], {"lost": 3, "acked": 60_000})
    assert ok.passed and ok.observed == pytest.approx(0.005)
    assert ok.message == "lost = 0.005% (3 of 60000 acked), SLO <= 0.1%"
    (bad,) = evaluate([slo], {"lost": 120, "acked": 60_000})
    assert bad.failed
    (unknown,) = evaluate([slo], {"lost": 0, "acked": 0})
    assert unknown.inconclusive and "acked" in unknown.message
    (absent,) = evaluate([slo], {"lost": 0})
    assert absent.inconclusive


def test_source_shown_for_file_and_shipped_slos(tmp_path: Path) -> None:
    (slo,) = load_slo_file(write(tmp_path, "slos:\n  - expr: lost == 0\n"))
    (r,) = evaluate([slo], {"lost": 1})
    assert r.message.endswith(f"[{tmp_path / 'slos.yaml'}:2]")
    (r,) = evaluate([TAIL_READ_SANITY_SLOS[0]], {"lost": 1})
    assert "[shipped sanity bound]" in r.message


# ------------------------------------------------------------------ shipped bounds and precedence


def test_tail_read_sanity_slos() -> None:
    assert [str(s) for s in TAIL_READ_SANITY_SLOS] == [
        "lost == 0",
        "e2e_response.p99 < 5 s",
        "publish_response.p99 < 5 s",
    ]


def test_user_slo_replaces_shipped_bound_for_same_metric_only() -> None:
    user = [parse_slo("lost <= 0.1%"), parse_slo("e2e_response.p99.9 < 100 ms")]
    merged = merge_slos(TAIL_READ_SANITY_SLOS, user)
    assert [str(s) for s in merged] == [
        "e2e_response.p99 < 5 s",
        "publish_response.p99 < 5 s",
        "lost <= 0.1%",
        "e2e_response.p99.9 < 100 ms",
    ]


def test_non_applicable_user_slo_does_not_replace_shipped_bound() -> None:
    user = [
        parse_slo("e2e_response.p99 < 20 ms", when={"broker": "pulsar"}),
        parse_slo("publish_response.p99 < 10 ms", when={"params": {"partitions": 4}}),
    ]
    merged = merge_slos(
        TAIL_READ_SANITY_SLOS, user, broker="kafka", scenario="tailread", params={"partitions": 4}
    )
    assert [str(s) for s in merged] == [
        "lost == 0",
        "e2e_response.p99 < 5 s",
        "publish_response.p99 < 10 ms",
    ]


def test_unknown_entry_key_names_file_line_key_value_and_fix(tmp_path: Path) -> None:
    text = "slos:\n  - expr: lost == 0\n  - expr: duplicates == 0\n    descripton: dup\n"
    with pytest.raises(
        SLOSyntaxError,
        match=r"slos\.yaml:4: slos\[1\]\.descripton = 'dup': unknown key \(did you mean "
        r"'description'\?\).*Fix: remove or rename it\.",
    ):
        load_slo_file(write(tmp_path, text))


def test_wrong_metric_type_names_file_line_and_type(tmp_path: Path) -> None:
    text = "slos:\n  - metric: [lost]\n    op: '=='\n    value: 0\n"
    with pytest.raises(
        SLOSyntaxError,
        match=r"slos\.yaml:2: slos\[0\]\.metric = \['lost'\]: expected a metric name, got list",
    ):
        load_slo_file(write(tmp_path, text))
