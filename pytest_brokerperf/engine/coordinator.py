"""The coordinator: runs a workload's phases across worker processes.

Phase order follows OMB's WorkloadGenerator: create topics → consumers → producers →
readiness probe (bounded) → start load → warm-up (discarded; ends when steady, capped)
→ measured window of fixed stats periods → stop producers → wait for consumers to
catch up (bounded) → reconcile delivery → delete topics. Every wait is bounded and
every created resource is removed on the way out, also on errors.

One :class:`LoadSession` holds the topics, worker processes and clients, so a
session can run several fixed-rate *rungs* one after another (set rate → settle /
warm-up → measured periods), as the throughput ladder and the generator calibration
do, or have a controller change the rate while it runs (OMB's rate discovery).
:func:`run_workload` is the one-rung case; :func:`run_rates` runs rungs until the
caller's ``next_rung`` says stop. Lifetime counters (backlog, delivery) span the whole
session; each rung's periods and histograms are its own.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.container_watch import check_watched_containers
from pytest_brokerperf.brokers.provision.process import check_watched
from pytest_brokerperf.core.errors import BrokerDied, MeasurementError, RunInterrupted
from pytest_brokerperf.engine.clock import ClockIdentity, clock_mismatch
from pytest_brokerperf.engine.delivery import DeliveryReport, reconcile
from pytest_brokerperf.engine.executor import ExecutorReport
from pytest_brokerperf.engine.liveness import RemoteWatch
from pytest_brokerperf.engine.plan import PhaseRun, Rung, RunOutcome, RunPlan, SessionEnd
from pytest_brokerperf.engine.worker import (
    BOOT_ID,
    WorkerAssignment,
)
from pytest_brokerperf.engine.workers import (
    CLOCK_SAMPLES,
    LocalLauncher,
    WorkerHandle,
    WorkerLauncher,
    assign_topics,
    await_drain,
    await_readiness,
    broadcast,
    cpu_snapshot,
    measure_residuals,
    sync_clocks,
    wait_until,
    worst_pair_uncertainty,
)
from pytest_brokerperf.metrics.cpus import allowed_cpus, pinned_coordinator
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats, WorkerSample
from pytest_brokerperf.metrics.sysstats import ProcessResources

if TYPE_CHECKING:

    from pytest_brokerperf.brokers.driver import BrokerBacklog, Driver
    from pytest_brokerperf.workload.model import Workload

__all__ = [
    "LoadSession",
    "run_rates",
    "run_workload",
]

_mono = time.monotonic_ns


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def safe_name(text: str, limit: int = 120) -> str:
    """A topic/group-safe name: [A-Za-z0-9._-], bounded length."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit]


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
        # consume throughput counts every delivery (as OMB does); backlog, distinct ones
        ps.messages_received += (t["received"] + t["redelivered"]
                                 - p.get("received", 0) - p.get("redelivered", 0))
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
                resources=ProcessResources(**s["resources"]) if "resources" in s else None,
            )
        )
        prev[s["worker"]] = {k: v for k, v in t.items() if isinstance(v, int)}
    ps.backlog = max(0, subscriptions_per_topic * ps.total_sent - ps.total_received)
    ps.histograms = hists
    return ps


