"""Where brokers come from: local processes, containers or remote clusters (DESIGN §5).

Every mode ends in one :class:`~pytest_brokerperf.endpoint.BrokerEndpoint`, so a
scenario never knows how its broker was made.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_brokerperf.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint

__all__ = ["ManagedBroker", "effective_mode", "start_broker"]


class _Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class ManagedBroker:
    """A broker this session started (or reached), with the way to let it go."""

    endpoint: BrokerEndpoint
    handle: _Stoppable | None = None

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()


def effective_mode(requested: str) -> str:
    """``auto`` means local processes until container support lands."""
    return "process" if requested == "auto" else requested


def start_broker(kind: str, settings: Settings, workdir: Path,
                 durability: int | None = None) -> ManagedBroker:
    """Start (or reach) a broker of ``kind`` as the settings say; raise BrokerUnavailable.

    ``durability`` (1-4) matters where it is broker-wide: Pulsar's bookie journal.
    """
    mode = settings.provision_effective
    if kind == "kafka" and mode == "process":
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

        cluster = KafkaProcessCluster(
            nodes=settings.nodes, version=settings.kafka_version,
            kafka_home=settings.kafka_home, workdir=workdir,
            metrics_agent=settings.broker_metrics,
        )
        endpoint = cluster.start()
        return ManagedBroker(endpoint, cluster)
    if kind == "pulsar" and mode == "process":
        from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

        # journal fsync is bookie-wide: one standalone serves one durability level
        standalone = PulsarStandalone(
            nodes=settings.nodes, version=settings.pulsar_version, workdir=workdir,
            durability=durability,
        )
        return ManagedBroker(standalone.start(), standalone)
    if kind == "rabbitmq" and mode == "process":
        from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster

        rmq = RabbitMQProcessCluster(nodes=settings.nodes, workdir=workdir)
        endpoint = rmq.start()
        if durability is not None:  # not broker-wide: the driver picks queue type/persistence
            endpoint.info["durability"] = durability
        return ManagedBroker(endpoint, rmq)
    if kind == "tansu" and mode == "process":
        from pytest_brokerperf.brokers.tansu.process import IN_MEMORY_NOTE, TansuProcess

        if durability is not None:
            raise BrokerUnavailable(f"durability level {durability} on Tansu: {IN_MEMORY_NOTE}")
        tansu = TansuProcess(nodes=settings.nodes, workdir=workdir)
        return ManagedBroker(tansu.start(), tansu)
    if kind in ("redpanda", "automq") and mode != "remote":
        raise BrokerUnavailable(
            f"{kind} cannot be started by pytest-brokerperf (no artifact it can install); "
            f"point it at a running {kind} cluster: --kafka-bootstrap=HOST:PORT (remote mode)"
        )
    if mode == "container":
        raise BrokerUnavailable(
            f"--brokerperf-provision=container is not available for {kind!r} in this version; "
            "use --brokerperf-provision=process (local processes, no Docker needed)"
        )
    if kind in ("kafka", "redpanda", "automq") and mode == "remote":
        from pytest_brokerperf.brokers.kafka.remote import remote_kafka_endpoint

        # nothing to stop; Redpanda and AutoMQ speak the Kafka protocol
        return ManagedBroker(remote_kafka_endpoint(settings, kind=kind))
    if kind == "pulsar" and mode == "remote":
        from pytest_brokerperf.brokers.pulsar.remote import remote_pulsar_endpoint

        endpoint = remote_pulsar_endpoint(settings)
        if durability is not None:  # declared by the user: the bookie journal is not visible
            endpoint.info["durability"] = durability
        return ManagedBroker(endpoint)  # nothing to stop
    if kind == "rabbitmq" and mode == "remote":
        from pytest_brokerperf.brokers.rabbitmq.remote import remote_rabbitmq_endpoint

        endpoint = remote_rabbitmq_endpoint(settings)
        if durability is not None:  # the driver picks queue type and persistence
            endpoint.info["durability"] = durability
        return ManagedBroker(endpoint)  # nothing to stop
    if mode == "remote":
        raise BrokerUnavailable(
            f"--brokerperf-provision=remote for {kind!r} needs the remote-cluster flags, "
            "which are not available in this version"
        )
    raise BrokerUnavailable(
        f"broker {kind!r} cannot be provisioned as {mode!r} in this version of "
        "pytest-brokerperf (available: kafka, pulsar, rabbitmq and tansu as local processes)"
    )
