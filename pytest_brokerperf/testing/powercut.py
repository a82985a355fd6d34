"""Helpers for the power-cut integration tests: local Kafka nodes on the filesystem that
forgets unsynced writes, and numbered messages whose acknowledgements are counted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.faults.powercut import powercut_problem

__all__ = ["powercut_kafka", "produce_numbered"]


@contextmanager
def powercut_kafka(workdir: Path, *, nodes: int, heap: str) -> Iterator[KafkaProcessCluster]:
    """Started Kafka nodes whose data directories are power-cut filesystems (skips the
    test where FUSE or fusepy is missing); stopped on exit."""
    problem = powercut_problem()
    if problem is not None:
        pytest.skip(problem)
    cluster = KafkaProcessCluster(nodes=nodes, heap=heap, powercut_fs=True, workdir=workdir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


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
