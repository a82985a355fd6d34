"""RabbitMQ: the pika driver, local nodes from Debian's package, remote brokers.

Everything RabbitMQ lives in this package: the driver with asynchronous publisher
confirms (:mod:`.driver`), its OMB driver YAML and queue types (:mod:`.config`), local
nodes (one, or a three-node cluster) run as our own processes (:mod:`.process`) or in
containers (:mod:`.container`), remote
brokers by ``--rabbitmq-url`` (:mod:`.remote`) and durability levels, which are per
queue (:mod:`.durability`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.base import BrokerType, ManagedBroker, RemoteFlags
from pytest_brokerperf.brokers.capabilities import Capabilities
from pytest_brokerperf.brokers.durability import check_level
from pytest_brokerperf.brokers.rabbitmq import durability as rabbitmq_durability
from pytest_brokerperf.brokers.rabbitmq.readback import RabbitMQReadBack

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

__all__ = ["RabbitMQBroker"]


class RabbitMQBroker(BrokerType):
    """RabbitMQ through pika."""

    def check_driver_file(self, path: Path) -> None:
        from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig

        RabbitMQDriverConfig.from_yaml(path)

    def fault_leader(self, endpoint: BrokerEndpoint, driver: Driver, topic: str) -> int | None:
        """The leader node of the run's first quorum or stream queue (``rmqN@localhost``
        is node N); None for classic queues, which have no leader."""
        import re

        from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

        ctl = driver.ctl() if isinstance(driver, RabbitMQDriver) else None
        if ctl is None:
            return None
        rows = ctl.json("rabbitmqctl", "list_queues", "-q", "name", "leader")
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and str(row.get("name", "")).startswith(topic):
                m = re.match(r"rmq(\d+)@", str(row.get("leader") or ""))
                if m:
                    return int(m.group(1))
        return None

    name: ClassVar[str] = "rabbitmq"
    #: an amqps listener with a per-run CA (--brokerperf-tls)
    tls_modes: ClassVar[tuple[str, ...]] = ("process",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        read_back=RabbitMQReadBack(),
        lacks={
            "partition_mover": (
                "partition reassignment is a Kafka-protocol operation "
                "(AlterPartitionReassignments); RabbitMQ has no partitions to move"),
            "earliest_reader": (
                "a new subscription starts from the earliest message only on a stream queue, "
                "and the mixed scenario's subscriptions are per-subscription queues that hold "
                "only what was published after they were declared")})
    protocol: ClassVar[str] = "amqp"
    no_durability: ClassVar[str | None] = None
    container_nodes: ClassVar[tuple[int, ...]] = (1, 3)
    memory_cap_modes: ClassVar[tuple[str, ...]] = ("process", "container")
    power_cut_modes: ClassVar[tuple[str, ...]] = ("process",)
    remote_flags: ClassVar[RemoteFlags | None] = RemoteFlags(
        address=("rabbitmq_url",),
        needs="pass --rabbitmq-url=amqp://USER:PASSWORD@HOST:5672/VHOST[,amqp://...]",
    )

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        """A direct exchange: the workload's partitions become routing keys."""
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        return shipped_driver("rabbitmq-quorum")

    def create_driver(self, endpoint: BrokerEndpoint, driver_file: Path | None, *,
                      scenario: str = "tailread", stats_interval_ms: int = 5000
                      ) -> RabbitMQDriver:
        from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
        from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

        path = driver_file or self.default_driver_file(endpoint.nodes, scenario)
        cfg = RabbitMQDriverConfig.from_yaml(path)
        if endpoint.durability is not None:  # per queue: queue type, replicas, persistence
            cfg = rabbitmq_durability.apply_rabbitmq(
                cfg, check_level(endpoint.durability, "the endpoint's durability level"),
                endpoint.nodes)
        return RabbitMQDriver(endpoint, cfg)

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster

        cluster = RabbitMQProcessCluster(nodes=settings.nodes, workdir=workdir,
                                         memory_limit=settings.broker_memory,
                                         powercut_fs=settings.powercut_effective,
                                         tls=settings.tls)
        return ManagedBroker(cluster.start(), cluster)

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        from pytest_brokerperf.brokers.rabbitmq.container import default_images

        return default_images()

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """One node, or a cluster of three, in containers (:mod:`.container`)."""
        from pytest_brokerperf.brokers.rabbitmq.container import RabbitMQContainerCluster

        cluster = RabbitMQContainerCluster(workdir=workdir, run_id=settings.run_id,
                                           nodes=settings.nodes,
                                           image=settings.image_for("rabbitmq"))
        cluster.memory_limit = settings.broker_memory
        return ManagedBroker(cluster.start(), cluster)

    def reach_remote(self, settings: BrokerSettings, *, timeout_s: float) -> ManagedBroker:
        from pytest_brokerperf.brokers.rabbitmq.remote import remote_rabbitmq_endpoint

        return ManagedBroker(remote_rabbitmq_endpoint(settings, timeout_s))  # nothing to stop

    def remote_address(self, settings: BrokerSettings) -> str | None:
        """The URIs without user and password."""
        from pytest_brokerperf.brokers.rabbitmq.remote import split_credentials

        return ",".join(split_credentials(u.reveal())[0] for u in settings.rabbitmq_url) or None

    def check_offered(self, level: int | None, nodes: int, *, remote: bool = False) -> None:
        super().check_offered(level, nodes, remote=remote)
        if level is not None and not remote:  # the queue type's replicas must fit
            rabbitmq_durability.rabbitmq_settings(level, nodes)

    def level_settings(self, level: int, *, nodes: int = 1,
                       shape: Mapping[str, int | None] | None = None) -> dict[str, Any]:
        return rabbitmq_durability.level_settings(level, nodes)

    def durability_settings(self, description: Mapping[str, Any],
                            endpoint: BrokerEndpoint) -> dict[str, Any]:
        return rabbitmq_durability.driver_settings(description)

    def durability_read_back(self, read_back: Mapping[str, Any],
                             endpoint: BrokerEndpoint) -> dict[str, Any]:
        return rabbitmq_durability.read_back_view(read_back)
