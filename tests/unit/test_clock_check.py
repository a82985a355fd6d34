"""The workers' clock check: stamps from another boot or another time namespace make the
run ``clock-uncertain`` (end-to-end subtracts two processes' CLOCK_MONOTONIC stamps)."""

from __future__ import annotations

import time

from pytest_brokerperf.engine.clock import SLACK_NS, clock_mismatch
from pytest_brokerperf.engine.worker import BOOT_ID

BOOT = "0b1e2c3d-0000-4000-8000-000000000001"


def _snap(worker: int, mono_ns: int, boot: str | None = BOOT) -> dict[str, object]:
    return {"worker": worker, "clock": {"boot_id": boot, "mono_ns": mono_ns}}


def test_readings_inside_the_bracket_are_one_clock() -> None:
    assert clock_mismatch([_snap(0, 1_000), _snap(1, 2_000)], 1_000, 2_000, BOOT) is None
    # the pipe's own rounding is allowed for
    assert clock_mismatch([_snap(0, 2_000 + SLACK_NS)], 1_000, 2_000, BOOT) is None


def test_a_reading_outside_the_bracket_is_another_clock() -> None:
    why = clock_mismatch([_snap(0, 1_500), _snap(1, 5_000_000_000)], 1_000, 2_000, BOOT)
    assert why is not None
    assert "worker 1's CLOCK_MONOTONIC is +5,000.0 ms outside" in why
    assert "worker 0" not in why


def test_another_boot_is_another_machine() -> None:
    why = clock_mismatch([_snap(0, 1_500, boot="ffffffff-1111")], 1_000, 2_000, BOOT)
    assert why is not None and "another boot" in why


def test_snapshots_without_a_clock_are_not_judged() -> None:
    assert clock_mismatch([{"worker": 0}], 1_000, 2_000, BOOT) is None


def test_this_process_knows_its_boot() -> None:
    assert BOOT_ID is None or len(BOOT_ID) >= 32
    now = time.monotonic_ns()
    assert clock_mismatch([_snap(0, now, BOOT_ID)], now - 1, now + 1, BOOT_ID) is None
