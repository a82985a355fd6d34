"""System sampling: process CPU and run-queue delay, clocks, fsync cost, machine facts.

Why these numbers (docs/explanation/measurement.md, docs/reference/results.md):

* A load generator that is short of CPU produces latency that belongs to the generator,
  not the broker.  CPU time near one core, or time spent *runnable but waiting* for a CPU
  (``/proc/<pid>/task/*/schedstat`` field 2), marks a run ``generator-bound``.
* Latency is only as good as the clock: record which clock we subtract and the kernel
  clocksource (``hpet``/``acpi_pm`` turn every clock read into a syscall).
* Durability comparisons mean nothing when ``fdatasync`` is free (tmpfs, overlay on
  tmpfs, a VM disk with ``cache=unsafe``): probe it and say so.
* Steal time on a VM is CPU the hypervisor took away; it is reported, never hidden.

Everything reads ``/proc`` and ``/sys`` directly (Linux); readers degrade to ``None``
where a file is missing rather than failing a benchmark over a fact sheet.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "CpuSnapshot",
    "ProcDelta",
    "ProcSample",
    "ProcessResources",
    "ProcessSampler",
    "SystemCpuDelta",
    "clock_info",
    "cpu_snapshot",
    "delta",
    "fsync_probe",
    "jvm_heap_first_touch",
    "machine_info",
    "mount_of",
    "process_resources",
    "system_cpu_delta",
]

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PROC = Path("/proc")
_SYS = Path("/sys")

#: fdatasync faster than this (p50, µs) cannot have reached stable storage.
FSYNC_SUSPICIOUS_P50_US = 50.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


# ---------------------------------------------------------------------- process sampling


class ProcSample(NamedTuple):
    """Cumulative resource use of one process at one instant."""

    cpu_s: float  # user + system CPU seconds of all threads since the process started
    runq_delay_s: float  # sum over live threads of time runnable but not running
    wall_ns: int  # time.monotonic_ns() when sampled
    runq_ok: bool = True  # False when schedstat is unavailable (runq_delay_s is then 0)


class ProcDelta(NamedTuple):
    """Resource use of one process over an interval."""

    cpu_s: float
    runq_delay_s: float
    elapsed_s: float
    runq_ok: bool = True

    @property
    def cpu_share(self) -> float:
        """CPU use as a fraction of one core (1.0 = one core saturated)."""
        return self.cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def runq_share(self) -> float:
        """Run-queue wait as a fraction of wall time (summed over threads, may exceed 1)."""
        return self.runq_delay_s / self.elapsed_s if self.elapsed_s > 0 else 0.0


class ProcessSampler:
    """Sample CPU time and run-queue delay of a process (ours by default, or a broker's).

    ``/proc/<pid>/stat`` utime+stime covers all threads, including exited ones.  Run-queue
    delay is summed over the *live* threads' ``schedstat``; a thread that exits takes its
    share with it, so :func:`delta` clamps a negative difference to zero.
    """

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self._base = _PROC / ("self" if pid is None else str(int(pid)))
        if not (self._base / "stat").exists():
            raise ProcessLookupError(f"no such process: {pid}")

    def cpu_seconds(self) -> float:
        text = _read(self._base / "stat")
        if text is None:
            raise ProcessLookupError(f"process {self.pid} is gone")
        # comm (field 2) may contain spaces and parentheses: split after the last ')'
        fields = text[text.rindex(")") + 2 :].split()
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of stat(5)
        return (utime + stime) / _CLK_TCK

    def runq_seconds(self) -> tuple[float, bool]:
        total_ns = 0
        seen = False
        try:
            tasks = os.listdir(self._base / "task")
        except OSError:
            return 0.0, False
        for tid in tasks:
            text = _read(self._base / "task" / tid / "schedstat")
            if not text:
                continue  # thread exited between listdir and read
            parts = text.split()
            if len(parts) >= 2:
                total_ns += int(parts[1])
                seen = True
        return total_ns / 1e9, seen

    def sample(self) -> ProcSample:
        wall = time.monotonic_ns()
        cpu = self.cpu_seconds()
        runq, ok = self.runq_seconds()
        return ProcSample(cpu, runq, wall, ok)


@dataclass(frozen=True)
class ProcessResources:
    """What a process holds at one instant: the figures a soak watches for growth that
    never levels off (a leak). ``None`` where ``/proc`` did not say (another uid's
    ``fd`` directory, a process gone)."""

    rss_bytes: int | None = None  # resident set (/proc/<pid>/statm, field 2 x page size)
    open_fds: int | None = None  # entries in /proc/<pid>/fd
    threads: int | None = None  # "Threads:" of /proc/<pid>/status

    def as_dict(self) -> dict[str, int | None]:
        return {"rss_bytes": self.rss_bytes, "open_fds": self.open_fds,
                "threads": self.threads}


def process_resources(pid: int | None = None) -> ProcessResources:
    """RSS, open file descriptors and threads of ``pid`` (this process by default)."""
    base = _PROC / ("self" if pid is None else str(int(pid)))
    rss = fds = threads = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        rss = int((base / "statm").read_text().split()[1]) * _PAGE
    with contextlib.suppress(OSError):  # another uid's fd directory needs ptrace rights
        fds = len(os.listdir(base / "fd"))
    with contextlib.suppress(OSError, ValueError):
        for line in (base / "status").read_text().splitlines():
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
                break
    return ProcessResources(rss, fds, threads)


_SIZE_RE = re.compile(r"^-Xmx(\d+)([kKmMgGtT]?)$")
_SCALE = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def jvm_heap_first_touch(pid: int) -> int | None:
    """How far a JVM's RSS may rise only by touching its heap for the first time: its
    ``-Xmx`` in bytes, unless ``-XX:+AlwaysPreTouch`` touched the heap at start (then 0).
    None when ``pid`` is not a JVM with ``-Xmx`` (or is gone)."""
    try:
        args = (_PROC / str(int(pid)) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    heap: int | None = None
    pretouch = False
    for raw in args:
        arg = raw.decode("utf-8", "replace")
        if (m := _SIZE_RE.match(arg)) is not None:
            heap = int(m[1]) * _SCALE[m[2].lower()]  # the last -Xmx wins, as in the JVM
        elif arg in ("-XX:+AlwaysPreTouch", "-XX:-AlwaysPreTouch"):
            pretouch = arg == "-XX:+AlwaysPreTouch"
    if heap is None:
        return None
    return 0 if pretouch else heap


def delta(prev: ProcSample, cur: ProcSample) -> ProcDelta:
    """CPU and run-queue delay between two samples of the same process."""
    elapsed = (cur.wall_ns - prev.wall_ns) / 1e9
    return ProcDelta(
        cpu_s=max(0.0, cur.cpu_s - prev.cpu_s),
        runq_delay_s=max(0.0, cur.runq_delay_s - prev.runq_delay_s),
        elapsed_s=elapsed,
        runq_ok=prev.runq_ok and cur.runq_ok,
    )


# ---------------------------------------------------------------------- system CPU / steal

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuSnapshot:
    """``/proc/stat`` cpu lines (clock ticks since boot), whole machine and per CPU."""

    wall_ns: int
    total: tuple[int, ...]
    per_cpu: dict[int, tuple[int, ...]]


def cpu_snapshot() -> CpuSnapshot:
    """Read ``/proc/stat``: user, nice, system, idle, iowait, irq, softirq, steal ticks."""
    wall = time.monotonic_ns()
    text = _read(_PROC / "stat") or ""
    total: tuple[int, ...] = (0,) * len(_CPU_FIELDS)
    per_cpu: dict[int, tuple[int, ...]] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *values = line.split()
        ticks = tuple(int(v) for v in values[: len(_CPU_FIELDS)])
        ticks += (0,) * (len(_CPU_FIELDS) - len(ticks))
        if name == "cpu":
            total = ticks
        else:
            per_cpu[int(name[3:])] = ticks
    return CpuSnapshot(wall, total, per_cpu)


class SystemCpuDelta(NamedTuple):
    """Machine CPU use over an interval, as shares of all CPU time available."""

    elapsed_s: float
    busy_share: float  # everything but idle, iowait and steal
    iowait_share: float
    steal_share: float  # taken by the hypervisor
    per_cpu_steal: dict[int, float]
    per_cpu_busy: dict[int, float]


def _shares(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[float, float, float]:
    d = [max(0, y - x) for x, y in zip(a, b, strict=True)]
    total = sum(d)
    if total == 0:
        return 0.0, 0.0, 0.0
    idle, iowait, steal = d[3], d[4], d[7]
    return (total - idle - iowait - steal) / total, iowait / total, steal / total


def system_cpu_delta(prev: CpuSnapshot, cur: CpuSnapshot) -> SystemCpuDelta:
    """Busy, iowait and steal shares between two :func:`cpu_snapshot` readings."""
    busy, iowait, steal = _shares(prev.total, cur.total)
    per_steal: dict[int, float] = {}
    per_busy: dict[int, float] = {}
    for cpu, ticks in cur.per_cpu.items():
        before = prev.per_cpu.get(cpu)
        if before is not None:
            b, _, s = _shares(before, ticks)
            per_busy[cpu], per_steal[cpu] = b, s
    return SystemCpuDelta(
        (cur.wall_ns - prev.wall_ns) / 1e9, busy, iowait, steal, per_steal, per_busy
    )


# ---------------------------------------------------------------------- clocks


def clock_info(sample_reads: int = 2000) -> dict[str, Any]:
    """The clock latency is measured with, and what the kernel backs it with.

    ``read_cost_ns`` is the median cost of one ``time.monotonic_ns()`` call; a
    syscall-backed clocksource shows up here as ~1 µs instead of ~50 ns.
    """
    info = time.get_clock_info("monotonic")
    implementation = info.implementation
    match = re.search(r"CLOCK_[A-Z_]+", implementation)
    clocksource = _read(_SYS / "devices/system/clocksource/clocksource0/current_clocksource")
    available = _read(_SYS / "devices/system/clocksource/clocksource0/available_clocksource")
    costs = []
    read = time.monotonic_ns
    for _ in range(max(1, sample_reads // 100)):
        t0 = read()
        for _ in range(100):
            read()
        costs.append((read() - t0) / 101)
    source = clocksource.strip() if clocksource else None
    return {
        "clock": match.group(0) if match else implementation,
        "python_function": "time.monotonic_ns",
        "implementation": implementation,
        "resolution_s": info.resolution,
        "monotonic": info.monotonic,
        "adjustable": info.adjustable,
        "clocksource": source,
        "available_clocksources": available.split() if available else None,
        "slow_clocksource": source in {"hpet", "acpi_pm"},
        "read_cost_ns": statistics.median(costs),
    }


# ---------------------------------------------------------------------- mounts and fsync


def _unescape_mount(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def mount_of(path: Path) -> dict[str, str] | None:
    """Mount (point, fs type, source, options) holding ``path``, from /proc/self/mountinfo."""
    text = _read(_PROC / "self/mountinfo")
    if text is None:
        return None
    target = os.path.realpath(path)
    best: dict[str, str] | None = None
    best_len = -1
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        tail = right.split()
        if len(fields) < 6 or len(tail) < 2:
            continue
        point = _unescape_mount(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:  # later lines shadow earlier mounts
            best_len = len(point)
            best = {
                "mount_point": point,
                "fs_type": tail[0],
                "source": _unescape_mount(tail[1]),
                "mount_options": fields[5],
                "super_options": tail[2] if len(tail) > 2 else "",
            }
    return best


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of raw samples (the probe keeps every sample)."""
    rank = max(1, min(len(sorted_values), int(q / 100 * len(sorted_values) + 0.999999)))
    return sorted_values[rank - 1]


def fsync_probe(directory: Path, n: int = 200) -> dict[str, Any]:
    """Time ``n`` appends of 4 KiB each followed by ``os.fdatasync`` in ``directory``.

    ``suspicious`` is true when the median is below 50 µs: such an fsync did not reach
    stable storage (tmpfs, overlay on tmpfs, a VM disk with ``cache=unsafe``), and
    durability levels cannot be told apart on this machine.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(str(directory))
    if n < 1:
        raise ValueError("n must be >= 1")
    block = os.urandom(4096)
    samples: list[float] = []
    fd, name = tempfile.mkstemp(prefix=".brokerperf-fsync-", dir=directory)
    try:
        sync = getattr(os, "fdatasync", os.fsync)
        for _ in range(n):
            t0 = time.perf_counter_ns()
            os.write(fd, block)
            sync(fd)
            samples.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    samples.sort()
    p50 = _percentile(samples, 50)
    mount = mount_of(directory) or {}
    return {
        "directory": str(directory),
        "n": n,
        "block_bytes": 4096,
        "call": "fdatasync" if hasattr(os, "fdatasync") else "fsync",
        "p50_us": p50,
        "p90_us": _percentile(samples, 90),
        "p99_us": _percentile(samples, 99),
        "max_us": samples[-1],
        "mean_us": statistics.fmean(samples),
        "fs_type": mount.get("fs_type"),
        "mount_point": mount.get("mount_point"),
        "mount_source": mount.get("source"),
        "mount_options": mount.get("mount_options"),
        "super_options": mount.get("super_options"),
        "suspicious": p50 < FSYNC_SUSPICIOUS_P50_US,
        "suspicious_threshold_us": FSYNC_SUSPICIOUS_P50_US,
    }


# ---------------------------------------------------------------------- machine facts


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (_read(_PROC / "meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            out[key] = int(parts[0]) * scale
    return out


def _cpu_model() -> str | None:
    for line in (_read(_PROC / "cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in {"model name", "Hardware", "cpu model", "Processor"}:
            return value.strip()
    return platform.processor() or None


def _bracketed(path: Path) -> str | None:
    text = _read(path)
    if text is None:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.strip()


def _iter_governors() -> Iterator[str]:
    for cpu in sorted((_SYS / "devices/system/cpu").glob("cpu[0-9]*")):
        text = _read(cpu / "cpufreq/scaling_governor")
        if text:
            yield text.strip()


def machine_info() -> dict[str, Any]:
    """Facts that decide whether two runs are comparable (written to the run manifest)."""
    uname = platform.uname()
    mem = _meminfo()
    snap = cpu_snapshot()
    total_ticks = sum(snap.total)
    try:
        from pytest_brokerperf.metrics.cpus import allowed_cpus

        affinity: list[int] | None = sorted(allowed_cpus())
    except (AttributeError, OSError):
        affinity = None
    physical: int | None
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing or unable to tell: not worth failing over
        physical = None
    governors = sorted(set(_iter_governors()))
    return {
        "hostname": uname.node,
        "kernel": uname.release,
        "kernel_version": uname.version,
        "arch": uname.machine,
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "physical_cores": physical,
        "cpu_affinity": affinity,
        "mem_total_bytes": mem.get("MemTotal"),
        "mem_available_bytes": mem.get("MemAvailable"),
        "page_cache_bytes": mem.get("Cached"),
        "thp_enabled": _bracketed(_SYS / "kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": _bracketed(_SYS / "kernel/mm/transparent_hugepage/defrag"),
        "steal_since_boot_s": snap.total[7] / _CLK_TCK,
        "steal_since_boot_share": snap.total[7] / total_ticks if total_ticks else 0.0,
        "cpu_governor": ",".join(governors) or None,  # one value per distinct governor
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
    }
