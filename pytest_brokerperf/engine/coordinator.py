"""The coordinator: runs one scenario's phases across worker processes.

Phase order follows OMB (DESIGN §4): create topics → consumers → producers →
readiness probe (bounded) → start load → warm-up (discarded; ends when steady, capped)
→ measured window of fixed stats periods → stop producers → wait for consumers to
catch up (bounded) → reconcile delivery → delete topics. Every wait is bounded and
every created resource is removed on the way out, also on errors.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.engine.delivery import DeliveryReport, reconcile
from pytest_brokerperf.engine.worker import (
    ConsumerSpec,
    ProducerSpec,
    WorkerAssignment,
    worker_main,
)
from pytest_brokerperf.errors import DriverError, MeasurementError
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats, WorkerSample

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_brokerperf.drivers.base import Driver
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.workload import Workload

__all__ = ["RunOutcome", "RunPlan", "run_workload"]

_mono = time.monotonic_ns


@dataclass(frozen=True)
class RunPlan:
    """How long and how to run a workload; the profile and options decide these."""

    rate: float  # aggregate target msg/s over all producers
    period_s: float
    warmup_max_s: float
    measure_s: float
    warmup_min_periods: int = 3
    steady_periods: int = 3
    steady_rate_tolerance: float = 0.10  # ack rate within ±10 % of target
    steady_p99_tolerance: float = 0.50  # publish-response p99 within ±50 % across periods
    workers: int = 1
    probe_timeout_s: float = 60.0
    flush_timeout_s: float = 30.0
    drain_timeout_s: float = 30.0
    topic_prefix: str = "brokerperf"
    keep_topics: bool = False
    generator_cpus: tuple[int, ...] | None = None
    seed: int = 0


@dataclass
class RunOutcome:
    """Everything one run measured, before any verdict or SLO is applied."""

    plan: RunPlan
    topics: list[str]
    subscriptions: list[str]
    warmup: list[PeriodStats]
    warmup_steady: bool
    periods: list[PeriodStats]
    cumulative: dict[str, LatencyHistogram]
    delivery: DeliveryReport
    totals: dict[str, int]
    begin_time: str
    end_time: str
    measure_begin_time: str
    probe_wait_s: float
    read_back: dict[str, Any] = field(default_factory=dict)
    client_stats: list[str] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    drain_complete: bool = True
    outstanding_after_flush: int = 0
    driver_description: dict[str, Any] = field(default_factory=dict)

    @property
    def measured_s(self) -> float:
        return sum(p.elapsed_s for p in self.periods)

    @property
    def ack_rate(self) -> float:
        s = self.measured_s
        return sum(p.messages_sent for p in self.periods) / s if s else 0.0

    @property
    def consume_rate(self) -> float:
        s = self.measured_s
        return sum(p.messages_received for p in self.periods) / s if s else 0.0

    @property
    def publish_mib_s(self) -> float:
        s = self.measured_s
        return sum(p.bytes_sent for p in self.periods) / s / 1048576 if s else 0.0

    @property
    def consume_mib_s(self) -> float:
        s = self.measured_s
        return sum(p.bytes_received for p in self.periods) / s / 1048576 if s else 0.0


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def safe_name(text: str, limit: int = 120) -> str:
    """A topic/group-safe name: [A-Za-z0-9._-], bounded length."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit]


class _WorkerHandle:
    def __init__(self, ctx: Any, assignment: WorkerAssignment) -> None:
        self.id = assignment.worker_id
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.proc = ctx.Process(
            target=worker_main, args=(child, assignment), name=f"brokerperf-worker-{self.id}",
            daemon=True,
        )
        self.proc.start()
        child.close()

    def send(self, cmd: str, arg: Any = None) -> None:
        self.conn.send((cmd, arg))

    def recv(self, cmd: str, timeout_s: float) -> Any:
        if not self.conn.poll(timeout_s):
            alive = self.proc.is_alive()
            raise DriverError(
                f"worker {self.id} did not answer {cmd!r} within {timeout_s:.0f} s "
                f"(process {'alive' if alive else f'exited with {self.proc.exitcode}'})"
            )
        try:
            status, result = self.conn.recv()
        except EOFError:
            raise DriverError(
                f"worker {self.id} died during {cmd!r} (exit code {self.proc.exitcode})"
            ) from None
        if status != "ok":
            raise DriverError(f"worker {self.id} failed in {cmd!r}:\n{result}")
        return result

    def call(self, cmd: str, arg: Any = None, timeout_s: float = 60.0) -> Any:
        self.send(cmd, arg)
        return self.recv(cmd, timeout_s)

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.send("close")
                self.conn.poll(10)
        except (OSError, EOFError, BrokenPipeError):
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()


