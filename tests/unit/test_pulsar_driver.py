"""The Pulsar driver against a fake pulsar.Client: settings passed, acks, queue-full, acks.

The key test reads pulsar-client's *own* defaults from its signatures and shows that
every default that differs from OMB's is overridden with OMB's value.
"""

from __future__ import annotations

import inspect
import pickle
from typing import Any, ClassVar

import _pulsar
import pulsar
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.driver import QueueFull
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.pulsar.config import JAVA_INT_MAX, PulsarDriverConfig
from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver
from pytest_brokerperf.core import header
from tests.support.engine import publish_side

REAL_CLIENT = pulsar.Client  # the fixture below replaces pulsar.Client
ENDPOINT = BrokerEndpoint(kind="pulsar", bootstrap="pulsar://127.0.0.1:6650", mode="process",
                          admin_url="http://127.0.0.1:8080")


class FakeRawProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []
        self.reject = False
        self.reject_after: int | None = None

    def send_async(self, msg: Any, cb: Any) -> None:
        if self.reject_after is not None and len(self.sent) >= self.reject_after:
            self.reject = True
        if self.reject:  # what the C++ client does with block_if_queue_full=False
            cb(_pulsar.Result.ProducerQueueIsFull, None)
            return
        self.sent.append((msg, cb))


class FakeProducer:
    def __init__(self) -> None:
        self._producer = FakeRawProducer()
        self.closed = False

    def close(self) -> None:
        self.closed = True


class FakeMessage:
    def __init__(self, data: bytes, topic: str) -> None:
        self._data, self._topic = data, topic

    def data(self) -> bytes:
        return self._data

    def topic_name(self) -> str:
        return self._topic


class FakeRawConsumer:
    def __init__(self) -> None:
        self.queue: list[FakeMessage] = []
        self.cumulative: list[FakeMessage] = []
        self.individual: list[FakeMessage] = []

    def receive(self, timeout_ms: int) -> FakeMessage:
        if not self.queue:
            raise _pulsar.Timeout("Pulsar error: TimeOut")
        return self.queue.pop(0)

    def acknowledge_cumulative(self, m: FakeMessage) -> None:
        self.cumulative.append(m)

    def acknowledge(self, m: FakeMessage) -> None:
        self.individual.append(m)


class FakeConsumer:
    def __init__(self) -> None:
        self._consumer = FakeRawConsumer()

    def close(self) -> None:
        pass


