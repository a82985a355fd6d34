"""Result records and the per-test artefact directory (docs/reference/results.md).

Layout, one directory per test run: ``<results>/<run id>/<test id>/`` holding the
OMB-compatible result JSON, the effective workload and driver YAML, the broker
settings read back from the broker, broker and GC logs, the per-period CSV, HdrHistogram
logs, client statistics and a reproducibility manifest. One record per test run is
appended to ``<results>/results.jsonl`` in the versioned schema below, keyed by
(run id, test id, attempt) so re-runs never double-count.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from pytest_brokerperf.brokers.versions import __version__
from pytest_brokerperf.metrics.cpus import cpu_layout
from pytest_brokerperf.metrics.stats import METRICS
from pytest_brokerperf.results.figures import PERCENTILES, percentile_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.core.errors import ResultsWriteError
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.results.prepared import PreparedRun

__all__ = [
    "PERIODS_HEADER",
    "RECORD_RESERVE_BYTES",
    "RECORD_SCHEMA",
    "RUN_STATUSES",
    "TIMELINE_VIEWS",
    "ResultRecord",
    "ScenarioBlocks",
    "append_jsonl",
    "artefact_dir",
    "build_record",
    "free_space",
    "histogram_block",
    "period_row",
    "release_record_space",
    "reserve_record_space",
    "timeline_block",
    "write_artefacts",
    "write_atomic",
    "write_error",
]

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
    artefacts_missing: list[str]  # result files a full disk kept from being written
    results_error: str  # the first of those errors (file, reason, free space, fix)


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
    tls: dict[str, Any]
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
    #: which executor ran the generators (local or spark), its master, each task's host,
    #: executor id, versions and clock offset (executor_block)
    executor: NotRequired[dict[str, Any]]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:150] or "test"


#: Space held for a run's ``record.json`` from the moment its directory is made, given
#: back just before the record is written: a disk that fills during the run (the run's
#: own files, a broker's logs, another process) still has room for the record.
RECORD_RESERVE_BYTES = 1024 * 1024
RESERVE_NAME = ".record-space"


def reserve_record_space(directory: Path) -> None:
    """Hold :data:`RECORD_RESERVE_BYTES` in ``directory`` (blocks allocated, not written)."""
    path = directory / RESERVE_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, RECORD_RESERVE_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        release_record_space(directory)
        raise write_error(path, exc) from None


def release_record_space(directory: Path) -> None:
    """Give back the space :func:`reserve_record_space` held (idempotent)."""
    with contextlib.suppress(OSError):
        (directory / RESERVE_NAME).unlink()


def artefact_dir(results: Path, run_id: str, test_id: str) -> tuple[Path, int]:
    """A fresh directory for this test run and its attempt number (1, 2, ...), holding
    room for its record (:func:`reserve_record_space`)."""
    base = results / run_id / _safe(test_id)
    attempt = 1
    path = base
    while path.exists():
        attempt += 1
        path = base.with_name(f"{base.name}.attempt{attempt}")
    path.mkdir(parents=True)
    reserve_record_space(path)
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
                 manifest: dict[str, Any], broker_type: BrokerType | None = None
                 ) -> ResultRecord:
    """One JSONL record (schema ``RECORD_SCHEMA``); unit-suffixed field names."""
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.durability import result_block
    from pytest_brokerperf.results.driver_identity import driver_file_name, settings_hash
    from pytest_brokerperf.results.prepared import workload_block

    return {
        "schema": RECORD_SCHEMA,
        "run_id": run_id,
        "test_id": test_id,
        "attempt": attempt,
        "broker": broker.kind,
        "broker_version": broker.version,
        "provision": broker.mode,
        # did the clients speak TLS, and which protocol (--brokerperf-tls, --kafka-config)
        "tls": broker.tls_record(),
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
        "durability": result_block(broker_type or brokers.get(broker.kind), broker,
                                   outcome.driver_description, outcome.read_back),
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
        "executor": executor_block(outcome),
    }


def executor_block(outcome: RunOutcome) -> dict[str, Any]:
    """The record's and manifest's ``executor``: kind, master, tasks, clocks (µs)."""
    rep = outcome.executor
    if rep is None:
        return {"kind": "local", "master": None, "tasks": [], "clocks": [],
                "pair_uncertainty_us": 0.0}
    return {
        "kind": rep.kind,
        "master": rep.master,
        "app_id": rep.app_id,
        "tasks": [{"task": t.task, "host": t.host, "executor_id": t.executor_id,
                   "pid": t.pid, "python": t.python, "client": t.client,
                   "client_version": t.client_version, "boot_id": t.identity.boot_id,
                   "time_namespace": t.identity.time_ns} for t in rep.tasks],
        "clocks": [{"task": c.task, "host": c.identity.host, "corrected": c.corrected,
                    "offset_us": c.applied_offset_ns / 1e3,
                    "first_uncertainty_us": (c.first.uncertainty_ns / 1e3
                                             if c.first is not None else None),
                    "first_rtt_us": c.first.rtt_ns / 1e3 if c.first is not None else None,
                    "residuals_us": [r.offset_ns / 1e3 for r in c.residuals],
                    "uncertainty_us": c.uncertainty_ns / 1e3,
                    "drift_ppm": c.drift_ppm} for c in rep.clocks],
        "pair_uncertainty_us": rep.pair_uncertainty_ns / 1e3,
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
    out = io.StringIO(newline="")
    w = csv.writer(out)
    w.writerow(PERIODS_HEADER)
    for p in [*outcome.warmup, *outcome.periods]:
        w.writerow(period_row(p))
    write_atomic(path, out.getvalue())


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


def free_space(path: Path) -> str:
    """Free space on the filesystem holding ``path`` (its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return "free space unknown"
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if free >= size:
            return f"{free / size:.1f} {unit} free"
    return f"{free} bytes free"


def write_error(path: Path, exc: OSError) -> ResultsWriteError:
    """The error for a result file that could not be written: file, reason, free space
    and the fix."""
    from pytest_brokerperf.core.errors import ResultsWriteError

    return ResultsWriteError(
        f"cannot write {path}: {exc.strerror or exc} ({free_space(path)} on its "
        f"filesystem). Fix: free space there, or give --brokerperf-results a directory "
        "on a filesystem with room")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or not at all: a temporary file in the same directory, flushed
    to disk, renamed over ``path``. A full disk leaves the old file (or none) and no
    truncated one; raises :class:`ResultsWriteError` naming the file and the free space."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise write_error(path, exc) from None


#: The run's bulky artefacts, dropped (largest value last) when the disk has no room left
#: for ``record.json``: the record names them under ``artefacts_missing``.
_DROPPABLE = ("logs", "client-stats.jsonl", "broker-metrics.csv", "histograms", "periods.csv")


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def write_artefacts(*, directory: Path, record: ResultRecord, prepared: PreparedRun,
                    outcome: RunOutcome, broker: BrokerEndpoint, results_root: Path,
                    omb_result: dict[str, Any], omb_filename: str) -> None:
    """Write every artefact of one test run and append its JSONL record.

    A full disk never leaves a truncated file: each artefact is written whole or removed,
    the ones that could not be written are listed in the record (``artefacts_missing``,
    ``results_error``), ``record.json`` is written atomically (dropping the run's bulky
    artefacts to make room if it must) and the JSONL line after it; then
    :class:`ResultsWriteError` names the file and the free space.
    """
    import yaml

    from pytest_brokerperf.core.errors import ResultsWriteError
    from pytest_brokerperf.metrics.hlog import write_hlogs

    if "durability" in record:  # an extra key, after OMB's own (OMB's readers skip it)
        omb_result = {**omb_result, "durability": record["durability"]}
    driver_doc = dict(outcome.driver_description)
    record["timeline"] = timeline_block(outcome)
    logs_dir = directory / "logs"

    def client_stats() -> None:
        write_atomic(directory / "client-stats.jsonl",
                     "".join(doc.strip() + "\n" for doc in outcome.client_stats))

    def hlogs() -> None:
        write_hlogs(directory / "histograms", outcome)

    def logs() -> None:
        record["manifest"]["logs"] = _copy_logs(logs_dir, broker)

    steps: list[tuple[str, Callable[[], None]]] = [
        (omb_filename, lambda: write_atomic(
            directory / omb_filename, json.dumps(omb_result, indent=2, allow_nan=False))),
        ("workload.yaml", lambda: write_atomic(directory / "workload.yaml", yaml.safe_dump(
            prepared.workload.to_omb_dict(), sort_keys=False))),
        ("driver.yaml", lambda: write_atomic(directory / "driver.yaml", yaml.safe_dump(
            {"omb_driver": _redact_doc(_driver_yaml(outcome)),
             "effective_client_settings": driver_doc}, sort_keys=False))),
        ("broker-settings.json", lambda: write_atomic(
            directory / "broker-settings.json", json.dumps(outcome.read_back, indent=2))),
        ("periods.csv", lambda: _periods_csv(directory / "periods.csv", outcome)),
        ("histograms", hlogs),
        ("client-stats.jsonl", client_stats),
        ("logs", logs),
    ]
    missing: list[str] = []
    first: ResultsWriteError | None = None
    for name, step in steps:
        if first is not None:  # the disk is full: the record comes first
            missing.append(name)
            continue
        try:
            step()
        except ResultsWriteError as exc:
            first = exc
        except OSError as exc:
            first = write_error(directory / name, exc)
        if first is not None:
            missing.append(name)
            if name in ("histograms", "logs", "periods.csv"):
                _remove(directory / name)  # what was half written
    if first is not None:
        record["manifest"].setdefault("logs", [])
    try:
        write_atomic(directory / "manifest.json",
                     json.dumps(record["manifest"], indent=2, default=str))
    except ResultsWriteError as exc:
        first = first or exc
        missing.append("manifest.json")
    record_path = directory / "record.json"
    release_record_space(directory)  # the room held since the run began
    for attempt in range(2):
        if missing:
            record["artefacts_missing"] = sorted(set(missing))
            record["results_error"] = str(first)
        try:
            write_atomic(record_path, json.dumps(record, indent=2, allow_nan=False))
            break
        except ResultsWriteError as exc:
            first = first or exc
            if attempt:
                raise first from None
            for name in _DROPPABLE:  # make room: the record is what a run leaves
                if (directory / name).exists():
                    _remove(directory / name)
                    missing.append(name)
    try:
        append_jsonl(results_root / "results.jsonl", record)
    except OSError as exc:
        first = first or write_error(results_root / "results.jsonl", exc)
    if first is not None:
        raise first


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
        "executor": executor_block(outcome),
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
