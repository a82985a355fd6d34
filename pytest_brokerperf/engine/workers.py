"""The coordinator's side of the worker processes: handles, commands, topic assignment,
and the readiness and drain waits that poll every worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.core.errors import DriverError
from pytest_brokerperf.engine.clock import (
    ClockExchange,
    ClockIdentity,
    TaskClock,
    estimate_offset,
    pair_uncertainty_ns,
)
from pytest_brokerperf.engine.executor import (
    ExecutorReport,
    TaskInfo,
    WorkerHandle,
    WorkerLauncher,
)
from pytest_brokerperf.engine.worker import (
    ConsumerSpec,
    ProducerSpec,
    WorkerAssignment,
    worker_main,
)

__all__ = ["CLOCK_SAMPLES", "DRAIN_IDLE_S", "LocalLauncher", "ProcessWorker", "RemoteWorker",
           "WorkerHandle", "WorkerLauncher", "assign_topics", "await_drain", "await_readiness",
           "broadcast", "cpu_snapshot", "measure_clock", "measure_residuals", "sync_clocks",
           "wait_until", "worst_pair_uncertainty"]

_mono = time.monotonic_ns

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload


class ProcessWorker(WorkerHandle):
    """One spawned worker process and the pipe its commands and answers travel on."""

    def __init__(self, ctx: Any, assignment: WorkerAssignment) -> None:
        self.id = assignment.worker_id
        parent, child = ctx.Pipe()
        self.conn = parent
        self.proc = ctx.Process(
            target=worker_main, args=(child, assignment), name=f"brokerperf-worker-{self.id}",
            daemon=True,
        )
        self.proc.start()
        child.close()
        # Killed by the session's watchdog should the session die without closing it.
        if self.proc.pid is not None:
            watchdog.track_pid(self.proc.pid)

    def alive(self) -> bool:
        return bool(self.proc.is_alive())

    def describe_exit(self) -> str:
        return ("process alive" if self.proc.is_alive()
                else f"process exited with {self.proc.exitcode}")

    def close(self) -> None:
        try:
            if self.proc.is_alive():
                self.send("close")
                self.conn.poll(10)
        except (OSError, EOFError, BrokenPipeError, DriverError):
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()
        if self.proc.pid is not None and not self.proc.is_alive():
            watchdog.untrack_pid(self.proc.pid)


class RemoteWorker(WorkerHandle):
    """A generator task on a cluster, connected back over an authenticated channel.

    ``job_error`` says why the task's job ended (None while it runs): a task whose
    channel closes is reported with its host and that reason."""

    def __init__(self, conn: Connection, info: TaskInfo,
                 job_error: Callable[[], str | None]) -> None:
        self.id = info.task
        self.conn = conn
        self.info = info
        self._job_error = job_error
        self._closed = False

    def alive(self) -> bool:
        return not self._closed and self._job_error() is None

    def describe_exit(self) -> str:
        why = self._job_error()
        return (f"task {self.info.task} on host {self.info.host}, executor "
                f"{self.info.executor_id}, pid {self.info.pid}"
                + (f": {why}" if why else ""))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.conn.send(("close", None))
            self.conn.poll(10)
        except (OSError, EOFError):
            pass
        self.conn.close()


class LocalLauncher:
    """Worker processes on this machine, started with ``spawn``, over pipes."""

    kind = "local"

    def launch(self, assignments: list[WorkerAssignment]) -> list[WorkerHandle]:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        return [ProcessWorker(ctx, a) for a in assignments]

    def stop(self) -> None:
        return None

    def report(self) -> ExecutorReport:
        return ExecutorReport()


def broadcast(workers: list[WorkerHandle], cmd: str, arg: Any = None,
               timeout_s: float = 60.0) -> list[Any]:
    for w in workers:
        w.send(cmd, arg)
    return [w.recv(cmd, timeout_s) for w in workers]


def assign_topics(workload: Workload, plan: RunPlan, driver: Driver, topics: list[str],
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
            members = workload.consumer_per_subscription
            for k in range(members):
                consumers.append(ConsumerSpec(cid, topic, sub, member=k, members=members))
                cid += 1
    n = max(1, min(plan.workers, max(len(producers), len(consumers), 1)))
    if plan.launcher is not None and plan.launcher.kind != "local":
        # generator tasks are hosts: a producer and a consumer of one topic on two
        # tasks, so their end-to-end latency crosses hosts as it would in production
        n = max(1, min(plan.workers, len(producers) + len(consumers)))
    out = [
        WorkerAssignment(
            worker_id=k, driver=driver, payloads=payloads,
            key_distributor=workload.key_distributor, cpus=plan.generator_cpus,
            client_prefix=client_prefix, seed=plan.seed + k,
        )
        for k in range(n)
    ]
    if getattr(driver, "TOPIC_IN_ONE_WORKER", False):
        # an in-process driver (loopback): topic i, its producers and its consumers, all
        # in worker i % n
        where = {t: i % n for i, t in enumerate(topics)}
        for p in producers:
            out[where[p.topic]].producers.append(p)
        for c in consumers:
            out[where[c.topic]].consumers.append(c)
        return out
    for k, p in enumerate(producers):
        out[k % n].producers.append(p)
    # consumers fill workers from the other end so producer-heavy workers get fewer
    for k, c in enumerate(consumers):
        out[(n - 1 - k) % n].consumers.append(c)
    return out


def cpu_snapshot() -> Any:
    from pytest_brokerperf.metrics.sysstats import cpu_snapshot

    try:
        return cpu_snapshot()
    except (OSError, ValueError):  # pragma: no cover - no /proc/stat
        return None


def wait_until(t_ns: int) -> None:
    while True:
        left = (t_ns - _mono()) / 1e9
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def await_readiness(workers: list[WorkerHandle], subscriptions: list[str],
                     timeout_s: float) -> float:
    """OMB's readiness probe: every subscription must receive a probe message."""
    t0 = time.monotonic()
    last_probe = -1e9
    while True:
        now = time.monotonic()
        if now - last_probe >= 2.0:
            broadcast(workers, "probe")
            last_probe = now
        time.sleep(0.2)
        got: dict[str, int] = {}
        for r in broadcast(workers, "totals"):
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


