"""The engine's batch paths give the same record as one call per message.

The pacer hands each batch of due messages to a driver's ``send_many`` in one call, a
driver acknowledges a batch through ``on_ack.many``, and consumers account a received
batch as arrays. Each must leave the same latency views, counters and delivery ledgers
as the per-message path would: same sequences, same intended times, same duplicates
and reordering counts.
"""

from __future__ import annotations

import random
import threading
from array import array

import numpy as np
import pytest

from pytest_brokerperf.brokers.driver import batch_ack
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.core import header
from pytest_brokerperf.engine.delivery import AckLedger, ReceiveLedger
from pytest_brokerperf.engine.pacing import Schedule
from pytest_brokerperf.engine.worker import (
    ProducerSpec,
    Worker,
    WorkerAssignment,
    _Counters,
)
from tests.support.engine import publish_side

MS = 1_000_000


def _bits(exported: dict) -> dict:
    return {k: int.from_bytes(v, "little") for k, v in exported.items()}


@pytest.mark.parametrize("shape", ["random", "rising", "rising-with-gaps", "interleaved"])
def test_ledger_batches_count_as_one_call_per_message(shape: str) -> None:
    rnd = random.Random(7)
    for _ in range(150):
        one_a, many_a = AckLedger(), AckLedger()
        one_r, many_r = ReceiveLedger(), ReceiveLedger()
        new_one = new_many = 0
        nxt = {0: 0, 1: 0, 2: 0}
        for _ in range(4):
            n = rnd.randint(1, 80)
            pids = [rnd.randint(0, 2) for _ in range(n)]
            if shape == "random":
                seqs = [rnd.randint(0, rnd.choice([20, 100, 20_000])) for _ in range(n)]
            elif shape == "interleaved":  # one producer's acks from several partitions
                pids = [pids[0]] * n
                run = list(range(nxt[pids[0]], nxt[pids[0]] + n))
                k = rnd.randint(2, 16)
                seqs = [s for i in range(k) for s in run[i::k]]
                nxt[pids[0]] += n
            else:
                pids = [pids[0]] * n  # one producer's run, as a consumer batch mostly is
                step = 1 if shape == "rising" else rnd.randint(1, 9)
                start = nxt[pids[0]] - rnd.randint(0, 3)  # may overlap the last batch
                seqs = [max(0, start) + step * i for i in range(n)]
                nxt[pids[0]] = seqs[-1] + 1
            parts = [rnd.randint(0, 2) for _ in range(n)]
            for p, s, q in zip(pids, seqs, parts, strict=True):
                one_a.ack(p, s)
                new_one += one_r.receive("sub", p, s, q)
            many_a.ack_many(np.array(pids, dtype=np.int64), np.array(seqs, dtype=np.int64))
            new_many += many_r.receive_many("sub", np.array(pids, dtype=np.int64),
                                            np.array(seqs, dtype=np.int64), np.array(parts))
        assert many_a.duplicate_acks == one_a.duplicate_acks
        assert _bits(many_a.export()) == _bits(one_a.export())
        assert new_many == new_one
        a, b = one_r.export(), many_r.export()
        assert (b["duplicates"], b["reordered"]) == (a["duplicates"], a["reordered"])
        assert _bits(b["bitmaps"]) == _bits(a["bitmaps"])


@pytest.mark.parametrize("rate", [3.0, 1000.0, 7919.3, 333_333.3, 2_000_000.0])
def test_take_many_gives_the_intended_times_take_gives(rate: float) -> None:
    one, many = Schedule(rate, 1_234_567_891), Schedule(rate, 1_234_567_891)
    expected = [one.take() for _ in range(5000)]
    got = many.take_many(7) + many.take_many(2993) + many.take_many(2000)
    assert got == expected


def _value(kind: int, pid: int, seq: int, intended: int, sent: int, size: int = 64) -> bytes:
    return header.pack(header.MAGIC, header.VERSION, kind, pid, seq, intended,
                       sent) + b"t" * (size - header.HEADER_SIZE)


