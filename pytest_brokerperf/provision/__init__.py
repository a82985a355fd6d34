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

__all__ = ["ManagedBroker", "effective_mode", "provision_reason", "start_broker"]


def effective_mode(requested: str) -> str:
    """``auto`` means local processes (see :func:`provision_reason` for why)."""
    return "process" if requested == "auto" else requested


def provision_reason(settings: Settings) -> str | None:
    """Which provisioning mode the session uses and why, with the Docker engine's state
    (for the report header); None for remote clusters.

    ``auto`` stays ``process`` even when an engine answers: container mode is offered for
    one Kafka node only in this version, and an engine on the machine must not change
    which brokers a test suite measures (CI's integration tests run in process mode).
    """
    from pytest_brokerperf.provision.containers import engine_status

    if settings.provision_effective not in ("process", "container"):
        return None
    if settings.provision_effective == "process" and settings.provision != "auto":
        return None
    engine = engine_status()
    where = (f"a Docker engine answers at {engine.address}" if engine.answers
             else f"no Docker engine answers at {engine.address} ({engine.detail})")
    if settings.provision == "auto":
        return (f"provision auto -> process: local processes unless "
                f"--brokerperf-provision=container is asked for ({where})")
    if engine.answers:
        return f"provision container: {where}"
    return f"provision container: {where}; container-mode tests skip"


def start_broker(kind: str, settings: Settings, workdir: Path,
                 durability: int | None = None) -> ManagedBroker:
    """Start (or reach) a broker of ``kind`` as the settings say; raise BrokerUnavailable.

    ``durability`` (1-4) is the test's level: started into the broker where it is
    broker-wide (Pulsar's bookie journal), recorded on the endpoint everywhere.
    """
    from pytest_brokerperf import brokers

    return brokers.get(kind).start(settings.provision_effective, settings, workdir,
                                   durability)
