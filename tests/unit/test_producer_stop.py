"""Stopping producers hands over from the pacer before the drain starts.

The drain compares received with acknowledged, and the consumers are stopped once it
passes. If producers are reported stopped while the pacer is still handing over a
batch, or while a serviced batch's acks are still being counted, the drain can pass
with part of that batch still on its way: acknowledged afterwards and never received,
it shows as lost (an overdriven loopback run once reported ``lost: 500``, one receive
batch). Each interleaving is driven explicitly here.
"""

from __future__ import annotations

import threading
import time

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.engine.pacing import Schedule
from pytest_brokerperf.engine.worker import ProducerSpec, Worker, WorkerAssignment


def test_a_loopback_batch_stays_outstanding_until_its_acks_are_counted() -> None:
    depth_seen: list[int] = []

    def on_ack(value: bytes, latency_ns: int | None) -> None:
        depth_seen.append(producer.queue_depth())

    def on_acks(values: list[bytes], ack_ns: int) -> None:
        depth_seen.append(producer.queue_depth())

    on_ack.many = on_acks  # type: ignore[attr-defined]
    producer = LoopbackDriver().producer("stop-depth", "p", on_ack, lambda v, r: None)
    assert producer.send_many([b"m" * 64] * 20, None) == 20  # the batch path (16+)
    producer.service()
    for _ in range(3):  # one by one (fewer than 16)
        producer.send(b"m" * 64, None)
    producer.service()
    assert depth_seen == [20, 3, 3, 3]
    assert producer.queue_depth() == 0


class _GatedClient:
    """A batch client whose next ``send_many`` waits at a gate (the pacer is then past
    its stop check, about to hand over a batch) and whose ``service`` takes its queue
    before acknowledging it, as a client with a delivery queue does."""

    def __init__(self, on_ack) -> None:  # type: ignore[no-untyped-def]
        self.on_ack = on_ack
        self.pending: list[bytes] = []
        self.handed = 0
        self.in_send = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, value: bytes, key: bytes | None) -> None:
        self.send_many([value], None)

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        if not self.release.is_set():
            self.in_send = True
            self.entered.set()
            self.release.wait(60)
            self.in_send = False
        self.pending.extend(values)
        self.handed += len(values)
        return len(values)

    def service(self) -> None:
        pending, self.pending = self.pending, []
        for v in pending:
            self.on_ack(v, 1000)

    def queue_depth(self) -> int:
        return len(self.pending)

    def flush(self, timeout_s: float) -> int:
        self.service()
        return 0

    def close(self) -> None:
        self.service()


def test_producers_are_not_reported_stopped_while_the_pacer_hands_over_a_batch() -> None:
    clients: list[_GatedClient] = []

    class _Driver(LoopbackDriver):
        def producer(self, topic, client_id, on_ack, on_error):  # type: ignore[override]
            clients.append(_GatedClient(on_ack))
            return clients[-1]

    w = Worker(WorkerAssignment(worker_id=3, driver=_Driver(), producers=[ProducerSpec(0, "t")],
                                payloads=[b"\x00" * 32 + b"p" * 32]))
    # 10k msg/s from 1 s ago: a batch is due at once
    w.pending_schedule = Schedule(10_000.0, time.monotonic_ns() - 1_000_000_000)
    w.create_producers()
    client = clients[0]
    try:
        assert client.entered.wait(30), "the pacer never sent"
        # the pacer is past its stop check, inside send_many; nothing is queued yet, so
        # a queue depth read from this thread says 0
        assert client.queue_depth() == 0
        res = w.stop_producers(0.3)
        assert client.in_send  # the gate is still closed: the pacer is mid-batch
        assert res.get("pacer_stopped") is False, res
        assert any("pacer did not confirm its stop" in e for e in w.errors), w.errors
        client.release.set()
        res = w.stop_producers(30.0)
        # now the pacer confirmed: nothing is being handed over, everything handed over
        # was acknowledged and counted before stop_producers returned
        assert res == {"outstanding": 0, "pacer_stopped": True}
        assert not client.in_send
        assert client.handed > 0 and w.pub_counters.acked == client.handed
    finally:
        client.release.set()
        w.stop_event.set()
        assert w.producer_thread is not None
        w.producer_thread.join(30)
    assert not w.producer_thread.is_alive()
