"""The Spark job: exact histogram merge, de-duplication, versions, cells, left-out records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.metrics.hdr_layout import (
    E2E_HIGHEST_US,
    highest_for,
    min_samples_for,
    value_at_index,
)
from pytest_brokerperf.report.model import PERCENTILE_NAMES, ReportInputError, cell_key_of
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")

from pytest_brokerperf.report import spark as job

VIEWS = ("publish_response", "e2e_response")


def _samples(rng: np.random.Generator, n: int, scale: float) -> dict[str, np.ndarray]:
    # a body around `scale` µs with a heavy tail reaching minutes, plus some sub-µs zeros
    body = rng.lognormal(np.log(scale), 1.1, size=n)
    tail = rng.pareto(1.2, size=n // 50) * scale * 20
    e2e = np.concatenate([body, tail, np.zeros(3)]).astype(np.int64)
    return {"e2e_response": e2e, "publish_response": (e2e // 3).astype(np.int64)}


@pytest.fixture(scope="module")
def exact_case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """3 runs × 4 records with different distributions, in two directories, plus noise:
    a duplicate record, a host-noise record with huge latencies, and a malformed line."""
    root = tmp_path_factory.mktemp("exact")
    rng = np.random.default_rng(14)
    raw: dict[str, list[np.ndarray]] = {v: [] for v in VIEWS}
    per_run: dict[str, dict[str, list[np.ndarray]]] = {}
    first: dict[str, Any] | None = None
    for r in range(3):
        run_id = f"2026010{r + 1}-000000-abcdef"
        for t in range(4):
            s = _samples(rng, 6000, scale=300 * (t + 1) * (r + 1))
            for v in VIEWS:
                raw[v].append(s[v])
                per_run.setdefault(run_id, {}).setdefault(v, []).append(s[v])
            rec = synthetic_record(SyntheticRun(run_id=run_id, test_id=f"t.py::test[{t}]",
                                                ack_rate=1000.0 + r), s)
            first = first or rec
            write_jsonl(root / ("a" if r < 2 else "b") / "results.jsonl", [rec])
    assert first is not None
    write_jsonl(root / "b" / "copy" / "results.jsonl", [first])  # the same key again
    huge = {v: np.full(5000, 40_000_000, dtype=np.int64) for v in VIEWS}
    write_jsonl(root / "b" / "results.jsonl", [synthetic_record(SyntheticRun(
        run_id="20260103-000000-abcdef", test_id="t.py::test[noisy]", status="host-noise",
        reasons=("steal 12% >= 5%",)), huge)])
    with open(root / "b" / "results.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"schema": "brokerperf.result/1", "run_id": "x", "test_')  # cut short
    return {"dirs": [root / "a", root / "b"], "raw": raw, "per_run": per_run}


def _hdr_fed(values: list[np.ndarray], view: str) -> Any:
    """One plain HdrHistogram (HdrHistogram_py) fed every raw sample, one by one."""
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, highest_for(view), 3)
    for v in np.concatenate(values).tolist():
        assert h.record_value(max(v, 1))  # the plugin records sub-µs values as 1 µs
    return h


def _expect(h: Any) -> dict[str, float | None]:
    n = h.get_total_count()
    return {name: (float(h.get_value_at_percentile(q)) if n >= min_samples_for(q) else None)
            for name, q in PERCENTILE_NAMES}


def test_spark_merge_equals_one_histogram_fed_every_raw_sample(spark: Any,
                                                               exact_case: dict[str, Any]
                                                               ) -> None:
    result = job.run_job(spark, exact_case["dirs"])
    [c] = result.cells.values()
    for view in VIEWS:
        hdr = _hdr_fed(exact_case["raw"][view], view)
        lat = c.figures.latency[view]
        assert lat.count == hdr.get_total_count()
        assert {name: lat.get(name) for name, _ in PERCENTILE_NAMES} == _expect(hdr)
        assert lat.get("min") == hdr.get_min_value()
        assert lat.get("max") == hdr.get_max_value()
        assert lat.get("mean") == pytest.approx(hdr.get_mean_value(), rel=1e-9)
    # per-run figures (the noise floor's input) are exact too
    run_id = "20260102-000000-abcdef"
    hdr = _hdr_fed(exact_case["per_run"][run_id]["e2e_response"], "e2e_response")
    got = c.run_figures[run_id].latency["e2e_response"]
    assert {name: got.get(name) for name, _ in PERCENTILE_NAMES} == _expect(hdr)

    # what was skipped is said, and left out of the figures
    assert result.duplicates_dropped == 1
    assert result.malformed_lines == 1 and "malformed" in result.warnings[0]
    assert (c.records, c.valid, c.runs, c.valid_runs) == (13, 12, 3, 3)
    [bad] = c.invalid
    assert (bad.status, bad.reasons, bad.test_id) == (
        "host-noise", ("steal 12% >= 5%",), "t.py::test[noisy]")
    ack = c.figures.rates["ack_rate"]
    assert (ack.n, ack.min, ack.max, ack.mean) == (12, 1000.0, 1002.0, pytest.approx(1001.0))


def test_bucket_value_in_sql_matches_the_histogram_layout(spark: Any) -> None:
    from hdrh.histogram import HdrHistogram
    from pyspark.sql import functions as F

    top = HdrHistogram(1, E2E_HIGHEST_US, 3).counts_len - 1
    idx = [0, 1, 1023, 1024, 1025, 2047, 2048, 2049, 3071, 3072, 5000, 20_000, top - 1, top]
    df = spark.createDataFrame([(i,) for i in idx], "i long")
    rows = df.select("i", job.bucket_value("i").alias("v")).orderBy("i").collect()
    assert [r["v"] for r in rows] == [value_at_index(i) for i in idx]
    assert df.count() == len(idx) and F is not None


def test_a_figure_over_tls_is_never_pooled_with_a_plaintext_one(
        spark: Any, tmp_path: Path) -> None:
    """The record's ``tls`` is a set-up field of the cell (``--across-tls`` compares on
    purpose): TLS costs throughput and latency, so a TLS run is never a plaintext
    baseline's match. A record written before the field keys as unknown."""
    s = {"e2e_response": np.arange(1, 2001, dtype=np.int64)}
    ssl = synthetic_record(SyntheticRun(test_id="a"), s)
    ssl["tls"] = {"on": True, "protocol": "SSL", "local_ca": True}
    plain = synthetic_record(SyntheticRun(test_id="b"), s)
    plain["tls"] = {"on": False, "protocol": None, "local_ca": False}
    sasl = synthetic_record(SyntheticRun(test_id="c"), s)
    sasl["tls"] = {"on": False, "protocol": "SASL_PLAINTEXT", "local_ca": False}
    old = synthetic_record(SyntheticRun(test_id="d"), s)  # no tls field
    write_jsonl(tmp_path / "results.jsonl", [ssl, plain, sasl, old])
    result = job.run_job(spark, [tmp_path])
    assert sorted((k.tls, c.records) for k, c in result.cells.items()) == [
        ("?", 1), ("SSL", 1), ("off", 2)]
    assert {cell_key_of(r) for r in (ssl, plain, sasl, old)} == set(result.cells)
    assert "tls=SSL" in cell_key_of(ssl).setup()


