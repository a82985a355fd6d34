"""How much of a RabbitMQ publish latency is the client's own hand-off, measured on the wire.

A proxy in its own process (:mod:`pytest_brokerperf.testing.wirestamp`) stamps when each
``Basic.Publish`` and its confirm cross the wire. The driver's producer, run as the
engine runs it, reports per message the header's send time (the engine's ``send()``
call), the send time it passes to the engine (the burst's socket write on pika's IO
thread) and the ack latency. Functional truths are asserted (every message matched, no
stamp before the wire, the hand-off recorded in the client statistics); the figures are
printed for docs/explanation/measurement.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster, rabbitmq_available
from pytest_brokerperf.engine import header
from pytest_brokerperf.testing.wirestamp import WireStampProxy

pytestmark = pytest.mark.integration

RATE = 1000
COUNT = 3000


@pytest.fixture(scope="module", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    """RabbitMQ, not Kafka: hold the broker lock, skip without the package."""
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQProcessCluster]:
    cluster = RabbitMQProcessCluster(nodes=1, workdir=tmp_path_factory.mktemp("rmq"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _quantiles(values: list[int]) -> tuple[float, float, float]:
    s = sorted(values)
    return (s[len(s) // 2] / 1000, s[int(len(s) * 0.99)] / 1000, s[-1] / 1000)


def test_rabbitmq_send_is_stamped_at_the_wire_and_the_handoff_is_bounded(
        rmq: RabbitMQProcessCluster, tmp_path: Path) -> None:
    port = int(rmq.endpoint.bootstrap.rsplit(":", 1)[1])
    proxy = WireStampProxy(("127.0.0.1", port)).start()
    try:
        endpoint = replace(rmq.endpoint, bootstrap=f"amqp://127.0.0.1:{proxy.port}")
        driver = create_driver(endpoint, shipped_driver("rabbitmq-omb"))
        admin = driver.admin()
        admin.create_topics(["it-handoff-000"], [1])
        got: list[tuple[int, int, int, int]] = []  # seq, header send, wire send, ack

        def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
            _, _, _, _, seq, _, sent = header.unpack(value)
            assert latency_ns is not None and sent_ns is not None
            got.append((seq, sent, sent_ns, sent_ns + latency_ns))

        errors: list[str] = []
        producer = driver.producer("it-handoff-000", "it-handoff-p0", on_ack,
                                   lambda v, why: errors.append(why))
        start = time.monotonic_ns()
        for seq in range(COUNT):
            due = start + seq * 1_000_000_000 // RATE
            while time.monotonic_ns() < due:
                producer.service()
                time.sleep(0.0002)
            now = time.monotonic_ns()
            head = header.pack(header.MAGIC, header.VERSION, header.KIND_DATA, 0, seq, due, now)
            producer.send(head + b"x" * 992, None)
        assert producer.flush(30) == 0
        producer.close()
        stats = [json.loads(s)["rabbitmq_producer"] for s in driver.client_stats()]
        admin.delete_topics(["it-handoff-000"])
        admin.close()
    finally:
        wires = proxy.stop()
    assert errors == []
    assert [g[0] for g in got] == list(range(COUNT))
    wire = next(w for w in wires if any(w.published.values()))
    channel, published = next((c, p) for c, p in wire.published.items() if p)
    confirmed = wire.confirmed[channel]
    assert len(published) == COUNT and len(confirmed) == COUNT
    to_wire, before, after, ack_bias = [], [], [], []
    for k, (_, header_sent, wire_sent, ack) in enumerate(got):
        w_pub, w_ack = published[k + 1], confirmed[k + 1]
        assert wire_sent <= w_pub and w_ack <= ack  # nothing stamped before the wire
        to_wire.append(w_pub - wire_sent)
        ack_bias.append(ack - w_ack)
        before.append((ack - header_sent) - (w_ack - w_pub))  # the old send stamp
        after.append((ack - wire_sent) - (w_ack - w_pub))
    handoff = stats[0]["send_handoff_us"]
    assert handoff["count"] == COUNT
    print(f"\nRabbitMQ {RATE} msg/s x {COUNT}: (p50 / p99 / max, µs)"
          f"\n  publish-latency bias, send stamped at send():     {_quantiles(before)}"
          f"\n  publish-latency bias, send stamped at the write:  {_quantiles(after)}"
          f"\n  of which write -> wire (proxy recv):              {_quantiles(to_wire)}"
          f"\n  of which wire confirm -> ack stamp:               {_quantiles(ack_bias)}"
          f"\n  client statistics send_handoff_us: {handoff}")