def _broadcast(workers: list[_WorkerHandle], cmd: str, arg: Any = None,
               timeout_s: float = 60.0) -> list[Any]:
    for w in workers:
        w.send(cmd, arg)
    return [w.recv(cmd, timeout_s) for w in workers]


def _assign(workload: Workload, plan: RunPlan, driver: Driver, topics: list[str],
            subs_by_topic: dict[str, list[str]], payloads: list[bytes],
            client_prefix: str) -> list[WorkerAssignment]:
    producers: list[ProducerSpec] = []
    pid = 0
    for i, topic in enumerate(topics):
        for _ in range(workload.producers_for_topic(i)):
            producers.append(ProducerSpec(pid, topic))
            pid += 1
    consumers: list[ConsumerSpec] = []
    cid = 0
    for topic in topics:
        for sub in subs_by_topic[topic]:
            for _ in range(workload.consumer_per_subscription):
                consumers.append(ConsumerSpec(cid, topic, sub))
                cid += 1
    n = max(1, min(plan.workers, max(len(producers), len(consumers), 1)))
    out = [
        WorkerAssignment(
            worker_id=k, driver=driver, payloads=payloads,
            key_distributor=workload.key_distributor, cpus=plan.generator_cpus,
            client_prefix=client_prefix, seed=plan.seed + k,
        )
        for k in range(n)
    ]
    for k, p in enumerate(producers):
        out[k % n].producers.append(p)
    # consumers fill workers from the other end so producer-heavy workers get fewer
    for k, c in enumerate(consumers):
        out[(n - 1 - k) % n].consumers.append(c)
    return out


def _merge_period(index: int, phase: str, start_ns: int, elapsed_s: float,
                  snaps: list[dict[str, Any]], prev: dict[int, dict[str, int]],
                  subscriptions_per_topic: int, rate: float) -> PeriodStats:
    from pytest_brokerperf.metrics.histogram import LatencyHistogram

    ps = PeriodStats(index=index, start_ns=start_ns, elapsed_s=elapsed_s, phase=phase,
                     target_rate=rate)
    hists = {m: LatencyHistogram.for_metric(m) for m in METRICS}
    for s in snaps:
        t = s["totals"]
        p = prev.get(s["worker"], {})
        ps.messages_sent += t["acked"] - p.get("acked", 0)
        ps.bytes_sent += t["acked_bytes"] - p.get("acked_bytes", 0)
        ps.send_errors += t["send_errors"] - p.get("send_errors", 0)
        ps.messages_received += t["received"] - p.get("received", 0)
        ps.bytes_received += t["received_bytes"] - p.get("received_bytes", 0)
        ps.total_sent += t["acked"]
        ps.total_send_errors += t["send_errors"]
        ps.total_received += t["received"]
        for m in METRICS:
            hists[m].add(s["histograms"][m])
        ps.workers.append(
            WorkerSample(
                worker=s["worker"], cpu_s=s["cpu_s"], runq_delay_s=s["runq_delay_s"],
                elapsed_s=s["wall_s"], queue_full=t["queue_full"] - p.get("queue_full", 0),
                client_queue_depth=t["queue_depth"],
            )
        )
        prev[s["worker"]] = {k: v for k, v in t.items() if isinstance(v, int)}
    ps.backlog = max(0, subscriptions_per_topic * ps.total_sent - ps.total_received)
    ps.histograms = hists
    return ps


