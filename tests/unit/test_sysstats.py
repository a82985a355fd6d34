"""System sampling reads the numbers that decide a run's validity verdict: test them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_brokerperf.metrics import sysstats
from pytest_brokerperf.metrics.sysstats import (
    ProcessSampler,
    ProcSample,
    clock_info,
    cpu_snapshot,
    delta,
    fsync_probe,
    machine_info,
    mount_of,
    system_cpu_delta,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def test_sampler_measures_own_cpu() -> None:
    sampler = ProcessSampler()
    before = sampler.sample()
    _burn(0.3)
    after = sampler.sample()
    d = delta(before, after)
    assert d.elapsed_s == pytest.approx(0.3, abs=0.1)
    assert d.cpu_s > 0.1  # 10 ms clock ticks: a 300 ms spin shows
    assert 0 < d.cpu_share <= 1.5
    assert d.runq_delay_s >= 0 and d.runq_share >= 0
    assert after.runq_ok == any(Path("/proc/self/task").glob("*/schedstat"))


def test_sampler_reads_another_process_and_its_threads() -> None:
    code = (
        "import threading, time\n"
        "def spin():\n"
        "    end = time.perf_counter() + 1.0\n"
        "    while time.perf_counter() < end: pass\n"
        "ts = [threading.Thread(target=spin) for _ in range(2)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "time.sleep(5)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        sampler = ProcessSampler(child.pid)
        first = sampler.sample()
        time.sleep(1.2)
        second = sampler.sample()
        d = delta(first, second)
        assert d.cpu_s > 0.3  # two spinning threads, counted for the whole process
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ProcessLookupError):
        sampler.sample()


def test_unknown_pid_is_rejected() -> None:
    with pytest.raises(ProcessLookupError):
        ProcessSampler(2**22 + 12345)


def test_delta_clamps_lost_thread_wait() -> None:
    prev = ProcSample(cpu_s=1.0, runq_delay_s=0.5, wall_ns=0)
    cur = ProcSample(cpu_s=1.5, runq_delay_s=0.2, wall_ns=2_000_000_000)  # a thread exited
    d = delta(prev, cur)
    assert (d.cpu_s, d.runq_delay_s, d.elapsed_s) == (0.5, 0.0, 2.0)
    assert d.cpu_share == 0.25
    assert delta(prev, ProcSample(1.0, 0.5, 0, runq_ok=False)).runq_ok is False


def test_clock_info() -> None:
    info = clock_info()
    assert info["clock"] == "CLOCK_MONOTONIC"
    assert info["python_function"] == "time.monotonic_ns"
    assert info["monotonic"] is True and info["adjustable"] is False
    assert 0 < info["resolution_s"] <= 1e-3
    assert info["read_cost_ns"] > 0
    sysfs = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    if sysfs.exists():
        assert info["clocksource"] == sysfs.read_text().strip()
        assert info["slow_clocksource"] == (info["clocksource"] in {"hpet", "acpi_pm"})


def test_mount_of_finds_the_deepest_mount(tmp_path: Path) -> None:
    mount = mount_of(tmp_path)
    assert mount is not None
    assert str(tmp_path.resolve()).startswith(mount["mount_point"].rstrip("/") + "/") or (
        mount["mount_point"] == "/"
    )
    assert mount["fs_type"]
    proc = mount_of(Path("/proc/self"))
    assert proc is not None and proc["fs_type"] == "proc"


def test_fsync_probe_on_real_directory(tmp_path: Path) -> None:
    result = fsync_probe(tmp_path, n=20)
    assert result["n"] == 20 and result["block_bytes"] == 4096
    assert 0 < result["p50_us"] <= result["p90_us"] <= result["p99_us"] <= result["max_us"]
    assert result["suspicious"] == (result["p50_us"] < 50)
    assert result["fs_type"] and result["mount_point"]
    assert list(tmp_path.iterdir()) == []  # probe file removed


def test_fsync_probe_flags_free_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysstats.os, "fdatasync", lambda fd: None)  # what tmpfs amounts to
    assert fsync_probe(tmp_path, n=20)["suspicious"] is True


def test_fsync_probe_trusts_slow_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysstats.os, "fdatasync", lambda fd: time.sleep(0.0003))
    result = fsync_probe(tmp_path, n=10)
    assert result["suspicious"] is False and result["p50_us"] >= 300


def test_fsync_probe_reports_tmpfs() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    result = fsync_probe(shm, n=10)
    assert result["fs_type"] == "tmpfs"


def test_fsync_probe_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        fsync_probe(tmp_path / "missing")
    with pytest.raises(ValueError):
        fsync_probe(tmp_path, n=0)


def test_machine_info() -> None:
    info = machine_info()
    for key in (
        "kernel",
        "cpu_model",
        "logical_cpus",
        "cpu_affinity",
        "mem_total_bytes",
        "page_cache_bytes",
        "thp_enabled",
        "steal_since_boot_s",
        "cpu_governor",
        "python_version",
    ):
        assert key in info
    assert info["logical_cpus"] == os.cpu_count()
    assert set(info["cpu_affinity"]) == os.sched_getaffinity(0)
    assert info["mem_total_bytes"] > info["page_cache_bytes"] >= 0
    assert info["steal_since_boot_s"] >= 0
    assert info["python_version"] == ".".join(map(str, sys.version_info[:3]))


def test_system_cpu_delta_shares() -> None:
    first = cpu_snapshot()
    _burn(0.2)
    second = cpu_snapshot()
    d = system_cpu_delta(first, second)
    assert d.elapsed_s > 0.1
    for share in (d.busy_share, d.iowait_share, d.steal_share):
        assert 0.0 <= share <= 1.0
    assert d.busy_share > 0
    assert set(d.per_cpu_busy) == set(second.per_cpu)
    assert all(0.0 <= s <= 1.0 for s in d.per_cpu_steal.values())
