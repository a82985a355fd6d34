"""Nothing a session started outlives it, even when the session is killed with SIGKILL.

:mod:`.process` stops every managed process when the interpreter ends normally, on an
exception, Ctrl-C, SIGTERM or SIGHUP. SIGKILL (an OOM killer, a CI runner cancelling a
job) runs no Python code at all, so two further guards cover it:

* **A watchdog process.** The first locally started process of an interpreter also
  starts a small watchdog (``python -m pytest_brokerperf.brokers.provision.watchdog``) in its own
  session, holding the read end of a pipe whose write end only the owner holds. The
  kernel closes that pipe when the owner dies, however it dies; the watchdog then
  SIGKILLs every process carrying the owner's tag and every process group and worker
  the owner registered (each checked against its recorded start time, so a recycled pid
  is never hit), removes the scratch directories the owner registered, and exits.
* **Containers.** Container mode registers its run id; the watchdog then removes the
  containers and networks labelled with that run id and the owner's pid
  (``docker rm -f``), which otherwise only the next session or ``cleanup --local`` would.
* **A tag and a state file.** Every managed process gets ``BROKERPERF_LOCAL_OWNER`` in
  its environment (inherited by whatever it spawns: ``erl_child_setup``, ``inet_gethost``
  ...), ``<owner pid>.<owner start time>.<random>``; and the owner keeps a state file under
  ``<cache dir>/local-runs/`` listing its processes, ports and data directories. Should the
  watchdog itself have been killed, ``brokerperf cleanup --local`` (:func:`cleanup_local`)
  finds the leftovers by process id and verified tag (``/proc/PID/environ``), never by
  process name, and only for owners that are gone (pid absent, or reused by a process
  with another start time).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "TAG_ENV",
    "LeftoverReport",
    "cleanup_local",
    "owner_token",
    "remove_containers",
    "state_dir",
    "tagged_env",
    "track_containers",
    "track_group",
    "track_path",
    "track_pid",
    "track_ports",
    "untrack_group",
    "untrack_path",
    "untrack_pid",
]

#: The environment variable that tags every locally started process with its owner.
TAG_ENV = "BROKERPERF_LOCAL_OWNER"
STATE_SUBDIR = "local-runs"

_lock = threading.RLock()


def state_dir() -> Path:
    """``<cache dir>/local-runs``: one state file per interpreter that started processes.

    The cache dir as :func:`pytest_brokerperf.brokers.provision.maven.cache_root` finds it
    (not imported: maven starts processes, so it imports this module).
    """
    env = os.environ.get("BROKERPERF_CACHE_DIR", "").strip()
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "pytest-brokerperf"
    return root / STATE_SUBDIR


def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def proc_env(pid: int, name: str) -> str | None:
    """The value of ``name`` in ``/proc/PID/environ`` (None if absent/unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("utf-8", "replace")
    return None


def proc_tag(pid: int) -> str | None:
    """The value of :data:`TAG_ENV` in ``/proc/PID/environ`` (None if absent/unreadable)."""
    return proc_env(pid, TAG_ENV)


def _state_dir_of(pid: int) -> Path:
    """The state directory the process's own ``BROKERPERF_CACHE_DIR`` names (its run's
    scope: brokers inherit their pytest's environment)."""
    env = (proc_env(pid, "BROKERPERF_CACHE_DIR") or "").strip()
    if env:
        return Path(env).expanduser() / STATE_SUBDIR
    try:  # the default cache dir is under the process owner's home
        import pwd

        home = Path(pwd.getpwuid(os.stat(f"/proc/{pid}").st_uid).pw_dir)
    except (OSError, KeyError):
        home = Path.home()
    return home / ".cache" / "pytest-brokerperf" / STATE_SUBDIR


def _whose(state: Mapping[str, Any], pids: list[int]) -> str:
    """Who started a run: its pytest's pid and command line, and the user."""
    user = "?"
    for pid in pids[:1]:
        try:
            import pwd

            user = pwd.getpwuid(os.stat(f"/proc/{pid}").st_uid).pw_name
        except (OSError, KeyError):
            pass
    argv = state.get("argv")
    cmd = " ".join(str(a) for a in argv) if isinstance(argv, list) and argv else "unknown"
    owner = state.get("owner_pid") or str(state.get("token", "?")).split(".")[0]
    return f"owner pid {owner} (`{cmd[:120]}`, user {user})"


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def tagged_pids(token: str) -> list[int]:
    """Every process (other than this one) whose environment carries exactly ``token``."""
    me = os.getpid()
    return [p for p in _all_pids() if p != me and proc_tag(p) == token]


def owner_alive(token: str) -> bool:
    """True while the interpreter that minted ``token`` runs (pid and start time match)."""
    try:
        pid_s, start_s, _ = token.split(".", 2)
        pid, start = int(pid_s), int(start_s)
    except ValueError:
        return False
    return proc_start_time(pid) == start


def _kill_verified(pid: int, start: int | None, sig: int = signal.SIGKILL) -> bool:
    if start is None or proc_start_time(pid) != start:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
        return True
    return False


# -- the owner's side -------------------------------------------------------------------


@dataclass
class _Owner:
    pid: int
    token: str
    state_file: Path
    groups: dict[int, int | None] = field(default_factory=dict)  # pgid -> leader start
    pids: dict[int, int | None] = field(default_factory=dict)  # pid -> start time
    paths: dict[str, None] = field(default_factory=dict)
    ports: dict[str, list[int]] = field(default_factory=dict)
    watchdog: subprocess.Popen[bytes] | None = None
    pipe: IO[bytes] | None = None

    def state(self) -> dict[str, Any]:
        return {"token": self.token, "owner_pid": self.pid,
                "owner_start": proc_start_time(self.pid), "argv": sys.argv[:8],
                "groups": [{"pgid": g, "start": s} for g, s in self.groups.items()],
                "pids": [{"pid": p, "start": s} for p, s in self.pids.items()],
                "data_dirs": list(self.paths), "ports": self.ports,
                "watchdog_pid": self.watchdog.pid if self.watchdog else None}

    def save(self) -> None:
        with contextlib.suppress(OSError):
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.state(), indent=1))
            os.replace(tmp, self.state_file)

    def send(self, line: str) -> None:
        if self.pipe is None:
            return
        try:
            self.pipe.write(line.encode() + b"\n")
            self.pipe.flush()
        except (OSError, ValueError):
            self.pipe = None


