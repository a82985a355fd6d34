"""Which executor ran a session's generators, and where each generator task ran: plain
values for the outcome, the record and the manifest (docs/reference/results.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf.core.errors import DriverError
from pytest_brokerperf.engine.clock import ClockIdentity, TaskClock

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_brokerperf.engine.worker import WorkerAssignment

__all__ = ["ExecutorReport", "TaskHello", "TaskInfo", "WorkerHandle", "WorkerLauncher"]


@dataclass(frozen=True)
class TaskHello:
    """A generator task's first message on its channel: its index in the stage, and
    where it runs (engine/remote.py sends it)."""

    task: int
    host: str
    executor_id: str
    pid: int
    python: str
    identity: ClockIdentity


@dataclass(frozen=True)
class TaskInfo(TaskHello):
    """Where one generator task runs and which client it drives: what the manifest and
    record say of it."""

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


class WorkerHandle:
    """One generator worker and the channel its commands and answers travel on.

    The coordinator sees only this: ``send``/``recv``/``call``/``close``. Behind it is a
    local worker process and its pipe (:class:`ProcessWorker`) or a generator task on a
    cluster and its authenticated connection (:class:`RemoteWorker`); both run the same
    worker loop (:func:`~pytest_brokerperf.engine.worker.worker_main`)."""

    id: int
    conn: Connection
    #: this worker's clock (None: a local process, on the coordinator's clock)
    clock: TaskClock | None = None

    def describe_exit(self) -> str:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def send(self, cmd: str, arg: Any = None) -> None:
        try:
            self.conn.send((cmd, arg))
        except (OSError, EOFError) as exc:
            raise DriverError(f"worker {self.id}: cannot send {cmd!r} ({exc}); "
                              f"{self.describe_exit()}") from None

    def recv(self, cmd: str, timeout_s: float) -> Any:
        try:
            ready = self.conn.poll(timeout_s)
        except (OSError, EOFError):
            ready = True  # the recv below says what happened
        if not ready:
            raise DriverError(
                f"worker {self.id} did not answer {cmd!r} within {timeout_s:.0f} s "
                f"({self.describe_exit()})"
            )
        try:
            status, result = self.conn.recv()
        except (EOFError, OSError):
            raise DriverError(
                f"worker {self.id} died during {cmd!r} ({self.describe_exit()})"
            ) from None
        if status != "ok":
            raise DriverError(f"worker {self.id} failed in {cmd!r}:\n{result}")
        return result

    def call(self, cmd: str, arg: Any = None, timeout_s: float = 60.0) -> Any:
        self.send(cmd, arg)
        return self.recv(cmd, timeout_s)

    def close(self) -> None:
        raise NotImplementedError


class WorkerLauncher(Protocol):
    """Starts a session's workers (one per assignment) and stops what it started.

    The engine's default runs local processes; the plugin injects a cluster's
    (``--brokerperf-executor=spark``) through :attr:`RunPlan.launcher`."""

    kind: str

    def launch(self, assignments: list[WorkerAssignment]) -> list[WorkerHandle]: ...

    def stop(self) -> None: ...

    def report(self) -> ExecutorReport: ...
