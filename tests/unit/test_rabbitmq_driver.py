"""The pika driver's confirm bookkeeping and threading, against fake pika connections.

No broker: a fake ``SelectConnection`` runs its IO loop in the producer's IO thread like
pika's, so these tests show that ``send()`` never blocks the pacer, that publisher
confirms are asynchronous (never ``BlockingChannel.confirm_delivery``), and that
``Basic.Ack``/``Basic.Nack`` with ``multiple=True`` settle every tag up to theirs.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any, ClassVar

import pika
import pytest
from pika.frame import Method
from pika.spec import Basic, Connection

from pytest_brokerperf.brokers.driver import QueueFull
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
from pytest_brokerperf.brokers.rabbitmq.driver import ConfirmTracker, RabbitMQDriver

# --------------------------------------------------------------------- ConfirmTracker


def test_multiple_ack_settles_every_tag_up_to_it() -> None:
    t = ConfirmTracker()
    tags = [t.add(f"m{i}".encode(), 100 + i) for i in range(10)]
    assert tags == list(range(1, 11)) and len(t) == 10
    assert [v for v, _ in t.settle(4, multiple=True)] == [b"m0", b"m1", b"m2", b"m3"]
    assert len(t) == 6
    assert t.settle(3, multiple=True) == []  # already settled
    assert t.settle(4, multiple=False) == []


def test_single_acks_out_of_order_then_multiple() -> None:
    t = ConfirmTracker()
    for i in range(6):
        t.add(bytes([i]), i)
    assert t.settle(3, multiple=False) == [(b"\x02", 2)]
    assert t.settle(3, multiple=False) == []  # twice: nothing
    assert t.settle(1, multiple=False) == [(b"\x00", 0)]
    assert len(t) == 4
    # multiple up to 5 settles 2, 4, 5 (3 was settled singly)
    assert [v for v, _ in t.settle(5, multiple=True)] == [b"\x01", b"\x03", b"\x04"]
    assert len(t) == 1
    assert t.settle(99, multiple=False) == []  # never published
    assert [v for v, _ in t.settle(99, multiple=True)] == [b"\x05"]
    assert len(t) == 0 and t.next_tag == 7


def test_tag_zero_multiple_settles_all_and_settle_all_empties() -> None:
    t = ConfirmTracker()
    for i in range(3):
        t.add(b"x", i)
    assert len(t.settle(0, multiple=True)) == 3
    for i in range(2):
        t.add(b"y", i)
    assert len(t.settle_all()) == 2 and len(t) == 0
    t.add(b"z", 0)
    assert t.settle(6, multiple=False) == [(b"z", 0)]  # tags keep counting after settle_all


def test_single_acks_do_not_leak_slots() -> None:
    t = ConfirmTracker()
    for i in range(10_000):
        t.add(b"v", i)
        assert t.settle(i + 1, multiple=False)
    assert len(t._slots) == 0


# --------------------------------------------------------------------- fake pika


class FakeIOLoop:
    def __init__(self) -> None:
        self.callbacks: queue.Queue[Any] = queue.Queue()
        self.stopped = threading.Event()
        self.paused = threading.Event()
        self.thread: threading.Thread | None = None

    def add_callback_threadsafe(self, cb: Any) -> None:
        self.callbacks.put(cb)

    def start(self) -> None:
        self.thread = threading.current_thread()
        while not self.stopped.is_set():
            if self.paused.is_set():
                time.sleep(0.001)
                continue
            try:
                cb = self.callbacks.get(timeout=0.005)
            except queue.Empty:
                continue
            cb()

    def stop(self) -> None:
        self.stopped.set()


class FakeChannel:
    def __init__(self, conn: FakeSelectConnection) -> None:
        self.conn = conn
        self.is_open = True
        self.published: list[tuple[str, str, bytes, Any]] = []
        self.on_confirm: Any = None
        self.confirm_calls: list[dict[str, Any]] = []

    def add_on_close_callback(self, cb: Any) -> None:
        self.on_close = cb

    def confirm_delivery(self, ack_nack_callback: Any, callback: Any = None) -> None:
        self.confirm_calls.append({"ack_nack_callback": ack_nack_callback, "callback": callback})
        self.on_confirm = ack_nack_callback
        callback(Method(1, Basic.Ack()))  # stands in for Confirm.SelectOk

    def basic_publish(self, exchange: str, routing_key: str, body: bytes,
                      properties: Any = None) -> None:
        # pika is not thread-safe: only the IO thread may publish
        assert threading.current_thread() is self.conn.ioloop.thread
        self.published.append((exchange, routing_key, body, properties))


class FakeSelectConnection:
    instances: ClassVar[list[FakeSelectConnection]] = []

    def __init__(self, parameters: Any, on_open_callback: Any, on_open_error_callback: Any,
                 on_close_callback: Any) -> None:
        self.params = parameters
        self.ioloop = FakeIOLoop()
        self.on_close = on_close_callback
        self.is_open = True
        self.is_opening = False
        self.blocked_cb: Any = None
        self.unblocked_cb: Any = None
        self.ioloop.add_callback_threadsafe(lambda: on_open_callback(self))
        FakeSelectConnection.instances.append(self)

    def channel(self, on_open_callback: Any) -> None:
        self.ch = FakeChannel(self)
        on_open_callback(self.ch)

    def add_on_connection_blocked_callback(self, cb: Any) -> None:
        self.blocked_cb = cb

    def add_on_connection_unblocked_callback(self, cb: Any) -> None:
        self.unblocked_cb = cb

    def close(self) -> None:
        self.is_open = False
        self.on_close(self, "closed by the client")

    def run(self, fn: Any) -> None:
        """Run ``fn`` on the IO thread and wait for it (a frame arriving)."""
        done = threading.Event()

        def call() -> None:
            fn()
            done.set()

        self.ioloop.add_callback_threadsafe(call)
        assert done.wait(5)


def _no_blocking(*a: Any, **k: Any) -> None:
    raise AssertionError("producers must not use BlockingConnection (closed-loop confirms)")


@pytest.fixture
def fake_pika(monkeypatch: pytest.MonkeyPatch) -> type[FakeSelectConnection]:
    FakeSelectConnection.instances = []
    monkeypatch.setattr(pika, "SelectConnection", FakeSelectConnection)
    monkeypatch.setattr(pika, "BlockingConnection", _no_blocking)
    return FakeSelectConnection


def _driver(**cfg: Any) -> RabbitMQDriver:
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:5999", mode="process")
    config = RabbitMQDriverConfig(exchange_type="DIRECT", queue_type="QUORUM", **cfg)
    return RabbitMQDriver(ep, config, topic_partitions={"t": 3})


def _producer_stats(d: RabbitMQDriver) -> list[dict[str, Any]]:
    """The producers' client-stats documents: the list is the process's, so it also
    holds the consumer lines of other tests' consumers (every consumer writes one)."""
    docs = [json.loads(x) for x in d.client_stats()]
    return [doc["rabbitmq_producer"] for doc in docs if "rabbitmq_producer" in doc]


