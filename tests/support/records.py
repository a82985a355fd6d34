"""Synthetic ``results.jsonl`` records for report tests and the report benchmark.

Records carry real histograms (``LatencyHistogram`` fed the given samples, encoded as the
plugin encodes them), so what the report merges is what a run would have written; the
rest of the record holds the fields the report reads, in schema ``brokerperf.result/1``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS
from pytest_brokerperf.results.figures import PERCENTILES, percentile_name

__all__ = ["SyntheticRun", "latency_block_from_samples", "record_with_timeline",
           "report_of_records", "slowed_record", "synthetic_record", "synthetic_timeline",
           "write_jsonl"]


def latency_block_from_samples(samples: Mapping[str, Sequence[int] | npt.NDArray[np.int64]]
                               ) -> dict[str, Any]:
    """The record's ``latency`` object for raw µs samples per view (as ``results.py``)."""
    out: dict[str, Any] = {}
    for view in METRICS:
        h = LatencyHistogram.for_metric(view)
        if view in samples:
            h.record_batch(np.asarray(samples[view], dtype=np.int64))
        pct = h.percentiles(PERCENTILES)
        block: dict[str, Any] = {
            f"{percentile_name(q).replace('.', '')}_us": pct[q] for q in PERCENTILES}
        block.update(count=h.total_count, min_us=h.min(), max_us=h.max(), mean_us=h.mean(),
                     clamped=h.clamped, below_one_us=h.below_one, hdr=h.encode(),
                     sparse=h.sparse())
        out[view] = block
    return out


@dataclass
class SyntheticRun:
    """What one synthetic record says; defaults make a valid Kafka tail-read."""

    run_id: str = "20260101-000000-aaaaaa"
    test_id: str = "test_scn.py::test_tail[kafka]"
    attempt: int = 1
    broker: str = "kafka"
    scenario: str = "tailread"
    params: dict[str, Any] = field(default_factory=lambda: {
        "topics": 1, "partitions": 4, "message_size": 1024, "producers": 1,
        "subscriptions": 1, "consumers": 1, "rate": 1000.0, "durability": None})
    env: str = "local"
    status: str = "valid"
    reasons: tuple[str, ...] = ()
    ack_rate: float = 1000.0
    durability_level: int | None = None
    end_time: str = "2026-01-01T00:01:00.000+00:00"
    cpu_model: str = "Test CPU"


def synthetic_record(run: SyntheticRun, samples: Mapping[str, Sequence[int]
                                                         | npt.NDArray[np.int64]],
                     *, latency: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One record; ``latency`` (a prebuilt block) wins over ``samples`` when given."""
    params = dict(run.params)
    params["durability"] = run.durability_level
    return {
        "schema": "brokerperf.result/1",
        "run_id": run.run_id, "test_id": run.test_id, "attempt": run.attempt,
        "broker": run.broker, "broker_version": "test", "provision": "process", "nodes": 1,
        "topology_check": False, "scenario": run.scenario, "params": params,
        "profile": "smoke", "env": run.env, "driver": run.broker,
        "durability": {"level": run.durability_level,
                       "label": "driver-defined" if run.durability_level is None
                       else f"level {run.durability_level}", "settings": {}, "read_back": {}},
        "begin_time": "2026-01-01T00:00:00.000+00:00", "end_time": run.end_time,
        "period_s": 10.0, "measured_s": 60.0,
        "target_rate_msg_s": float(params.get("rate") or run.ack_rate),
        "ack_rate_msg_s": run.ack_rate, "consume_rate_msg_s": run.ack_rate,
        "publish_mib_s": run.ack_rate * int(params.get("message_size") or 0) / 2**20,
        "consume_mib_s": run.ack_rate * int(params.get("message_size") or 0) / 2**20,
        "send_errors": 0,
        "latency": dict(latency) if latency is not None else latency_block_from_samples(samples),
        "verdict": {"status": run.status, "reasons": list(run.reasons), "flags": [],
                    "details": {}},
        "slo": [], "notes": [], "artefacts": "",
        "manifest": {"machine": {"cpu_model": run.cpu_model, "logical_cpus": 2}},
    }


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> Path:
    """Append records to ``path`` (a ``results.jsonl``), creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True, allow_nan=False) + "\n")
    return path


def synthetic_timeline(periods: int, *, rate: float = 1000.0, e2e_us: float = 2000.0,
                       warmup: int = 2, period_s: float = 1.0,
                       undersampled: Sequence[int] = (),
                       phases: Sequence[str] | None = None) -> dict[str, Any]:
    """A record's ``timeline`` block (as ``results.timeline_block`` writes it).

    Period ``i`` publishes ``rate + i`` msg/s and its e2e p50/p99 are ``e2e_us`` and
    ``3 × e2e_us`` plus ``i`` µs, so a chart's points can be told apart; periods in
    ``undersampled`` have no p99 (too few samples), as a real record would say.
    """
    from pytest_brokerperf.results.record import TIMELINE_VIEWS

    phase = list(phases) if phases is not None else (
        ["warmup"] * warmup + ["measure"] * (periods - warmup))
    cols: dict[str, Any] = {
        "periods": periods, "phase": phase,
        "t_s": [round((i + 1) * period_s, 3) for i in range(periods)],
        "elapsed_s": [period_s] * periods, "target_rate_msg_s": [rate] * periods,
        "publish_rate_msg_s": [rate + i for i in range(periods)],
        "consume_rate_msg_s": [rate + i / 2 for i in range(periods)],
        "backlog": [0] * periods}
    for v in TIMELINE_VIEWS:
        scale = e2e_us if v.startswith("e2e") else e2e_us / 2
        cols[f"{v}_p50_us"] = [scale + i for i in range(periods)]
        cols[f"{v}_p99_us"] = [None if i in undersampled else 3 * scale + i
                               for i in range(periods)]
        cols[f"{v}_count"] = [int(rate * period_s)] * periods
    return cols


