"""Broker-side metrics on the client's timeline (docs/reference/results.md, broker metrics).

A p99.9 spike in the client's periods means little until it lines up with "GC 180 ms"
or "ISR shrink" on the broker. A sampler thread in the pytest process reads, once per
stats period and right after the coordinator closes that period:

* every broker node's Prometheus endpoint: the JMX exporter agent the harness attaches
  to local Kafka (:mod:`pytest_brokerperf.brokers.kafka.jmx_exporter`) or the URLs given with
  ``--brokerperf-prometheus`` for a remote cluster — request-queue time, produce and
  consumer-fetch total time, ISR shrinks/expands, under-replicated partitions, bytes
  in/out, GC time, and process CPU/RSS when ``/proc`` is out of reach;
* ``/proc/<pid>`` of every local broker JVM: CPU, run-queue delay (schedstat), RSS, open
  files, threads and storage I/O (per process, for the soak's growth rule).

Alignment: the coordinator's ``on_period`` callback hands over each period's start and
end (``CLOCK_MONOTONIC``, the sampler's clock too); the sampler scrapes at once (the lag is
recorded, typically milliseconds) and differences counters against the sample taken at
the previous period's end, so broker period *i* covers the same window as client period
*i*. The first period's start has no scrape of its own: before it the sampler scrapes
every 250 ms and takes the one nearest the period start (its offset is recorded).

Kafka's percentiles (``99thPercentile``...) come from Yammer histograms over an
exponentially decaying reservoir (roughly the last five minutes, biased to recent
values): they lag and are not per-period figures. Per-period *means* are exact: Yammer's
mean is sum/count over the broker's life, so Δ(mean·count)/Δcount is the mean over the
period.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import queue
import re
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pytest_brokerperf.metrics.sysstats import ProcessResources

if TYPE_CHECKING:
    from pytest_brokerperf.metrics.stats import PeriodStats

__all__ = [
    "COLUMNS",
    "BrokerMetricsSampler",
    "BrokerPeriod",
    "parse_prometheus",
    "period_figures",
    "proc_figures",
    "process_figures",
    "process_tree",
    "redact_url",
    "series_total",
    "series_value",
]

_MIB = 1024.0 * 1024.0
_PROC = Path("/proc")
#: what each local broker process holds at a period's end (``BrokerPeriod.resources``)
RESOURCE_KEYS = ("rss_bytes", "open_fds", "threads")

# ------------------------------------------------------------------ Prometheus text format

_LINE_RE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?$"
)
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')

Series = dict[str, list[tuple[dict[str, str], float]]]


def parse_prometheus(text: str) -> Series:
    """Prometheus/OpenMetrics text → ``{name: [(labels, value), ...]}`` (comments skipped)."""
    out: Series = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE_RE.match(line)
        if m is None:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\")
                  for k, v in _LABEL_RE.findall(m["labels"] or "")}
        out.setdefault(m["name"], []).append((labels, value))
    return out


def series_value(series: Series, metric: str, **want: str) -> float | None:
    for labels, value in series.get(metric, ()):
        if all(labels.get(k) == v for k, v in want.items()):
            return value
    return None


def series_total(series: Series, name: str) -> float | None:
    values = [v for _, v in series.get(name, ())]
    return sum(values) if values else None


def process_figures(series: Series) -> dict[str, float]:
    """JVM garbage collection and process CPU/RSS from any Prometheus JVM/process exporter
    (the client_java default names); missing metrics are simply absent."""
    fig = {
        "gc_count": series_total(series, "jvm_gc_collection_seconds_count"),
        "gc_seconds": series_total(series, "jvm_gc_collection_seconds_sum"),
        "process_cpu_seconds": series_value(series, "process_cpu_seconds_total"),
        "process_rss_bytes": series_value(series, "process_resident_memory_bytes"),
    }
    return {k: v for k, v in fig.items() if v is not None and math.isfinite(v)}


# ------------------------------------------------------------------ /proc of a local broker


#: how long a process tree's membership is reused before /proc is scanned again
TREE_REFRESH_S = 5.0
_trees: dict[int, tuple[float, tuple[int, ...]]] = {}


def process_tree(pid: int) -> tuple[int, ...]:
    """``pid`` and its descendants, ``pid`` first. A broker's work is often not done by the
    process the harness started: Debian's ``rabbitmq-server`` is a shell script whose
    Erlang VM (``beam.smp``) is a child, a container's first process is its init. The
    membership is cached for :data:`TREE_REFRESH_S` (a scan reads every process's stat)."""
    import psutil

    now = time.monotonic()
    held = _trees.get(pid)
    if held is not None and now - held[0] < TREE_REFRESH_S:
        return held[1]
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess as exc:
        _trees.pop(pid, None)
        raise ProcessLookupError(f"no such process: {pid}") from exc
    tree = (pid, *sorted(k.pid for k in kids))
    _trees[pid] = (now, tree)
    return tree


def _cpu_with_reaped(pid: int) -> float:
    """utime + stime of ``pid`` and of its children it has reaped (cutime, cstime): summed
    over a tree, a child's CPU moves to its parent when it exits instead of vanishing."""
    text = (_PROC / str(pid) / "stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def proc_figures(pid: int) -> dict[str, float]:
    """CPU seconds, run-queue seconds, RSS, open files, threads and storage I/O bytes of
    process ``pid`` and its descendants (:func:`process_tree`), summed."""
    from pytest_brokerperf.metrics.sysstats import ProcessSampler, process_resources

    tree = process_tree(pid)
    fig: dict[str, float] = {}
    for n, member in enumerate(tree):
        try:
            cpu = _cpu_with_reaped(member)
        except (OSError, ValueError, IndexError):
            if n == 0:
                raise ProcessLookupError(f"process {pid} is gone") from None
            continue  # a descendant that exited since the tree was read
        fig["cpu_seconds"] = fig.get("cpu_seconds", 0.0) + cpu
        with contextlib.suppress(ProcessLookupError):
            runq, ok = ProcessSampler(member).runq_seconds()
            if ok:
                fig["runq_seconds"] = fig.get("runq_seconds", 0.0) + runq
        held = process_resources(member)
        for key in RESOURCE_KEYS:
            value = getattr(held, key)
            if value is not None:
                fig[key] = fig.get(key, 0.0) + float(value)
        with contextlib.suppress(OSError, ValueError):  # needs the same uid (or ptrace rights)
            for line in (_PROC / str(member) / "io").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("read_bytes", "write_bytes"):
                    fig[key] = fig.get(key, 0.0) + float(value)
    return fig


# ------------------------------------------------------------------ one period of figures

#: CSV columns after ``phase,index``: (name, how nodes combine, meaning). Units in names.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("broker_cpu_cores", "sum", "CPU used by the broker processes, in cores"),
    ("broker_runq_share", "sum", "time broker threads waited on a run queue / wall time"),
    ("broker_rss_mib", "sum", "resident memory at the period's end"),
    ("broker_open_fds", "sum", "open file descriptors at the period's end (/proc)"),
    ("broker_threads", "sum", "threads at the period's end (/proc)"),
    ("disk_read_mib_s", "sum", "storage reads of the broker processes"),
    ("disk_write_mib_s", "sum", "storage writes of the broker processes"),
    ("bytes_in_mib_s", "sum", "BytesInPerSec: produced bytes the brokers accepted"),
    ("bytes_out_mib_s", "sum", "BytesOutPerSec: bytes fetched by consumers"),
    ("replication_in_mib_s", "sum", "ReplicationBytesInPerSec: follower fetch traffic"),
    ("messages_in_s", "sum", "MessagesInPerSec"),
    ("produce_requests", "sum", "produce requests completed in the period"),
    ("produce_total_mean_ms", "wmean", "produce request total time, mean over the period"),
    ("produce_total_p50_ms", "max", "produce total time p50 (Kafka's decaying reservoir)"),
    ("produce_total_p99_ms", "max", "produce total time p99 (Kafka's decaying reservoir)"),
    ("produce_total_p999_ms", "max", "produce total time p99.9 (Kafka's decaying reservoir)"),
    ("produce_queue_mean_ms", "wmean", "produce request-queue time, mean over the period"),
    ("produce_queue_p99_ms", "max", "produce request-queue time p99 (reservoir)"),
    ("fetch_requests", "sum", "consumer fetch requests completed in the period"),
    ("fetch_total_mean_ms", "wmean", "consumer fetch total time, mean (includes fetch wait)"),
    ("fetch_total_p99_ms", "max", "consumer fetch total time p99 (reservoir)"),
    ("fetch_queue_mean_ms", "wmean", "consumer fetch request-queue time, mean"),
    ("follower_fetch_total_p99_ms", "max", "follower fetch total time p99 (reservoir)"),
    ("request_queue_size", "sum", "requests waiting for a handler thread at the period's end"),
    ("isr_shrinks", "sum", "ISR shrinks in the period"),
    ("isr_expands", "sum", "ISR expands in the period"),
    ("under_replicated", "sum", "under-replicated partitions at the period's end"),
    ("gc_count", "sum", "JVM garbage collections in the period"),
    ("gc_ms", "sum", "JVM GC time in the period (all collectors, all nodes)"),
)
COLUMN_NAMES = tuple(c[0] for c in COLUMNS)
_HOW = {name: how for name, how, _ in COLUMNS}


def period_figures(base: Mapping[str, float], end: Mapping[str, float],
                   elapsed_s: float) -> dict[str, float | None]:
    """One node's figures between two samples ``elapsed_s`` apart.

    Means carry their weights as ``_<column>_sum``/``_<column>_n`` so nodes combine
    exactly (:func:`combine`).
    """
    out: dict[str, float | None] = dict.fromkeys(COLUMN_NAMES)

    def delta(key: str) -> float | None:
        if key in base and key in end:
            return max(0.0, end[key] - base[key])  # a restarted counter never goes negative
        return None

    def per_s(key: str, scale: float = 1.0) -> float | None:
        d = delta(key)
        return None if d is None or elapsed_s <= 0 else d / elapsed_s / scale

    cpu_key = "cpu_seconds" if "cpu_seconds" in end else "process_cpu_seconds"
    out["broker_cpu_cores"] = per_s(cpu_key)
    out["broker_runq_share"] = per_s("runq_seconds")
    rss = end.get("rss_bytes", end.get("process_rss_bytes"))
    out["broker_rss_mib"] = None if rss is None else rss / _MIB
    out["broker_open_fds"] = end.get("open_fds")
    out["broker_threads"] = end.get("threads")
    out["disk_read_mib_s"] = per_s("read_bytes", _MIB)
    out["disk_write_mib_s"] = per_s("write_bytes", _MIB)
    out["bytes_in_mib_s"] = per_s("bytes_in_count", _MIB)
    out["bytes_out_mib_s"] = per_s("bytes_out_count", _MIB)
    out["replication_in_mib_s"] = per_s("replication_in_count", _MIB)
    out["messages_in_s"] = per_s("messages_in_count")
    out["produce_requests"] = delta("produce_total_count")
    out["fetch_requests"] = delta("fetch_total_count")
    for column, prefix in (("produce_total_mean_ms", "produce_total"),
                           ("produce_queue_mean_ms", "produce_queue"),
                           ("fetch_total_mean_ms", "fetch_total"),
                           ("fetch_queue_mean_ms", "fetch_queue")):
        n = delta(f"{prefix}_count")
        keys = (f"{prefix}_mean", f"{prefix}_count")
        if n and all(k in base and k in end for k in keys):
            total = end[keys[0]] * end[keys[1]] - base[keys[0]] * base[keys[1]]
            out[f"_{column}_sum"], out[f"_{column}_n"] = max(0.0, total), n
            out[column] = max(0.0, total) / n
    for column, key in (("produce_total_p50_ms", "produce_total_p50"),
                        ("produce_total_p99_ms", "produce_total_p99"),
                        ("produce_total_p999_ms", "produce_total_p999"),
                        ("produce_queue_p99_ms", "produce_queue_p99"),
                        ("fetch_total_p99_ms", "fetch_total_p99"),
                        ("follower_fetch_total_p99_ms", "follower_fetch_total_p99"),
                        ("request_queue_size", "request_queue_size"),
                        ("under_replicated", "under_replicated")):
        out[column] = end.get(key)
    out["isr_shrinks"] = delta("isr_shrinks_count")
    out["isr_expands"] = delta("isr_expands_count")
    out["gc_count"] = delta("gc_count")
    gc = delta("gc_seconds")
    out["gc_ms"] = None if gc is None else gc * 1000.0
    return out


def combine(nodes: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """All nodes' period figures as one row: sums, maxima and count-weighted means."""
    row: dict[str, float | None] = {}
    for name in COLUMN_NAMES:
        how = _HOW[name]
        if how == "wmean":
            sums = [n.get(f"_{name}_sum") for n in nodes]
            counts = [n.get(f"_{name}_n") for n in nodes]
            pairs = [(s, c) for s, c in zip(sums, counts, strict=True)
                     if s is not None and c]
            row[name] = (sum(s for s, _ in pairs) / sum(c for _, c in pairs)
                         if pairs else None)
            continue
        values = [v for n in nodes if (v := n.get(name)) is not None]
        if not values:
            row[name] = None
        else:
            row[name] = sum(values) if how == "sum" else max(values)
    return row


# ------------------------------------------------------------------ the sampler


def redact_url(url: str) -> str:
    """A URL without user info, query or fragment (they may carry credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class _Sample:
    t_ns: int  # CLOCK_MONOTONIC, middle of the scrape
    nodes: dict[str, dict[str, float]]


@dataclass
class BrokerPeriod:
    """The broker's side of one client stats period (same ``phase`` and ``index``)."""

    phase: str
    index: int
    start_ns: int  # the client period's start and end (CLOCK_MONOTONIC)
    end_ns: int
    sampled_s: float  # time between the two samples the figures come from
    lag_ms: float  # end sample taken this long after the client period ended
    base_offset_ms: float  # start sample taken this far from the client period's start
    figures: dict[str, float | None] = field(default_factory=dict)
    #: per local broker process (``/proc``), what it holds at the period's end
    resources: dict[str, ProcessResources] = field(default_factory=dict)


@dataclass(frozen=True)
class _Source:
    node: str
    kind: str  # "proc" | "prometheus"
    target: str = field(repr=False)  # pid or URL (user info may be a password)


def _fetch(url: str, timeout_s: float) -> str:
    parts = urlsplit(url)
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    if parts.username is not None:  # http://user:pass@host/metrics
        import base64

        token = base64.b64encode(
            f"{parts.username}:{parts.password or ''}".encode()).decode("ascii")
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        request = urllib.request.Request(
            urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")),
            headers={"Accept": "text/plain", "Authorization": f"Basic {token}"},
        )
    with urllib.request.urlopen(request, timeout=timeout_s) as resp:  # http[s] only (validated)
        data: bytes = resp.read(32 * 1024 * 1024)
    return data.decode("utf-8", errors="replace")


class BrokerMetricsSampler:
    """Samples broker nodes once per client stats period, in a thread of its own.

    ``sources``: (node, "proc", pid) and (node, "prometheus", url) triples. Call
    :meth:`start` before the run, :meth:`on_period` from the coordinator's
    ``on_period`` callback (cheap: it only queues the boundary), :meth:`stop` after.
    """

    PRE_INTERVAL_S = 0.25
    SCRAPE_TIMEOUT_S = 2.0
    MAX_ERRORS = 50

    def __init__(self, sources: Iterable[tuple[str, str, str]], *,
                 clock: Callable[[], int] = time.monotonic_ns,
                 figures: Callable[[Series], dict[str, float]] = process_figures) -> None:
        self.sources = [_Source(*s) for s in sources]
        self._figures = figures  # the broker kind's reading of a Prometheus scrape
        self.nodes = sorted({s.node for s in self.sources}, key=_node_order)
        self._clock = clock
        self._events: queue.Queue[tuple[str, int, int, int] | None] = queue.Queue()
        self._ring: deque[_Sample] = deque(maxlen=600)
        self._last: tuple[int, _Sample] | None = None  # (period end_ns, sample)
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.rows: list[BrokerPeriod] = []
        self.errors: list[str] = []
        self.kinds = sorted({s.kind for s in self.sources})

    # -- construction ------------------------------------------------------------------
    @classmethod
    def for_sources(cls, *, remote: bool, pids: Sequence[int] = (),
                    metrics_urls: Sequence[str] = (), prometheus: Sequence[str] = (),
                    figures: Callable[[Series], dict[str, float]] = process_figures
                    ) -> BrokerMetricsSampler | None:
        """A sampler of a broker's local ``pids`` and agent ``metrics_urls`` (none when
        ``remote``) plus the ``--brokerperf-prometheus`` URLs, read with the broker kind's
        ``figures``; None when there is nothing to read. The caller hands in the values
        (scenario_library.setup.broker_sampler), so metrics never look a broker up."""
        sources: list[tuple[str, str, str]] = []
        if not remote:
            for i, pid in enumerate(pids, start=1):
                sources.append((str(i), "proc", str(pid)))
            for i, url in enumerate(metrics_urls, start=1):
                sources.append((str(i), "prometheus", url))
        for i, url in enumerate(prometheus, start=1):
            node = f"prom{i}" if not remote else str(i)
            if (node, "prometheus", url) not in sources:
                sources.append((node, "prometheus", url))
        if not sources:
            return None
        return cls(sources, figures=figures)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="brokerperf-broker-metrics",
                                        daemon=True)
        self._thread.start()

    def on_period(self, period: Any) -> None:
        """Queue one client period's boundary (``phase``, ``index``, ``start_ns``,
        ``elapsed_s`` of a :class:`~pytest_brokerperf.metrics.stats.PeriodStats`)."""
        start = int(period.start_ns)
        end = start + round(float(period.elapsed_s) * 1e9)
        self._events.put((str(period.phase), int(period.index), start, end))

    def stop(self, timeout_s: float = 30.0) -> None:
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._error("sampler thread did not finish; later periods are missing")

    # -- the thread -----------------------------------------------------------------------
    def _error(self, text: str) -> None:
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append(text)

    def _sample(self) -> _Sample:
        t0 = self._clock()
        nodes: dict[str, dict[str, float]] = {n: {} for n in self.nodes}
        for src in self.sources:
            try:
                if src.kind == "proc":
                    nodes[src.node].update(proc_figures(int(src.target)))
                else:
                    text = _fetch(src.target, self.SCRAPE_TIMEOUT_S)
                    nodes[src.node].update(self._figures(parse_prometheus(text)))
            except Exception as exc:  # one failed scrape is a gap, not a failed run
                where = src.target if src.kind == "proc" else redact_url(src.target)
                self._error(f"node {src.node} {src.kind} {where}: {type(exc).__name__}: "
                            f"{str(exc)[:200]}")
        t1 = self._clock()
        return _Sample((t0 + t1) // 2, nodes)

    def _loop(self) -> None:
        first = self._sample()
        self._ring.append(first)
        while True:
            try:
                event = self._events.get(timeout=self.PRE_INTERVAL_S)
            except queue.Empty:
                if self._last is None:  # before the first boundary: keep a fine ring
                    self._ring.append(self._sample())
                continue
            if event is None:
                return
            self._boundary(*event)

    def _boundary(self, phase: str, index: int, start_ns: int, end_ns: int) -> None:
        end = self._sample()
        if self._last is not None and abs(self._last[0] - start_ns) < 1_000_000:
            base = self._last[1]
        else:
            candidates = list(self._ring) + ([self._last[1]] if self._last else [])
            base = min(candidates, key=lambda s: abs(s.t_ns - start_ns))
        self._last = (end_ns, end)
        elapsed = (end.t_ns - base.t_ns) / 1e9
        per_node = [period_figures(base.nodes.get(n, {}), end.nodes.get(n, {}), elapsed)
                    for n in self.nodes]
        self.rows.append(BrokerPeriod(
            phase=phase, index=index, start_ns=start_ns, end_ns=end_ns,
            sampled_s=elapsed, lag_ms=(end.t_ns - end_ns) / 1e6,
            base_offset_ms=(base.t_ns - start_ns) / 1e6, figures=combine(per_node),
            resources=self._held(end),
        ))

    def _held(self, sample: _Sample) -> dict[str, ProcessResources]:
        """Each local broker process's RSS, open files and threads in ``sample``, keyed
        ``node <n> (pid <pid>)``."""
        out: dict[str, ProcessResources] = {}
        for src in self.sources:
            if src.kind != "proc":
                continue
            fig = sample.nodes.get(src.node, {})
            if not any(k in fig for k in RESOURCE_KEYS):
                continue  # the process could not be read at this boundary
            values = {k: int(fig[k]) if k in fig else None for k in RESOURCE_KEYS}
            out[f"node {src.node} (pid {src.target})"] = ProcessResources(**values)
        return out

    def process_pids(self) -> dict[str, int]:
        """The local broker processes by their ``resources`` key."""
        return {f"node {s.node} (pid {s.target})": int(s.target) for s in self.sources
                if s.kind == "proc"}

    def attach_resources(self, periods: Iterable[PeriodStats]) -> None:
        """Copy each row's per-process resources onto the client period it belongs to
        (same start), so ``periods.csv`` and the record carry them. Call after
        :meth:`stop`; calling it again changes nothing."""
        by_start = {r.start_ns: r.resources for r in self.rows}
        for p in periods:
            held = by_start.get(p.start_ns)
            if held is not None:
                p.broker_resources = dict(held)

    # -- results ------------------------------------------------------------------------
    def write_csv(self, path: Path) -> None:
        """``broker-metrics.csv``: one row per client period, same ``phase``/``index``."""
        t0 = self.rows[0].start_ns if self.rows else 0
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["phase", "index", "t_end_s", "sampled_s", "scrape_lag_ms",
                        "base_offset_ms", *COLUMN_NAMES])
            for r in self.rows:
                w.writerow([r.phase, r.index, round((r.end_ns - t0) / 1e9, 3),
                            round(r.sampled_s, 4), round(r.lag_ms, 2),
                            round(r.base_offset_ms, 2),
                            *("" if (v := r.figures.get(c)) is None else round(v, 4)
                              for c in COLUMN_NAMES)])

    def summary(self, csv_name: str | None = "broker-metrics.csv") -> dict[str, Any]:
        """The JSONL record's ``broker_metrics``: measured-window means and maxima."""
        measured = [r for r in self.rows if r.phase == "measure"]
        stats: dict[str, dict[str, float] | None] = {}
        for name in COLUMN_NAMES:
            values = [v for r in measured if (v := r.figures.get(name)) is not None]
            stats[name] = ({"mean": round(sum(values) / len(values), 4),
                            "max": round(max(values), 4)} if values else None)

        def total(name: str) -> float | None:
            values = [v for r in measured if (v := r.figures.get(name)) is not None]
            return round(sum(values), 3) if values else None

        return {
            "sources": self.kinds,
            "nodes": len(self.nodes),
            "endpoints": [redact_url(s.target) for s in self.sources if s.kind == "prometheus"],
            "pids": [int(s.target) for s in self.sources if s.kind == "proc"],
            "csv": csv_name if self.rows else None,
            "periods": len(self.rows),
            "measured_periods": len(measured),
            "measured": stats,
            "totals": {k: total(k) for k in ("isr_shrinks", "isr_expands", "gc_count",
                                             "gc_ms")},
            "max_scrape_lag_ms": round(max((r.lag_ms for r in self.rows), default=0.0), 2),
            "max_base_offset_ms": round(max((abs(r.base_offset_ms) for r in self.rows),
                                            default=0.0), 2),
            "errors": list(self.errors),
        }


def _node_order(node: str) -> tuple[int, str]:
    return (int(node), "") if node.isdigit() else (10**9, node)
