"""Where brokers come from: local processes, containers or remote clusters.

Each broker kind knows how it is started in each mode (its
:class:`~pytest_brokerperf.brokers.base.BrokerType`); this package holds the machinery
they share — managed processes that never outlive pytest (:mod:`.process`), the
lifecycle base every local broker subclasses (:mod:`.lifecycle`), Java discovery and JVM
flags (:mod:`.java`), the broker/generator CPU split (:mod:`.cpus`), Maven jar
resolution (:mod:`.maven`), free ports (:mod:`.ports`) — and :func:`start_broker`, the
one call the fixtures make. Every mode ends in one
:class:`~pytest_brokerperf.endpoint.BrokerEndpoint`, so a scenario never knows how its
broker was made.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.brokers.base import ManagedBroker

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings

__all__ = ["ManagedBroker", "effective_mode", "start_broker"]


def effective_mode(requested: str) -> str:
    """``auto`` means local processes until container support lands."""
    return "process" if requested == "auto" else requested


def start_broker(kind: str, settings: Settings, workdir: Path,
                 durability: int | None = None) -> ManagedBroker:
    """Start (or reach) a broker of ``kind`` as the settings say; raise BrokerUnavailable.

    ``durability`` (1-4) is the test's level: started into the broker where it is
    broker-wide (Pulsar's bookie journal), recorded on the endpoint everywhere.
    """
    from pytest_brokerperf import brokers

    return brokers.get(kind).start(settings.provision_effective, settings, workdir,
                                   durability)
