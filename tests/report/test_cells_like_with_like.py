"""Cells compare like with like; a regression is called a regression; the CI history.

Pure Python (no Spark): cell keys of records, the alignment of a run's cells with a
baseline's, ``--across-*``, the wording of gate results in the summary and the
Markdown, the driver settings hash, and the history the CI gate keeps.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.plugin.summary import SummaryRow, _tally, format_table
from pytest_brokerperf.report.gates import align, evaluate, exit_code, gate_tally, parse_fail_on
from pytest_brokerperf.report.history import append_run, history_runs
from pytest_brokerperf.report.model import CellKey, cell_key_of, natural_key
from pytest_brokerperf.report.render import markdown
from pytest_brokerperf.results.driver_identity import driver_file_name, settings_hash
from tests.support.records import (
    SyntheticRun,
    report_of_records,
    synthetic_record,
    write_jsonl,
)

SETUP = dict(nodes="1", broker_version="3.9.0", profile="smoke", period="10.0s",
             provision="process", driver="kafka", driver_file="kafka-latency.yaml",
             driver_settings="0123456789ab", clients="confluent-kafka 2.16.1")
BASE = CellKey("kafka", "tailread", "rate=1000.0", "d1", "none", "ci", **SETUP)


def _record(run_id: str, scale: float = 1.0, **fields: object) -> dict[str, object]:
    rng = np.random.default_rng(len(run_id) + int(scale * 10))
    e2e = (rng.lognormal(np.log(3000 * scale), 0.3, 5000)).astype(np.int64)
    rec = synthetic_record(SyntheticRun(run_id=run_id, env="ci"),
                           {"e2e_response": e2e, "publish_response": e2e // 2})
    rec.update(broker_version="3.9.0", driver_file="kafka-latency.yaml",
               driver_settings_sha256="0123456789ab")
    rec["manifest"]["driver"] = {"client": "confluent-kafka", "client_version": "2.16.1",
                                 "librdkafka_version": "2.16.0"}
    rec.update(fields)
    return rec


# --------------------------------------------------------------------------- cell keys


def test_a_records_cell_key_holds_its_set_up() -> None:
    key = cell_key_of(_record("20260101-000000-aaaaaa"))
    assert (key.nodes, key.broker_version, key.profile, key.period, key.provision) == (
        "1", "3.9.0", "smoke", "10.0s", "process")
    assert (key.driver, key.driver_file, key.driver_settings) == (
        "kafka", "kafka-latency.yaml", "0123456789ab")
    assert key.clients == "confluent-kafka 2.16.1 librdkafka 2.16.0"
    # a record written before driver_file / the settings hash existed still keys
    old = _record("20260101-000000-aaaaaa")
    del old["driver_file"], old["driver_settings_sha256"]
    old_key = cell_key_of(old)
    assert old_key.driver_file == "?" and old_key.driver_settings == "?"


def test_numbers_sort_by_value() -> None:
    keys = [replace(BASE, params=f"rate={r}") for r in ("1000.0", "500.0", "2000.0")]
    assert [k.params for k in sorted(keys, key=natural_key)] == [
        "rate=500.0", "rate=1000.0", "rate=2000.0"]


# --------------------------------------------------------------------------- alignment


def _cells(*records: dict[str, object]) -> dict[CellKey, object]:
    return report_of_records(list(records)).current.cells  # type: ignore[no-any-return]


def test_a_run_of_another_set_up_is_not_pooled_with_the_baseline() -> None:
    """The pooled-setup case: 3 nodes, another broker version, the standard profile and
    containers against a 1-node smoke baseline: no baseline, and the message says why
    and which flags compare across on purpose."""
    base = _cells(*[_record(f"2026010{i}-000000-aaaaaa") for i in range(1, 4)])
    big = _record("20260201-000000-bbbbbb", nodes=3, broker_version="3.9.1",
                  profile="standard", provision="container")
    cur = _cells(big)
    aligned = align(cur, base)
    [key] = cur
    assert key not in aligned.cells
    hint = aligned.hints[key]
    for text in ("nodes 1 (baseline) vs 3 (this run)", "broker_version 3.9.0 (baseline) vs "
                 "3.9.1", "profile smoke (baseline) vs standard", "provision process",
                 "not pooled", "--across-broker-version --across-nodes --across-profile "
                 "--across-provision"):
        assert text in hint, hint
    gates = evaluate(cur, aligned.cells, parse_fail_on("e2e_response.p99:+15%"),
                     hints=aligned.hints)
    assert [g.status for g in gates] == ["no-baseline"] and exit_code(gates) == 3
    assert "nodes 1 (baseline) vs 3" in gates[0].message
    # the baseline's cell is not also reported "missing": it is this cell's other set-up
    assert not aligned.cells


def test_across_flags_compare_on_purpose_and_say_so() -> None:
    base = _cells(*[_record(f"2026010{i}-000000-aaaaaa") for i in range(1, 4)])
    cur = _cells(_record("20260201-000000-bbbbbb", nodes=3))
    aligned = align(cur, base, across={"nodes"})
    [key] = cur
    assert aligned.cells[key].key == key
    assert aligned.notes == ["comparing across nodes: baseline 1, this run 3 "
                             "(--across-nodes), in 1 cell(s)"]
    with pytest.raises(ConfigError, match="unknown --across dimension"):
        align(cur, base, across={"colour"})


def test_a_tls_run_has_no_plaintext_baseline_unless_asked_across_tls() -> None:
    plain = {"on": False, "protocol": None, "local_ca": False}
    base = _cells(*[_record(f"2026010{i}-000000-aaaaaa", tls=plain) for i in range(1, 4)])
    cur = _cells(_record("20260201-000000-bbbbbb",
                         tls={"on": True, "protocol": "SSL", "local_ca": True}))
    [key] = cur
    aligned = align(cur, base)
    assert key not in aligned.cells
    assert "tls off (baseline) vs SSL (this run)" in aligned.hints[key], aligned.hints[key]
    assert "--across-tls" in aligned.hints[key]
    across = align(cur, base, across={"tls"})
    assert across.cells[key].key == key
    assert across.notes == ["comparing across tls: baseline off, this run SSL "
                            "(--across-tls), in 1 cell(s)"]


def test_two_baseline_set_ups_for_one_cell_are_refused_not_pooled() -> None:
    base = _cells(_record("20260101-000000-aaaaaa", nodes=1),
                  _record("20260102-000000-aaaaaa", nodes=5))
    cur = _cells(_record("20260201-000000-bbbbbb", nodes=3))
    with pytest.raises(ConfigError, match="would pool different set-ups"):
        align(cur, base, across={"nodes"})


def test_an_older_baseline_without_a_field_still_compares_and_says_so() -> None:
    old = [_record(f"2026010{i}-000000-aaaaaa") for i in range(1, 4)]
    for r in old:
        del r["driver_settings_sha256"]
    aligned = align(_cells(_record("20260201-000000-bbbbbb")), _cells(*old))
    assert len(aligned.cells) == 1
    assert aligned.notes == ["comparing across driver_settings: baseline ?, this run "
                             "0123456789ab (a side's records do not say), in 1 cell(s)"]


# --------------------------------------------------------------------------- wording


def test_a_regression_is_called_a_regression_in_the_markdown() -> None:
    base = [_record(f"2026010{i}-000000-aaaaaa", scale=1 + i / 100) for i in range(1, 4)]
    report = report_of_records([_record("20260201-000000-bbbbbb", scale=3.0)], base,
                               fail_on="e2e_response.p99:+15%")
    assert report.exit_code == 1
    md = markdown(report)
    assert "**Regression gate: REGRESSION**" in md
    assert "1 gate check: 1 regression" in md and "SLO" not in md
    assert "Input: 1 record from 1 file; 1 matrix cell." in md  # not "1 records"
    assert gate_tally(report.gates) == "1 gate check: 1 regression"


def test_the_summary_keeps_budgets_and_baselines_apart() -> None:
    def row(slo: str, baseline: str) -> SummaryRow:
        return SummaryRow("t.py::test[kafka]", "kafka", "tailread", "p=4", 1000.0, 1.0,
                          1.0, 2.0, None, 1.0, 2.0, None, "valid", slo, baseline=baseline)

    gated = [row("-", "REGRESSION: e2e_response.p99"), row("pass", "inconclusive")]
    lines = format_table(gated)
    assert lines[1].split()[-3:] == ["SLO", "vs", "baseline"]
    assert "REGRESSION: e2e_response.p99" in lines[2] and "FAIL" not in lines[2]
    assert _tally(gated).endswith("SLO failed in 0, inconclusive in 0; regression against "
                                  "the baseline in 1, not judged in 1")
    plain = [row("FAIL: e2e_response.p99", "-")]
    assert "baseline" not in format_table(plain)[1]  # no gate: no column
    assert _tally(plain).endswith("SLO failed in 1, inconclusive in 0")


# --------------------------------------------------------------------------- identity


def test_the_settings_hash_ignores_the_endpoint_and_sees_a_setting() -> None:
    doc = {"name": "kafka", "replicationFactor": 1,
           "commonConfig": "bootstrap.servers=localhost:9092\nrequest.timeout.ms=30000",
           "producerConfig": "acks=all\nlinger.ms=1"}
    moved = {**doc, "commonConfig": "bootstrap.servers=10.0.0.7:19092\n"
             "request.timeout.ms=30000"}
    assert settings_hash(doc) == settings_hash(moved)
    assert settings_hash(doc) != settings_hash({**doc, "producerConfig": "acks=1\nlinger.ms=1"})
    assert len(settings_hash(doc) or "") == 12 and settings_hash(None) is None
    assert driver_file_name("/home/ci/work/drivers/kafka-latency.yaml") == "kafka-latency.yaml"
    assert driver_file_name("<loopback>") == "<loopback>"


# --------------------------------------------------------------------------- history


def test_the_history_appends_one_directory_per_run_and_prunes_by_run(tmp_path: Path) -> None:
    history, results = tmp_path / "history", tmp_path / "results"
    for i in range(1, 6):
        write_jsonl(results / "results.jsonl", [_record(f"2026010{i}-000000-aaaaaa")])
        done = append_run(history, results, run_id=f"2026010{i}-000000-aaaaaa", keep=3)
        assert done.run_ids == (f"2026010{i}-000000-aaaaaa",) and done.records == 1
    assert history_runs(history) == [f"2026010{i}-000000-aaaaaa" for i in (3, 4, 5)]
    # the same run again replaces its own directory only; nothing measured adds nothing
    append_run(history, results, run_id="20260105-000000-aaaaaa", keep=3)
    assert len((history / "20260105-000000-aaaaaa" / "results.jsonl").read_text()
               .splitlines()) == 1
    assert append_run(history, results, run_id="20991231-000000-ffffff").run_ids == ()
    assert len(history_runs(history)) == 3
    # a torn last line (a killed writer) is not copied
    with open(results / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(_record("20260106-000000-aaaaaa"))[:50])
    assert append_run(history, results, run_id="20260106-000000-aaaaaa").run_ids == ()
    with pytest.raises(ValueError, match="at least 3"):
        append_run(history, results, keep=2)


def test_a_baseline_set_up_this_run_did_not_run_is_missing() -> None:
    base = _cells(*[_record(f"2026010{i}-000000-aaaaaa", nodes=n)
                    for i in range(1, 4) for n in (1, 3)])
    cur = _cells(_record("20260201-000000-bbbbbb", nodes=1))
    aligned = align(cur, base)
    gates = evaluate(cur, aligned.cells, parse_fail_on("e2e_response.p99:+15%"))
    assert sorted(g.status for g in gates) == ["missing", "pass"]
    [missing] = [g for g in gates if g.status == "missing"]
    assert missing.cell.nodes == "3"
