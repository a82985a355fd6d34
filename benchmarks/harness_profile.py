"""Where the harness worker's time goes: py-spy on it during one run, summarised.

``compare_native.py --profile`` starts a :class:`WorkerProfiler` before the first
harness run at ``--profile-rate`` (default ``max``). It waits for the run's spawned
worker process (the one child of this process started by ``multiprocessing``'s spawn),
lets the warm-up pass, then runs
``py-spy record --format raw --threads --nonblocking`` on it for the measured seconds
(``--nonblocking``: the worker is not paused for each sample, so the profile does not
slow what it measures much). :func:`summarise` turns the collapsed stacks into the
share of samples per thread and the top frames by own time (the innermost Python frame
of a sample: time in a C call such as ``produce()`` counts on the line that made it).

py-spy: https://github.com/benfred/py-spy (``pip install py-spy``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProfileSummary", "WorkerProfiler", "summarise"]

_THREAD = re.compile(r"^thread \((?:0x)?[0-9a-fA-F]+\): ?(?P<name>[^;]*)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


@dataclass
class ProfileSummary:
    """Samples per thread and per innermost frame (own time), as shares of all samples."""

    samples: int = 0
    threads: list[tuple[str, float]] = field(default_factory=list)
    own: list[tuple[str, float]] = field(default_factory=list)
    error: str = ""
    #: over the sampled window, from /proc/<pid>/task/*/schedstat, threads summed, as
    #: shares of one core: time on a CPU, and time runnable but waiting for one (the
    #: machine's other load; on a shared host this is why a CPU-bound worker gets < 1.0)
    on_cpu: float | None = None
    run_queue: float | None = None

    def lines(self, top: int = 15) -> list[str]:
        if self.error:
            return [f"  profile: {self.error}"]
        out = []
        if self.on_cpu is not None and self.run_queue is not None:
            out.append(f"  worker threads on a CPU {self.on_cpu:.2f} of a core, runnable but "
                       f"waiting for a CPU {self.run_queue:.2f} (/proc schedstat, summed)")
        out += [f"  {self.samples} samples (py-spy, on-CPU threads); share per thread:"]
        out += [f"    {share:6.1%}  {name}" for name, share in self.threads]
        out.append(f"  top {min(top, len(self.own))} frames by own time (innermost Python "
                   "frame; a C call counts on its caller's line):")
        out += [f"    {share:6.1%}  {frame}" for frame, share in self.own[:top]]
        return out


def _frame_name(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file.py:123)``."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    base = os.path.basename(m["file"])
    return f"{m['func']} ({base}:{m['line']})" if m["line"] else f"{m['func']} ({base})"


def summarise(raw: str) -> ProfileSummary:
    """Collapsed stacks (``frame;frame;... count`` per line, py-spy ``--format raw
    --threads``) into shares per thread and per innermost frame."""
    threads: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        name = "(main)"
        m = _THREAD.match(frames[0])
        if m:
            name = m["name"].strip() or "(unnamed)"
            frames = frames[1:]
        # per-client names carry an id (consumer-c0, brokerperf-kafka-poll-<topic>)
        threads[re.sub(r"^(brokerperf-\w+-poll)-.*$|-c\d+$", r"\1", name)] += n
        own[_frame_name(frames[-1]) if frames else "(no Python frame)"] += n
        total += n
    if not total:
        return ProfileSummary(error="py-spy recorded no samples")
    return ProfileSummary(
        samples=total,
        threads=[(k, v / total) for k, v in threads.most_common()],
        own=[(k, v / total) for k, v in own.most_common()],
    )


def schedstat(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable but waiting) summed over ``pid``'s threads (Linux
    ``/proc/<pid>/task/<tid>/schedstat``); (0, 0) where it cannot be read."""
    run = wait = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
            run, wait = run + int(fields[0]), wait + int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return run, wait


def _spawned_children(parent: int) -> list[int]:
    """This process's children started by multiprocessing's spawn (not its resource
    tracker), from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rpartition(")")[2].split()[1])
            if ppid != parent:
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if "spawn_main" in cmd and "resource_tracker" not in cmd:
            out.append(int(entry.name))
    return out


class WorkerProfiler:
    """py-spy on the next spawned worker of this process, for ``duration_s`` after
    ``delay_s``; :meth:`result` waits for it and summarises."""

    def __init__(self, out: Path, delay_s: float, duration_s: float, rate_hz: int = 100) -> None:
        self.out, self.delay_s, self.duration_s, self.rate_hz = out, delay_s, duration_s, rate_hz
        self.summary = ProfileSummary(error="not run")
        self._before = set(_spawned_children(os.getpid()))
        self._thread = threading.Thread(target=self._run, name="worker-profiler", daemon=True)

    def start(self) -> WorkerProfiler:
        self._thread.start()
        return self

    def _run(self) -> None:
        spy = shutil.which("py-spy")
        if spy is None:
            self.summary = ProfileSummary(error="py-spy not found on PATH: pip install py-spy")
            return
        deadline = time.monotonic() + 180
        pid = None
        while pid is None and time.monotonic() < deadline:
            new = [p for p in _spawned_children(os.getpid()) if p not in self._before]
            pid = new[0] if new else None
            if pid is None:
                time.sleep(0.2)
        if pid is None:
            self.summary = ProfileSummary(error="no harness worker process appeared in 180 s")
            return
        # the worker creates its clients and probes before the warm-up starts: wait for the
        # warm-up too, so the samples are of the measured (steady) part
        time.sleep(self.delay_s)
        argv = [spy, "record", "--pid", str(pid), "--duration", str(max(1, int(self.duration_s))),
                "--rate", str(self.rate_hz), "--format", "raw", "--threads", "--nonblocking",
                "--output", str(self.out)]
        t0, (run0, wait0) = time.monotonic_ns(), schedstat(pid)
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=self.duration_s + 60, check=False)
        t1, (run1, wait1) = time.monotonic_ns(), schedstat(pid)
        if proc.returncode != 0 or not self.out.exists():
            why = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            self.summary = ProfileSummary(error=f"py-spy exit {proc.returncode}: {why[0]} "
                                          f"(argv: {' '.join(argv)})")
            return
        self.summary = summarise(self.out.read_text(errors="replace"))
        if run1 > run0 and t1 > t0:  # the worker was still there at the end
            self.summary.on_cpu = (run1 - run0) / (t1 - t0)
            self.summary.run_queue = (wait1 - wait0) / (t1 - t0)

    def result(self, timeout_s: float = 120.0) -> ProfileSummary:
        self._thread.join(timeout_s)
        return self.summary