def _wait(pred: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_async_confirms_with_multiple_acks_and_nacks(fake_pika: Any) -> None:
    acks: list[tuple[bytes, int | None]] = []
    sent: list[int | None] = []
    errors: list[tuple[bytes, str]] = []
    d = _driver(message_persistence=True)
    p = d.producer("t", "p0", lambda v, lat, at=None: (acks.append((v, lat)), sent.append(at)),
                   lambda v, why: errors.append((v, why)))
    conn = fake_pika.instances[0]
    ch = conn.ch
    # confirm mode was entered asynchronously, with an ack/nack callback
    assert len(ch.confirm_calls) == 1 and callable(ch.confirm_calls[0]["ack_nack_callback"])
    for i in range(10):
        p.send(f"m{i}".encode(), None)
    _wait(lambda: len(ch.published) == 10)
    assert [rk for _, rk, _, _ in ch.published] == ["0", "1", "2"] * 3 + ["0"]  # round-robin
    assert {x for x, _, _, _ in ch.published} == {"t"}
    assert all(props.delivery_mode == 2 for *_, props in ch.published)  # persistent
    assert p.queue_depth() == 10
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=5, multiple=True))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=7, multiple=False))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=6, multiple=False))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Nack(delivery_tag=10, multiple=True))))
    assert acks == [] and errors == []  # callbacks only run on the pacer, in service()
    p.service()
    assert [v for v, _ in acks] == [f"m{i}".encode() for i in (0, 1, 2, 3, 4, 6, 5)]
    assert all(lat is not None and lat > 0 for _, lat in acks)  # measured to the confirm
    assert all(at is not None and at > 0 for at in sent)  # from when it was written
    assert [v for v, _ in errors] == [b"m7", b"m8", b"m9"]
    assert all("nack" in why for _, why in errors)
    assert p.queue_depth() == 0
    p.close()
    doc = _producer_stats(d)[-1]
    assert doc["acked"] == 7 and doc["nacked"] == 3 and doc["multiple_acks"] == 2
    assert doc["confirm_mode"] == "async"


