"""Test helpers for pytest-brokerperf and its users (e.g. :mod:`.delayproxy`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

__all__ = ["PLAIN_SCENARIOS", "skip_if_host_noise"]

#: ``-k`` for the shipped suite's plain scenarios: without the studies' cases, their
#: sweeps, the Pulsar limit test and the 1 GiB cold-read case (each a run of its own)
PLAIN_SCENARIOS = "not study and not sweep and not limit and not cold_read"


def skip_if_host_noise(records: Iterable[dict[str, Any]]) -> None:
    """Skip (saying so) when a run's figures were voided by the host: hypervisor steal
    time, or other processes on the generator's CPUs.

    The harness then did what it must — measured again (--brokerperf-noise-retries) and
    still said INCONCLUSIVE (host-noise) — so nothing about the code under test can be
    read from this window: neither a pass nor a failure would be true. Every other
    status, valid or not, is left to the test's own assertions.
    """
    for rec in records:
        v = rec.get("verdict") or {}
        if v.get("status") == "host-noise":
            details = v.get("details") or {}
            steal = details.get("host_steal_share")
            other = details.get("other_process_cpu_share")
            rungs = (rec.get("ladder") or {}).get("rungs") or []
            if steal is None and rungs:  # a ladder: the rung the host stopped
                steal = rungs[-1].get("host_steal_share")
            retries = rec.get("noise_retries") or (rec.get("ladder") or {}).get(
                "noise_retries") or []
            pytest.skip(
                f"this host was too noisy to check {rec.get('test_id', 'this run')}: "
                f"hypervisor steal {steal if steal is None else format(steal, '.1%')}"
                + (f", other processes {other:.0%} of the generator's CPUs"
                   if other is not None else "")
                + f" after {len(retries)} re-measurement(s); the run said INCONCLUSIVE "
                "(host-noise) as it should")

