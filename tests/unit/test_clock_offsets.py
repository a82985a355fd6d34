"""The NTP-style offset estimator, pure math on synthetic exchanges: the minimum round
trip is kept, the truth lies within ± RTT/2 of the estimate, same-clock pairs are never
corrected, and the clock-uncertain rule for corrected clocks."""

from __future__ import annotations

import random

import pytest

from pytest_brokerperf.engine.clock import (
    CLOCK_UNCERTAINTY_SHARE,
    ClockExchange,
    ClockIdentity,
    OffsetEstimate,
    TaskClock,
    clock_mismatch,
    drift_ppm,
    estimate_offset,
    pair_uncertainty_ns,
    uncertainty_note,
)


def _exchange(t0: int, offset: int, out_ns: int, back_ns: int) -> ClockExchange:
    """The coordinator asks at t0; the task reads its clock ``out_ns`` later (its clock
    runs ``offset`` ahead); the answer is back ``back_ns`` after that."""
    return ClockExchange(t0=t0, task=t0 + out_ns + offset, t3=t0 + out_ns + back_ns)


def test_a_symmetric_exchange_gives_the_exact_offset() -> None:
    x = _exchange(1_000_000, 3_000_000_000, 50_000, 50_000)
    assert x.offset_ns == 3_000_000_000 and x.rtt_ns == 100_000


def test_the_minimum_round_trip_is_kept_and_the_truth_is_within_half_of_it() -> None:
    rnd = random.Random(7)
    truth = -2_000_000_000
    xs = []
    t = 10_000_000
    for _ in range(64):  # asymmetric, jittery paths: a busy task answers late
        out, back = rnd.randint(20_000, 3_000_000), rnd.randint(20_000, 3_000_000)
        xs.append(_exchange(t, truth, out, back))
        t += 5_000_000
    est = estimate_offset(xs)
    best = min(xs, key=lambda x: x.rtt_ns)
    assert est.rtt_ns == best.rtt_ns and est.samples == 64
    assert est.uncertainty_ns == (best.rtt_ns + 1) // 2
    assert abs(est.offset_ns - truth) <= est.uncertainty_ns
    # a single bad exchange (worst asymmetry) is off by more than the kept one's bound
    worst = max(xs, key=lambda x: abs(x.offset_ns - truth))
    assert abs(worst.offset_ns - truth) > est.uncertainty_ns


def test_the_bound_holds_for_the_most_asymmetric_path() -> None:
    # all of the round trip on the way out: the estimate is off by exactly RTT/2
    x = _exchange(0, 5_000, 1_000_000, 0)
    est = estimate_offset([x])
    assert abs(est.offset_ns - 5_000) == 500_000 <= est.uncertainty_ns


def test_no_valid_exchange_is_an_error() -> None:
    with pytest.raises(ValueError, match="no valid clock exchange"):
        estimate_offset([ClockExchange(t0=10, task=5, t3=9)])


def test_drift_is_the_slope_between_two_estimates() -> None:
    a = OffsetEstimate(offset_ns=0, uncertainty_ns=10, rtt_ns=20, samples=8, at_ns=0)
    b = OffsetEstimate(offset_ns=50_000, uncertainty_ns=10, rtt_ns=20, samples=8,
                       at_ns=10_000_000_000)
    assert drift_ppm(a, b) == pytest.approx(5.0)  # 50 µs over 10 s
    assert drift_ppm(a, a) is None


def _clock(task: int, ns: str, unc: int, residuals: tuple[int, ...] = ()) -> TaskClock:
    first = OffsetEstimate(offset_ns=7, uncertainty_ns=unc, rtt_ns=2 * unc, samples=32, at_ns=0)
    return TaskClock(task=task, identity=ClockIdentity("h", "boot", ns), applied_offset_ns=7,
                     corrected=True, first=first,
                     residuals=[OffsetEstimate(r, unc, 2 * unc, 8, k + 1)
                                for k, r in enumerate(residuals)])


def test_a_task_bound_is_its_worst_residual_plus_half_its_round_trip() -> None:
    c = _clock(0, "time:[1]", 40_000, residuals=(5_000, -30_000, 1_000))
    assert c.uncertainty_ns == 70_000
    assert c.drift_ppm is not None
    assert TaskClock(task=1, identity=ClockIdentity("h", "b", "t")).uncertainty_ns == 0


def test_a_pair_on_one_clock_has_no_uncertainty_a_cross_pair_sums_both() -> None:
    a = _clock(0, "time:[1]", 40_000)
    b = _clock(1, "time:[1]", 60_000)  # same boot and namespace: one clock
    c = _clock(2, "time:[2]", 25_000)
    assert pair_uncertainty_ns(a, b) == 0
    assert pair_uncertainty_ns(a, a) == 0
    assert pair_uncertainty_ns(a, c) == 65_000
    # an unknown namespace is never taken for the same clock
    u = TaskClock(task=3, identity=ClockIdentity("h", "boot", None), corrected=True,
                  first=OffsetEstimate(0, 1_000, 2_000, 8, 0))
    assert pair_uncertainty_ns(u, TaskClock(task=4, identity=ClockIdentity("h", "boot", None),
                                            corrected=True,
                                            first=OffsetEstimate(0, 1_000, 2_000, 8, 0))) == 2_000


def test_clock_uncertain_fires_above_the_stated_share_of_the_p50() -> None:
    assert CLOCK_UNCERTAINTY_SHARE == 0.10
    assert uncertainty_note(100.0, 1_000.0) is None  # exactly 10 %: trusted
    note = uncertainty_note(101.0, 1_000.0)
    assert note is not None and "±101 µs" in note and "10%" in note
    assert uncertainty_note(0.0, 1.0) is None  # one clock
    assert uncertainty_note(50.0, None) is None  # no e2e figure to judge


def test_a_corrected_reading_passes_the_bracket_within_its_uncertainty() -> None:
    snap = {"worker": 0, "clock": {"boot_id": "other-host", "mono_ns": 1_000 - 1_500_000,
                                   "corrected": True, "uncertainty_ns": 600_000}}
    assert clock_mismatch([snap], 1_000, 2_000, "this-host") is None
    # beyond slack + uncertainty it is reported, and another boot uncorrected always is
    snap["clock"]["uncertainty_ns"] = 100_000
    assert clock_mismatch([snap], 1_000, 2_000, "this-host") is not None
    plain = {"worker": 1, "clock": {"boot_id": "other-host", "mono_ns": 1_500}}
    assert "another boot" in (clock_mismatch([plain], 1_000, 2_000, "this-host") or "")
