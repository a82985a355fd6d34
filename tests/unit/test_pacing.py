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


def test_a_rate_change_carries_the_slots_already_due() -> None:
    """The slots due under the old rate and not yet sent keep their intended times and
    go first; the new rate's slots start at the change (they were dropped before)."""
    old = Schedule(1000.0, start_ns=0)
    for _ in range(500):  # the sender stalled: 500 of the 1001 slots due at 1 s were sent
        old.take()
    new = old.rebased(2000.0, now_ns=1_000_000_000)
    assert new.owed_count() == 501
    assert new.due(1_000_000_000) == 502  # 501 owed + the new rate's first slot
    owed = [new.take() for _ in range(501)]
    assert owed[0] == 500_000_000 and owed[-1] == 1_000_000_000
    assert new.next_ns() == 1_000_000_000 and new.take() == 1_000_000_000
    assert new.take() == 1_000_500_000  # then the new rate: 0.5 ms apart
    assert new.owed_count() == 0


def test_rate_changes_chain_their_owed_slots_in_order() -> None:
    s = Schedule(10.0, start_ns=0)  # nothing sent: slots at 0, 100, 200 ms due at 250 ms
    s = s.rebased(100.0, now_ns=250_000_000)
    s = s.rebased(1.0, now_ns=260_000_000)  # + 2 of the 100 msg/s rate (250, 260 ms)
    times = [s.take() for _ in range(s.due(260_000_000))]  # + the 1 msg/s rate's first
    assert times == [0, 100_000_000, 200_000_000, 250_000_000, 260_000_000, 260_000_000]
    assert s.due(260_000_000) == 0 and s.next_ns() == 1_260_000_000


def test_a_sender_on_time_owes_nothing_at_a_rate_change() -> None:
    s = Schedule(1000.0, start_ns=0)
    while s.due(10_000_000):
        s.take()
    assert s.rebased(10.0, now_ns=10_000_000).owed_count() == 0


def test_a_batch_of_due_slots_is_claimed_in_one_call_with_the_same_times():
    # the pacer claims every due slot at once (take_many), owed slots of an earlier
    # rate first, exactly as one take() per message would
    one, many = Schedule(1000.0, 0), Schedule(1000.0, 0)
    singles = [one.take() for _ in range(5)]
    assert many.take_many(5) == singles == [0, 1_000_000, 2_000_000, 3_000_000, 4_000_000]
    one, many = one.rebased(10.0, 10_000_000), many.rebased(10.0, 10_000_000)
    assert one.due(10_000_000) == many.due(10_000_000) == 7  # 6 owed + the new rate's first
    assert many.take_many(7) == [one.take() for _ in range(7)]
    assert many.next_ns() == one.next_ns()