class FakeClient:
    instances: ClassVar[list[FakeClient]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.producers: list[tuple[str, dict[str, Any], FakeProducer]] = []
        self.consumers: list[tuple[str, str, dict[str, Any], FakeConsumer]] = []
        self.closed = False
        FakeClient.instances.append(self)

    def create_producer(self, topic: str, **kwargs: Any) -> FakeProducer:
        p = FakeProducer()
        self.producers.append((topic, kwargs, p))
        return p

    def get_topic_partitions(self, topic: str) -> list[str]:
        return [f"{topic}-partition-{i}" for i in range(4)]

    def subscribe(self, topic: str, subscription: str, **kwargs: Any) -> FakeConsumer:
        c = FakeConsumer()
        self.consumers.append((topic, subscription, kwargs, c))
        return c

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_client(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    FakeClient.instances = []
    monkeypatch.setattr(pulsar, "Client", FakeClient)
    return FakeClient


def test_every_python_default_that_differs_from_omb_is_overridden(
        fake_client: type[FakeClient]) -> None:
    """pulsar-client's Python defaults: batching off, block_if_queue_full off, 1000
    pending, 30 s send timeout, receiver queue 1000, 50 000 across partitions, Exclusive
    subscription."""
    driver = create_driver(ENDPOINT, None)
    producer = driver.producer("t", "p0", lambda v, lat, sent=None: None, lambda v, e: None)
    consumer = driver.consumer("t", "sub", "c0")
    ((_, pkw, _),) = fake_client.instances[0].producers
    ((_, _, ckw, _),) = fake_client.instances[0].consumers
    # pulsar-client's own defaults, read from the library itself
    pdef = {k: v.default for k, v in
            inspect.signature(REAL_CLIENT.create_producer).parameters.items()}
    cdef = {k: v.default for k, v in
            inspect.signature(REAL_CLIENT.subscribe).parameters.items()}
    named = {
        # setting: (Python default, OMB value we must pass)
        "batching_enabled": (False, True),
        "block_if_queue_full": (False, True),
        "max_pending_messages": (1000, 0),
        "send_timeout_millis": (30000, 0),
    }
    for key, (python_default, omb) in named.items():
        assert pdef[key] == python_default, f"pulsar-client's default of {key} changed"
        assert key in pkw and pkw[key] == omb != python_default, key
    consumer_named = {
        "receiver_queue_size": (1000, 10000),
        "max_total_receiver_queue_size_across_partitions": (50000, JAVA_INT_MAX),
        "consumer_type": (pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover),
    }
    for key, (python_default, omb) in consumer_named.items():
        assert cdef[key] == python_default, f"pulsar-client's default of {key} changed"
        assert key in ckw and ckw[key] == omb != python_default, key
    assert pkw["batching_max_publish_delay_ms"] == 1 != pdef["batching_max_publish_delay_ms"]
    assert pkw["batching_max_messages"] == JAVA_INT_MAX != pdef["batching_max_messages"]
    assert pkw["compression_type"] == pulsar.CompressionType.NONE
    # every create_producer/subscribe setting the driver config names reaches the client
    assert set(driver.config.producer_kwargs()) <= set(pkw)
    assert set(driver.config.subscribe_kwargs("c0")) <= set(ckw)
    ck = fake_client.instances[0].kwargs
    assert ck["service_url"] == "pulsar://127.0.0.1:6650"
    # pulsar-local.yaml: 2 I/O threads for a one-CPU generator (OMB's files: 16)
    assert ck["operation_timeout_seconds"] == 600 and ck["io_threads"] == 2
    producer.close()
    consumer.close()
    assert fake_client.instances[0].closed  # last user gone: client closed


def test_topic_and_namespace_names(fake_client: type[FakeClient]) -> None:
    driver = create_driver(ENDPOINT, None)
    tenant, _, rest = driver.namespace.partition("/")
    assert tenant == "benchmark" and rest.startswith("ns-") and len(rest) == 11
    assert driver.full_topic("bp-000") == f"persistent://{driver.namespace}/bp-000"
    again = pickle.loads(pickle.dumps(driver))  # what a worker process gets
    assert again.namespace == driver.namespace
    assert PulsarDriver(ENDPOINT, driver.config).namespace != driver.namespace


def test_yaml_service_url_wins_only_for_remote_endpoints(fake_client: type[FakeClient]) -> None:
    cfg = PulsarDriverConfig.from_dict({"client": {"serviceUrl": "pulsar://far:6650",
                                                   "httpUrl": "http://far:8080"}})
    local = PulsarDriver(ENDPOINT, cfg)
    assert local.service_url == ENDPOINT.bootstrap and local.admin_url == ENDPOINT.admin_url
    remote = PulsarDriver(BrokerEndpoint(kind="pulsar", bootstrap="pulsar://x:6650",
                                         mode="remote", admin_url="http://x:8080"), cfg)
    assert remote.service_url == "pulsar://far:6650" and remote.admin_url == "http://far:8080"


def _value(pid: int, seq: int, sent: int) -> bytes:
    return header.pack(header.MAGIC, header.VERSION, header.KIND_DATA, pid, seq, sent - 5,
                       sent) + b"x" * 32


def test_acks_are_delivered_from_service_with_callback_time(
        fake_client: type[FakeClient]) -> None:
    acks: list[tuple[bytes, int | None]] = []
    errors: list[tuple[bytes, str]] = []
    driver = create_driver(ENDPOINT, None)
    prod = driver.producer("t", "p0", lambda v, lat, sent=None: acks.append((v, lat)),
                           lambda v, e: errors.append((v, e)))
    raw = fake_client.instances[0].producers[0][2]._producer
    v1, v2 = _value(0, 0, 1000), _value(0, 1, 2000)
    prod.send(v1, None)
    prod.send(v2, b"key-1")
    assert prod.queue_depth() == 2 and len(raw.sent) == 2
    raw.sent[0][1](_pulsar.Result.Ok, None)  # as a C++ thread would
    assert acks == []  # nothing reaches the engine outside service()
    prod.service()
    ((value, latency),) = acks
    assert value == v1 and latency is not None and latency > 0
    raw.sent[1][1](_pulsar.Result.Timeout, None)
    prod.service()
    assert errors and "Timeout" in errors[0][1] and prod.queue_depth() == 0


def test_sync_mode_and_synchronous_rejection_raise_queue_full(
        fake_client: type[FakeClient]) -> None:
    from pytest_brokerperf.brokers.kafka.config import shipped_driver

    sync = create_driver(ENDPOINT, shipped_driver("pulsar-sync"))
    prod = sync.producer("t", "p0", lambda v, lat, sent=None: None, lambda v, e: None)
    prod.send(_value(0, 0, 1), None)
    with pytest.raises(QueueFull, match="limit 1"):
        prod.send(_value(0, 1, 2), None)
    raw = fake_client.instances[0].producers[0][2]._producer
    raw.sent[0][1](_pulsar.Result.Ok, None)
    prod.service()
    prod.send(_value(0, 1, 3), None)  # the slot is free again

    asyn = create_driver(ENDPOINT, None)
    prod2 = asyn.producer("t", "p1", lambda v, lat, sent=None: None, lambda v, e: None)
    raw2 = fake_client.instances[-1].producers[-1][2]._producer
    raw2.reject = True  # the client refuses inside send_async (queue full)
    with pytest.raises(QueueFull, match="ProducerQueueIsFull"):
        prod2.send(_value(1, 0, 1), None)
    assert prod2.queue_depth() == 0


def test_memory_limit_is_enforced_by_the_driver(fake_client: type[FakeClient]) -> None:
    cfg = PulsarDriverConfig().with_overrides(
        client={"client_memory_limit_mb": 0, "namespace_prefix": "t/ns"})
    driver = PulsarDriver(ENDPOINT, cfg.with_overrides(persistence={"ensemble_size": 1,
                                                                    "write_quorum": 1,
                                                                    "ack_quorum": 1}))
    prod = driver.producer("t", "p0", lambda v, lat, sent=None: None, lambda v, e: None)
    prod._mem_limit = 100  # bytes, to test the rule without megabytes of payload
    prod.send(b"y" * 64 + _value(0, 0, 1), None)  # one message may always go
    with pytest.raises(QueueFull, match="bytes pending"):
        prod.send(_value(0, 1, 2), None)


@pytest.mark.parametrize("acks_per_service", [40, 7])
def test_send_many_and_batch_acks_record_what_one_call_per_message_records(
        fake_client: type[FakeClient], monkeypatch: pytest.MonkeyPatch,
        acks_per_service: int) -> None:
    """The batch path (send_many, acks handed over as arrays when 16 or more are
    pending) leaves the engine the same latency views, counters and ack ledger as
    send() and one on_ack per message, with each message's own callback time."""
    from pytest_brokerperf.brokers.pulsar import producer as producer_mod

    values = [_value(i % 2, i // 2, 1000 + 50 * i) for i in range(120)]
    records = []
    for batched in (False, True):
        clock = iter(range(10**9, 10**9 + 10**6, 997))  # each callback its own time
        monkeypatch.setattr(producer_mod, "_mono", lambda c=clock: next(c))
        w = publish_side()
        on_ack = w._ack_callback()
        if not batched:
            del on_ack.many  # the engine without a batch callback: one on_ack each
        prod = create_driver(ENDPOINT, None).producer("t", "p0", on_ack, lambda v, e: None)
        raw = fake_client.instances[-1].producers[-1][2]._producer
        if batched:
            assert prod.send_many(values[:64], None) == 64
            assert prod.send_many(values[64:], [b"k"] * 56) == 56
        else:
            for i, v in enumerate(values):
                prod.send(v, None if i < 64 else b"k")
        assert [m.data() for m, _ in raw.sent] == values and prod.queue_depth() == 120
        for start in range(0, 120, acks_per_service):
            for _, cb in raw.sent[start:start + acks_per_service]:
                cb(_pulsar.Result.Ok, None)
            prod.service()
        assert prod.queue_depth() == 0 and prod._bytes == 0
        records.append(({n: list(b) for n, b in w._pub_local.items()},
                        (w.pub_counters.acked, w.pub_counters.acked_bytes),
                        w.ack_ledger.export()))
    assert records[0] == records[1]
    assert records[1][1] == (120, sum(map(len, values)))


def test_send_many_stops_where_the_client_or_the_limits_refuse(
        fake_client: type[FakeClient]) -> None:
    driver = create_driver(ENDPOINT, None)
    errors: list[str] = []
    prod = driver.producer("t", "p0", lambda v, lat, sent=None: None, lambda v, e: errors.append(e))
    raw = fake_client.instances[-1].producers[-1][2]._producer
    values = [_value(0, i, 10 + i) for i in range(30)]
    raw.reject_after = 12  # the client refuses the 13th inside send_async
    assert prod.send_many(values, None) == 12
    assert [m.data() for m, _ in raw.sent] == values[:12]  # none twice, none skipped
    assert prod.queue_depth() == 12 and not errors
    raw.reject, raw.reject_after = False, None
    assert prod.send_many(values[12:], None) == 18  # the engine hands the rest again
    assert [m.data() for m, _ in raw.sent] == values

    prod._limit = 32  # the driver's own count limit (pendingQueueSize)
    assert prod.send_many([_value(1, i, 1) for i in range(5)], None) == 2
    prod._limit, prod._mem_limit = 0, prod._bytes + 2 * len(values[0])
    assert prod.send_many([_value(2, i, 1) for i in range(5)], None) == 2
    assert prod.queue_depth() == 34


def test_consumer_acks_cumulatively_per_partition(fake_client: type[FakeClient]) -> None:
    driver = create_driver(ENDPOINT, None)
    cons = driver.consumer("t", "sub", "c0")
    raw = fake_client.instances[0].consumers[0][3]._consumer
    t = driver.full_topic("t")
    msgs = [FakeMessage(b"a", f"{t}-partition-0"), FakeMessage(b"b", f"{t}-partition-3"),
            FakeMessage(b"c", f"{t}-partition-0")]
    raw.queue = list(msgs)
    assert cons.receive(500, 0.01) == [(b"a", 0), (b"b", 3), (b"c", 0)]
    assert raw.cumulative == [msgs[2], msgs[1]] and raw.individual == []
    assert cons.receive(500, 0.01) == []  # timeout: nothing, no error
    raw.queue = [FakeMessage(b"d", t)]  # a non-partitioned topic is partition 0
    assert cons.receive(1, 0.01) == [(b"d", 0)]


def test_shared_subscription_acks_every_message(fake_client: type[FakeClient]) -> None:
    cfg = PulsarDriverConfig.from_dict({"consumer": {"subscriptionType": "Shared"},
                                        "client": {"persistence": {"ensembleSize": 1,
                                                                   "writeQuorum": 1,
                                                                   "ackQuorum": 1}}})
    cons = PulsarDriver(ENDPOINT, cfg).consumer("t", "sub", "c0")
    raw = fake_client.instances[0].consumers[0][3]._consumer
    raw.queue = [FakeMessage(b"a", "x-partition-1"), FakeMessage(b"b", "x-partition-1")]
    assert len(cons.receive(10, 0.01)) == 2
    assert len(raw.individual) == 2 and raw.cumulative == []


def test_describe_and_driver_yaml_redact_auth(fake_client: type[FakeClient]) -> None:
    cfg = PulsarDriverConfig.from_dict({"client": {"authentication": {
        "plugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "data": "token:secret-value"}}})
    d = PulsarDriver(ENDPOINT, cfg)
    text = repr(d.describe()) + repr(d.driver_yaml())
    assert "secret-value" not in text
    desc = d.describe()
    assert desc["client"] == "pulsar-client" and desc["namespace"] == d.namespace
    assert desc["producer"]["batching_enabled"] is True


def test_pause_closes_the_consumer_and_resume_subscribes_again(
        fake_client: type[FakeClient], monkeypatch: pytest.MonkeyPatch) -> None:
    """Catch-up runs: a paused consumer holds nothing in a receiver queue (it is closed;
    the durable subscription keeps the backlog) and resumes on the same subscription."""
    closed: list[FakeConsumer] = []
    monkeypatch.setattr(FakeConsumer, "close", lambda self: closed.append(self))
    driver = create_driver(ENDPOINT, None)
    assert "subscribes again" in (driver.CONSUMER_PAUSE or "")
    cons = driver.consumer("t", "sub", "c0")
    client = fake_client.instances[0]
    (first,) = [c for *_, c in client.consumers]
    first._consumer.queue = [FakeMessage(b"a", "x")]
    cons.pause()
    assert closed == [first]
    assert cons.receive(10, 0.01) == []  # paused: nothing, the message stays queued
    assert first._consumer.queue
    cons.pause()  # idempotent
    assert closed == [first]
    cons.resume()
    (_, _, kw1, _), (topic2, sub2, kw2, second) = client.consumers
    assert (topic2, sub2, kw2) == (driver.full_topic("t"), "sub", kw1)
    second._consumer.queue = [FakeMessage(b"b", "x")]
    assert cons.receive(10, 0.01) == [(b"b", 0)]
    cons.pause()
    cons.close()  # already closed by the pause: not closed twice
    assert closed == [first, second]


def _slice_driver(**producer: Any) -> PulsarDriver:
    cfg = PulsarDriverConfig().with_overrides(
        client={"namespace_prefix": "t/ns"},
        persistence={"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1},
        producer={"send_callbacks": "perSlice", "batching_max_bytes": 64 * 1024, **producer})
    return PulsarDriver(ENDPOINT, cfg)


def _kib(i: int) -> bytes:
    return b"%06d" % i + bytes(1018)


class _Clock:
    """CLOCK_MONOTONIC for the slice producer: 1 µs per reading, and jumps on demand."""

    def __init__(self) -> None:
        self.ns = 10**12

    def __call__(self) -> int:
        self.ns += 1_000
        return self.ns

    def jump_ms(self, ms: float) -> None:
        self.ns += int(ms * 1_000_000)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from pytest_brokerperf.brokers.pulsar import slice_producer

    c = _Clock()
    monkeypatch.setattr(slice_producer, "_mono", c)
    return c


def test_per_slice_callbacks_one_per_slice_and_every_message_acked_once(
        fake_client: type[FakeClient], clock: _Clock) -> None:
    """sendCallbacks: perSlice: one producer per partition, a callback on the last
    message of each call's run on a partition only; the callbacks, completed in any
    partition order, confirm every message once with its own send time."""
    acks: list[tuple[bytes, int | None, int | None]] = []
    prod = _slice_driver().producer("t", "p0", lambda v, lat, sent=None: acks.append(
        (v, lat, sent)), lambda v, e: None)
    client = fake_client.instances[-1]
    assert [t.rsplit("-", 1)[-1] for t, _, _ in client.producers] == ["0", "1", "2", "3"]
    values = [_kib(i) for i in range(150)]
    assert prod.send_many(values, None) == 150  # a batch is 64 KiB: 64 + 64 + 22 messages
    raws = [p._producer for _, _, p in client.producers]
    assert [len(r.sent) for r in raws] == [64, 64, 22, 0]
    for r in raws[:3]:
        assert [cb is not None for _, cb in r.sent] == [False] * (len(r.sent) - 1) + [True]
    assert prod.queue_depth() == 150
    raws[2].sent[-1][1](_pulsar.Result.Ok, None)
    raws[0].sent[-1][1](_pulsar.Result.Ok, None)
    prod.service()
    assert sorted(v for v, _, _ in acks) == values[:64] + values[128:]
    raws[1].sent[-1][1](_pulsar.Result.Ok, None)
    prod.service()
    assert sorted(v for v, _, _ in acks) == values and prod.queue_depth() == 0
    assert all(lat is not None and lat > 0 and sent for _, lat, sent in acks)
    assert prod._bytes == 0


def test_per_slice_routing_keeps_a_partition_for_a_batching_window(
        fake_client: type[FakeClient], clock: _Clock) -> None:
    """At a low rate each pacer tick hands over one or two messages: they stay on one
    partition for the batching window (1 ms) or a batch's worth, as the client's
    round-robin router does, so batches are not cut to one message each."""
    prod = _slice_driver().producer("t", "p0", lambda v, lat, sent=None: None,
                                    lambda v, e: None)
    raws = [p._producer for _, _, p in fake_client.instances[-1].producers]
    for tick in range(20):  # 20 ticks 0.1 ms apart: 2 ms
        assert prod.send_many([_kib(tick)], None) == 1
        clock.jump_ms(0.1)
    assert [len(r.sent) for r in raws] == [10, 10, 0, 0]
    assert all(cb is not None for r in raws[:2] for _, cb in r.sent)  # a slice per call
    assert prod.send_many([_kib(i) for i in range(100)], None) == 100  # a new window
    assert [len(r.sent) for r in raws] == [10, 10, 64, 36]


def test_per_slice_failure_refusal_limits_and_keys(fake_client: type[FakeClient],
                                                   clock: _Clock) -> None:
    """A failed slice callback fails the whole slice; a refused last message leaves the
    slice's others to the next callback on that partition; the per-partition queue limit
    caps a slice; a key always goes to one partition."""
    acked: list[bytes] = []
    errors: list[tuple[bytes, str]] = []
    prod = _slice_driver(pending_queue_size=40).producer(
        "t", "p0", lambda v, lat, sent=None: acked.append(v), lambda v, e: errors.append((v, e)))
    raws = [p._producer for _, _, p in fake_client.instances[-1].producers]
    assert prod.send_many([_kib(i) for i in range(100)], None) == 100  # 40 + 40 + 20
    assert [len(r.sent) for r in raws] == [40, 40, 20, 0]
    clock.jump_ms(2)
    assert prod.send_many([_kib(100)], None) == 1  # the next window: partition 3
    clock.jump_ms(2)
    # 0 and 1 are full: a full partition ends its window, 2 and 3 take the rest
    assert prod.send_many([_kib(101 + i) for i in range(60)], None) == 59
    assert [len(r.sent) for r in raws] == [40, 40, 40, 40]
    assert prod.send_many([_kib(160)], None) == 0  # all full: the engine waits
    raws[0].sent[-1][1](_pulsar.Result.Timeout, None)
    prod.service()
    assert len(errors) == 40 and all("Timeout" in e for _, e in errors) and acked == []

    def to_partition_1() -> None:
        clock.jump_ms(2)
        prod._next = 0  # the next window goes to partition 1

    raws[1].sent[-1][1](_pulsar.Result.Ok, None)
    prod.service()
    assert len(acked) == 40 and prod.queue_depth() == 80  # partitions 2 and 3
    raws[1].reject_after = 5  # the client refuses the 6th of the next slice there
    raws[1].sent.clear()
    to_partition_1()
    assert prod.send_many([_kib(300 + i) for i in range(6)], None) == 5  # last refused
    assert prod.queue_depth() == 80 + 5
    raws[1].reject, raws[1].reject_after = False, None
    to_partition_1()
    assert prod.send_many([_kib(400)], None) == 1
    raws[1].sent[-1][1](_pulsar.Result.Ok, None)  # confirms the orphaned five too
    prod.service()
    assert acked[40:] == [_kib(300 + i) for i in range(5)] + [_kib(400)]

    keyed = _slice_driver().producer("k", "p1", lambda v, lat, sent=None: None,
                                     lambda v, e: None)
    kraws = [p._producer for _, _, p in fake_client.instances[-1].producers]
    keys: list[bytes | None] = [b"user-%d" % (i % 5) for i in range(50)]
    assert keyed.send_many([_kib(i) for i in range(50)], keys) == 50
    where = {m.data()[:6]: n for n, r in enumerate(kraws) for m, _ in r.sent}
    for k in set(keys):
        assert len({where[b"%06d" % i] for i in range(50) if keys[i] == k}) == 1
    assert all(m.partition_key() for r in kraws for m, _ in r.sent)