@pytest.mark.parametrize("sizes", ["equal", "mixed", "large"])
def test_a_batch_ack_records_what_one_ack_per_message_records(sizes: str) -> None:
    values = [_value(header.KIND_PROBE if i == 3 else header.KIND_DATA, i % 2, i // 2,
                     i * MS, i * MS + 250_000 * (i % 5),
                     size={"equal": 64, "large": 1024}.get(sizes, 40 + 8 * (i % 4)))
              for i in range(40)]
    ack_ns = 90 * MS
    one, many = publish_side(), publish_side()
    on_ack = one._ack_callback()
    for v in values:
        on_ack(v, ack_ns - header.unpack(v)[6])
    on_acks = batch_ack(many._ack_callback())
    assert on_acks is not None
    on_acks(values, ack_ns)
    assert {n: list(b) for n, b in many._pub_local.items()} == {
        n: list(b) for n, b in one._pub_local.items()}
    for name in ("acked", "acked_bytes", "probe_acked"):
        assert getattr(many.pub_counters, name) == getattr(one.pub_counters, name), name
    assert _bits(many.ack_ledger.export()) == _bits(one.ack_ledger.export())


@pytest.mark.parametrize("form", ["ack_ns", "latency_ns", "sent_ns"])
def test_per_message_ack_times_record_what_one_ack_per_message_records(form: str) -> None:
    """Real clients acknowledge each message at its own moment (librdkafka's latency,
    pulsar-client's callback time, pika's confirm after its own socket write): a batch
    of such acks leaves what one ``on_ack`` call per message leaves."""
    values = [_value(header.KIND_PROBE if i == 5 else header.KIND_DATA, i % 3, i // 3,
                     i * MS, i * MS + 100_000 * (i % 7), size=1024) for i in range(50)]
    sents = [header.unpack(v)[6] for v in values]
    wire = [s + 30_000 * (i % 4) for i, s in enumerate(sents)]  # the IO thread's write
    lats = [2 * MS + 17_000 * i for i in range(len(values))]
    one, many = publish_side(), publish_side()
    on_ack = one._ack_callback()
    on_acks = batch_ack(many._ack_callback())
    assert on_acks is not None
    if form == "ack_ns":
        acks = [s + lat for s, lat in zip(sents, lats, strict=True)]
        for v, s, a in zip(values, sents, acks, strict=True):
            on_ack(v, a - s)
        on_acks(values, np.array(acks, dtype=np.int64))
    elif form == "latency_ns":
        for v, lat in zip(values, lats, strict=True):
            on_ack(v, lat)
        on_acks(values, latency_ns=lats)
    else:
        for v, lat, w in zip(values, lats, wire, strict=True):
            on_ack(v, lat, w)
        on_acks(values, latency_ns=np.array(lats), sent_ns=wire)
    assert {n: list(b) for n, b in many._pub_local.items()} == {
        n: list(b) for n, b in one._pub_local.items()}
    for name in ("acked", "acked_bytes", "probe_acked"):
        assert getattr(many.pub_counters, name) == getattr(one.pub_counters, name), name
    assert _bits(many.ack_ledger.export()) == _bits(one.ack_ledger.export())


def test_a_batch_ack_without_a_time_is_refused() -> None:
    on_acks = batch_ack(publish_side()._ack_callback())
    assert on_acks is not None
    with pytest.raises(TypeError, match="ack_ns or latency_ns"):
        on_acks([_value(header.KIND_DATA, 0, 0, 0, 1)])


