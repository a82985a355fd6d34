"""AutoMQ: a Kafka-protocol broker on object storage, reached remotely through the
Kafka driver with AutoMQ's own driver config (RF 1 + ``flush.messages=1``: durability
claimed from its write-ahead log). Only remote mode exists; levels are not mapped.

No container mode: AutoMQ needs its image (automqinc/automq) and an S3-compatible
object store beside it, and neither can be obtained on this project's machines, so a
container mode could not be run or tested here (docs/reference/containers.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.base import ManagedBroker
from pytest_brokerperf.brokers.kafka import KafkaProtocolBroker
from pytest_brokerperf.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings

__all__ = ["AutoMQBroker"]


class AutoMQBroker(KafkaProtocolBroker):
    """AutoMQ (remote clusters only in this version)."""

    name: ClassVar[str] = "automq"

    def start_container(self, settings: Settings, workdir: Path,
                        durability: int | None) -> ManagedBroker:
        raise BrokerUnavailable(
            "--brokerperf-provision=container is not offered for automq: AutoMQ needs the "
            "automqinc/automq image and an S3-compatible object store beside it, which this "
            "version does not provision; run against an existing AutoMQ cluster with "
            "--kafka-bootstrap=HOST:PORT")

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        return shipped_driver("automq")