def test_cells_split_by_durability_env_fault_and_set_up(spark: Any, tmp_path: Path) -> None:
    s = {"e2e_response": np.arange(1, 2001, dtype=np.int64)}
    fault_params = {**SyntheticRun().params, "fault": "broker-restart"}
    runs = [SyntheticRun(test_id="a"), SyntheticRun(test_id="b", durability_level=1),
            SyntheticRun(test_id="c", env="ci-m5"),
            SyntheticRun(test_id="d", params=fault_params),
            SyntheticRun(test_id="e", attempt=2), SyntheticRun(test_id="e", attempt=1)]
    recs = [synthetic_record(r, s) for r in runs]
    old = synthetic_record(SyntheticRun(test_id="f"), s)
    del old["attempt"], old["env"]  # written before these fields: upgraded on read
    # another set-up: 3 nodes; another driver file, settings, clients and period
    nodes = synthetic_record(SyntheticRun(test_id="g"), s)
    nodes["nodes"] = 3
    drv = synthetic_record(SyntheticRun(test_id="h"), s)
    drv.update(driver_file="kafka-throughput.yaml", driver_settings_sha256="abcdef012345",
               period_s=0.5)
    drv["manifest"]["driver"] = {"client": "confluent-kafka", "client_version": "2.16.1",
                                 "librdkafka_version": "2.16.0"}
    write_jsonl(tmp_path / "results.jsonl", [*recs, old, nodes, drv])
    result = job.run_job(spark, [tmp_path])
    setups = {k for k in result.cells if (k.nodes, k.period) != ("1", "10.0s")}
    assert sorted((k.nodes, k.period, k.driver_file, k.driver_settings, k.clients)
                  for k in setups) == [
        ("1", "0.5s", "kafka-throughput.yaml", "abcdef012345",
         "confluent-kafka 2.16.1 librdkafka 2.16.0"),
        ("3", "10.0s", "?", "?", "?")]
    # the pytest gate keys one record in Python exactly as Spark keys it
    assert {cell_key_of(r) for r in [*recs, old, nodes, drv]} == set(result.cells)
    keys = sorted((k.durability, k.env, k.fault) for k in result.cells if k not in setups)
    assert keys == [("d1", "local", "none"), ("driver-defined", "ci-m5", "none"),
                    ("driver-defined", "local", "broker-restart"),
                    ("driver-defined", "local", "none")]
    plain = next(c for k, c in result.cells.items() if k not in setups
                 and (k.durability, k.env, k.fault) == ("driver-defined", "local", "none"))
    # a, e's two attempts (distinct keys) and f (no attempt/env: 1 and "local")
    assert plain.records == 4
    assert "fault" not in plain.key.params and "durability" not in plain.key.params
    assert "message_size=1024" in plain.key.params