def test_a_received_batch_is_accounted_as_message_by_message() -> None:
    # data from two producers on two partitions, a probe, a foreign and a short message,
    # a redelivery and one message late on its partition
    batch = [(_value(header.KIND_DATA, i % 2, i // 2, i * MS, i * MS + 5), i % 2)
             for i in range(30) if i != 10]  # producer 0's sequence 5 comes last
    batch += [(_value(header.KIND_PROBE, 0, -1, 0, 0), 0), (b"\x00" * 64, 1), (b"short", 0),
              (batch[4][0], 0), (_value(header.KIND_DATA, 0, 5, 0, 7), 0)]
    now = 200 * MS

    def per_message() -> tuple[_Counters, ReceiveLedger, dict[str, list[int]]]:
        c, ledger = _Counters(), ReceiveLedger()
        e2e_l, e2e_r = array("q"), array("q")
        received = 0
        for value, partition in batch:
            if len(value) < 32:
                c.foreign += 1
                continue
            magic, _, kind, pid, seq, intended, sent = header.unpack(value)
            if magic != header.MAGIC:
                c.foreign += 1
                continue
            if kind == header.KIND_PROBE:
                c.probes["s"] = c.probes.get("s", 0) + 1
                continue
            if now - sent <= 0:
                c.negative_e2e += 1
            e2e_l.append((now - sent) // 1000)
            e2e_r.append((now - intended) // 1000)
            if ledger.receive("s", pid, seq, partition):
                received += 1
            else:
                c.redelivered += 1
            c.received_bytes += len(value)
        c.received = received
        return c, ledger, {"l": list(e2e_l), "r": list(e2e_r)}

    c1, ledger1, views1 = per_message()
    c2, ledger2 = _Counters(), ReceiveLedger()
    e2e_l, e2e_r = array("q"), array("q")
    received, redelivered, nbytes = Worker._consume_batch(batch, now, "s", c2, ledger2,
                                                          e2e_l, e2e_r)
    assert (received, redelivered, nbytes) == (c1.received, c1.redelivered,
                                               c1.received_bytes)
    assert (c2.foreign, c2.probes, c2.negative_e2e) == (c1.foreign, c1.probes,
                                                        c1.negative_e2e)
    assert {"l": list(e2e_l), "r": list(e2e_r)} == views1
    a, b = ledger1.export(), ledger2.export()
    assert (b["duplicates"], b["reordered"]) == (a["duplicates"], a["reordered"]) == (
        {"s": 1}, {"s": 1})
    assert _bits(b["bitmaps"]) == _bits(a["bitmaps"])


def test_loopback_send_many_assigns_partitions_as_send_does() -> None:
    drv = LoopbackDriver(partitions=3)
    one = drv.producer("t-one", "p", lambda *a: None, lambda *a: None)
    many = drv.producer("t-many", "p", lambda *a: None, lambda *a: None)
    q_one = drv.consumer("t-one", "s", "c")
    q_many = drv.consumer("t-many", "s", "c")
    values = [bytes([i]) * 40 for i in range(10)]
    one.send(values[0], None)
    many.send(values[0], None)
    for v in values[1:]:
        one.send(v, None)
    assert many.send_many(values[1:4], None) == 3
    assert many.send_many(values[4:], None) == 6
    assert q_many.receive(100, 0.01) == q_one.receive(100, 0.01)


def test_loopback_send_many_takes_only_what_fits() -> None:
    drv = LoopbackDriver(max_queue=5)
    p = drv.producer("t-full", "p", lambda *a: None, lambda *a: None)
    assert p.send_many([b"x" * 40] * 8, None) == 5
    assert p.send_many([b"x" * 40], None) == 0
    assert p.queue_depth() == 5


class _BatchClient:
    """Records every call the pacer makes; acks nothing (service is a no-op)."""

    def __init__(self) -> None:
        self.batches: list[list[bytes]] = []  # send_many calls
        self.calls: list[list[bytes]] = []  # every call in order (a send is a list of 1)

    def send(self, value: bytes, key: bytes | None) -> None:
        # fewer than VECTOR_MIN due messages go one by one (numpy's per-call cost)
        self.calls.append([value])

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        self.batches.append(list(values))
        self.calls.append(list(values))
        return len(values)

    def service(self) -> None:
        pass

    def queue_depth(self) -> int:
        return 0

    def flush(self, timeout_s: float) -> int:
        return 0

    def close(self) -> None:
        pass


def test_the_pacer_sends_due_messages_in_batches() -> None:
    clients: list[_BatchClient] = []

    class _Driver(LoopbackDriver):
        def producer(self, topic, client_id, on_ack, on_error):  # type: ignore[override]
            clients.append(_BatchClient())
            return clients[-1]

    a = WorkerAssignment(worker_id=0, driver=_Driver(),
                         producers=[ProducerSpec(0, "t"), ProducerSpec(1, "t")],
                         consumers=[], payloads=[b"\x00" * 32 + b"p" * 32])
    w = Worker(a)
    # 10k msg/s from 1 s ago: about 10 000 messages are already due when the pacer starts
    start = header_now = __import__("time").monotonic_ns() - 1_000_000_000
    w.pending_schedule = Schedule(10_000.0, start)
    done = threading.Event()

    def stop_when_due_sent() -> None:
        while sum(len(b) for c in clients for b in c.batches) < 10_000:
            done.wait(0.01)
        w.stop_event.set()

    w.create_producers()
    stopper = threading.Thread(target=stop_when_due_sent, daemon=True)
    stopper.start()
    stopper.join(30)
    assert w.producer_thread is not None
    w.producer_thread.join(10)
    assert not w.errors, w.errors
    batched = [header.unpack(v) for c in clients for b in c.batches for v in b]
    sent = [header.unpack(v) for c in clients for b in c.calls for v in b]
    calls = sum(len(c.batches) for c in clients)
    assert len(batched) >= 10_000
    assert calls <= len(batched) // 50, f"{calls} calls for {len(batched)} messages"
    # every message still carries its own sequence and intended time
    for pid, c in enumerate(clients):
        seqs = [header.unpack(v)[4] for b in c.calls for v in b]
        assert seqs == list(range(len(seqs)))
        assert all(header.unpack(v)[3] == pid for b in c.calls for v in b)
    intended = sorted(s[5] for s in sent)
    ref = Schedule(10_000.0, start)
    assert intended == [ref.take() for _ in range(len(intended))]
    assert all(s[6] >= s[5] or s[5] > header_now for s in sent)


def test_loopback_topics_stay_whole_in_one_worker() -> None:
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.engine.workers import assign_topics
    from pytest_brokerperf.workload.model import Workload

    wl = Workload(name="w", topics=4, partitions_per_topic=1, message_size=64,
                  subscriptions_per_topic=2, producers_per_topic=2,
                  consumer_per_subscription=1, producer_rate=100,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    topics = [f"t{i}" for i in range(4)]
    subs = {t: [f"{t}-s0", f"{t}-s1"] for t in topics}
    plan = RunPlan(rate=100, period_s=1, warmup_max_s=1, measure_s=1, workers=2)
    out = assign_topics(wl, plan, LoopbackDriver(), topics, subs, [b"x" * 64], "bp")
    assert len(out) == 2
    for a in out:
        mine = {p.topic for p in a.producers}
        assert mine == {c.topic for c in a.consumers} and len(mine) == 2
    assert sorted(t for a in out for t in {p.topic for p in a.producers}) == topics


def test_two_loopback_workers_deliver_everything() -> None:
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    wl = Workload(name="w2", topics=2, partitions_per_topic=2, message_size=256,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=4000,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=4000, period_s=0.5, warmup_max_s=1.0, warmup_min_periods=1,
                   measure_s=1.0, workers=2, topic_prefix="loop-two", probe_timeout_s=20)
    out = run_workload(LoopbackDriver(partitions=2), wl, plan,
                       payloads=wl.payloads(None, seed=5))
    assert {w.worker for p in out.periods for w in p.workers} == {0, 1}
    assert out.delivery.acknowledged > 0 and out.delivery.lost == 0
    assert out.delivery.received == out.delivery.acknowledged
    assert out.delivery.duplicates == 0 and out.delivery.reordered == 0
