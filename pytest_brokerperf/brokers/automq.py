"""AutoMQ: a Kafka-protocol broker on object storage, reached through the Kafka driver
with AutoMQ's own driver config (RF 1 + ``flush.messages=1``: durability claimed from its
write-ahead log). Remote (``--broker=automq --kafka-bootstrap=HOST:PORT``) or one node
in a container beside its object store (:mod:`.automq_container`); levels are not
mapped. No AutoMQ build can be installed from this project's package sources, so there
is no process mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.base import ManagedBroker
from pytest_brokerperf.brokers.kafka import KafkaProtocolBroker
from pytest_brokerperf.core.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings

__all__ = ["AutoMQBroker"]


class AutoMQBroker(KafkaProtocolBroker):
    """AutoMQ (a remote cluster, or one node and its object store in containers)."""

    name: ClassVar[str] = "automq"
    container_nodes: ClassVar[tuple[int, ...]] = (1,)

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        from pytest_brokerperf.brokers.automq_container import default_images

        return default_images()

    def companion_images(self, settings: BrokerSettings) -> dict[str, tuple[str, ...]]:
        from pytest_brokerperf.brokers.automq_container import (
            OBJECT_STORE_KIND,
            object_store_images,
        )

        return {OBJECT_STORE_KIND: object_store_images()}

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """One node and its object store (:mod:`.automq_container`)."""
        from pytest_brokerperf.brokers.automq_container import (
            OBJECT_STORE_KIND,
            AutoMQContainer,
        )

        if settings.nodes != 1:
            raise BrokerUnavailable(
                f"--brokerperf-provision=container runs one AutoMQ node in this version, "
                f"not {settings.nodes} (--brokerperf-nodes); run a larger AutoMQ cluster "
                "yourself and pass --kafka-bootstrap=HOST:PORT")
        node = AutoMQContainer(workdir=workdir, run_id=settings.run_id,
                               image=settings.image_for("automq"),
                               store_image=settings.image_for(OBJECT_STORE_KIND))
        return ManagedBroker(node.start(), node)

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        return shipped_driver("automq")
