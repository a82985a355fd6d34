"""The coordinator's side of the worker processes: handles, commands, topic assignment,
and the readiness and drain waits that poll every worker.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.core.errors import DriverError
from pytest_brokerperf.engine.worker import (
    ConsumerSpec,
    ProducerSpec,
    WorkerAssignment,
    worker_main,
)

__all__ = ["DRAIN_IDLE_S", "WorkerHandle", "assign_topics", "await_drain", "await_readiness",
           "broadcast", "cpu_snapshot", "wait_until"]

_mono = time.monotonic_ns

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload


class WorkerHandle:
    """One spawned worker process and the pipe its commands and answers travel on."""

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
        # Killed by the session's watchdog should the session die without closing it.
        if self.proc.pid is not None:
            watchdog.track_pid(self.proc.pid)

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
        except (EOFError, ConnectionResetError):
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
        if self.proc.pid is not None and not self.proc.is_alive():
            watchdog.untrack_pid(self.proc.pid)


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
