"""Redpanda: a Kafka-protocol broker through the Kafka driver, remote
(``--broker=redpanda --kafka-bootstrap=HOST:PORT``) or one node in a container from the
official image (:mod:`.redpanda_container`); durability levels are not mapped. No
Redpanda binary can be installed from this project's package sources, so there is no
process mode.
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

__all__ = ["RedpandaBroker"]


class RedpandaBroker(KafkaProtocolBroker):
    """Redpanda (Raft; fsync per batch by Redpanda's default)."""

    name: ClassVar[str] = "redpanda"
    container_nodes: ClassVar[tuple[int, ...]] = (1,)

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        from pytest_brokerperf.brokers.redpanda_container import default_images

        return default_images()

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """One node from the official image (:mod:`.redpanda_container`)."""
        from pytest_brokerperf.brokers.redpanda_container import RedpandaContainer

        if settings.nodes != 1:
            raise BrokerUnavailable(
                f"--brokerperf-provision=container runs one Redpanda node in this version, "
                f"not {settings.nodes} (--brokerperf-nodes)")
        node = RedpandaContainer(workdir=workdir, run_id=settings.run_id,
                                 image=settings.image_for("redpanda"))
        return ManagedBroker(node.start(), node)

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        if nodes >= 3:
            return shipped_driver("redpanda")
        return super().default_driver_file(nodes, scenario)
