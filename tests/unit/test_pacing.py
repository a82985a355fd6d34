"""Open-loop schedule: absolute intended times, no lost slots after a stall."""

import pytest

from pytest_brokerperf.engine.pacing import Schedule


def test_intended_times_are_absolute():
    s = Schedule(1000.0, start_ns=1_000_000_000)
    assert [s.take() for _ in range(3)] == [1_000_000_000, 1_001_000_000, 1_002_000_000]
    assert s.next_ns() == 1_003_000_000


def test_nothing_due_before_start():
    s = Schedule(1000.0, start_ns=5_000)
    assert s.due(4_999) == 0
    assert s.due(5_000) == 1


def test_stall_keeps_every_slot():
    """A sender that stalls for 50 ms owes 50 messages, each with its original time."""
    s = Schedule(1000.0, start_ns=0)
    assert s.due(0) == 1
    s.take()
    due = s.due(50_000_000)
    assert due == 50
    times = [s.take() for _ in range(due)]
    assert times[0] == 1_000_000 and times[-1] == 50_000_000
    assert s.due(50_000_000) == 0


def test_fractional_rate_does_not_drift():
    s = Schedule(3.0, start_ns=0)
    for _ in range(3_000):
        s.take()
    # 3000 messages at 3 msg/s end at 1000 s minus one interval, exactly
    assert s.intended(3_000) == 1_000_000_000_000


def test_rebase_has_one_per_second_floor():
    s = Schedule(100.0, start_ns=0).rebased(0.0, now_ns=10)
    assert s.rate == 1.0 and s.start_ns == 10


@pytest.mark.parametrize("rate", [0, -5])
def test_rate_must_be_positive(rate):
    with pytest.raises(ValueError, match="rate must be > 0"):
        Schedule(rate, 0)
