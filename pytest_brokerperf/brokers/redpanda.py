"""Redpanda: a Kafka-protocol broker reached remotely through the Kafka driver.

No artifact this project can install starts Redpanda, so only remote mode exists
(``--broker=redpanda --kafka-bootstrap=HOST:PORT``); durability levels are not mapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pytest_brokerperf.brokers.kafka import KafkaProtocolBroker

__all__ = ["RedpandaBroker"]


class RedpandaBroker(KafkaProtocolBroker):
    """Redpanda (Raft; fsync per batch by Redpanda's default)."""

    name: ClassVar[str] = "redpanda"

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        if nodes >= 3:
            return shipped_driver("redpanda")
        return super().default_driver_file(nodes, scenario)