_owner: _Owner | None = None


def owner_token() -> str:
    """This interpreter's tag value (minted on first use; new after a fork)."""
    return _ensure_owner(start_watchdog=False).token


def _ensure_owner(start_watchdog: bool = True) -> _Owner:
    global _owner
    with _lock:
        if _owner is None or _owner.pid != os.getpid():
            pid = os.getpid()
            token = f"{pid}.{proc_start_time(pid) or 0}.{secrets.token_hex(4)}"
            _owner = _Owner(pid=pid, token=token, state_file=state_dir() / f"{token}.json")
        if start_watchdog and _owner.watchdog is None:
            _start_watchdog(_owner)
        return _owner


def _start_watchdog(owner: _Owner) -> None:
    owner.save()
    env = {k: v for k, v in os.environ.items() if k != TAG_ENV}
    with contextlib.suppress(OSError):
        owner.watchdog = subprocess.Popen(
            [sys.executable, "-m", "pytest_brokerperf.brokers.provision.watchdog", owner.token,
             str(owner.state_file)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env=env,
        )
        owner.pipe = owner.watchdog.stdin
        owner.save()


def _after_fork_in_child() -> None:
    """A forked child must not keep the owner's pipe open (it would hide the owner's death)."""
    global _owner
    owner, _owner = _owner, None
    if owner is not None and owner.pipe is not None:
        # Point the inherited descriptor at /dev/null rather than closing it, so that the
        # file object, whenever it is collected, closes nothing else.
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, owner.pipe.fileno(), inheritable=False)
            os.close(null)