def _is_steady(periods: list[PeriodStats], plan: RunPlan, subscriptions: int = 1) -> bool:
    """The last periods published at the target rate with a stable publish p99, and the
    consumers are at the tail."""
    k = plan.steady_periods
    if len(periods) < max(k, plan.warmup_min_periods):
        return False
    last = periods[-k:]
    if any(abs(p.publish_rate - plan.rate) > plan.steady_rate_tolerance * plan.rate
           for p in last):
        return False
    if plan.rate > 0 and last[-1].backlog > plan.steady_lag_s * plan.rate * max(1, subscriptions):
        return False
    p99s = [p.histograms["publish_response"].percentile(99) for p in last]
    if any(v is None for v in p99s):
        return True  # too few samples per period to judge the tail; rate is steady
    vals = [float(v) for v in p99s if v is not None]
    mid = sorted(vals)[len(vals) // 2]
    return all(abs(v - mid) <= plan.steady_p99_tolerance * max(mid, 1.0) for v in vals)


#: Called while the coordinator waits between periods (about every 50 ms).
WaitHook = Callable[["LoadSession"], None]


class LoadSession:
    """Topics, worker processes and clients of one workload, for one or more rungs.

    Use as a context manager: entering creates the topics and clients and waits for
    readiness; leaving closes every worker and deletes the topics (unless
    ``plan.keep_topics``), also on errors. Between the two, :meth:`run_rung` any number
    of times, then :meth:`finish` once for the delivery report.
    """

    def __init__(self, driver: Driver, workload: Workload, plan: RunPlan, *,
                 payloads: list[bytes],
                 on_period: Callable[[PeriodStats], None] | None = None) -> None:
        self.driver = driver
        self.workload = workload
        self.plan = plan
        self.payloads = payloads
        self.on_period = on_period
        self.begin_time = _now_iso()
        prefix = safe_name(plan.topic_prefix)
        self.prefix = prefix
        self.topics = [f"{prefix}-{i:03d}" for i in range(workload.topics)]
        self.subs_by_topic = {
            t: [f"{prefix}-{i:03d}-sub{j:03d}" for j in range(workload.subscriptions_per_topic)]
            for i, t in enumerate(self.topics)
        }
        self.subscriptions = [s for ss in self.subs_by_topic.values() for s in ss]
        self.subs_per_topic = workload.subscriptions_per_topic
        self.workers: list[WorkerHandle] = []
        #: starts the workers: local processes unless the plan injects a cluster's
        self.launcher: WorkerLauncher = plan.launcher or LocalLauncher()
        self.assignments: list[WorkerAssignment] = []
        self.read_back: dict[str, Any] = {}
        self.probe_wait_s = 0.0
        self.errors: list[str] = []
        self.rate = 0.0
        self._admin: Any = None
        self._created = False
        self._started = False
        self._nprod: list[int] = []
        self._prev: dict[int, dict[str, int]] = {}
        self._last_tick = 0
        self._cpu: Any = None  # /proc/stat snapshot at the last tick
        self._finished: SessionEnd | None = None
        #: a local broker process exited (or a remote cluster stopped answering) during
        #: the run: nothing more is asked of it
        self.broker_died = False
        #: probes a remote cluster's addresses while the session lives (engine/liveness.py)
        endpoint = getattr(driver, "endpoint", None)
        self._remote = RemoteWatch.for_endpoint(
            endpoint if isinstance(endpoint, BrokerEndpoint) else None)
        #: CLOCK_MONOTONIC ns when the current rung's measured window began (None during
        #: its warm-up): what a fault's ``AT`` counts from
        self.measure_started_ns: int | None = None
        #: the pytest process (coordinator, broker-metrics sampler) pinned to the
        #: generator's CPUs for the session, off the broker's (provision/cpus.py)
        self._pin = contextlib.ExitStack()
        self.coordinator_cpus: tuple[int, ...] | None = None
        #: wall-clock time the current rung's measured window began (its begin until then)
        self._measure_begin = self.begin_time

    # -- lifecycle --------------------------------------------------------------------
    def __enter__(self) -> LoadSession:
        begin = _now_iso()
        try:
            self.open()
        except (BrokerDied, KeyboardInterrupt) as exc:
            # stopped in the set-up: nothing measured, but the record still says so
            stop = exc if isinstance(exc, BrokerDied) else RunInterrupted.of(exc)
            if stop.partial is None:
                stop.partial = self._outcome(self.plan, [], False, [], begin, begin, 0)
            self.close()
            if stop is exc:
                raise
            raise stop from exc
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Create topics, spawn workers, create consumers then producers, probe readiness."""
        wl, plan = self.workload, self.plan
        self.coordinator_cpus = self._pin.enter_context(pinned_coordinator(plan.generator_cpus))
        partitions = [wl.partitions_for_topic(i) for i in range(wl.topics)]
        self._admin = self.driver.admin()
        if self._remote is not None:
            self._remote.start()
        self._admin.create_topics(self.topics, partitions)
        self._created = True
        self.assignments = assign_topics(wl, plan, self.driver, self.topics, self.subs_by_topic,
                                   self.payloads, self.prefix)
        self.workers = self.launcher.launch(self.assignments)
        # before any client exists: a task off the coordinator's clock stamps on it
        sync_clocks(self.workers, ClockIdentity.here())
        broadcast(self.workers, "create_consumers", timeout_s=120)
        broadcast(self.workers, "create_producers", timeout_s=120)
        self.probe_wait_s = await_readiness(self.workers, self.subscriptions,
                                             plan.probe_timeout_s)
        # Read back once consumers exist: RabbitMQ subscription queues are theirs.
        self.read_back = self._admin.read_back(self.topics)
        self._nprod = [len(a.producers) for a in self.assignments]

    def close(self) -> None:
        """Close every worker, delete the topics and consumer groups (bounded, idempotent)."""
        workers, self.workers = self.workers, []
        if self._remote is not None:
            self._remote.stop()
        for w in workers:
            w.close()
        self.launcher.stop()
        self._pin.close()
        admin, self._admin = self._admin, None
        if admin is None:
            return
        try:
            # A dead broker cannot delete topics: asking would only wait out timeouts.
            if self._created and not self.plan.keep_topics and not self.broker_died:
                self._created = False
                admin.delete_topics(self.topics)
                admin.delete_groups(self.subscriptions)
        finally:
            admin.close()

    # -- rate -------------------------------------------------------------------------
    @property
    def producing_workers(self) -> int:
        return sum(1 for k in self._nprod if k)

    def set_rate(self, rate: float) -> None:
        """Offer ``rate`` msg/s in total from now on, split by each worker's producers.

        The first call starts the load on one common schedule; later calls rebase every
        worker's schedule at the new rate (OMB ``adjustPublishRate``: 1 msg/s floor).
        """
        total = sum(self._nprod)
        if not self._started:
            start_ns = _mono() + 50_000_000
            for w, k in zip(self.workers, self._nprod, strict=True):
                w.call("start_load", (rate * k / total if total else 0.0, start_ns))
            self._started = True
            wait_until(start_ns)
            self._baseline()
        else:
            for w, k in zip(self.workers, self._nprod, strict=True):
                w.send("adjust_rate", max(rate * k / total, 1.0) if total else 1.0)
            for w in self.workers:
                w.recv("adjust_rate", 60)
        self.rate = float(rate)

    def _baseline(self) -> None:
        """Open a new stats window now: what happened since the last tick is discarded."""
        _merge_period(-1, "setup", _mono(), 0.0, broadcast(self.workers, "snapshot"),
                      self._prev, self.subs_per_topic, self.rate)
        self._last_tick = _mono()
        self._cpu = cpu_snapshot()

    def _machine_cpu(self) -> tuple[float | None, float | None]:
        """Since the last tick: busy share of the generator's CPUs (all processes) and
        the share of the whole machine's CPU time the hypervisor stole."""
        from pytest_brokerperf.metrics.sysstats import system_cpu_delta

        prev, cur = self._cpu, cpu_snapshot()
        self._cpu = cur
        if prev is None or cur is None:
            return None, None
        delta = system_cpu_delta(prev, cur)
        busy = delta.per_cpu_busy
        cpus = self.plan.generator_cpus or tuple(sorted(busy))
        values = [busy[c] for c in cpus if c in busy]
        return (sum(values) / len(values) if values else None), delta.steal_share

    # -- periods ----------------------------------------------------------------------
    def tick(self, index: int, phase: str, on_wait: WaitHook | None = None, *,
             stop: Callable[[], bool] | None = None, check_s: float = 0.05) -> PeriodStats:
        """Wait for the end of the current stats period and merge every worker's snapshot;
        the period ends early once ``stop()`` (asked every ``check_s``) is true."""
        deadline = self._last_tick + int(self.plan.period_s * 1e9)
        next_check = 0
        if stop is not None:
            while not stop():
                left = (deadline - _mono()) / 1e9
                if left <= 0:
                    break
                next_check = self._check_brokers_every(next_check)
                time.sleep(min(left, check_s))
        else:
            while True:
                if on_wait is not None:
                    on_wait(self)
                left = (deadline - _mono()) / 1e9
                if left <= 0:
                    break
                next_check = self._check_brokers_every(next_check)
                time.sleep(min(left, 0.05))
        self._check_brokers()
        measure_residuals(self.workers)
        asked = _mono()
        snaps = broadcast(self.workers, "snapshot")
        now = _mono()
        for w, snap in zip(self.workers, snaps, strict=True):
            if w.clock is not None and w.clock.corrected and snap.get("clock"):
                snap["clock"] = {**snap["clock"], "corrected": True,
                                 "uncertainty_ns": w.clock.uncertainty_ns}
        ps = _merge_period(index, phase, self._last_tick, (now - self._last_tick) / 1e9, snaps,
                           self._prev, self.subs_per_topic, self.rate)
        ps.clock_note = clock_mismatch(snaps, asked, now, BOOT_ID)
        ps.generator_cpu_busy, ps.host_steal_share = self._machine_cpu()
        self._last_tick = now
        for s in snaps:
            self.errors.extend(s["errors"])
        negative = sum(s["totals"]["negative_e2e"] for s in snaps)
        if negative:
            raise MeasurementError(
                f"{negative} end-to-end latencies <= 0 on one clock (CLOCK_MONOTONIC): "
                "this is a harness bug, not a broker figure"
            )
        if self.on_period is not None:
            self.on_period(ps)
        return ps

    def _check_brokers_every(self, due_ns: int, interval_s: float = 0.5) -> int:
        """:meth:`_check_brokers` once ``due_ns`` has passed; the next due time."""
        now = _mono()
        if now < due_ns:
            return due_ns
        self._check_brokers()
        return now + int(interval_s * 1e9)

    def _check_brokers(self) -> None:
        """Stop the run at once if a local broker process or container exited (kill -9,
        OOM, crash), or once a remote cluster has stopped answering for longer than its
        bound."""
        try:
            check_watched()
            check_watched_containers()
            if self._remote is not None:
                self._remote.check(self.totals)
        except BrokerDied:
            self.broker_died = True
            raise

    def run_rung(self, rung: Rung, on_wait: WaitHook | None = None) -> RunOutcome:
        """Set the rung's rate, settle (warm-up), measure; return this rung's outcome.

        The outcome's delivery report is empty until :meth:`finish` (delivery is
        reconciled once per session); ``SessionEnd.apply`` fills it in.
        """
        if rung.drain_before_s > 0 and self._started:
            self.drain(rung.drain_before_s)
        begin = _now_iso()
        self.measure_started_ns = None
        errors_before = len(self.errors)
        first = not self._started
        self.set_rate(rung.rate)
        if not first:
            self._baseline()
        plan = replace(self.plan, rate=rung.rate, warmup_max_s=rung.warmup_max_s,
                       measure_s=rung.measure_s)
        warmup: list[PeriodStats] = []
        periods: list[PeriodStats] = []
        self._measure_begin = begin
        try:
            return self._run_rung(rung, plan, on_wait, warmup, periods, begin, errors_before)
        except BrokerDied as exc:  # what was measured until then, for the failed record
            exc.partial = self._outcome(plan, warmup, False, periods, begin,
                                        self._measure_begin, errors_before)
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: the same, for the record
            stop = RunInterrupted.of(exc)
            stop.partial = self._outcome(plan, warmup, False, periods, begin,
                                         self._measure_begin, errors_before)
            if stop is exc:
                raise
            raise stop from exc

    def _run_rung(self, rung: Rung, plan: RunPlan, on_wait: WaitHook | None,
                  warmup: list[PeriodStats], periods: list[PeriodStats], begin: str,
                  errors_before: int) -> RunOutcome:
        steady = False
        if rung.warmup_max_s > 0:
            deadline = self._last_tick + int(rung.warmup_max_s * 1e9)
            while _mono() < deadline - int(plan.period_s * 1e9 * 0.05):
                warmup.append(self.tick(len(warmup), "warmup", on_wait))
                if rung.warmup_until_steady and _is_steady(warmup, plan, self.subs_per_topic):
                    steady = True
                    break
            if not rung.warmup_until_steady:
                steady = True  # a fixed warm-up (OMB) is never "capped"
        else:
            steady = True
        measure_begin = self._measure_begin = _now_iso()
        self.measure_started_ns = self._last_tick
        n_periods = max(1, math.ceil(rung.measure_s / plan.period_s - 1e-9))
        schedule, window_start = plan.rate_schedule, self._last_tick
        for i in range(n_periods):
            if schedule is not None:  # each period at the schedule's rate at its start
                rate = schedule.rate_at((self._last_tick - window_start) / 1e9)
                if rate != self.rate:
                    self.set_rate(rate)  # overdue sends carry over (adjust_rate)
            periods.append(self.tick(i, "measure", on_wait))
        return self._outcome(plan, warmup, steady, periods, begin, measure_begin,
                             errors_before)

    def _outcome(self, plan: RunPlan, warmup: list[PeriodStats], steady: bool,
                 periods: list[PeriodStats], begin: str, measure_begin: str,
                 errors_before: int) -> RunOutcome:
        """One rung's outcome from its periods (delivery is the session's, later)."""
        from pytest_brokerperf.metrics.histogram import LatencyHistogram

        if plan.rate_schedule is not None and periods:  # judged against what was offered
            span = sum(p.elapsed_s for p in periods)
            offered = sum(p.target_rate * p.elapsed_s for p in periods)
            plan = replace(plan, rate=offered / span if span else plan.rate)
        cumulative = {m: LatencyHistogram.for_metric(m) for m in METRICS}
        for p in periods:
            for m in METRICS:
                cumulative[m].add(p.histograms[m])
        return RunOutcome(
            plan=plan, topics=self.topics, subscriptions=self.subscriptions, warmup=warmup,
            warmup_steady=steady, periods=periods, cumulative=cumulative,
            delivery=DeliveryReport(acknowledged=0), totals={}, begin_time=begin,
            end_time=_now_iso(), measure_begin_time=measure_begin,
            probe_wait_s=self.probe_wait_s, read_back=self.read_back,
            worker_errors=self.errors[errors_before:],
            driver_description={**self.driver.describe(), "source": self.driver.source},
            coordinator_cpus=self.coordinator_cpus,
            executor=self.executor_report(),
        )

    def executor_report(self) -> ExecutorReport:
        """Which executor ran the generators, where each task ran, and each task's clock
        (offset applied, residuals, uncertainty) with the worst pair's uncertainty."""
        rep = self.launcher.report()
        rep.clocks = [w.clock for w in self.workers if w.clock is not None] or rep.clocks
        if self.workers:
            rep.pair_uncertainty_ns = worst_pair_uncertainty(self.workers, self.assignments)
        return rep

    # -- counters -----------------------------------------------------------------------
    def totals(self) -> dict[str, int]:
        """Lifetime counters summed over workers (acked, received, queue_depth, ...)."""
        out: dict[str, int] = {}
        for r in broadcast(self.workers, "totals"):
            self.errors.extend(r["errors"])
            for k, v in r["totals"].items():
                if isinstance(v, int):
                    out[k] = out.get(k, 0) + v
        return out

    def backlog(self, totals: dict[str, int] | None = None) -> int:
        """Messages published and not yet received, over every subscription (OMB's
        ``subscriptionsPerTopic * messagesSent - messagesReceived``)."""
        t = self.totals() if totals is None else totals
        return self.subs_per_topic * t.get("acked", 0) - t.get("received", 0)

    def pause_consumers(self, pause: bool = True) -> dict[str, int]:
        """Pause (or resume) every consumer; returns once each has applied it, with the
        lifetime totals read then. The drivers' ``ConsumerClient.pause`` keeps the
        subscriptions (no rebalance) and leaves no backlog in client memory."""
        out: dict[str, int] = {}
        for r in broadcast(self.workers, "pause_consumers", pause, timeout_s=60):
            for k, v in r.items():
                if isinstance(v, int):
                    out[k] = out.get(k, 0) + v
        return out

    def stop_producers(self) -> int:
        """Stop sending for good (catch-up's consumer-only drain); outstanding acks left."""
        flush = broadcast(self.workers, "stop_producers", self.plan.flush_timeout_s,
                           timeout_s=self.plan.flush_timeout_s + 30)
        return sum(f["outstanding"] for f in flush)

    def broker_backlog(self) -> list[BrokerBacklog] | None:
        """Each subscription's backlog read from the broker; None when the driver's admin
        client cannot read one."""
        from pytest_brokerperf.brokers.driver import BacklogReader

        if not isinstance(self._admin, BacklogReader):
            return None
        return self._admin.subscription_backlog(self.subs_by_topic)

    def run_until(self, phase: str, done: Callable[[dict[str, int]], bool],
                  timeout_s: float, *, check_s: float = 0.05,
                  begin: Callable[[], object] | None = None) -> PhaseRun:
        """Stats periods labelled ``phase`` until ``done(lifetime totals)`` holds (asked
        every ``check_s``) or ``timeout_s`` passes; the last period ends at that moment.

        The phase's first period starts now (what happened since the last period, such
        as broker-side readings between phases, is in no period); its start totals are
        read, then its clock starts, then ``begin()`` runs (resuming paused consumers:
        their counters cannot move before it).

        Stopped by a broker death or an interrupt, the exception's ``partial`` holds the
        phase's periods completed until then (as :meth:`run_rung`'s does).
        """
        self._baseline()  # between phases (broker-side readings) is in no period
        start = self.totals()
        t0 = _mono()
        if begin is not None:
            begin()
        deadline = t0 + int(timeout_s * 1e9)
        reached: list[tuple[dict[str, int], int]] = []

        def stop() -> bool:
            t = self.totals()
            if done(t):
                reached.append((t, _mono()))
                return True
            return _mono() >= deadline

        periods: list[PeriodStats] = []
        begin_iso, errors_before = _now_iso(), len(self.errors)
        try:
            while True:
                periods.append(self.tick(len(periods), phase, stop=stop, check_s=check_s))
                if reached or _mono() >= deadline:
                    break
        except (BrokerDied, KeyboardInterrupt) as exc:  # the phase's periods until then
            stop_exc = exc if isinstance(exc, BrokerDied) else RunInterrupted.of(exc)
            stop_exc.partial = self._outcome(self.plan, [], False, periods, begin_iso,
                                             begin_iso, errors_before)
            if stop_exc is exc:
                raise
            raise stop_exc from exc
        if reached:
            end, t_end = reached[0]
        else:
            end, t_end = self.totals(), _mono()
        return PhaseRun(phase=phase, periods=periods, done=bool(reached),
                        elapsed_s=(t_end - t0) / 1e9, start_totals=start, end_totals=end)

    def drain(self, timeout_s: float) -> bool:
        """Lower the rate to the 1 msg/s floor and wait (bounded) for queues and lag to empty."""
        self.set_rate(1.0)
        deadline = time.monotonic() + timeout_s
        while True:
            t = self.totals()
            backlog = self.subs_per_topic * t.get("acked", 0) - t.get("received", 0)
            if t.get("queue_depth", 0) <= 10 and backlog <= 10 * max(1, self.subs_per_topic):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    # -- end --------------------------------------------------------------------------
    def finish(self) -> SessionEnd:
        """Stop producers, let consumers catch up (bounded), reconcile delivery."""
        if self._finished is not None:
            return self._finished
        plan = self.plan
        flush = broadcast(self.workers, "stop_producers", plan.flush_timeout_s,
                           timeout_s=plan.flush_timeout_s + 30)
        outstanding = sum(f["outstanding"] for f in flush)
        drain_complete, settled = await_drain(self.workers, self.subs_per_topic,
                                               plan.drain_timeout_s)
        measure_residuals(self.workers, CLOCK_SAMPLES)  # after the window
        finals = broadcast(self.workers, "final", timeout_s=120)
        end = _now_iso()
        for f in finals:
            self.errors.extend(f["errors"])
        subs_of_producer = {
            p.pid: self.subs_by_topic[p.topic] for a in self.assignments for p in a.producers
        }
        delivery = reconcile(
            [f["acks"] for f in finals],
            [r for f in finals for r in f["receipts"]],
            subs_of_producer,
            duplicate_acks=sum(f["duplicate_acks"] for f in finals),
            settled=settled,
        )
        totals: dict[str, int] = {}
        for f in finals:
            for k, v in f["totals"].items():
                if isinstance(v, int):
                    totals[k] = totals.get(k, 0) + v
        self._finished = SessionEnd(
            delivery=delivery, totals=totals,
            client_stats=[d for f in finals for d in f["client_stats"]],
            worker_errors=list(self.errors), drain_complete=drain_complete,
            outstanding_after_flush=outstanding, end_time=end, begin_time=self.begin_time,
        )
        return self._finished


def run_workload(
    driver: Driver,
    workload: Workload,
    plan: RunPlan,
    *,
    payloads: list[bytes],
    on_period: Callable[[PeriodStats], None] | None = None,
    on_wait: WaitHook | None = None,
    after_measure: Callable[[], None] | None = None,
    after_drain: Callable[[LoadSession, SessionEnd], None] | None = None,
) -> RunOutcome:
    """Run ``workload`` against ``driver``'s broker at ``plan.rate`` and return what was
    measured (one rung: warm-up until steady, capped, then the measured window). With
    ``plan.rate_schedule`` the warm-up runs at the schedule's first rate and the measured
    window follows the schedule; the outcome's ``plan.rate`` is then the mean offered.

    ``on_wait`` is called between periods (a fault injector); ``after_measure`` once the
    measured window ended, before the drain (the fault's node back first); ``after_drain``
    once delivery is reconciled, while the topics still exist (a power cut's read-back)."""
    rate = plan.rate if plan.rate_schedule is None else plan.rate_schedule.rate_at(0.0)
    with LoadSession(driver, workload, plan, payloads=payloads, on_period=on_period) as s:
        out = s.run_rung(Rung(rate, plan.warmup_max_s, plan.measure_s), on_wait)
        out.begin_time = s.begin_time
        try:
            if after_measure is not None:
                after_measure()
            end = s.finish()
            if after_drain is not None:
                after_drain(s, end)
            return end.apply(out)
        except KeyboardInterrupt as exc:  # the window is whole; its drain never ended
            stop = RunInterrupted.of(exc)
            stop.partial = out
            if stop is exc:
                raise
            raise stop from exc


def run_rates(
    driver: Driver,
    workload: Workload,
    plan: RunPlan,
    next_rung: Callable[[list[RunOutcome]], Rung | None],
    *,
    payloads: list[bytes],
    on_period: Callable[[PeriodStats], None] | None = None,
    on_rung: Callable[[RunOutcome], None] | None = None,
) -> tuple[list[RunOutcome], SessionEnd]:
    """Run rungs in one session until ``next_rung(done so far)`` returns None.

    Topics, workers and clients are set up once; each rung sets its rate, settles and
    measures; delivery is reconciled once at the end and applied to every rung.
    """
    rungs: list[RunOutcome] = []
    with LoadSession(driver, workload, plan, payloads=payloads, on_period=on_period) as s:
        while (rung := next_rung(rungs)) is not None:
            out = s.run_rung(rung)
            rungs.append(out)
            if on_rung is not None:
                on_rung(out)
        end = s.finish()
        for out in rungs:
            end.apply(out, end_time=False)
        return rungs, end


def default_generator_cpus(broker_cpus: Any) -> tuple[int, ...] | None:
    """CPUs for load generators: every CPU the broker is not pinned to, if any remain.

    ``broker_cpus`` is a list of CPUs or a provisioner's ``info["cpu_affinity"]`` mapping
    (``{"broker_cpus": [...], "generator_cpus": [...], ...}``); None when the broker is
    not pinned.
    """
    try:
        mine = sorted(allowed_cpus())
    except AttributeError:  # pragma: no cover - non-Linux
        return None
    if isinstance(broker_cpus, dict):
        broker_cpus = broker_cpus.get("broker_cpus")
    if not broker_cpus:
        return None
    pinned = {int(c) for c in broker_cpus}
    rest = [c for c in mine if c not in pinned]
    return tuple(rest) if rest else None
