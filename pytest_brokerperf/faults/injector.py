"""Carry a fault out while the load runs, and keep the time of every step.

The coordinator calls the injector between stats periods (about every 50 ms, the
``on_wait`` hook); once the measured window has run ``at_s`` seconds it starts the
fault on a thread of its own, so periods go on being merged while a node is down or
starting again. Every step is an event with its CLOCK_MONOTONIC time (the clock the
periods use), turned into seconds since the first period for the record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.core.errors import ProvisionError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.node_control import NodeControl
    from pytest_brokerperf.config.fault_spec import FaultSpec
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.faults.readback import ReadBack

__all__ = ["FaultEvent", "FaultInjector", "LeaderLookup"]

#: Bound on a node's start after a kill or a stop (a JVM broker replays its log).
START_TIMEOUT_S = 180.0
#: Bound on a graceful stop before SIGKILL (restart-broker).
STOP_TIMEOUT_S = 30.0

#: ``(session) -> 1-based node index`` of the leader of the run's first topic or queue,
#: None when the broker cannot tell (the fault then targets node 1)
LeaderLookup = Callable[["LoadSession"], "int | None"]


@dataclass
class FaultEvent:
    """One step of a fault: ``kill-broker``, ``pause-broker``, ``resume-broker``,
    ``stop-broker``, ``power-cut``, ``start-broker`` (asked) and ``serving`` (the node
    answers again)."""

    action: str
    node: int
    t_ns: int
    pid: int | None = None
    detail: str = ""

    def as_dict(self, t0_ns: int) -> dict[str, Any]:
        out: dict[str, Any] = {"t_s": round((self.t_ns - t0_ns) / 1e9, 3),
                               "action": self.action, "target": f"node {self.node}"}
        if self.pid is not None:
            out["pid"] = self.pid
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class FaultInjector:
    """``spec`` on one node of ``control``'s cluster, once, at ``spec.at_s`` into the
    measured window. Call it as the coordinator's wait hook; :meth:`settle` after the
    window waits until the node is back (or says why it is not)."""

    spec: FaultSpec
    control: NodeControl
    leader: LeaderLookup | None = None
    events: list[FaultEvent] = field(default_factory=list)
    node: int | None = None
    target_note: str = ""
    error: str | None = None
    #: power-cut: what the cut dropped (files removed, files rolled back, bytes)
    cut_report: dict[str, Any] | None = None
    #: power-cut: the topics read back after the restart against what was acknowledged
    read_back: ReadBack | None = None
    #: power-cut: how many nodes the cut took when one process holds them all (a Pulsar
    #: standalone's bookies); None when it took the nodes it struck
    cut_covers: int | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, session: LoadSession) -> None:
        if self._thread is not None or session.measure_started_ns is None:
            return
        if time.monotonic_ns() - session.measure_started_ns < self.spec.at_s * 1e9:
            return
        self._thread = threading.Thread(target=self._run, args=(session,),
                                        name="brokerperf-fault", daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def _event(self, action: str, pid: int | None = None, detail: str = "",
               node: int | None = None, t_ns: int | None = None) -> None:
        node = node if node is not None else self.node
        assert node is not None
        with self._lock:
            self.events.append(FaultEvent(action, node, t_ns or time.monotonic_ns(), pid,
                                          detail))

    def _target(self, session: LoadSession) -> int:
        index = self.spec.node_index
        if index is not None:
            self.target_note = f"node {index} (as asked)"
            return index
        led = None
        if self.leader is not None:
            try:
                led = self.leader(session)
            except Exception as exc:  # the broker's answer decides the target, not the run
                self.target_note = f"node 1: the leader could not be read ({exc})"[:300]
                return 1
        if led is None:
            self.target_note = self.target_note or "node 1: this broker names no leader"
            return 1
        self.target_note = f"node {led}: leader of {session.topics[0]}"
        return led

    def _run(self, session: LoadSession) -> None:
        c, spec = self.control, self.spec
        try:
            if spec.whole_cluster:
                self.target_note = f"all {c.node_count()} node(s) at once (as asked)"
                self._power_cut_all()
                time.sleep(spec.duration_s or 0.0)
                self._start_all()
                return
            self.node = node = self._target(session)
            if node > c.node_count():
                raise ProvisionError(f"the cluster has {c.node_count()} node(s); there is no "
                                     f"node {node} to {spec.short}")
            if spec.action == "kill-broker":
                self._event("kill-broker", c.kill_node(node))
                time.sleep(spec.duration_s or 0.0)
                self._start(node)
            elif spec.action == "power-cut":
                self._power_cut(node)
                time.sleep(spec.duration_s or 0.0)
                self._start(node)
            elif spec.action == "pause-broker":
                self._event("pause-broker", c.pause_node(node))
                time.sleep(spec.duration_s or 0.0)
                c.resume_node(node)
                self._event("resume-broker", c.node_pid(node))
            else:  # restart-broker
                pid = c.node_pid(node)
                self._event("stop-broker", pid)
                status = c.stop_node(node, STOP_TIMEOUT_S)
                self._event("stopped", pid, f"exit status {status}")
                self._start(node)
        except Exception as exc:  # reported in the record and the verdict, never swallowed
            self.error = f"{type(exc).__name__}: {exc}"[:2000]

    def _power_cut(self, node: int) -> None:
        cut = getattr(self.control, "power_cut_node", None)
        if cut is None:
            raise ProvisionError(
                f"power-cut: node {node} of this cluster cannot lose unsynced writes (only "
                "local Kafka and RabbitMQ process nodes and the local Pulsar standalone run "
                "on the power-cut filesystem). "
                "Fix: --brokerperf-provision=process with one of those, or kill-broker")
        report: dict[str, Any] = cut(node)
        self._note_scope(report)
        self.cut_report = {k: v for k, v in report.items() if k != "pid"}
        self._event("power-cut", report.get("pid"),
                    f"dropped {report.get('bytes_dropped', 0)} unsynced byte(s): "
                    f"{len(report.get('removed', []))} file(s) never fsynced removed, "
                    f"{len(report.get('restored', []))} rolled back to their last fsync")

    def _note_scope(self, report: dict[str, Any]) -> None:
        """A cut whose one process held every node (``covers``: how many) is judged as
        the whole cluster's, and the target says so (``scope``)."""
        if report.get("covers"):
            self.cut_covers = int(report["covers"])
            if report.get("scope"):
                self.target_note = f"{self.target_note}; {report['scope']}".lstrip("; ")

    def _power_cut_all(self) -> None:
        cut = getattr(self.control, "power_cut_all", None)
        if cut is None:
            raise ProvisionError(
                "power-cut/all: this cluster cannot cut every node's power at once (only "
                "local Kafka and RabbitMQ process nodes and the local Pulsar standalone run "
                "on the power-cut filesystem). "
                "Fix: --brokerperf-provision=process with one of those")
        struck = time.monotonic_ns()
        report: dict[str, Any] = cut()
        self._note_scope(report)
        self.cut_report = {k: v for k, v in report.items() if k not in ("pids", "nodes")}
        per_node: dict[int, dict[str, Any]] = report.get("nodes") or {}
        self.cut_report["per_node"] = {
            str(i): {"bytes_dropped": r.get("bytes_dropped", 0),
                     "files_removed": len(r.get("removed", [])),
                     "files_rolled_back": len(r.get("restored", []))}
            for i, r in per_node.items()}
        for i, r in sorted(per_node.items()):  # one kill, stamped when it struck
            self._event("power-cut", r.get("pid"),
                        f"dropped {r.get('bytes_dropped', 0)} unsynced byte(s): "
                        f"{len(r.get('removed', []))} file(s) never fsynced removed, "
                        f"{len(r.get('restored', []))} rolled back to their last fsync",
                        node=i, t_ns=struck)

    def _start_all(self) -> None:
        start = getattr(self.control, "start_all", None)
        if start is None:  # power_cut_all without start_all: a control that lies
            raise ProvisionError("power-cut/all: this cluster cannot start every node at once")
        count = self.control.node_count()
        for i in range(1, count + 1):
            self._event("start-broker", node=i)
        pids: list[int] = start(START_TIMEOUT_S)
        note = self._restart_note()
        for i, pid in enumerate(pids, 1):
            self._event("serving", pid, note, node=i)

    def _start(self, node: int) -> None:
        self._event("start-broker")
        pid = self.control.start_node(node, START_TIMEOUT_S)
        self._event("serving", pid, self._restart_note())

    def _restart_note(self) -> str:
        """What the start did besides starting (a Pulsar standalone clears the killed
        process's ephemeral metadata nodes first), for the event's detail."""
        return str(getattr(self.control, "restart_note", "") or "")

    def settle(self, timeout: float = START_TIMEOUT_S + STOP_TIMEOUT_S + 60) -> None:
        """Wait until the fault has run its course (the node is back); a fault still
        running after ``timeout`` is an error in the record."""
        if self._thread is None:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            where = self.target_note if self.spec.whole_cluster else f"node {self.node}"
            self.error = self.error or (f"the fault on {where} had not finished "
                                        f"{timeout:.0f} s after the measured window")

    def first_ns(self) -> int | None:
        """When the fault struck (the first event), None if it never did."""
        with self._lock:
            return self.events[0].t_ns if self.events else None