def record_with_timeline(broker: str, periods: int | None, *,
                         undersampled: Sequence[int] = (), rate: float = 1000.0,
                         e2e_us: float = 2000.0, **run: Any) -> dict[str, Any]:
    """A valid tail-read record of ``broker`` (``run``: other ``SyntheticRun`` fields) with
    3,000 latency samples and, unless ``periods`` is None, a ``periods``-long timeline."""
    rec = synthetic_record(
        SyntheticRun(broker=broker, test_id=f"t.py::test[{broker}]", **run),
        {"e2e_response": np.arange(1, 3000, dtype=np.int64),
         "publish_response": np.arange(1, 3000, dtype=np.int64)})
    if periods is not None:
        rec["timeline"] = synthetic_timeline(periods, undersampled=undersampled, rate=rate,
                                             e2e_us=e2e_us)
    return rec


def _cells_of(records: Sequence[Mapping[str, Any]]) -> dict[Any, Any]:
    """Cells of records without Spark, one run per record; a cell's pooled figures are
    its first record's (an approximation for chart tests: Spark merges histograms)."""
    from pytest_brokerperf.report.model import CellStats, cell_key_of, figures_of

    by_cell: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        by_cell.setdefault(cell_key_of(r), []).append(r)
    cells = {}
    for k, rs in by_cell.items():
        m = rs[0]["manifest"]["machine"]
        cells[k] = CellStats(key=k, records=len(rs), valid=len(rs), runs=len(rs),
                             figures=figures_of(rs[0]),
                             run_figures={str(r["run_id"]): figures_of(r) for r in rs},
                             p99_spread=None,
                             machines=(f"{m['cpu_model']} × {m['logical_cpus']} cpus",))
    return cells


def report_of_records(records: Sequence[Mapping[str, Any]],
                      baseline: Sequence[Mapping[str, Any]] = (),
                      fail_on: str | None = None) -> Any:
    """A ``render.Report`` of records without Spark (one cell per record, its own
    figures, and the records' series), compared with ``baseline`` records when given
    (aligned as ``brokerperf report`` aligns them, gated by ``fail_on``)."""
    from pytest_brokerperf.report.gates import align, evaluate, parse_fail_on
    from pytest_brokerperf.report.model import ReportResult
    from pytest_brokerperf.report.render import Report
    from pytest_brokerperf.report.series import pick_series, series_from_record

    result = ReportResult(cells=_cells_of(records), files=["(in memory)"],
                          records_read=len(records), duplicates_dropped=0,
                          malformed_lines=0)
    report = Report(current=result, series=pick_series(records))
    if baseline:
        from pytest_brokerperf.report.model import cell_key_of

        base = ReportResult(cells=_cells_of(baseline), files=["(in memory)"],
                            records_read=len(baseline), duplicates_dropped=0,
                            malformed_lines=0)
        aligned = align(result.cells, base.cells)
        report.baseline = base
        report.aligned, report.baseline_of = aligned.cells, aligned.sources
        report.comparison_notes = aligned.notes
        for r in baseline:
            report.baseline_series.setdefault(cell_key_of(r), []).append(
                series_from_record(r))
        if fail_on:
            report.budgets = parse_fail_on(fail_on)
            report.gates = evaluate(result.cells, aligned.cells, report.budgets,
                                    hints=aligned.hints)
    return report


def slowed_record(record: Mapping[str, Any], factor: float, run_id: str) -> dict[str, Any]:
    """A fabricated regression: ``record`` as run ``run_id`` with every latency sample
    multiplied by ``factor`` (its histograms rebuilt from the recorded buckets, so the
    report merges them as it would a real run's)."""
    from pytest_brokerperf.metrics.hdr_layout import midpoint_at_index

    out = json.loads(json.dumps(record))
    samples: dict[str, npt.NDArray[np.int64]] = {}
    for view, block in (record.get("latency") or {}).items():
        pairs = block.get("sparse") or []
        if not pairs:
            continue
        values = np.repeat([midpoint_at_index(int(i)) for i, _ in pairs],
                           [int(c) for _, c in pairs]).astype(np.float64)
        samples[view] = np.maximum(values * factor, 1).astype(np.int64)
    out["latency"] = latency_block_from_samples(samples)
    out["run_id"] = run_id
    timeline = out.get("timeline")
    if isinstance(timeline, dict):  # the charts over time show the same slowdown
        for k, col in timeline.items():
            if k.endswith("_us") and isinstance(col, list):
                timeline[k] = [None if v is None else v * factor for v in col]
    return out