#: A drain that ends with no distinct message for this long has settled: what is missing
#: then is lost, not still on its way.
DRAIN_IDLE_S = 5.0


def await_drain(workers: list[WorkerHandle], subs_per_topic: int,
                 timeout_s: float) -> tuple[bool, bool]:
    """After producers stop, wait (bounded) until consumers received every acked message.

    Counts distinct messages (a redelivery is no progress). Returns (complete, settled):
    settled is False when the window closed while messages were still arriving.
    """
    deadline = time.monotonic() + timeout_s
    last_received, last_progress = -1, time.monotonic()
    while True:
        totals = [r["totals"] for r in broadcast(workers, "totals")]
        acked = sum(t["acked"] for t in totals)
        received = sum(t["received"] for t in totals)
        now = time.monotonic()
        if received >= subs_per_topic * acked:
            return True, True
        if received != last_received:
            last_received, last_progress = received, now
        if now > deadline:
            return False, now - last_progress >= min(DRAIN_IDLE_S, timeout_s)
        time.sleep(0.1)


#: NTP-style exchanges per clock measurement: before the load, and after the window
CLOCK_SAMPLES = 32
#: ... and at every period snapshot (a few ms of the coordinator's time per task)
CLOCK_SAMPLES_PERIOD = 8


def measure_clock(w: WorkerHandle, samples: int) -> Any:
    """``samples`` exchanges with ``w``'s clock; the minimum-round-trip estimate."""
    exchanges = []
    for _ in range(samples):
        t0 = _mono()
        w.send("clock")
        task = w.recv("clock", 10.0)
        t3 = _mono()
        exchanges.append(ClockExchange(t0=t0, task=int(task), t3=t3))
    return estimate_offset(exchanges)


def sync_clocks(workers: list[WorkerHandle], here: ClockIdentity,
                samples: int = CLOCK_SAMPLES) -> None:
    """Before any client exists: measure each remote task's clock offset and make it
    stamp on the coordinator's clock. A task on the coordinator's clock (same boot and
    time namespace) is not corrected; tasks sharing one clock get one offset (the
    tightest of theirs), so a same-clock pair is never corrected relative to itself."""
    groups: dict[tuple[str, str | None, str | None], list[RemoteWorker]] = {}
    for w in workers:
        if not isinstance(w, RemoteWorker):
            continue
        ident = w.info.identity
        if here.same_clock(ident):
            w.clock = TaskClock(task=w.id, identity=ident)
            continue
        groups.setdefault((ident.host, ident.boot_id, ident.time_ns), []).append(w)
    for members in groups.values():
        estimates = [(measure_clock(w, samples), w) for w in members]
        best = min(estimates, key=lambda e: e[0].uncertainty_ns)[0]
        for _est, w in estimates:
            w.call("set_clock", best.offset_ns, timeout_s=10)
            w.clock = TaskClock(task=w.id, identity=w.info.identity,
                                applied_offset_ns=best.offset_ns, corrected=True, first=best)


def measure_residuals(workers: list[WorkerHandle],
                      samples: int = CLOCK_SAMPLES_PERIOD) -> None:
    """The offset left on every corrected task's clock (drift, the first estimate's
    error), kept on its :class:`TaskClock`."""
    for w in workers:
        if w.clock is not None and w.clock.corrected:
            w.clock.residuals.append(measure_clock(w, samples))


def worst_pair_uncertainty(workers: list[WorkerHandle],
                           assignments: list[WorkerAssignment]) -> int:
    """The largest clock uncertainty of a pair (task producing a topic, task consuming
    it), ns; 0 when every pair is on one clock."""
    clocks = {w.id: w.clock for w in workers if w.clock is not None}
    worst = 0
    for a in assignments:
        produced = {p.topic for p in a.producers}
        for b in assignments:
            if not produced & {c.topic for c in b.consumers}:
                continue
            ca, cb = clocks.get(a.worker_id), clocks.get(b.worker_id)
            if ca is None or cb is None:
                continue
            worst = max(worst, pair_uncertainty_ns(ca, cb))
    return worst