def test_send_never_blocks_and_a_full_window_is_queue_full(fake_pika: Any) -> None:
    d = _driver(max_pending_confirms=50)
    p = d.producer("t", "p0", lambda v, lat, at=None: None, lambda v, why: None)
    conn = fake_pika.instances[0]
    conn.ioloop.paused.set()  # the IO loop is stuck (e.g. a slow broker)
    t0 = time.perf_counter()
    for i in range(50):
        p.send(b"x%d" % i, None)
    elapsed = time.perf_counter() - t0
    # a send that waited for the IO loop would never come back while it is stuck;
    # well under a second is not waiting (a few µs each; a preemption is tens of ms)
    assert elapsed < 1.0, f"50 sends took {elapsed * 1000:.1f} ms on a stalled IO loop"
    with pytest.raises(QueueFull, match="50 messages await a publisher confirm"):
        p.send(b"one more", None)
    conn.ioloop.paused.clear()
    _wait(lambda: len(conn.ch.published) == 50)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=50, multiple=True))))
    p.service()
    assert p.queue_depth() == 0
    p.send(b"again", None)  # room again
    _wait(lambda: len(conn.ch.published) == 51)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=51, multiple=False))))
    p.close()


def test_connection_blocked_is_back_pressure(fake_pika: Any) -> None:
    d = _driver()
    p = d.producer("t", "p0", lambda v, lat, at=None: None, lambda v, why: None)
    conn = fake_pika.instances[0]
    frame = Method(0, Connection.Blocked(reason="low on memory"))
    conn.run(lambda: conn.blocked_cb(conn, frame))
    with pytest.raises(QueueFull, match="blocked"):
        p.send(b"x", None)
    conn.run(lambda: conn.unblocked_cb(conn, Method(0, Connection.Unblocked())))
    p.send(b"x", None)
    _wait(lambda: len(conn.ch.published) == 1)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=1, multiple=False))))
    p.close()
    doc = _producer_stats(d)[-1]
    assert doc["blocked_events"] == 1 and doc["blocked_reasons"] == ["low on memory"]
    assert doc["queue_full"] == 1 and doc["blocked_s"] >= 0


def test_lost_connection_fails_the_unconfirmed_and_the_producer_reconnects(
        fake_pika: Any) -> None:
    """What awaited a confirm when the connection went away is a send error (the broker
    may or may not have it); what the pacer sends meanwhile waits with its intended
    time and goes out on the next connection (pika never reconnects by itself)."""
    errors: list[str] = []
    acks: list[bytes] = []
    d = _driver()
    p = d.producer("t", "p0", lambda v, lat, at=None: acks.append(v),
                   lambda v, why: errors.append(why))
    conn = fake_pika.instances[0]
    for _ in range(3):
        p.send(b"x", None)
    _wait(lambda: len(conn.ch.published) == 3)
    conn.run(lambda: conn.on_close(conn, "CONNECTION_FORCED - broker shutdown"))
    p.send(b"late", None)  # while reconnecting: queued, never raised, never an error
    _wait(lambda: len(fake_pika.instances) == 2)
    again = fake_pika.instances[1]
    _wait(lambda: [m[2] for m in getattr(getattr(again, "ch", None), "published", [])]
          == [b"late"])
    p.service()
    assert len(errors) == 3 and all("CONNECTION_FORCED" in e for e in errors)
    assert p.stats["reconnects"] == 1 and p.stats["unconfirmed_at_connection_loss"] == 3
    again.run(lambda: again.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=1))))
    _wait(lambda: (p.service(), acks)[1] == [b"late"])  # the new channel numbers from 1
    assert p.queue_depth() == 0
    p.close()