def _is_steady(periods: list[PeriodStats], plan: RunPlan) -> bool:
    k = plan.steady_periods
    if len(periods) < max(k, plan.warmup_min_periods):
        return False
    last = periods[-k:]
    if any(abs(p.publish_rate - plan.rate) > plan.steady_rate_tolerance * plan.rate
           for p in last):
        return False
    p99s = [p.histograms["publish_response"].percentile(99) for p in last]
    if any(v is None for v in p99s):
        return True  # too few samples per period to judge the tail; rate is steady
    vals = [float(v) for v in p99s if v is not None]
    mid = sorted(vals)[len(vals) // 2]
    return all(abs(v - mid) <= plan.steady_p99_tolerance * max(mid, 1.0) for v in vals)


def run_workload(
    driver: Driver,
    workload: Workload,
    plan: RunPlan,
    *,
    payloads: list[bytes],
    on_period: Callable[[PeriodStats], None] | None = None,
) -> RunOutcome:
    """Run ``workload`` against ``driver``'s broker and return what was measured."""
    begin = _now_iso()
    prefix = safe_name(plan.topic_prefix)
    topics = [f"{prefix}-{i:03d}" for i in range(workload.topics)]
    subs_by_topic = {
        t: [f"{prefix}-{i:03d}-sub{j:03d}" for j in range(workload.subscriptions_per_topic)]
        for i, t in enumerate(topics)
    }
    subscriptions = [s for ss in subs_by_topic.values() for s in ss]
    partitions = [workload.partitions_for_topic(i) for i in range(workload.topics)]
    admin = driver.admin()
    created = False
    workers: list[_WorkerHandle] = []
    try:
        admin.create_topics(topics, partitions)
        created = True
        read_back = admin.read_back(topics)
        assignments = _assign(workload, plan, driver, topics, subs_by_topic, payloads, prefix)
        ctx = mp.get_context("spawn")
        workers = [_WorkerHandle(ctx, a) for a in assignments]
        _broadcast(workers, "create_consumers", timeout_s=120)
        _broadcast(workers, "create_producers", timeout_s=120)
        probe_wait = _await_readiness(workers, subscriptions, plan.probe_timeout_s)

        nprod = [len(a.producers) for a in assignments]
        total_prod = sum(nprod)
        start_ns = _mono() + 50_000_000
        for w, k in zip(workers, nprod, strict=True):
            w.call("start_load", (plan.rate * k / total_prod if total_prod else 0.0, start_ns))
        prev: dict[int, dict[str, int]] = {}
        subs_per_topic = workload.subscriptions_per_topic
        sleep_until = start_ns
        # The snapshot at load start opens the first period.
        _wait_until(sleep_until)
        _merge_period(-1, "setup", sleep_until, 0.0, _broadcast(workers, "snapshot"), prev,
                      subs_per_topic, plan.rate)
        last_tick = _mono()
        warmup: list[PeriodStats] = []
        steady = False
        warm_deadline = last_tick + int(plan.warmup_max_s * 1e9)
        period_ns = int(plan.period_s * 1e9)
        errors: list[str] = []

        def tick(index: int, phase: str) -> PeriodStats:
            nonlocal last_tick
            _wait_until(last_tick + period_ns)
            snaps = _broadcast(workers, "snapshot")
            now = _mono()
            ps = _merge_period(index, phase, last_tick, (now - last_tick) / 1e9, snaps, prev,
                               subs_per_topic, plan.rate)
            last_tick = now
            for s in snaps:
                errors.extend(s["errors"])
            negative = sum(s["totals"]["negative_e2e"] for s in snaps)
            if negative:
                raise MeasurementError(
                    f"{negative} end-to-end latencies <= 0 on one clock (CLOCK_MONOTONIC): "
                    "this is a harness bug, not a broker figure"
                )
            if on_period is not None:
                on_period(ps)
            return ps

        if plan.warmup_max_s > 0:
            while _mono() < warm_deadline:
                warmup.append(tick(len(warmup), "warmup"))
                if _is_steady(warmup, plan):
                    steady = True
                    break
        else:
            steady = True
        measure_begin = _now_iso()
        periods: list[PeriodStats] = []
        n_periods = max(1, math.ceil(plan.measure_s / plan.period_s - 1e-9))
        for i in range(n_periods):
            periods.append(tick(i, "measure"))

        flush = _broadcast(workers, "stop_producers", plan.flush_timeout_s,
                           timeout_s=plan.flush_timeout_s + 30)
        outstanding = sum(f["outstanding"] for f in flush)
        drain_complete = _await_drain(workers, subs_per_topic, plan.drain_timeout_s)
        finals = _broadcast(workers, "final", timeout_s=120)
        end = _now_iso()
        for f in finals:
            errors.extend(f["errors"])
        subs_of_producer = {
            p.pid: subs_by_topic[p.topic] for a in assignments for p in a.producers
        }
        delivery = reconcile(
            [f["acks"] for f in finals],
            [r for f in finals for r in f["receipts"]],
            subs_of_producer,
            duplicate_acks=sum(f["duplicate_acks"] for f in finals),
        )
        totals: dict[str, int] = {}
        for f in finals:
            for k, v in f["totals"].items():
                if isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
        cumulative = {m: periods[0].histograms[m].copy() for m in METRICS}
        for p in periods[1:]:
            for m in METRICS:
                cumulative[m].add(p.histograms[m])
        return RunOutcome(
            plan=plan, topics=topics, subscriptions=subscriptions, warmup=warmup,
            warmup_steady=steady, periods=periods, cumulative=cumulative, delivery=delivery,
            totals=totals, begin_time=begin, end_time=end, measure_begin_time=measure_begin,
            probe_wait_s=probe_wait, read_back=read_back,
            client_stats=[d for f in finals for d in f["client_stats"]],
            worker_errors=errors, drain_complete=drain_complete,
            outstanding_after_flush=outstanding, driver_description=driver.describe(),
        )
    finally:
        for w in workers:
            w.close()
        if created and not plan.keep_topics:
            try:
                admin.delete_topics(topics)
                groups = getattr(admin, "delete_groups", None)
                if groups is not None:
                    groups(subscriptions)
            finally:
                admin.close()
        else:
            admin.close()


def _wait_until(t_ns: int) -> None:
    while True:
        left = (t_ns - _mono()) / 1e9
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def _await_readiness(workers: list[_WorkerHandle], subscriptions: list[str],
                     timeout_s: float) -> float:
    """OMB's readiness probe: every subscription must receive a probe message."""
    t0 = time.monotonic()
    last_probe = -1e9
    while True:
        now = time.monotonic()
        if now - last_probe >= 2.0:
            _broadcast(workers, "probe")
            last_probe = now
        time.sleep(0.2)
        got: dict[str, int] = {}
        for r in _broadcast(workers, "totals"):
            if r["errors"]:
                raise DriverError("worker error during readiness probe:\n" + "\n".join(
                    r["errors"]))
            for k, v in r["totals"]["probes"].items():
                got[k] = got.get(k, 0) + v
        missing = [s for s in subscriptions if not got.get(s)]
        if not missing:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise DriverError(
                f"timed out after {timeout_s:.0f} s waiting for consumers to be ready: "
                f"subscriptions without a probe message: {missing[:5]}"
            )


def _await_drain(workers: list[_WorkerHandle], subs_per_topic: int, timeout_s: float) -> bool:
    """After producers stop, wait (bounded) until consumers received every acked message."""
    deadline = time.monotonic() + timeout_s
    while True:
        totals = [r["totals"] for r in _broadcast(workers, "totals")]
        acked = sum(t["acked"] for t in totals)
        received = sum(t["received"] for t in totals)
        if received >= subs_per_topic * acked:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def default_generator_cpus(broker_cpus: list[int] | None) -> tuple[int, ...] | None:
    """CPUs for load generators: every CPU the broker is not pinned to, if any remain."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return None
    if not broker_cpus:
        return None
    rest = [c for c in mine if c not in set(broker_cpus)]
    return tuple(rest) if rest else None
