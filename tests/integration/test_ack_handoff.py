"""How much of a publish latency is the client's own hand-off, measured on the wire.

A proxy in its own process (:mod:`tests.support.wirestamp`) stamps when each
publish and its confirm cross the wire (RabbitMQ: ``Basic.Publish``/``Basic.Ack``;
Pulsar: ``SEND``/``SEND_RECEIPT``, the broker advertising the proxy as a listener). The
driver's producer, run as the engine runs it, reports per message the header's send time
(the engine's ``send()`` call), the send time it passes to the engine where it knows a
later one (pika: the burst's socket write) and the ack latency. Functional truths are
asserted (every message matched, no stamp before the wire, the hand-off recorded in the
client statistics); the figures are printed for docs/explanation/measurement.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.driver import Driver, ProducerClient
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.provision.maven import resolve_pulsar
from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone
from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster
from pytest_brokerperf.core import header
from pytest_brokerperf.core.errors import BrokerUnavailable
from tests.support.wirestamp import WireStampProxy, WireStamps

pytestmark = pytest.mark.integration

RATE = 1000
COUNT = 3000


@pytest.fixture(scope="module", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    """RabbitMQ and Pulsar, not Kafka: hold the broker lock only."""


def _quantiles(values: list[int]) -> tuple[float, float, float]:
    s = sorted(values)
    return (s[len(s) // 2] / 1000, s[int(len(s) * 0.99)] / 1000, s[-1] / 1000)


#: per message in send order: header send, the driver's send time, ack (ns)
Stamped = list[tuple[int, int, int]]


def _publish(driver: Driver, topic: str) -> Stamped:
    """COUNT messages at RATE through the driver's producer, serviced as the engine does."""
    admin = driver.admin()
    admin.create_topics([topic], [1])
    got: dict[int, tuple[int, int, int]] = {}
    errors: list[str] = []

    def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
        _, _, _, _, seq, _, sent = header.unpack(value)
        assert latency_ns is not None
        start = sent if sent_ns is None else sent_ns
        got[seq] = (sent, start, start + latency_ns)

    try:
        producer: ProducerClient = driver.producer(topic, f"{topic}-p0", on_ack,
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
        admin.delete_topics([topic])
    finally:
        admin.close()
    assert errors == []
    assert sorted(got) == list(range(COUNT))
    return [got[seq] for seq in range(COUNT)]


def _bias(name: str, stamped: Stamped, wires: list[WireStamps], first: int) -> dict[str, Any]:
    """Match message k with the wire's k-th publish (AMQP tags from 1, Pulsar sequence ids
    from 0) and its confirm; print and return the bias figures."""
    wire = next(w for w in wires if any(w.published.values()))
    stream = next(s for s, p in wire.published.items() if p)
    published, confirmed = wire.published[stream], wire.confirmed[stream]
    assert len(published) == COUNT and len(confirmed) == COUNT
    to_wire, before, after, ack_bias = [], [], [], []
    for k, (header_sent, sent, ack) in enumerate(stamped):
        w_pub, w_ack = published[k + first], confirmed[k + first]
        assert sent <= w_pub and w_ack <= ack  # nothing stamped before the wire
        to_wire.append(w_pub - sent)
        ack_bias.append(ack - w_ack)
        before.append((ack - header_sent) - (w_ack - w_pub))  # send stamped at send()
        after.append((ack - sent) - (w_ack - w_pub))
    figures = {"send() stamp": _quantiles(before), "driver's send stamp": _quantiles(after),
               "send stamp -> wire": _quantiles(to_wire),
               "wire confirm -> ack stamp": _quantiles(ack_bias)}
    print(f"\n{name} {RATE} msg/s x {COUNT}, publish-latency bias (client - wire), "
          "p50 / p99 / max in µs:")
    for label, q in figures.items():
        print(f"  {label:28s} {q}")
    return figures


def test_pulsar_ack_stamp_is_bounded_against_the_wire(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        resolve_pulsar()
    except BrokerUnavailable as e:
        pytest.skip(str(e))
    proxy = WireStampProxy(("127.0.0.1", 1), "pulsar")  # its port is advertised below
    standalone = PulsarStandalone(workdir=tmp_path / "pulsar",
                                  extra_listeners={"wire": proxy.port})
    endpoint = standalone.start()
    try:
        proxy.target = ("127.0.0.1", int(endpoint.bootstrap.rsplit(":", 1)[1]))
        proxy.start()
        kwargs = PulsarDriverConfig.client_kwargs
        monkeypatch.setattr(PulsarDriverConfig, "client_kwargs",
                            lambda self, url: {**kwargs(self, url), "listener_name": "wire"})
        # the service URL is the proxy too: the client then reaches the broker through it
        # for lookups and, as the lookup's answer says, for the producer
        via = replace(endpoint, bootstrap=f"pulsar://127.0.0.1:{proxy.port}")
        driver = create_driver(via, shipped_driver("pulsar-local"))
        try:
            stamped = _publish(driver, "it-handoff-000")
        finally:
            wires = proxy.stop()
    finally:
        standalone.stop()
    _bias("Pulsar (batching)", stamped, wires, first=0)


def test_rabbitmq_send_is_stamped_at_the_wire_and_the_handoff_is_bounded(
        rmq: RabbitMQProcessCluster) -> None:
    port = int(rmq.endpoint.bootstrap.rsplit(":", 1)[1])
    proxy = WireStampProxy(("127.0.0.1", port), "amqp").start()
    try:
        endpoint = replace(rmq.endpoint, bootstrap=f"amqp://127.0.0.1:{proxy.port}")
        driver = create_driver(endpoint, shipped_driver("rabbitmq-omb"))
        stamped = _publish(driver, "it-handoff-000")
        # (the process's list: other tests' consumers add their own lines)
        docs = [json.loads(s) for s in driver.client_stats()]
        stats = [d["rabbitmq_producer"] for d in docs if "rabbitmq_producer" in d]
    finally:
        wires = proxy.stop()
    assert all(sent > header_sent for header_sent, sent, _ in stamped)  # the write, later
    _bias("RabbitMQ", stamped, wires, first=1)
    handoff = stats[0]["send_handoff_us"]
    assert handoff["count"] == COUNT
    print(f"  client statistics send_handoff_us: {handoff}")
