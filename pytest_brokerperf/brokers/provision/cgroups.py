"""A memory limit around a local broker process: one memory cgroup per node.

Why: a catch-up read is only a read from storage when the backlog no longer fits in the
page cache the broker can use. On a test machine with plenty of RAM every local backlog
is served from memory (a *hot* catch-up). The kernel charges page cache to the cgroup
of the process that wrote the pages; a broker in a memory cgroup with a limit below
its heap plus its backlog has its oldest log pages reclaimed, and draining the backlog
reads them from disk again: a *cold* catch-up, on a small machine
(``--brokerperf-broker-memory``, docs/how-to/cold-catchup.md).

Both cgroup versions exist in the wild: v1 (a ``memory`` hierarchy of its own,
``memory.limit_in_bytes``) and v2 (one unified hierarchy, ``memory.max``, the memory
controller enabled in the parent's ``cgroup.subtree_control``). The node's cgroup is a
child of the cgroup the pytest process is in, so a CI job's own limit still applies
above it. The process joins its cgroup before ``exec`` (:func:`join_argv`): every byte
the broker ever charges is charged there.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_brokerperf.core.errors import ConfigError

__all__ = ["MIN_NODE_MEMORY", "MemoryCgroup", "MemoryHierarchy", "check_memory_limit",
           "find_memory_hierarchy", "join_argv", "memory_cap_problem"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
_MIB = 1024 * 1024
#: below this no broker this plugin starts runs (a JVM's non-heap, an Erlang VM)
MIN_NODE_MEMORY = 256 * _MIB

#: a shell that writes its own pid to the cgroup's ``cgroup.procs`` and becomes the
#: broker (``exec``): the broker starts inside the cgroup, threads and all
_JOIN_SHIM = 'echo $$ > "$0" && exec "$@"'


def join_argv(procs_file: Path, argv: list[str]) -> list[str]:
    """``argv`` run so that it joins the cgroup of ``procs_file`` before it starts."""
    return ["/bin/sh", "-c", _JOIN_SHIM, str(procs_file), *argv]


@dataclass(frozen=True)
class MemoryHierarchy:
    """Where memory cgroups can be made for this process: the version and the directory
    of the cgroup this process is in (new node cgroups become its children)."""

    version: Literal[1, 2]
    base: Path

    @property
    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    @property
    def usage_file(self) -> str:
        return "memory.usage_in_bytes" if self.version == 1 else "memory.current"


def find_memory_hierarchy(root: Path = CGROUP_ROOT,
                          proc_cgroup: Path = Path("/proc/self/cgroup")) -> MemoryHierarchy:
    """The memory hierarchy of this process; ConfigError naming what is missing."""
    try:
        lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {proc_cgroup} ({exc.strerror}): this system has no "
                          "cgroups, so --brokerperf-broker-memory cannot be applied") from None
    unified: str | None = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            base = root / "memory" / path.lstrip("/")
            if base.is_dir():
                return MemoryHierarchy(1, base)
        if parts[0] == "0" and controllers == "":
            unified = path
    if unified is not None and (root / "cgroup.controllers").is_file():
        available = (root / "cgroup.controllers").read_text(encoding="ascii").split()
        if "memory" in available:
            return MemoryHierarchy(2, root / unified.lstrip("/"))
    raise ConfigError(
        f"no memory cgroup controller is mounted under {root} (read {proc_cgroup}): "
        "--brokerperf-broker-memory needs cgroup v1's memory hierarchy or cgroup v2 with the "
        "memory controller; drop the flag, or run where cgroups are available")


def check_memory_limit(limit_bytes: int, floor_bytes: int, what: str) -> None:
    """Refuse a node memory limit below what the broker needs beside its page cache."""
    if limit_bytes < floor_bytes:
        raise ConfigError(
            f"--brokerperf-broker-memory={limit_bytes / _MIB:,.0f}MiB is below the "
            f"{floor_bytes / _MIB:,.0f} MiB one node of {what} needs beside page cache (its "
            "heap and the rest of its VM): the kernel would OOM-kill it; give at least "
            f"{floor_bytes / _MIB:,.0f}MiB plus the page cache you want it to have")


def memory_cap_problem(root: Path = CGROUP_ROOT,
                       proc_cgroup: Path = Path("/proc/self/cgroup")) -> str | None:
    """Why a node memory cgroup cannot be made here (None: it can), checked before any
    broker starts by making and removing an empty probe cgroup."""
    try:
        hierarchy = find_memory_hierarchy(root, proc_cgroup)
        probe = MemoryCgroup.create(hierarchy, f"brokerperf-probe-{os.getpid()}", 64 * _MIB)
    except ConfigError as exc:
        return str(exc)
    probe.remove()
    return None


@dataclass
class MemoryCgroup:
    """One node's memory cgroup with its limit; :meth:`remove` once its process ended."""

    hierarchy: MemoryHierarchy
    path: Path
    limit_bytes: int

    @classmethod
    def create(cls, hierarchy: MemoryHierarchy, name: str, limit_bytes: int) -> MemoryCgroup:
        """Make the cgroup ``name`` under this process's cgroup with ``limit_bytes``."""
        path = hierarchy.base / name
        if hierarchy.version == 2:
            _enable_memory_controller(hierarchy.base)
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the memory cgroup {path} ({exc.strerror}): "
                "--brokerperf-broker-memory needs write access to the cgroup filesystem "
                "(root, or a delegated cgroup); drop the flag or run with that access") from None
        group = cls(hierarchy, path, int(limit_bytes))
        try:
            (path / hierarchy.limit_file).write_text(str(group.limit_bytes), encoding="ascii")
        except OSError as exc:
            group.remove()
            raise ConfigError(
                f"cannot set {hierarchy.limit_file}={group.limit_bytes} in {path} "
                f"({exc.strerror}); drop --brokerperf-broker-memory or run with write access "
                "to the cgroup filesystem") from None
        return group

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def usage_bytes(self) -> int | None:
        """Memory charged to the cgroup now (page cache included)."""
        return _read_int(self.path / self.hierarchy.usage_file)

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer ended in this cgroup (None: the
        kernel does not say)."""
        name = "memory.oom_control" if self.hierarchy.version == 1 else "memory.events"
        try:
            text = (self.path / name).read_text(encoding="ascii")
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None

    def remove(self, timeout_s: float = 5.0) -> bool:
        """Remove the (empty) cgroup; retries while the kernel still lists its exiting
        tasks. False when it could not be removed within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    return False
            time.sleep(0.05)

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "cgroup_version": self.hierarchy.version,
                "limit_bytes": self.limit_bytes}


def _enable_memory_controller(parent: Path) -> None:
    """cgroup v2: children get the memory controller only when the parent delegates it."""
    control = parent / "cgroup.subtree_control"
    try:
        if "memory" in control.read_text(encoding="ascii").split():
            return
        control.write_text("+memory", encoding="ascii")
    except OSError as exc:
        raise ConfigError(
            f"cannot enable the memory controller in {control} ({exc.strerror}): cgroup v2 "
            "lets a cgroup delegate controllers only when it holds no process itself; run "
            "pytest in a delegated sub-cgroup (e.g. systemd-run --scope -p Delegate=yes "
            "pytest ...) or drop --brokerperf-broker-memory") from None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
