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


def start_broker(kind: str, settings: Settings, workdir: Path) -> ManagedBroker:
    """Start (or reach) a broker of ``kind`` as the settings say; raise BrokerUnavailable."""
    mode = settings.provision_effective
    if kind == "kafka" and mode == "process":
        from pytest_brokerperf.provision.kafka_process import KafkaProcessCluster

        cluster = KafkaProcessCluster(
            nodes=settings.nodes, version=settings.kafka_version,
            kafka_home=settings.kafka_home, workdir=workdir,
        )
        endpoint = cluster.start()
        return ManagedBroker(endpoint, cluster)
    if mode == "container":
        raise BrokerUnavailable(
            f"--brokerperf-provision=container is not available for {kind!r} in this version; "
            "use --brokerperf-provision=process (local processes, no Docker needed)"
        )
    if mode == "remote":
        raise BrokerUnavailable(
            f"--brokerperf-provision=remote for {kind!r} needs the remote-cluster flags, "
            "which are not available in this version"
        )
    raise BrokerUnavailable(
        f"broker {kind!r} cannot be provisioned as {mode!r} in this version of "
        "pytest-brokerperf (available: kafka as local processes)"
    )
