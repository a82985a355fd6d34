"""Helpers for the power-cut integration tests: local Kafka or RabbitMQ nodes or a
Pulsar standalone on the filesystem that forgets unsynced writes, and numbered messages
whose acknowledgements are counted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.provision.lifecycle import ProcessCluster
from pytest_brokerperf.brokers.provision.powercut import powercut_problem
from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone
from pytest_brokerperf.brokers.rabbitmq.process import (
    RabbitMQProcessCluster,
    rabbitmq_available,
)

__all__ = ["powercut_kafka", "powercut_pulsar", "powercut_rabbitmq", "produce_numbered",
           "publish_numbered_amqp", "send_harness_pulsar"]


@contextmanager
def _powercut_cluster(cluster: ProcessCluster[Any]) -> Iterator[Any]:
    """``cluster`` (built with ``powercut_fs=True``) started, stopped on exit; skips the
    test where FUSE or fusepy is missing."""
    problem = powercut_problem()
    if problem is not None:
        pytest.skip(problem)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def powercut_kafka(workdir: Path, *, nodes: int, heap: str) -> Iterator[KafkaProcessCluster]:
    """Started Kafka nodes whose data directories are power-cut filesystems."""
    with _powercut_cluster(KafkaProcessCluster(nodes=nodes, heap=heap, powercut_fs=True,
                                               workdir=workdir)) as cluster:
        yield cluster


@contextmanager
def powercut_rabbitmq(workdir: Path, *, nodes: int) -> Iterator[RabbitMQProcessCluster]:
    """Started RabbitMQ nodes whose data directories are power-cut filesystems (skips
    where RabbitMQ is not installed)."""
    missing = rabbitmq_available()
    if missing is not None:
        pytest.skip(missing)
    with _powercut_cluster(RabbitMQProcessCluster(nodes=nodes, powercut_fs=True,
                                                  workdir=workdir)) as cluster:
        yield cluster


@contextmanager
def powercut_pulsar(workdir: Path, *, durability: int, bookies: int = 1
                    ) -> Iterator[PulsarStandalone]:
    """A started Pulsar standalone whose data directory (metadata store and every
    bookie) is a power-cut filesystem; its bookie journal as ``durability`` sets it."""
    with _powercut_cluster(PulsarStandalone(nodes=bookies, durability=durability,
                                            heap="512m", direct_memory="512m",
                                            powercut_fs=True, workdir=workdir)) as cluster:
        yield cluster


def send_harness_pulsar(service_url: str, topic: str, n: int, producer: int) -> int:
    """Send harness data messages (sequences 0..n-1 of ``producer``) one at a time, each
    acknowledgement awaited, batching off; the bitmap of the sequences acknowledged."""
    import pulsar

    from pytest_brokerperf.core.header import KIND_DATA, MAGIC, VERSION, pack

    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    acked = 0
    try:
        p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=30_000)
        for seq in range(n):
            try:
                p.send(pack(MAGIC, VERSION, KIND_DATA, producer, seq, 0, 0))
            except pulsar.PulsarException:
                continue
            acked |= 1 << seq
        p.close()
    finally:
        client.close()
    return acked


def publish_numbered_amqp(url: str, queue: str, n: int) -> list[int]:
    """Publish the values 0..n-1 as persistent messages with publisher confirms, one
    confirm awaited per message (pika's BlockingChannel); the numbers confirmed."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    confirmed: list[int] = []
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        for seq in range(n):
            try:
                ch.basic_publish("", queue, str(seq).encode(),
                                 pika.BasicProperties(delivery_mode=2), mandatory=True)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError):
                continue
            confirmed.append(seq)
    finally:
        conn.close()
    return confirmed


def produce_numbered(bootstrap: str, topic: str, n: int) -> list[int]:
    """Send the values 0..n-1 with ``acks=all``; the numbers the cluster acknowledged."""
    import confluent_kafka as ck

    acked: list[int] = []

    def on_ack(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is None:
            acked.append(int(msg.value() or b"-1"))

    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False, "log_level": 0})
    for seq in range(n):
        p.produce(topic, value=str(seq).encode(), on_delivery=on_ack)
        p.poll(0)
    assert p.flush(60) == 0, "the producer still had messages in flight after 60 s"
    return acked
