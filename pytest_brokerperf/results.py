"""Result records and the per-test artefact directory (docs/reference/results.md).

Layout, one directory per test run: ``<results>/<run id>/<test id>/`` holding the
OMB-compatible result JSON, the effective workload and driver YAML, the broker
settings read back from the broker, broker and GC logs, the per-period CSV, HdrHistogram
logs, client statistics and a reproducibility manifest. One record per test run is
appended to ``<results>/results.jsonl`` in the versioned schema below, keyed by
(run id, test id, attempt) so re-runs never double-count.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pytest_brokerperf import __version__
from pytest_brokerperf.figures import PERCENTILES, percentile_name
from pytest_brokerperf.metrics.stats import METRICS
from pytest_brokerperf.provision.cpus import cpu_layout

if TYPE_CHECKING:
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.base import PreparedRun
    from pytest_brokerperf.verdict import Verdict

__all__ = ["PERIODS_HEADER", "RECORD_SCHEMA", "RUN_STATUSES", "TIMELINE_VIEWS", "ResultRecord",
           "ScenarioBlocks", "append_jsonl", "artefact_dir", "build_record", "histogram_block",
           "period_row", "timeline_block", "write_artefacts"]

#: Latency views whose per-period p50/p99 the record's ``timeline`` carries.
TIMELINE_VIEWS = ("publish_latency", "publish_delay", "publish_response", "e2e_latency",
                  "e2e_response")
#: Version of the JSONL record schema; bump on any incompatible change.
RECORD_SCHEMA = "brokerperf.result/1"
LOG_COPY_LIMIT = 20 * 1024 * 1024
#: ``run_status`` values: only ``completed`` records carry figures a report may count.
RUN_STATUSES = ("completed", "failed", "interrupted")


class ScenarioBlocks(TypedDict, total=False):
    """The record's scenario-specific blocks (``None`` where a scenario has none)."""

    target_rate_msg_s: float | None
    ladder: dict[str, Any] | None
    throughput: dict[str, Any] | None
    calibration: dict[str, Any] | None
    rate_discovery: dict[str, Any] | None
    catchup: dict[str, Any] | None
    mixed: dict[str, Any] | None
    fault: dict[str, Any] | None  # a fault run: docs/reference/faults.md
    faults: list[dict[str, Any]]  # the fault's events, for the report's fault timeline
    reassignment: dict[str, Any] | None
    soak: dict[str, Any] | None  # the soak's resource trends: docs/reference/soak.md
    gates: list[dict[str, Any]]  # --brokerperf-fail-on: this record judged vs a baseline
    timeline: dict[str, Any]  # per-period series (written with the artefacts)


class ResultRecord(ScenarioBlocks):
    """One ``results.jsonl`` line, field by field as docs/reference/results.md documents
    them (schema ``RECORD_SCHEMA``): written by one function,
    :func:`~pytest_brokerperf.scenario_library.finish.finish`, for every scenario."""

    schema: str
    run_id: str
    test_id: str
    attempt: int
    broker: str
    broker_version: str
    provision: str
    nodes: int
    topology_check: bool
    scenario: str
    params: dict[str, Any]
    workload: dict[str, Any]
    profile: str
    env: str
    driver: str | None
    driver_file: str | None
    driver_settings_sha256: str | None
    durability: dict[str, Any]
    begin_time: str | None
    measure_begin_time: str | None
    end_time: str | None
    period_s: float
    warmup_s: float
    warmup_periods: int
    warmup_steady: bool
    measured_s: float
    ack_rate_msg_s: float
    consume_rate_msg_s: float
    publish_mib_s: float
    consume_mib_s: float
    send_errors: int
    latency: dict[str, Any]
    delivery: dict[str, Any]
    drain_complete: bool
    verdict: dict[str, Any]
    slo: list[dict[str, Any]]
    notes: list[str]
    artefacts: str
    manifest: dict[str, Any]
    noise_retries: list[dict[str, Any]]
    broker_metrics: dict[str, Any] | None
    #: one of ``RUN_STATUSES``: ``failed`` (a broker died) and ``interrupted`` (Ctrl-C,
    #: SIGTERM) hold the figures of the periods up to then
    run_status: str
    failure: str | None


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:150] or "test"


def artefact_dir(results: Path, run_id: str, test_id: str) -> tuple[Path, int]:
    """A fresh directory for this test run and its attempt number (1, 2, ...)."""
    base = results / run_id / _safe(test_id)
    attempt = 1
    path = base
    while path.exists():
        attempt += 1
        path = base.with_name(f"{base.name}.attempt{attempt}")
    path.mkdir(parents=True)
    return path, attempt


