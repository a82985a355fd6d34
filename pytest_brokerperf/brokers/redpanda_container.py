"""Redpanda in a container (``--broker=redpanda --brokerperf-provision=container``).

The official ``redpandadata/redpanda`` image runs ``redpanda start`` with its flags as
the command; this module renders them (:func:`start_command`):

- one node (``--smp 1``, ``--overprovisioned``: Redpanda shares the machine with the load
  generator, so it must not pin and busy-poll every core; ``--memory`` from the heap
  budget), **not** ``--mode dev-container``, which relaxes durability settings a
  benchmark must keep at Redpanda's defaults;
- two Kafka listeners: ``external`` binds port P inside and is published as the same
  port on 127.0.0.1 and advertised as ``127.0.0.1:P`` (host clients), ``internal`` on
  9092 is advertised as ``redpanda-1:9092`` (clients on the session's network) — the
  same scheme as Kafka's container mode;
- ready when the log says ``Successfully started Redpanda!`` and the Kafka metadata seen
  from the host names the node at ``127.0.0.1:P``.

No Redpanda binary or image can be obtained on this project's machines, so the real
image is not run in the project's CI: the rendering is unit-tested, and the readiness and
listener logic run against a stand-in image (``ci/images/redpanda-standin``: Kafka
behind a ``redpanda start`` that maps the same flags), see docs/reference/containers.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.container import await_node_advertised
from pytest_brokerperf.brokers.provision.container_node import (
    ContainerNode,
    ContainerPlan,
    wait_for_log,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.core.errors import ConfigError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["REDPANDA_DEFAULT_VERSION", "RedpandaContainer", "default_images", "start_command"]

REDPANDA_DEFAULT_VERSION = "v24.2.7"
ALIAS = "redpanda-1"
IN_NETWORK_PORT = 9092
READY_LINE = b"Successfully started Redpanda!"
DEFAULT_START_TIMEOUT_S = 120.0


def default_images(version: str = REDPANDA_DEFAULT_VERSION) -> tuple[str, ...]:
    """The official image (no local build exists: see the module docstring)."""
    return (f"redpandadata/redpanda:{version}",)


def start_command(host_port: int, *, memory_mb: int = 1024, smp: int = 1) -> list[str]:
    """``redpanda start`` flags for one node with host and in-network listeners."""
    if memory_mb < 512 or smp < 1:
        raise ConfigError(f"Redpanda needs --memory >= 512M and --smp >= 1, got "
                          f"{memory_mb}M and {smp}")
    return [
        "redpanda", "start",
        "--node-id", "0",
        "--smp", str(smp),
        "--memory", f"{memory_mb}M",
        "--reserve-memory", "0M",
        "--overprovisioned",
        "--check=false",
        "--kafka-addr", f"internal://0.0.0.0:{IN_NETWORK_PORT},external://0.0.0.0:{host_port}",
        "--advertise-kafka-addr",
        f"internal://{ALIAS}:{IN_NETWORK_PORT},external://{LOOPBACK}:{host_port}",
        "--default-log-level=info",
    ]


class RedpandaContainer(ContainerNode):
    """One Redpanda node in a container on the session's network."""

    kind: ClassVar[str] = "redpanda"

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 version: str = REDPANDA_DEFAULT_VERSION, memory_mb: int = 1024,
                 cpus: set[int] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.version = version
        self.memory_mb = memory_mb
        self._host_port: int | None = None
        self._endpoint: BrokerEndpoint | None = None

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the Redpanda container is not running; call start() first")
        return self._endpoint

    def image_candidates(self) -> tuple[str, ...]:
        return default_images(self.version)

    def plan(self) -> ContainerPlan:
        (port,) = free_ports(1)
        self._host_port = port
        return ContainerPlan(alias=ALIAS, hostname=ALIAS, env={},
                             command=start_command(port, memory_mb=self.memory_mb),
                             ports={port: port}, memory_mb=self.memory_mb + 512)

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """The ready line, then the Kafka metadata from the host names the node at the
        address it advertises to the host."""
        wait_for_log(container, READY_LINE, deadline, self.start_timeout,
                     since=self.log_since)
        await_node_advertised(f"{LOOPBACK}:{self._host_port}", deadline)

    def start(self) -> BrokerEndpoint:
        (plan,), info = self.launch()
        labels = info.pop("image_labels")
        info.update({
            "command": plan.command,
            "listeners": {"external": f"{LOOPBACK}:{self._host_port}",
                          "internal": f"{ALIAS}:{IN_NETWORK_PORT}"},
            "in_network_bootstrap": f"{ALIAS}:{IN_NETWORK_PORT}",
            "memory_mb": self.memory_mb,
        })
        self._endpoint = BrokerEndpoint(
            kind="redpanda", bootstrap=f"{LOOPBACK}:{self._host_port}", mode="container",
            nodes=1, version=labels.get("org.opencontainers.image.version") or self.version,
            info=info, local=self.local_record(info))
        return self.serving(self._endpoint)

    def forget(self) -> None:
        self._endpoint = None
