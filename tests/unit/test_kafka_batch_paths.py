"""The Kafka driver's batch paths record what its per-message paths record.

``send_many`` queues in order and stops at librdkafka's ``BufferError`` with the count
taken; ``service`` hands 16 or more delivery reports to the engine as one batch with
librdkafka's latency per message; ``receive`` reads a consumed batch with C loops. Each
must leave the latency views, counters and ledgers the one-by-one path leaves.
"""

from __future__ import annotations

import random
import time
from collections import deque
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from confluent_kafka import KafkaError, Message

from pytest_brokerperf.brokers.driver import batch_ack
from pytest_brokerperf.brokers.kafka.driver import (
    _KafkaConsumer,
    _KafkaProducer,
    latencies_ns,
    latency_ns,
)
from pytest_brokerperf.core import header
from pytest_brokerperf.core.errors import DriverError
from pytest_brokerperf.engine.delivery import AckLedger
from tests.support.engine import publish_side

MS = 1_000_000


def _value(kind: int, pid: int, seq: int, intended: int, sent: int) -> bytes:
    return header.pack(header.MAGIC, header.VERSION, kind, pid, seq, intended,
                       sent) + b"t" * (1024 - header.HEADER_SIZE)


def _producer(on_ack: Any, batch: bool) -> _KafkaProducer:
    """A producer without a librdkafka handle: only the report queues and callbacks."""
    p = _KafkaProducer.__new__(_KafkaProducer)
    p._done, p._failed = [], deque()
    p._on_ack = on_ack
    p._on_acks = batch_ack(on_ack) if batch else None
    p._on_error = lambda value, why: None
    return p


def _deliver(p: _KafkaProducer, reports: Any) -> None:
    """What the poll thread's delivery callback adds, report by report."""
    for report in reports:
        p._done.extend(report)


def test_latency_is_rounded_to_librdkafkas_microsecond() -> None:
    assert latency_ns(0.001235) == 1_235_000  # int(0.001235 * 1e9) is 1234999
    assert latency_ns(None) is None
    rnd = random.Random(3)
    lats = [rnd.randint(1, 5_000_000) / 1e6 for _ in range(2000)] + [None]
    assert latencies_ns(lats).tolist() == [latency_ns(x) for x in lats[:-1]] + [-1000]


def _reports(n: int, seed: int) -> list[tuple[bytes, float | None, int]]:
    """What the delivery callback queues: value, ``Message.latency()``, the clock then
    (produce() ran up to 200 µs after the header's send stamp, as in a send_many chunk)."""
    rnd = random.Random(seed)
    out: list[tuple[bytes, float | None, int]] = []
    for i in range(n):
        sent = i * MS + rnd.randint(0, 400_000)
        lat_us = rnd.randint(50, 90_000)
        now = sent + rnd.randint(0, 200_000) + lat_us * 1000 + rnd.randint(0, 999)
        out.append((_value(header.KIND_PROBE if i == 7 else header.KIND_DATA, i % 3, i // 3,
                           i * MS, sent), lat_us / 1e6, now))
    return out


def _counting(cb: Any) -> list[int]:
    """Wrap ``cb.many`` so each batch's size is recorded."""
    calls: list[int] = []
    inner = cb.many

    def counted(values: list[bytes], *a: Any, **kw: Any) -> None:
        calls.append(len(values))
        inner(values, *a, **kw)

    cb.many = counted
    return calls


@pytest.mark.parametrize("reports", [16, 40, 500])
def test_a_batch_of_delivery_reports_records_what_one_by_one_records(reports: int) -> None:
    items = _reports(reports, reports)
    one_w, many_w = publish_side(), publish_side()
    many_cb = many_w._ack_callback()
    calls = _counting(many_cb)
    one, many = _producer(one_w._ack_callback(), False), _producer(many_cb, True)
    _deliver(one, items)
    _deliver(many, items)
    one.service()
    many.service()
    assert calls == [reports]
    assert not one._done and not many._done
    assert {n: list(b) for n, b in many_w._pub_local.items()} == {
        n: list(b) for n, b in one_w._pub_local.items()}
    for name in ("acked", "acked_bytes", "probe_acked"):
        assert getattr(many_w.pub_counters, name) == getattr(one_w.pub_counters, name), name
    assert many_w.ack_ledger.export() == one_w.ack_ledger.export()


def test_a_report_without_latency_is_stamped_by_the_engine() -> None:
    items = _reports(30, 1)
    items[12] = (items[12][0], None, items[12][2])  # librdkafka had no enqueue time
    w = publish_side()
    cb = w._ack_callback()
    calls = _counting(cb)
    p = _producer(cb, True)
    _deliver(p, items)
    p.service()
    assert calls == [29]  # all but the unstamped one (the probe is counted inside)
    assert w.pub_counters.acked == 29 and w.pub_counters.probe_acked == 1
    assert w.ack_ledger.export() == _all_acked(items).export()


def _all_acked(items: list[tuple[bytes, float | None, int]]) -> AckLedger:
    ledger = AckLedger()
    for v, _, _ in items:
        _, _, kind, pid, seq, _, _ = header.unpack(v)
        if kind == header.KIND_DATA:
            ledger.ack(pid, seq)
    return ledger