def test_unknown_schema_and_empty_input_are_input_errors(spark: Any, tmp_path: Path) -> None:
    rec = synthetic_record(SyntheticRun(), {"e2e_response": np.arange(1, 10)})
    rec["schema"] = "brokerperf.result/9"
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "results.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(ReportInputError, match=r"brokerperf.result/9.*new/results.jsonl"):
        job.run_job(spark, [tmp_path / "new"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportInputError, match=r"no results\.jsonl"):
        job.find_result_files([tmp_path / "empty"])
    with pytest.raises(ReportInputError, match="does not exist"):
        job.find_result_files([tmp_path / "nope"])


def test_a_ladder_the_broker_stopped_is_a_figure_with_its_highest_sustainable_rate(
        spark: Any, tmp_path: Path) -> None:
    """``broker-backpressure`` is a broker result (judge/verdict.py: the run stays valid):
    its record is pooled, counted valid and gives the cell its highest sustainable rate
    (a Studies cell's max rate); stopped, or another status, it is left out as before."""
    from pytest_brokerperf.report.model import is_figure, record_status
    from pytest_brokerperf.report.session import cell_of_record

    s = {"e2e_response": np.arange(1, 2001, dtype=np.int64)}
    pushed = synthetic_record(SyntheticRun(test_id="a", status="broker-backpressure"), s)
    pushed["throughput"] = {"highest_sustainable_rate_msg_s": 40_000.0}
    stopped = synthetic_record(SyntheticRun(test_id="b", status="broker-backpressure"), s)
    stopped["run_status"] = "failed"
    bound = synthetic_record(SyntheticRun(test_id="c", status="client-bound"), s)
    bound["throughput"] = {"highest_sustainable_rate_msg_s": 90_000.0}
    write_jsonl(tmp_path / "results.jsonl", [pushed, stopped, bound])
    [c] = job.run_job(spark, [tmp_path]).cells.values()
    assert (c.records, c.valid) == (3, 1)
    assert sorted((r.test_id, r.status) for r in c.invalid) == [
        ("b", "failed"), ("c", "client-bound")]
    top = c.figures.rates["max_sustainable_rate"]
    assert (top.n, top.max) == (1, 40_000.0)  # never the harness-bound ladder's
    assert c.figures.latency["e2e_response"].count == 2000
    assert [record_status(r) for r in (pushed, stopped, bound)] == [
        "broker-backpressure", "failed", "client-bound"]
    assert [is_figure(record_status(r)) for r in (pushed, stopped, bound)] == [
        True, False, False]
    assert [cell_of_record(r).valid for r in (pushed, stopped, bound)] == [1, 0, 0]


def test_failed_and_interrupted_runs_are_never_counted_as_valid_figures(
        spark: Any, tmp_path: Path) -> None:
    """A stopped run's record holds the figures of the periods before the stop; even
    with a ``valid`` verdict (written by hand, or by an older writer) it is left out."""
    from pytest_brokerperf.report.model import record_status
    from pytest_brokerperf.report.session import cell_of_record

    s = {"e2e_response": np.arange(1, 2001, dtype=np.int64)}
    done = synthetic_record(SyntheticRun(test_id="a", ack_rate=1000.0), s)
    done["run_status"] = "completed"
    old = synthetic_record(SyntheticRun(test_id="b", ack_rate=1000.0), s)  # no run_status
    stopped = []
    for test_id, status, verdict in (("c", "interrupted", "valid"),
                                     ("d", "failed", "valid"),
                                     ("e", "interrupted", "interrupted")):
        rec = synthetic_record(SyntheticRun(test_id=test_id, ack_rate=5.0, status=verdict),
                               {"e2e_response": np.full(2000, 9_000_000, dtype=np.int64)})
        rec["run_status"] = status
        stopped.append(rec)
    write_jsonl(tmp_path / "results.jsonl", [done, old, *stopped])
    result = job.run_job(spark, [tmp_path])
    [c] = result.cells.values()
    assert (c.records, c.valid) == (5, 2)
    assert sorted((r.test_id, r.status) for r in c.invalid) == [
        ("c", "interrupted"), ("d", "failed"), ("e", "interrupted")]
    ack = c.figures.rates["ack_rate"]
    assert (ack.n, ack.min, ack.max) == (2, 1000.0, 1000.0)
    assert c.figures.latency["e2e_response"].get("max") < 9_000_000
    # the pytest gate files one record the same way
    assert [record_status(r) for r in (done, old, *stopped)] == [
        "valid", "valid", "interrupted", "failed", "interrupted"]
    assert [cell_of_record(r).valid for r in (done, *stopped)] == [1, 0, 0, 0]