# --------------------------------------------------------------------- consumer


class FakeBlockingChannel:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.consumers: dict[str, Any] = {}
        self.acks: list[tuple[int, bool]] = []
        self.tags: dict[str, str] = {}

    def basic_qos(self, prefetch_count: int, global_qos: bool = False) -> None:
        self.calls.append(("qos", (prefetch_count, global_qos)))

    def queue_declare(self, queue: str, **kw: Any) -> None:
        self.calls.append(("declare", (queue, kw)))

    def queue_bind(self, queue: str, exchange: str, routing_key: str) -> None:
        self.calls.append(("bind", (queue, exchange, routing_key)))

    def basic_consume(self, queue: str, on_message_callback: Any, auto_ack: bool,
                      arguments: Any, consumer_tag: str | None = None) -> str:
        tag = consumer_tag or f"ctag-{queue}"
        self.tags[queue] = tag
        self.consumers[tag] = on_message_callback
        self.calls.append(("consume", (queue, auto_ack, arguments)))
        return tag

    def basic_ack(self, delivery_tag: int, multiple: bool) -> None:
        self.acks.append((delivery_tag, multiple))


class FakeBlockingConnection:
    last: FakeBlockingConnection | None = None

    def __init__(self, params: Any) -> None:
        self.ch = FakeBlockingChannel()
        self.is_open = True
        self.pending: list[tuple[str, bytes]] = []
        FakeBlockingConnection.last = self

    def channel(self) -> FakeBlockingChannel:
        return self.ch

    def process_data_events(self, time_limit: float) -> None:
        for tag_no, (queue_name, body) in enumerate(self.pending, start=1):
            tag = self.ch.tags[queue_name]
            method = Basic.Deliver(consumer_tag=tag, delivery_tag=tag_no)
            self.ch.consumers[tag](self.ch, method, None, body)
        self.pending = []

    def close(self) -> None:
        self.is_open = False


def test_stream_consumer_prefetch_offset_and_one_multiple_ack_per_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pika, "BlockingConnection", FakeBlockingConnection)
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:5999", mode="process")
    cfg = RabbitMQDriverConfig(exchange_type="DIRECT", queue_type="STREAM", prefetch_count=77)
    c = RabbitMQDriver(ep, cfg, topic_partitions={"t": 2}).consumer("t", "t-sub000", "c0")
    conn = FakeBlockingConnection.last
    assert conn is not None
    calls = conn.ch.calls
    assert calls[0] == ("qos", (77, False))  # per-consumer prefetch, never global
    assert not [x for x in calls if x[0] == "declare"]  # streams are the topic's
    assert [x[1] for x in calls if x[0] == "consume"] == [
        ("t-stream-part-0", False, {"x-stream-offset": "first"}),
        ("t-stream-part-1", False, {"x-stream-offset": "first"}),
    ]
    conn.pending = [("t-stream-part-1", b"a"), ("t-stream-part-0", b"b"),
                    ("t-stream-part-1", b"c")]
    assert c.receive(2, 0.01) == [(b"a", 1), (b"b", 0)]
    assert conn.ch.acks == [(2, True)]
    assert c.receive(10, 0.01) == [(b"c", 1)]
    assert conn.ch.acks == [(2, True), (3, True)]
    assert c.receive(10, 0.01) == []
    c.close()


