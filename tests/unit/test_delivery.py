"""Delivery accounting: lost, duplicates and reordering across workers."""

import pytest

from pytest_brokerperf.engine.delivery import AckLedger, ReceiveLedger, reconcile


def _acks(pid, seqs):
    a = AckLedger()
    for s in seqs:
        a.ack(pid, s)
    return a


def test_all_received_is_zero_loss():
    acks = _acks(0, range(5000))
    r = ReceiveLedger()
    for s in range(5000):
        r.receive("sub", 0, s, s % 4)
    rep = reconcile([acks.export()], [r.export()], {0: ["sub"]})
    assert (rep.acknowledged, rep.received, rep.lost, rep.duplicates, rep.reordered) == (
        5000, 5000, 0, 0, 0)


def test_lost_is_acked_minus_received_per_subscription():
    acks = _acks(0, range(100))
    a, b = ReceiveLedger(), ReceiveLedger()
    for s in range(100):
        if s not in (3, 77):
            a.receive("s1", 0, s, 0)
        b.receive("s2", 0, s, 0)
    rep = reconcile([acks.export()], [a.export(), b.export()], {0: ["s1", "s2"]})
    by = {s.subscription: s for s in rep.subscriptions}
    assert by["s1"].lost == 2 and by["s2"].lost == 0 and rep.lost == 2


def test_duplicates_within_and_across_workers():
    acks = _acks(0, range(10))
    w1, w2 = ReceiveLedger(), ReceiveLedger()
    for s in range(10):
        w1.receive("sub", 0, s, 0)
    w1.receive("sub", 0, 4, 0)  # redelivered on the same worker
    w2.receive("sub", 0, 5, 1)  # and one on another worker after a rebalance
    w2.receive("sub", 0, 6, 1)
    rep = reconcile([acks.export()], [w1.export(), w2.export()], {0: ["sub"]})
    assert rep.duplicates == 3 and rep.lost == 0 and rep.received == 10


def test_order_checked_per_producer_and_partition_only():
    r = ReceiveLedger()
    # interleaving partitions is legal; going backwards within one partition is not
    for seq, part in [(0, 0), (2, 1), (1, 0), (3, 1), (5, 0), (4, 0)]:
        r.receive("sub", 7, seq, part)
    rep = reconcile([_acks(7, range(6)).export()], [r.export()], {7: ["sub"]})
    assert rep.reordered == 1


def test_received_but_never_acked_is_reported_not_lost():
    r = ReceiveLedger()
    for s in range(3):
        r.receive("sub", 0, s, 0)
    rep = reconcile([_acks(0, [0, 1]).export()], [r.export()], {0: ["sub"]})
    sub = rep.subscriptions[0]
    assert sub.lost == 0 and sub.unacked_received == 1


def test_large_sequences_grow_bitmaps():
    acks = _acks(1, [0, 1_000_000])
    r = ReceiveLedger()
    r.receive("sub", 1, 1_000_000, 0)
    rep = reconcile([acks.export()], [r.export()], {1: ["sub"]})
    assert rep.acknowledged == 2 and rep.lost == 1


def test_a_redelivery_is_no_progress() -> None:
    r = ReceiveLedger()
    assert r.receive("sub", 0, 7, 0) is True
    assert r.receive("sub", 0, 7, 0) is False  # the worker counts it as redelivered
    assert r.receive("other", 0, 7, 0) is True  # another subscription's own copy


def test_missing_messages_are_unconfirmed_while_still_arriving_lost_once_settled() -> None:
    acks = AckLedger()
    r = ReceiveLedger()
    for s in range(10):
        acks.ack(0, s)
    for s in range(7):
        r.receive("sub", 0, s, 0)
    settled = reconcile([acks.export()], [r.export()], {0: ["sub"]}, settled=True)
    assert (settled.lost, settled.unconfirmed, settled.received) == (3, 0, 7)
    arriving = reconcile([acks.export()], [r.export()], {0: ["sub"]}, settled=False)
    assert (arriving.lost, arriving.unconfirmed) == (0, 3)
    assert arriving.as_dict()["unconfirmed"] == 3 and arriving.as_dict()["lost"] == 0


def test_the_drain_tells_still_arriving_from_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_brokerperf.engine import workers as engine_workers

    received = iter(range(1, 10_000))  # a new distinct message at every look
    monkeypatch.setattr(engine_workers, "broadcast", lambda workers, cmd: [
        {"totals": {"acked": 100_000, "received": next(received)}}])
    assert engine_workers.await_drain([], 1, timeout_s=0.5) == (False, False)
    monkeypatch.setattr(engine_workers, "DRAIN_IDLE_S", 0.2)
    monkeypatch.setattr(engine_workers, "broadcast", lambda workers, cmd: [
        {"totals": {"acked": 10, "received": 7}}])  # stalled: 3 will never come
    assert engine_workers.await_drain([], 1, timeout_s=0.5) == (False, True)
    monkeypatch.setattr(engine_workers, "broadcast", lambda workers, cmd: [
        {"totals": {"acked": 10, "received": 10}}])
    assert engine_workers.await_drain([], 1, timeout_s=0.5) == (True, True)