def git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
            text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def library_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("pytest", "confluent-kafka", "pulsar-client", "pika", "hdrhistogram", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return out


def histogram_block(h: LatencyHistogram) -> dict[str, Any]:
    """One histogram's percentiles (µs, None = n/a) and counters, with the histogram
    itself (OMB-encoded and sparse)."""
    pct = h.percentiles(PERCENTILES)
    block: dict[str, Any] = {
        f"{percentile_name(q).replace('.', '')}_us": pct[q] for q in PERCENTILES
    }
    block.update(
        count=h.total_count, min_us=h.min(), max_us=h.max(), mean_us=h.mean(),
        clamped=h.clamped, below_one_us=h.below_one,
        hdr=h.encode(), sparse=h.sparse(),
    )
    return block


def latency_block(outcome: RunOutcome) -> dict[str, Any]:
    """Percentiles (µs, None = n/a) and counters per latency view, with the histograms."""
    return {m: histogram_block(outcome.cumulative[m]) for m in METRICS}


def build_record(*, run_id: str, test_id: str, attempt: int, broker: BrokerEndpoint,
                 prepared: PreparedRun, outcome: RunOutcome, verdict: Verdict,
                 slo_results: list[dict[str, Any]], figures: dict[str, float | None],
                 profile: str, env_label: str, artefacts: Path,
                 manifest: dict[str, Any]) -> ResultRecord:
    """One JSONL record (schema ``RECORD_SCHEMA``); unit-suffixed field names."""
    from pytest_brokerperf.driver_identity import driver_file_name, settings_hash
    from pytest_brokerperf.durability import result_block
    from pytest_brokerperf.scenario_library.base import workload_block

    return {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "test_id": test_id,
        "attempt": attempt,
        "broker": broker.kind,
        "broker_version": broker.version,
        "provision": broker.mode,
        "nodes": broker.nodes,
        "topology_check": broker.topology_check,
        "scenario": prepared.scenario,
        "params": prepared.params,
        # the file, keys ignored under --brokerperf-lenient, producerRateList followed
        "workload": workload_block(prepared),
        "profile": profile,
        "env": env_label,
        "driver": outcome.driver_description.get("driver"),
        # the driver file and a hash of the effective client settings: cells key on both
        "driver_file": driver_file_name(outcome.driver_description.get("source")),
        "driver_settings_sha256": settings_hash(
            outcome.driver_description.get("omb_driver_yaml"),
            fallback={k: v for k, v in outcome.driver_description.items()
                      if k != "source"} or None),
        # level (None = driver-defined), settings applied, settings read back
        "durability": result_block(broker, outcome.driver_description, outcome.read_back),
        "begin_time": outcome.begin_time,
        "measure_begin_time": outcome.measure_begin_time,
        "end_time": outcome.end_time,
        "period_s": prepared.period_s,
        "warmup_s": sum(p.elapsed_s for p in outcome.warmup),
        "warmup_periods": len(outcome.warmup),
        "warmup_steady": outcome.warmup_steady,
        "measured_s": outcome.measured_s,
        "target_rate_msg_s": prepared.rate,
        "ack_rate_msg_s": outcome.ack_rate,
        "consume_rate_msg_s": outcome.consume_rate,
        "publish_mib_s": outcome.publish_mib_s,
        "consume_mib_s": outcome.consume_mib_s,
        "send_errors": int(figures.get("send_errors") or 0),
        "latency": latency_block(outcome),
        "delivery": outcome.delivery.as_dict(),
        "drain_complete": outcome.drain_complete,
        "verdict": verdict.as_dict(),
        "slo": slo_results,
        "notes": prepared.notes,
        "artefacts": str(artefacts),
        "manifest": manifest,
        "noise_retries": [],
        "broker_metrics": None,
        "run_status": "completed",
        "failure": None,
    }


def append_jsonl(path: Path, record: Any) -> None:
    """Append ``record`` to ``path`` as one complete line, durable once this returns.

    One ``write(2)`` loop on an ``O_APPEND`` descriptor under an exclusive ``flock``
    (concurrent sessions sharing a results directory never interleave), then
    ``fsync``. A line an earlier process left torn (killed mid-write, disk full) is
    ended first, so this record starts a line of its own and readers skip only the torn
    fragment.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)  # read: the tail
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # the torn tail stays a fragment of its own
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


#: What the workers and the local broker processes hold at each period's end (sums over
#: processes; docs/reference/results.md): (column, side, ProcessResources field).
RESOURCE_FIELDS = (
    ("worker_rss_mib", "worker", "rss_bytes"), ("worker_open_fds", "worker", "open_fds"),
    ("worker_threads", "worker", "threads"), ("broker_rss_mib", "broker", "rss_bytes"),
    ("broker_open_fds", "broker", "open_fds"), ("broker_threads", "broker", "threads"),
)
RESOURCE_COLUMNS = tuple(c for c, _, _ in RESOURCE_FIELDS)


def resource_cells(p: PeriodStats) -> list[float | int | None]:
    """The ``RESOURCE_COLUMNS`` of one period (RSS in MiB)."""
    cells: list[float | int | None] = []
    for _, side, key in RESOURCE_FIELDS:
        v = p.held(side, key)
        cells.append(round(v / 1048576, 2) if v is not None and key == "rss_bytes" else v)
    return cells


#: ``periods.csv``'s latency views and columns (docs/reference/results.md).
PERIOD_VIEWS = ("publish_latency", "publish_delay", "publish_response", "e2e_latency",
                "e2e_response")
PERIODS_HEADER = [
    "phase", "index", "elapsed_s", "target_rate_msg_s", "publish_rate_msg_s",
    "consume_rate_msg_s", "publish_mib_s", "consume_mib_s", "send_error_rate",
    "backlog", "total_sent", "total_received", "queue_full", "client_queue_depth",
    "max_worker_cpu_share", "max_worker_runq_share", *RESOURCE_COLUMNS,
    *[f"{v}_{c}" for v in PERIOD_VIEWS for c in ("p50_us", "p99_us", "p999_us", "max_us",
                                                 "count")],
]


def period_row(p: PeriodStats) -> list[Any]:
    """One ``periods.csv`` row (``PERIODS_HEADER``); empty cells for n/a percentiles."""
    row: list[Any] = [
        p.phase, p.index, round(p.elapsed_s, 4), p.target_rate,
        round(p.publish_rate, 2), round(p.consume_rate, 2), round(p.publish_mib_s, 4),
        round(p.consume_mib_s, 4), round(p.error_rate, 3), p.backlog, p.total_sent,
        p.total_received, sum(x.queue_full for x in p.workers),
        sum(x.client_queue_depth for x in p.workers),
        round(max((x.cpu_share for x in p.workers), default=0.0), 3),
        round(max((x.runq_share for x in p.workers), default=0.0), 3),
        *resource_cells(p),
    ]
    for v in PERIOD_VIEWS:
        h = p.histograms[v]
        pct = h.percentiles((50.0, 99.0, 99.9))
        row += [pct[50.0], pct[99.0], pct[99.9], h.max(), h.total_count]
    return ["" if x is None else x for x in row]


def _periods_csv(path: Path, outcome: RunOutcome) -> None:
    """The final ``periods.csv`` (the record's periods), replacing the one appended
    during the run in one rename."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(PERIODS_HEADER)
        for p in [*outcome.warmup, *outcome.periods]:
            w.writerow(period_row(p))
    tmp.replace(path)


def timeline_block(outcome: RunOutcome) -> dict[str, Any]:
    """The per-period series of a run (the core of ``periods.csv``), one list per column.

    Every stats period in order (warm-up first, then the scenario's phases), so the report
    can draw rates and latency over time from the record alone: ``t_s`` is the period's
    end in seconds since the first period began; percentiles per period are ``None`` when
    the period holds too few samples (as everywhere in the record).
    """
    periods = [*outcome.warmup, *outcome.periods]
    t0 = periods[0].start_ns if periods else 0
    cols: dict[str, list[Any]] = {
        "phase": [], "t_s": [], "elapsed_s": [], "target_rate_msg_s": [],
        "publish_rate_msg_s": [], "consume_rate_msg_s": [], "backlog": []}
    for v in TIMELINE_VIEWS:
        cols.update({f"{v}_p50_us": [], f"{v}_p99_us": [], f"{v}_count": []})
    cols.update({c: [] for c in RESOURCE_COLUMNS})
    for p in periods:
        cols["phase"].append(p.phase)
        cols["t_s"].append(round((p.start_ns - t0) / 1e9 + p.elapsed_s, 3))
        cols["elapsed_s"].append(round(p.elapsed_s, 4))
        cols["target_rate_msg_s"].append(p.target_rate)
        cols["publish_rate_msg_s"].append(round(p.publish_rate, 2))
        cols["consume_rate_msg_s"].append(round(p.consume_rate, 2))
        cols["backlog"].append(p.backlog)
        for v in TIMELINE_VIEWS:
            h = p.histograms.get(v)
            pct = h.percentiles((50.0, 99.0)) if h is not None else {}
            cols[f"{v}_p50_us"].append(pct.get(50.0))
            cols[f"{v}_p99_us"].append(pct.get(99.0))
            cols[f"{v}_count"].append(h.total_count if h is not None else 0)
        for c, cell in zip(RESOURCE_COLUMNS, resource_cells(p), strict=True):
            cols[c].append(cell)
    return {"periods": len(periods), **cols}


def _copy_logs(dest: Path, broker: BrokerEndpoint) -> list[str]:
    copied: list[str] = []
    local = broker.processes_record()
    logs = [*local.log_files, *local.gc_logs]
    if not logs:
        return copied
    dest.mkdir(exist_ok=True)
    for src in logs:
        p = Path(src)
        if not p.is_file():
            continue
        target = dest / p.name
        size = p.stat().st_size
        with open(p, "rb") as fin, open(target, "wb") as fout:
            if size > LOG_COPY_LIMIT:
                fin.seek(size - LOG_COPY_LIMIT)
            shutil.copyfileobj(fin, fout)
        copied.append(target.name)
    return copied


def write_artefacts(*, directory: Path, record: ResultRecord, prepared: PreparedRun,
                    outcome: RunOutcome, broker: BrokerEndpoint, results_root: Path,
                    omb_result: dict[str, Any], omb_filename: str) -> None:
    """Write every artefact of one test run and append its JSONL record."""
    import yaml

    from pytest_brokerperf.metrics.hlog import write_hlogs

    if "durability" in record:  # an extra key, after OMB's own (OMB's readers skip it)
        omb_result = {**omb_result, "durability": record["durability"]}
    (directory / omb_filename).write_text(json.dumps(omb_result, indent=2, allow_nan=False))
    (directory / "workload.yaml").write_text(
        yaml.safe_dump(prepared.workload.to_omb_dict(), sort_keys=False))
    driver_doc = dict(outcome.driver_description)
    (directory / "driver.yaml").write_text(yaml.safe_dump(
        {"omb_driver": _redact_doc(_driver_yaml(outcome)), "effective_client_settings":
         driver_doc}, sort_keys=False))
    (directory / "broker-settings.json").write_text(json.dumps(outcome.read_back, indent=2))
    _periods_csv(directory / "periods.csv", outcome)
    record["timeline"] = timeline_block(outcome)
    write_hlogs(directory / "histograms", outcome)
    with open(directory / "client-stats.jsonl", "w", encoding="utf-8") as fh:
        for doc in outcome.client_stats:
            fh.write(doc.strip() + "\n")
    record["manifest"]["logs"] = _copy_logs(directory / "logs", broker)
    (directory / "manifest.json").write_text(json.dumps(record["manifest"], indent=2,
                                                        default=str))
    (directory / "record.json").write_text(json.dumps(record, indent=2, allow_nan=False))
    append_jsonl(results_root / "results.jsonl", record)


def _driver_yaml(outcome: RunOutcome) -> dict[str, Any]:
    doc = outcome.driver_description.get("omb_driver_yaml")
    return dict(doc) if isinstance(doc, dict) else {}


def _redact_doc(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, str) and re.search(r"(password|secret|jaas)", v, re.I):
            v = re.sub(r"(?im)^(\s*[^=\n]*(password|secret|jaas)[^=\n]*=).*$", r"\1***", v)
        out[k] = v
    return out


def manifest(*, broker: BrokerEndpoint, prepared: PreparedRun, outcome: RunOutcome,
             session_info: dict[str, Any], seed: int) -> dict[str, Any]:
    """The reproducibility manifest (docs/reference/results.md)."""
    return {
        "plugin_version": __version__,
        "git_sha": session_info.get("git_sha"),
        "libraries": session_info.get("libraries"),
        "python_executable": sys.executable,
        "broker": broker.redacted(),
        "machine": session_info.get("machine"),
        "clock": session_info.get("clock"),
        "fsync_probe": session_info.get("fsync_probe"),
        "broker_warmup": session_info.get("broker_warmup", {}).get(broker.kind),
        "provision": session_info.get("provision"),
        "generator_cpus": list(outcome.plan.generator_cpus or []),
        "cpu_layout": cpu_layout(broker.broker_cpus(), outcome.plan.generator_cpus,
                                 outcome.coordinator_cpus),
        "workers": outcome.plan.workers,
        "seed": seed,
        "begin_time": outcome.begin_time,
        "end_time": outcome.end_time,
        "workload_file": str(prepared.workload_file) if prepared.workload_file else None,
        "driver": {k: v for k, v in outcome.driver_description.items()
                   if k != "omb_driver_yaml"},
        "probe_wait_s": outcome.probe_wait_s,
        "outstanding_after_flush": outcome.outstanding_after_flush,
        "worker_errors": outcome.worker_errors[:50],
        "totals": outcome.totals,
    }
