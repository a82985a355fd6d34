"""AutoMQ: a Kafka-protocol broker on object storage, reached remotely through the
Kafka driver with AutoMQ's own driver config (RF 1 + ``flush.messages=1``: durability
claimed from its write-ahead log). Only remote mode exists; levels are not mapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pytest_brokerperf.brokers.kafka import KafkaProtocolBroker

__all__ = ["AutoMQBroker"]


class AutoMQBroker(KafkaProtocolBroker):
    """AutoMQ (remote clusters only in this version)."""

    name: ClassVar[str] = "automq"

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        return shipped_driver("automq")
