"""A small managed-process helper for locally started brokers (mirakuru-like).

Why not plain ``subprocess.Popen``: a broker is a long-lived JVM (or Erlang VM) that
must never outlive the test session. Each process therefore runs in its own session
and process group (so Ctrl-C in the terminal does not hit it half-way through a
measurement, and ``stop()`` reaches every child it may spawn), its output goes to a
log file (never to a pipe that could fill up and block it), and a module-level
registry kills whatever is still running when the interpreter exits: normal exit,
an uncaught exception, Ctrl-C, or SIGTERM/SIGHUP (CI job cancelled, terminal closed).
SIGKILL of the Python process itself runs none of that: every process is therefore
also tagged with its owner and registered with a watchdog process that kills it, and
removes the registered scratch directories, when the owner dies (:mod:`.watchdog`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.brokers.provision.cgroups import MemoryCgroup, join_argv
from pytest_brokerperf.core.errors import BrokerDied
from pytest_brokerperf.metrics.cpus import allowed_cpus

__all__ = [
    "ManagedProcess",
    "check_watched",
    "discard_cleanup_path",
    "kill_all",
    "log_tail",
    "register_cleanup_path",
    "running_processes",
    "stop_all",
]

_registry_lock = threading.RLock()
_registry: dict[int, ManagedProcess] = {}
_cleanup_paths: dict[Path, None] = {}  # ordered set of directories to remove in kill_all
_handlers_installed = False

# Python shim used to pin a child to CPUs *before* exec when taskset is missing.
_PIN_SHIM = (
    "import os, sys; os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(',')}); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def _cpu_list(cpus: Collection[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


class ManagedProcess:
    """One external command in its own process group, logging to a file.

    ``cpus`` pins the process (and every thread it will create) to those CPUs. The
    pinning is applied before ``exec`` (``taskset``, or a tiny Python shim) rather
    than with ``sched_setaffinity`` after start: a JVM starts threads within
    milliseconds of ``exec`` and threads created before the call would keep the
    old mask.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log_file: Path,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        cpus: Collection[int] | None = None,
        append_log: bool = False,
        cgroup: MemoryCgroup | None = None,
    ) -> None:
        if not argv:
            raise ValueError("ManagedProcess needs a non-empty argv")
        self.argv: list[str] = [str(a) for a in argv]
        self.log_file = Path(log_file)
        self.name = name or Path(self.argv[0]).name
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.cpus: frozenset[int] | None = frozenset(cpus) if cpus else None
        self.append_log = append_log
        #: the memory cgroup the process joins before ``exec`` (:mod:`.cgroups`)
        self.cgroup = cgroup
        self.started_at: float | None = None  # time.time() at launch
        self._started_mono: float | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._finalized = False  # group cleaned up and leader reaped
        #: a broker a run depends on: its exit before ``stop()`` fails the run
        #: (:func:`check_watched`)
        self.watched = False
        self._stopping = False  # terminate()/stop() was asked for: an exit is expected

    # -- lifecycle -----------------------------------------------------------------

    def _launch_argv(self) -> list[str]:
        argv = list(self.argv)
        if self.cgroup is not None:
            argv = join_argv(self.cgroup.procs_file, argv)
        if not self.cpus:
            return argv
        taskset = shutil.which("taskset")
        if taskset:
            return [taskset, "-c", _cpu_list(self.cpus), *argv]
        return [sys.executable, "-c", _PIN_SHIM, _cpu_list(self.cpus), *argv]

    def start(self) -> Self:
        """Launch the command; returns self so calls can be chained."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} was already started (pid {self._popen.pid})")
        if self.cpus:
            allowed = allowed_cpus()
            if not self.cpus <= allowed:
                raise ValueError(
                    f"cannot pin {self.name} to CPUs {sorted(self.cpus)}: "
                    f"this process may only use {sorted(allowed)}"
                )
        _install_signal_handlers()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab" if self.append_log else "wb") as log:
            popen = subprocess.Popen(
                self._launch_argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=watchdog.tagged_env(self.env),
                start_new_session=True,
                close_fds=True,
            )
        watchdog.track_group(popen.pid)
        self._popen = popen
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        with _registry_lock:
            _registry[popen.pid] = self
        return self

    @property
    def pid(self) -> int:
        """The child's pid (also its process-group id)."""
        if self._popen is None:
            raise RuntimeError(f"{self.name} has not been started")
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        """Exit status once the process has ended (negative = killed by that signal)."""
        if self._popen is None:
            return None
        return self._popen.poll()

    def alive(self) -> bool:
        """True while the process runs (it is reaped as a side effect once it ends)."""
        return self._popen is not None and self._popen.poll() is None

    def uptime_s(self) -> float:
        """Seconds since launch, 0.0 if never started."""
        if self._started_mono is None:
            return 0.0
        return time.monotonic() - self._started_mono

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for exit; the exit status, or None if still running after ``timeout``."""
        if self._popen is None:
            return None
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _signal_group(self, sig: int) -> None:
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (a fault: SIGKILL, SIGSTOP, SIGCONT)."""
        self._signal_group(sig)

    def relaunched(self) -> ManagedProcess:
        """A new, not yet started process with this one's command, environment, CPUs and
        log file (appended to) and memory cgroup, for starting a stopped node again."""
        return ManagedProcess(self.argv, log_file=self.log_file, name=self.name, env=self.env,
                              cwd=self.cwd, cpus=self.cpus, append_log=True,
                              cgroup=self.cgroup)

    def terminate(self) -> None:
        """Send SIGTERM to the process group without waiting (stop many in parallel)."""
        self._stopping = True
        if self.alive():
            self._signal_group(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM the process group, wait up to ``timeout`` s, then SIGKILL it.

        Safe to call repeatedly and on a process that already exited. Returns the
        exit status (None only if the process could not be reaped at all).
        """
        if self._popen is None or self._finalized:
            return self.returncode
        self._stopping = True
        if self._popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            if self.wait(timeout) is None:
                self._signal_group(signal.SIGKILL)
                self.wait(10.0)
        if self._popen.poll() is None:
            return None  # unkillable (D state); stays registered for kill_all
        # The leader is gone, but children of it may still hold the group. Done
        # once, right after reaping: later the pid could belong to someone else.
        self._signal_group(signal.SIGKILL)
        self._finalized = True
        with _registry_lock:
            _registry.pop(self._popen.pid, None)
        watchdog.untrack_group(self._popen.pid)
        return self._popen.poll()

    def kill(self) -> int | None:
        """SIGKILL the process group at once."""
        return self.stop(timeout=0.0)

    # -- introspection ---------------------------------------------------------------

    def affinity(self) -> set[int] | None:
        """The CPUs the running process may use (read back from the kernel)."""
        if not self.alive():
            return None
        try:
            return set(os.sched_getaffinity(self.pid))
        except OSError:
            return None

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the log file ('' if it does not exist yet)."""
        return log_tail(self.log_file, n)

    def __enter__(self) -> Self:
        if self._popen is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        pid = self._popen.pid if self._popen is not None else None
        state = "running" if self.alive() else f"exited({self.returncode})"
        return f"<ManagedProcess {self.name} pid={pid} {state}>"


def stop_all(procs: Collection[ManagedProcess], timeout: float) -> None:
    """SIGTERM every process at once, then stop each within one shared deadline."""
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.stop(timeout=max(0.0, deadline - time.monotonic()))


def log_tail(path: Path, n: int = 40, max_bytes: int = 256 * 1024) -> str:
    """The last ``n`` lines of a text file, reading at most ``max_bytes`` from its end."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-n:])


def check_watched(log_lines: int = 30) -> None:
    """Raise :class:`~pytest_brokerperf.core.errors.BrokerDied` if a watched process exited.

    Watched processes are the brokers of locally started clusters; one that ended
    without being asked to stop (crash, OOM kill, ``kill -9``) fails the run at once,
    naming it, its exit status and the tail of its log.
    """

    with _registry_lock:
        procs = [p for p in _registry.values() if p.watched and not p._stopping]
    dead = [p for p in procs if not p.alive()]
    if not dead:
        return
    parts = []
    for p in dead:
        rc = p.returncode
        status = (f"killed by signal {signal.Signals(-rc).name}" if rc is not None and rc < 0
                  else f"exit status {rc}")
        parts.append(f"broker process {p.name} (pid {p.pid}) exited during the run "
                     f"({status}) after {p.uptime_s():.1f} s{_oom_note(p)}; last lines of "
                     f"{p.log_file}:\n{p.log_tail(log_lines)}")
    raise BrokerDied("\n".join(parts))


def _oom_note(proc: ManagedProcess) -> str:
    """Why a capped broker died, when its memory cgroup says the OOM killer ended it."""
    group = proc.cgroup
    kills = group.oom_kills() if group is not None else None
    if group is None or not kills:
        return ""
    return (f": the kernel's OOM killer ended it ({kills} kill(s) in {group.path}) at the "
            f"memory limit of {group.limit_bytes / 1024**2:,.0f} MiB "
            "(--brokerperf-broker-memory); raise the limit above the broker's heap plus "
            "what its JVM or VM needs beside it")


def running_processes() -> list[ManagedProcess]:
    """Every managed process of this interpreter that is still running."""
    with _registry_lock:
        procs = list(_registry.values())
    return [p for p in procs if p.alive()]


def register_cleanup_path(path: Path) -> None:
    """Remove directory ``path`` in :func:`kill_all` (after the processes are dead).

    For scratch data (broker data dirs) that must not outlive a session that ended
    before its owner could clean up. Call :func:`discard_cleanup_path` once the owner
    has removed it (or wants to keep it).
    """
    with _registry_lock:
        _cleanup_paths[Path(path)] = None
    watchdog.track_path(Path(path))


def discard_cleanup_path(path: Path) -> None:
    """Forget a path given to :func:`register_cleanup_path`."""
    with _registry_lock:
        _cleanup_paths.pop(Path(path), None)
    watchdog.untrack_path(Path(path))


def kill_all(grace: float = 3.0) -> None:
    """Stop every still-running managed process group: SIGTERM, ``grace`` s, SIGKILL.

    Then remove the registered cleanup paths. Registered with ``atexit`` (and run on
    SIGTERM/SIGHUP) so nothing is orphaned when the session ends badly.
    """
    with _registry_lock:
        procs = list(_registry.values())
        paths = list(_cleanup_paths)
        _cleanup_paths.clear()
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.wait(max(0.0, deadline - time.monotonic()))
    for p in procs:
        p.stop(timeout=0.0)
    for path in paths:
        watchdog.remove_tree(str(path))  # unmounts a power-cut filesystem below it first
        watchdog.untrack_path(path)


def _on_fatal_signal(signum: int, frame: FrameType | None) -> None:
    """Clean up, then die of the same signal as the default action would."""
    kill_all(grace=2.0)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_signal_handlers() -> None:
    """Route SIGTERM/SIGHUP through :func:`kill_all` where nobody else handles them.

    Only replaces the *default* disposition, and only from the main thread (the
    only place Python allows it); the process still dies of the signal afterwards.
    """
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_fatal_signal)


atexit.register(kill_all)