def test_quorum_consumer_declares_and_binds_its_partition_queues(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pika, "BlockingConnection", FakeBlockingConnection)
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:5999", mode="process")
    cfg = RabbitMQDriverConfig(exchange_type="DIRECT", queue_type="QUORUM")
    RabbitMQDriver(ep, cfg, topic_partitions={"t": 2}).consumer("t", "s", "c0")
    conn = FakeBlockingConnection.last
    assert conn is not None
    declares = [x[1] for x in conn.ch.calls if x[0] == "declare" and not x[1][1].get("passive")]
    assert [q for q, _ in declares] == ["t-s-part-0", "t-s-part-1"]
    # then a passive declare per quorum queue: it answers once the queue's Raft member runs
    assert [x[1][0] for x in conn.ch.calls if x[0] == "declare" and x[1][1].get("passive")] == [
        "t-s-part-0", "t-s-part-1"]
    assert declares[0][1]["arguments"] == {"x-queue-type": "quorum"}
    assert declares[0][1]["durable"] is True
    assert [x[1] for x in conn.ch.calls if x[0] == "bind"] == [
        ("t-s-part-0", "t", "0"), ("t-s-part-1", "t", "1")]


def test_pause_cancels_and_requeues_then_resume_consumes_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Catch-up runs: AMQP has no pause, so the consumer cancels, the delivered messages
    not yet handed out go back to the queue (one multiple nack), and resume consumes the
    same queues again; streams cannot (they would restart at their offset)."""
    nacks: list[tuple[int, bool, bool]] = []
    cancelled: list[str] = []
    monkeypatch.setattr(pika, "BlockingConnection", FakeBlockingConnection)
    monkeypatch.setattr(FakeBlockingChannel, "basic_cancel",
                        lambda self, tag: cancelled.append(tag) or [], raising=False)
    monkeypatch.setattr(FakeBlockingChannel, "basic_nack",
                        lambda self, tag, multiple, requeue: nacks.append(
                            (tag, multiple, requeue)), raising=False)
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:5999", mode="process")
    cfg = RabbitMQDriverConfig(exchange_type="DIRECT", queue_type="QUORUM")
    driver = RabbitMQDriver(ep, cfg, topic_partitions={"t": 2})
    assert "basic.cancel" in (driver.CONSUMER_PAUSE or "")
    c = driver.consumer("t", "s", "c0")
    conn = FakeBlockingConnection.last
    assert conn is not None
    conn.pending = [("t-s-part-0", b"a"), ("t-s-part-1", b"b"), ("t-s-part-0", b"c")]
    assert c.receive(1, 0.01) == [(b"a", 0)]  # b and c delivered, not handed out
    tags = dict(conn.ch.tags)
    c.pause()
    assert sorted(cancelled) == sorted(tags.values()) and len(set(cancelled)) == 2
    assert nacks == [(3, True, True)]  # b and c requeued: nothing held in the client
    assert c.receive(10, 0.01) == []
    c.resume()
    consumes = [x[1][0] for x in conn.ch.calls if x[0] == "consume"]
    assert consumes == ["t-s-part-0", "t-s-part-1", "t-s-part-0", "t-s-part-1"]
    stream = RabbitMQDriver(ep, RabbitMQDriverConfig(exchange_type="DIRECT",
                                                     queue_type="STREAM"))
    assert stream.CONSUMER_PAUSE is None and "x-stream-offset" in stream.CONSUMER_PAUSE_MISSING


def test_clients_land_on_the_same_nodes_in_every_run() -> None:
    """Producers round robin from node 1, consumers from node 2, whatever the run id in
    the client id; a hash placed them anew in every run (and a fault test that kills each
    node once could miss every client)."""
    ep = BrokerEndpoint(kind="rabbitmq", mode="process",
                        bootstrap="amqp://127.0.0.1:1,amqp://127.0.0.1:2,amqp://127.0.0.1:3")
    d = RabbitMQDriver(ep, RabbitMQDriverConfig(exchange_type="DIRECT"), topic_partitions={})
    n1, n2, n3 = d.uris
    for run in ("bp-root-vm-20261127-044310-ed4153-tailread-334080", "bp-x-20261201-1-a"):
        assert d._uris_for(f"{run}-p0") == [n1, n2, n3]
        assert d._uris_for(f"{run}-c0") == [n2, n3, n1]
        assert d._uris_for(f"{run}-p4")[0] == n2 and d._uris_for(f"{run}-c2")[0] == n1
    other = d._uris_for("readback")  # not an engine id: by a hash, still every node once
    assert sorted(other) == [n1, n2, n3] and d._uris_for("readback") == other