def test_fewer_than_sixteen_reports_go_one_by_one() -> None:
    w = publish_side()
    cb = w._ack_callback()
    cb.many = lambda *a, **k: pytest.fail("a batch of 15 went through on_acks")  # type: ignore[attr-defined]
    p = _producer(cb, True)
    _deliver(p, [(_value(header.KIND_DATA, 0, i, i, i + 1), 0.002, 5 * MS + i)
                 for i in range(15)])
    p.service()
    assert w.pub_counters.acked == 15
    assert list(w._pub_local["publish_latency"]) == [2000] * 15
    # sent when produce() took it (3 ms + i), intended at i: 3 ms of publish delay
    assert list(w._pub_local["publish_delay"]) == [3000] * 15


def test_an_ack_is_timed_from_produce_not_from_the_chunk_stamp() -> None:
    """A message produced 150 µs after its send_many chunk was stamped: publish latency
    is librdkafka's produce->ack time, the 150 µs are publish delay, and the response
    ends at the report's own time."""
    stamp, produced, lat_us = 10 * MS, 10 * MS + 150_000, 2_000
    now = produced + lat_us * 1000
    items = [(_value(header.KIND_DATA, 0, i, 9 * MS, stamp), lat_us / 1e6, now)
             for i in range(20)]
    for batch in (False, True):
        w = publish_side()
        p = _producer(w._ack_callback(), batch)
        _deliver(p, items)
        p.service()
        assert set(w._pub_local["publish_latency"]) == {2_000}
        assert set(w._pub_local["publish_delay"]) == {1_150}
        assert set(w._pub_local["publish_response"]) == {3_150}


@pytest.mark.parametrize("keys", [None, "keyed"])
def test_send_many_stops_at_buffer_error_with_the_count_taken(keys: str | None) -> None:
    produced: list[tuple[bytes, bytes | None]] = []

    def produce(topic: str, value: bytes, key: bytes | None = None) -> None:
        if len(produced) == 5:
            raise BufferError("Local: Queue full")
        produced.append((value, key))

    p = _KafkaProducer.__new__(_KafkaProducer)
    p._produce, p._topic = produce, "t"
    values = [bytes([i]) * 8 for i in range(8)]
    key_list = None if keys is None else [b"k%d" % i for i in range(8)]
    assert p.send_many(values[:3], None if key_list is None else key_list[:3]) == 3
    assert p.send_many(values[3:], None if key_list is None else key_list[3:]) == 2
    assert p.send_many(values[5:], None if key_list is None else key_list[5:]) == 0
    assert [v for v, _ in produced] == values[:5]
    assert [k for _, k in produced] == ([None] * 5 if key_list is None else key_list[:5])


def test_send_many_on_librdkafka_takes_what_its_queue_holds() -> None:
    from pytest_brokerperf.brokers.kafka.driver import _KafkaProducer as P

    failed: list[bytes] = []
    p = P({"bootstrap.servers": "127.0.0.1:1", "queue.buffering.max.messages": 5,
           "log_level": 0}, "t", lambda *a: None, lambda v, why: failed.append(v))
    try:
        assert p.send_many([b"x" * 100] * 8, None) == 5
        assert p.send_many([b"x" * 100], [b"k"]) == 0
        # exactly the five taken are queued: purged, each comes back once as a failure
        # (len(producer) would also count librdkafka's connection-refused events)
        p._p.purge()
        deadline = time.monotonic() + 10
        while len(failed) < 5 and time.monotonic() < deadline:
            p.service()
            time.sleep(0.01)
        time.sleep(0.2)
        p.service()
        assert len(failed) == 5
    finally:
        p._stop.set()
        p._poller.join(5.0)
        p._p.purge()


class _FakeConsumer:
    def __init__(self, msgs: list[Any]) -> None:
        self.msgs = msgs

    def poll(self, timeout: float) -> Any:
        return self.msgs.pop(0) if self.msgs else None

    def consume(self, n: int, timeout: float) -> list[Any]:
        out, self.msgs = self.msgs[:n], self.msgs[n:]
        return out

    def commit(self, asynchronous: bool = True) -> None:
        pass


def _consumer(msgs: list[Any]) -> _KafkaConsumer:
    c = _KafkaConsumer.__new__(_KafkaConsumer)
    fake = _FakeConsumer(msgs)
    c._c, c._poll, c._consume = fake, fake.poll, fake.consume  # type: ignore[assignment]
    c._paused, c._auto_commit = False, False
    return c


def test_receive_returns_values_and_partitions_and_drops_non_fatal_errors() -> None:
    msgs = [Message(topic="t", partition=i % 4, value=b"v%d" % i) for i in range(30)]
    eof = Message(topic="t", partition=2, error=KafkaError(KafkaError._PARTITION_EOF))
    c = _consumer([*msgs[:10], eof, *msgs[10:]])
    got = c.receive(500, 0.0)
    assert got == [(m.value(), m.partition()) for m in msgs]
    assert c.receive(500, 0.0) == []


def test_receive_stops_at_a_fatal_error() -> None:
    fatal = Message(topic="t", partition=0,
                    error=KafkaError(KafkaError._FATAL, "fenced", fatal=True))
    c = _consumer([Message(topic="t", partition=0, value=b"v"), fatal])
    with pytest.raises(DriverError, match="fatal"):
        c.receive(500, 0.0)
