"""Which executor ran a session's generators, and where each generator task ran: plain
values for the outcome, the record and the manifest (docs/reference/results.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_brokerperf.engine.clock import ClockIdentity, TaskClock

__all__ = ["ExecutorReport", "TaskInfo"]


@dataclass(frozen=True)
class TaskInfo:
    """Where one generator task runs: what the manifest and record say of it."""

    task: int
    host: str
    executor_id: str
    pid: int
    python: str
    identity: ClockIdentity
    client: str | None = None
    client_version: str | None = None


@dataclass
class ExecutorReport:
    """Which executor ran a session's generators: ``local`` processes or a cluster's
    tasks, its master, each task's host and versions, and each task's clock."""

    kind: str = "local"
    master: str | None = None
    app_id: str | None = None
    tasks: list[TaskInfo] = field(default_factory=list)
    clocks: list[TaskClock] = field(default_factory=list)
    #: the largest clock uncertainty of any producer→consumer pair of tasks, ns
    pair_uncertainty_ns: int = 0