os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_at_exit() -> None:
    """At a normal exit: close the pipe and let the watchdog finish its (empty) sweep.

    Registered before :mod:`.process` registers its own exit hook, so it runs after the
    managed processes were stopped.
    """
    owner = _owner
    if owner is None or owner.pid != os.getpid() or owner.watchdog is None:
        return
    if owner.pipe is not None:
        with contextlib.suppress(OSError):
            owner.pipe.close()
        owner.pipe = None
    with contextlib.suppress(subprocess.TimeoutExpired):
        owner.watchdog.wait(5.0)


atexit.register(_close_at_exit)


def tagged_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (default: this environment) plus the owner tag; starts the watchdog."""
    owner = _ensure_owner()
    out = dict(env) if env is not None else dict(os.environ)
    out[TAG_ENV] = owner.token
    return out


def track_group(pgid: int) -> None:
    """Kill process group ``pgid`` (its leader's pid) should this interpreter die."""
    with _lock:
        owner = _ensure_owner()
        start = proc_start_time(pgid)
        owner.groups[pgid] = start
        owner.send(f"group {pgid} {start}")
        owner.save()


def untrack_group(pgid: int) -> None:
    with _lock:
        owner = _ensure_owner(start_watchdog=False)
        if owner.groups.pop(pgid, 0) != 0:
            owner.send(f"ungroup {pgid}")
            owner.save()


def track_pid(pid: int) -> None:
    """Kill process ``pid`` (a worker sharing our group) should this interpreter die."""
    with _lock:
        owner = _ensure_owner()
        start = proc_start_time(pid)
        owner.pids[pid] = start
        owner.send(f"pid {pid} {start}")
        owner.save()


def untrack_pid(pid: int) -> None:
    with _lock:
        owner = _ensure_owner(start_watchdog=False)
        if owner.pids.pop(pid, 0) != 0:
            owner.send(f"unpid {pid}")
            owner.save()


def track_path(path: Path) -> None:
    """Remove directory ``path`` should this interpreter die."""
    with _lock:
        owner = _ensure_owner()
        key = str(Path(path).resolve())
        owner.paths[key] = None
        owner.send(f"path {key}")
        owner.save()


def untrack_path(path: Path) -> None:
    with _lock:
        owner = _ensure_owner(start_watchdog=False)
        key = str(Path(path).resolve())
        if key in owner.paths:
            del owner.paths[key]
            owner.send(f"unpath {key}")
            owner.save()


def track_containers(run_id: str) -> None:
    """Remove this interpreter's containers and networks of run ``run_id`` (found by the
    labels container mode sets: run id and owner pid) should this interpreter die."""
    with _lock:
        owner = _ensure_owner()
        owner.send(f"containers {run_id}")


def remove_containers(run_id: str, owner_pid: int, *, timeout: float = 60.0) -> None:
    """``docker rm -f`` the containers, then remove the networks, labelled with ``run_id``
    and ``owner_pid`` (the Docker CLI; nothing happens without one)."""
    docker = shutil.which("docker")
    if docker is None:
        return
    labels = ["--filter", f"label=org.brokerperf.run-id={run_id}",
              "--filter", f"label=org.brokerperf.pid={owner_pid}"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        ids = subprocess.run([docker, "ps", "-aq", *labels], capture_output=True, text=True,
                             timeout=timeout, check=False).stdout.split()
        if ids:
            subprocess.run([docker, "rm", "-f", "-v", *ids], capture_output=True,
                           timeout=timeout, check=False)
        nets = subprocess.run([docker, "network", "ls", "-q", *labels], capture_output=True,
                              text=True, timeout=timeout, check=False).stdout.split()
        if nets:
            subprocess.run([docker, "network", "rm", *nets], capture_output=True,
                           timeout=timeout, check=False)


def track_ports(label: str, ports: list[int]) -> None:
    """Record ``label``'s listening ports in the state file (for ``cleanup --local``)."""
    with _lock:
        owner = _ensure_owner(start_watchdog=False)
        if ports:
            owner.ports[label] = sorted(ports)
        else:
            owner.ports.pop(label, None)
        owner.save()


# -- killing what an owner left ---------------------------------------------------------


def fuse_mounts_under(path: str, mounts_text: str | None = None) -> list[str]:
    """FUSE mount points at or below ``path`` (from /proc/mounts), deepest first."""
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            return []
    root = os.path.abspath(path).rstrip("/")
    found = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[2].startswith("fuse"):
            continue
        point = parts[1].replace("\\040", " ")
        if point == root or point.startswith(root + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_tree(path: str) -> None:
    """``rmtree`` after a lazy unmount of the FUSE mounts below it (the power-cut
    filesystem): a mount whose server was killed would stop the removal."""
    for point in fuse_mounts_under(path):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["fusermount", "-u", "-z", point], capture_output=True,
                           timeout=10, check=False)
    shutil.rmtree(path, ignore_errors=True)


def reap_owner(token: str, groups: Mapping[int, int | None], pids: Mapping[int, int | None],
               *, grace: float = 0.0) -> list[int]:
    """Stop every process of a dead owner: tagged ones, registered groups and pids.

    SIGTERM first when ``grace`` > 0 (then SIGKILL after it), else SIGKILL at once.
    Returns the pids signalled.
    """
    def victims() -> dict[int, int | None]:
        out: dict[int, int | None] = {p: proc_start_time(p) for p in tagged_pids(token)}
        for pid, start in pids.items():
            if start is not None and proc_start_time(pid) == start:
                out[pid] = start
        return out

    hit: list[int] = []
    for sig in ((signal.SIGTERM, signal.SIGKILL) if grace > 0 else (signal.SIGKILL,)):
        for pgid, start in groups.items():
            if start is not None and proc_start_time(pgid) == start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, sig)
        for pid, start in victims().items():
            if _kill_verified(pid, start, sig):
                hit.append(pid)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and victims():
                time.sleep(0.1)
    return sorted(set(hit))


def _watch(token: str, state_file: Path) -> int:
    """The watchdog's main loop: follow the owner's registrations until the pipe closes."""
    groups: dict[int, int | None] = {}
    pids: dict[int, int | None] = {}
    paths: dict[str, None] = {}
    container_runs: dict[str, None] = {}

    def num(s: str) -> int | None:
        return None if s == "None" else int(s)

    for raw in sys.stdin.buffer:
        words = raw.decode("utf-8", "replace").rstrip("\n").split(" ", 1)
        if len(words) != 2:
            continue
        cmd, arg = words
        with contextlib.suppress(ValueError):
            if cmd == "group":
                g, s = arg.split()
                groups[int(g)] = num(s)
            elif cmd == "ungroup":
                groups.pop(int(arg), None)
            elif cmd == "pid":
                p, s = arg.split()
                pids[int(p)] = num(s)
            elif cmd == "unpid":
                pids.pop(int(arg), None)
            elif cmd == "path":
                paths[arg] = None
            elif cmd == "unpath":
                paths.pop(arg, None)
            elif cmd == "containers":
                container_runs[arg] = None
    # EOF: the owner is gone (or closed us on purpose at a normal exit).
    for _ in range(3):  # a process may fork while we kill: sweep until nothing is left
        if not reap_owner(token, groups, pids):
            break
        time.sleep(0.2)
    for p in paths:
        remove_tree(p)
    owner_pid = int(token.split(".", 1)[0])
    for run_id in container_runs:  # container mode's session: its labelled containers
        remove_containers(run_id, owner_pid)
    with contextlib.suppress(OSError):
        state_file.unlink()
    return 0


# -- brokerperf cleanup --local ---------------------------------------------------------


@dataclass
class LeftoverReport:
    """What :func:`cleanup_local` found and did, one line per fact."""

    lines: list[str] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    #: runs whose owner is gone but whose state is another cache dir's: left alone
    foreign: list[str] = field(default_factory=list)


def _states(directory: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    if not directory.is_dir():
        return
    for f in sorted(directory.glob("*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("token"), str):
            yield f, data


def cleanup_local(*, dry_run: bool = False, directory: Path | None = None,
                  grace: float = 3.0, all_runs: bool = False) -> LeftoverReport:
    """Stop the processes and remove the data directories of crashed local runs.

    A run is crashed when its owning interpreter is gone; live runs are never touched.
    Processes are found by their tag in ``/proc/PID/environ`` (and the pids the state
    file lists, checked against their start time), never by name.

    Only the runs of this state directory (``BROKERPERF_CACHE_DIR``) are reaped: a run
    with a state file here, or tagged processes whose own ``BROKERPERF_CACHE_DIR`` names
    this directory (a crash while writing the state file). Tagged processes of runs
    elsewhere (another cache dir, another user's CI job) are reported and left alone
    unless ``all_runs`` (``brokerperf cleanup --local --all``).
    """
    directory = directory or state_dir()
    rep = LeftoverReport()
    tokens: dict[str, tuple[Path | None, dict[str, Any]]] = {}
    for state_file, state in _states(directory):
        tokens[state["token"]] = (state_file, state)
    # Tagged processes whose state file is not here: ours (same state dir), or another's.
    me = os.getpid()
    elsewhere: dict[str, Path] = {}
    here = directory.resolve()
    for pid in _all_pids():
        if pid == me:
            continue
        tag = proc_tag(pid)
        if tag and tag not in tokens:
            tokens[tag] = (None, {"token": tag})
            scope = _state_dir_of(pid)
            if scope.resolve() != here:
                elsewhere[tag] = scope
    for token, (f, data) in tokens.items():
        found_tagged = tagged_pids(token)
        if owner_alive(token):
            rep.live.append(token)
            rep.lines.append(f"run {token}: owner pid {token.split('.')[0]} is alive, left alone")
            continue
        groups = {int(g["pgid"]): g.get("start") for g in data.get("groups", [])}
        pids = {int(p["pid"]): p.get("start") for p in data.get("pids", [])}
        found = sorted(set(found_tagged)
                       | {p for p, s in pids.items() if s is not None
                          and proc_start_time(p) == s})
        whose = _whose(data, found)
        if token in elsewhere and not all_runs:
            rep.foreign.append(token)
            rep.lines.append(
                f"run {token}: {whose} is gone, but the run is not this cache dir's (its "
                f"state dir is {elsewhere[token]}, this is {directory}); processes {found}"
                " left alone. Fix: run the cleanup with that BROKERPERF_CACHE_DIR, or pass "
                "--all to reap every run whose owner is gone")
            continue
        dirs = [d for d in data.get("data_dirs", []) if Path(d).exists()]
        ports = data.get("ports", {})
        rep.lines.append(f"run {token}: {whose} is gone; processes {found or 'none'}; "
                         f"ports {ports or 'none recorded'}; data dirs {dirs or 'none'}")
        if dry_run:
            continue
        hit = reap_owner(token, groups, pids, grace=grace)
        rep.stopped += hit
        deadline = time.monotonic() + 10.0  # gone (reaped by init) before we report it
        while time.monotonic() < deadline and any(
                proc_start_time(p) is not None and proc_tag(p) == token for p in hit):
            time.sleep(0.1)
        for d in dirs:
            remove_tree(d)
            rep.removed.append(d)
        if f is not None:
            with contextlib.suppress(OSError):
                f.unlink()
    return rep


if __name__ == "__main__":
    # Only the owner's death ends the watch, not a Ctrl-C or hang-up meant for others.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sys.exit(_watch(sys.argv[1], Path(sys.argv[2])))
