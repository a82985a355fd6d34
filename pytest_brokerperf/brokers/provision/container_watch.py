"""Did a broker container exit mid-run? Death detection for ``--brokerperf-provision=container``.

A local broker *process* is watched through its ``Popen`` (``process.check_watched``). A
broker in a container is not this interpreter's child: when it dies (``docker kill``, the
OOM killer at the container's memory limit, a crash) the clients retry quietly and the
run would go on measuring 0 msg/s to its end. So every container a session started is
watched: a background thread asks the engine for each one's state (``GET
/containers/<name>/json``, what ``docker inspect`` reads: ``State.Running``,
``ExitCode``, ``OOMKilled``) every :data:`POLL_INTERVAL_S`, and the coordinator asks
:func:`check_watched_containers` between its stats periods, which reads only what the
thread last saw (no engine call on the run's path until a death is found; then one for
the log's tail).

An exit the run asked for is not a death, as for processes: a fault that kills or stops
a node (:meth:`ContainerNode.kill_node`, ``stop_node``) unwatches it first, and
``start_node`` watches it again once it serves; teardown unwatches everything before it
removes anything. A state read before the container was (re)watched never counts, so an
``exited`` seen during a planned outage cannot fail the run after the node came back.
A paused container (``pause-broker``) is still running.

The decision is :class:`DeathTracker`, a plain value with times passed in, so the rules
are tested without an engine.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.core.errors import BrokerDied

__all__ = [
    "LOG_TAIL_LINES",
    "POLL_INTERVAL_S",
    "ContainerState",
    "DeathTracker",
    "WatchedContainer",
    "check_watched_containers",
    "death_text",
    "state_of",
    "unwatch_container",
    "watch_container",
]

#: How often the engine is asked for each watched container's state (seconds): a death
#: stops the run within about this plus the coordinator's own check interval (0.5 s).
POLL_INTERVAL_S = 1.0
#: How long one state read may take before it counts as "no answer" (seconds).
INSPECT_TIMEOUT_S = 5.0
#: Lines of the dead container's log the failure carries (``docker logs --tail``).
LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class ContainerState:
    """What the engine says of one container (``docker inspect``'s ``State``)."""

    running: bool
    status: str  # running | paused | exited | dead | restarting | removed | ...
    exit_code: int | None = None
    oom_killed: bool = False
    error: str = ""  # State.Error: the engine's own reason, when it has one
    pid: int | None = None


#: the state of a container the engine no longer knows (``docker rm -f``)
REMOVED = ContainerState(running=False, status="removed")


def state_of(attrs: Mapping[str, Any]) -> ContainerState:
    """The :class:`ContainerState` in an inspect answer (``attrs["State"]``)."""
    st = attrs.get("State") or {}
    code = st.get("ExitCode")
    pid = st.get("Pid")
    return ContainerState(running=bool(st.get("Running")), status=str(st.get("Status") or ""),
                          exit_code=int(code) if code is not None else None,
                          oom_killed=bool(st.get("OOMKilled")), error=str(st.get("Error") or ""),
                          pid=int(pid) if pid else None)


@dataclass(frozen=True)
class WatchedContainer:
    """One container a run depends on, and since when (monotonic seconds)."""

    name: str
    role: str  # "kafka node 1", "pulsar support container zookeeper"
    since: float
    memory_limit_bytes: int | None = None


@dataclass
class DeathTracker:
    """The rules, on times passed in (seconds on one monotonic clock).

    :meth:`observe` takes one state read with the time it was *asked*; :meth:`dead`
    lists the watched containers whose latest read, asked after they were watched, says
    they are not running.
    """

    watched: dict[str, WatchedContainer] = field(default_factory=dict)
    #: name -> (when the read was asked, what it said)
    seen: dict[str, tuple[float, ContainerState]] = field(default_factory=dict)

    def watch(self, container: WatchedContainer) -> None:
        self.watched[container.name] = container
        self.seen.pop(container.name, None)  # what was read before does not count

    def unwatch(self, name: str) -> None:
        self.watched.pop(name, None)
        self.seen.pop(name, None)

    def observe(self, name: str, asked_at: float, state: ContainerState) -> None:
        """One read; ignored for a container no longer watched, watched after it was
        asked (a read that raced a planned outage's end), or asked before the latest
        read kept (two readers: the older answer says less)."""
        w = self.watched.get(name)
        if w is None or asked_at < w.since:
            return
        if name in self.seen and asked_at < self.seen[name][0]:
            return
        self.seen[name] = (asked_at, state)

    def dead(self) -> list[tuple[WatchedContainer, ContainerState]]:
        return [(self.watched[n], st) for n, (_, st) in self.seen.items()
                if n in self.watched and not st.running]


def _exit_words(state: ContainerState) -> str:
    """``exit code 137: killed by SIGKILL`` and the like."""
    code = state.exit_code
    if state.status == "removed":
        return "removed: the engine no longer knows it"
    words = f"exit code {code}" if code is not None else f"status {state.status!r}"
    if code is not None and code > 128:
        import signal

        with contextlib.suppress(ValueError):
            words += f": killed by {signal.Signals(code - 128).name}"
    return words


def death_text(container: WatchedContainer, state: ContainerState, logs: str,
               now: float) -> str:
    """One dead container's part of the failure: name, role, exit code, OOMKilled, for
    how long it had served, and its log's tail."""
    oom = ""
    if state.oom_killed:
        limit = (f" of {container.memory_limit_bytes / 1024**2:,.0f} MiB"
                 if container.memory_limit_bytes else "")
        oom = (f"; OOMKilled: the kernel's OOM killer ended it at the container's memory "
               f"limit{limit} (--brokerperf-broker-memory); raise the limit above the "
               "broker's heap plus what its JVM or VM needs beside it")
    error = f"; engine: {state.error}" if state.error else ""
    return (f"broker container {container.name} ({container.role}) exited during the run "
            f"({_exit_words(state)}, OOMKilled={str(state.oom_killed).lower()}) after "
            f"{now - container.since:.1f} s watched{oom}{error}; last {LOG_TAIL_LINES} lines "
            f"of its log (docker logs --tail {LOG_TAIL_LINES} {container.name}):\n{logs}")


# -- the session's watch: one tracker, one polling thread -----------------------------

#: name -> state; raises for an engine that does not answer (the read is skipped)
Inspect = Callable[[str], ContainerState]
#: name -> the last lines of its log
Logs = Callable[[str, int], str]


class _Watch:
    """The tracker plus the thread that feeds it; the thread runs while anything is
    watched and ends when nothing is."""

    def __init__(self) -> None:
        self.tracker = DeathTracker()
        self.lock = threading.Lock()
        self.inspect: Inspect | None = None  # None: the engine's, made on first use
        self.logs: Logs | None = None
        self.clock: Callable[[], float] = time.monotonic
        self.interval_s = POLL_INTERVAL_S
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: Any = None

    # engine access, replaceable for tests
    def _engine(self) -> Any:
        if self._client is None:
            import docker

            self._client = docker.from_env(timeout=int(INSPECT_TIMEOUT_S))
        return self._client

    def _inspect(self, name: str) -> ContainerState:
        if self.inspect is not None:
            return self.inspect(name)
        from docker.errors import NotFound

        try:
            return state_of(self._engine().api.inspect_container(name))
        except NotFound:
            return REMOVED

    def _logs(self, name: str, lines: int) -> str:
        if self.logs is not None:
            return self.logs(name, lines)
        try:
            raw = self._engine().api.logs(name, tail=lines)
        except Exception as exc:  # the death matters more than its log
            return f"(container log unavailable: {exc})"
        return bytes(raw).decode("utf-8", "replace").rstrip("\n")

    def poll_once(self) -> None:
        """Read every watched container's state once and hand the reads to the tracker."""
        with self.lock:
            names = list(self.tracker.watched)
        for name in names:
            asked = self.clock()
            try:
                state = self._inspect(name)
            except Exception:  # an engine that does not answer says nothing of the broker
                continue
            with self.lock:
                self.tracker.observe(name, asked, state)

    def _loop(self) -> None:
        while True:
            with self.lock:
                if not self.tracker.watched:
                    self._thread = None
                    return
            self.poll_once()
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def ensure_thread(self) -> None:
        with self.lock:
            if self._thread is not None or not self.tracker.watched:
                return
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name="brokerperf-container-watch")
            self._thread.start()

    def check(self, log_lines: int = LOG_TAIL_LINES) -> None:
        with self.lock:
            dead = self.tracker.dead()
        if not dead:
            return
        now = self.clock()
        raise BrokerDied("\n".join(death_text(c, st, self._logs(c.name, log_lines), now)
                                   for c, st in dead))


_watch = _Watch()


def watch_container(name: str, role: str, memory_limit_bytes: int | None = None) -> None:
    """From now on, ``name`` exiting fails the run (a node that serves, or serves again)."""
    with _watch.lock:
        _watch.tracker.watch(WatchedContainer(name, role, _watch.clock(), memory_limit_bytes))
    _watch.ensure_thread()


def unwatch_container(name: str) -> None:
    """``name`` may exit now: the run asked for it (a fault, teardown)."""
    with _watch.lock:
        _watch.tracker.unwatch(name)
    _watch._wake.set()  # a thread with nothing left to watch ends now


def check_watched_containers(log_lines: int = LOG_TAIL_LINES) -> None:
    """Raise :class:`~pytest_brokerperf.core.errors.BrokerDied` if a watched container exited:
    its name, role, exit code, OOMKilled and its log's tail. Reads only what the
    polling thread last saw, so it costs nothing while every container runs."""
    _watch.check(log_lines)
