"""A conftest snippet that fakes hypervisor steal time: ``FAKE_STEAL`` (a share, e.g.
``0.2``) of every ``/proc/stat`` reading's CPU time, so a window is host-noise on purpose
while everything else (the loopback broker, the engine, the verdicts) is real."""

from __future__ import annotations

from typing import Final

__all__ = ["FAKE_STEAL_CONFTEST"]

#: appended to a pytester conftest; no-op unless the session's FAKE_STEAL is set
FAKE_STEAL_CONFTEST: Final = """
import itertools, os, time
from pytest_brokerperf.metrics import sysstats

if os.environ.get("FAKE_STEAL") is not None:
    _calls = itertools.count(1)
    _STEAL = float(os.environ["FAKE_STEAL"])

    def _fake_cpu_snapshot():
        k = next(_calls) * 1000  # ticks; user, nice, system, idle, iowait, irq, softirq, steal
        steal = round(k * _STEAL)
        ticks = (k // 2, 0, 0, k - k // 2 - steal, 0, 0, 0, steal)
        return sysstats.CpuSnapshot(time.monotonic_ns(), ticks, {0: ticks, 1: ticks})

    sysstats.cpu_snapshot = _fake_cpu_snapshot
"""
