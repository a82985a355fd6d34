"""Apache Kafka, and the base of every broker spoken to through the Kafka protocol.

Everything Kafka lives in this package: the confluent-kafka driver (:mod:`.driver`), the
OMB driver YAML and client properties (:mod:`.config`), local KRaft clusters from Maven
Central jars (:mod:`.process`, :mod:`.jmx_exporter`), containers (:mod:`.container`),
remote clusters (:mod:`.remote`),
durability levels (:mod:`.durability`), broker metrics (:mod:`.metrics`), flags
(:mod:`.options`) and ``brokerperf cleanup`` (:mod:`.cleanup`). Tansu, Redpanda and
AutoMQ reuse it through :class:`KafkaProtocolBroker`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.base import BrokerType, ManagedBroker, RemoteFlags
from pytest_brokerperf.brokers.capabilities import Capabilities
from pytest_brokerperf.brokers.durability import check_level
from pytest_brokerperf.brokers.kafka import durability as kafka_durability
from pytest_brokerperf.brokers.kafka.readback import KafkaEarliestReader, KafkaReadBack
from pytest_brokerperf.brokers.kafka.reassign import KafkaPartitionMover
from pytest_brokerperf.core.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.brokers.producer_tweak import ProducerTweak
    from pytest_brokerperf.metrics.broker import Series

__all__ = ["KafkaBroker", "KafkaProtocolBroker"]


class KafkaProtocolBroker(BrokerType):
    """A broker reached through the Kafka driver (confluent-kafka): remote clusters by
    ``--kafka-bootstrap``, and the shipped Kafka driver files unless a kind has its own."""

    def check_driver_file(self, path: Path) -> None:
        from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

        KafkaDriverConfig.from_yaml(path)

    def fault_leader(self, endpoint: BrokerEndpoint, driver: Driver, topic: str) -> int | None:
        """The leader of partition 0 of the run's first topic (local node ids are 1..N)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**endpoint.client_config, "bootstrap.servers": endpoint.bootstrap,
                             "log_level": 0})
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        part = md.partitions.get(0) if md is not None else None
        return int(part.leader) if part is not None and part.leader >= 0 else None

    protocol: ClassVar[str] = "kafka"
    capabilities: ClassVar[Capabilities] = Capabilities(
        earliest_reader=KafkaEarliestReader(), partition_mover=KafkaPartitionMover(),
        lacks={"read_back": "no read-back after a power cut is wired for this kind"})
    remote_flags: ClassVar[RemoteFlags | None] = RemoteFlags(
        address=("kafka_bootstrap",),
        needs="pass --kafka-bootstrap=HOST:PORT[,HOST:PORT] (and --kafka-config=PATH for TLS "
              "or SASL)",
        client_config="kafka_config",
        client_config_needs="--kafka-bootstrap=HOST:PORT",
    )

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        """OMB's own Kafka configs need replication factor 3; a single local node gets the
        shipped ``kafka-local.yaml`` (RF 1) instead of a silently lowered RF."""
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        if nodes >= 3:
            return shipped_driver("kafka-throughput" if scenario == "throughput"
                                  else "kafka-latency")
        return shipped_driver("kafka-local")

    def tweak_driver_file(self, base: Path, tweak: ProducerTweak, dest: Path) -> Path:
        """Kafka producer properties: ``batch.size``, ``linger.ms``, ``compression.type``.
        librdkafka has no one-message-outstanding send mode, so ``sync`` is refused."""
        from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

        if tweak.send_mode == "sync":
            raise BrokerUnavailable(
                f"{self.name}: a synchronous producer (one message outstanding, the Pulsar "
                "performance-limit study's sync mode) is not offered by the Kafka driver: "
                "librdkafka queues and batches sends whatever max.in.flight says. The sync "
                "cases run on Pulsar (--broker=pulsar)")
        changes: dict[str, str] = {}
        if tweak.batch_bytes is not None:
            changes["batch.size"] = str(tweak.batch_bytes)
        if tweak.linger_ms is not None:
            changes["linger.ms"] = str(tweak.linger_ms)
        if tweak.compression is not None:
            changes["compression.type"] = tweak.compression
        cfg = KafkaDriverConfig.from_yaml(base)
        if changes:
            cfg = cfg.with_overrides(producer=changes, reason=f"study case sweep {tweak.id}")
        return cfg.to_yaml(dest)

    def apply_level(self, cfg: KafkaDriverConfig, level: int) -> KafkaDriverConfig:
        """``cfg`` at durability ``level`` (per topic: producer acks and topic configs)."""
        raise self.unavailable_level(level)

    def create_driver(self, endpoint: BrokerEndpoint, driver_file: Path | None, *,
                      scenario: str = "tailread", stats_interval_ms: int = 5000
                      ) -> KafkaDriver:
        from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
        from pytest_brokerperf.brokers.kafka.driver import KafkaDriver

        path = driver_file or self.default_driver_file(endpoint.nodes, scenario)
        cfg = KafkaDriverConfig.from_yaml(path)
        if endpoint.durability is not None:
            cfg = self.apply_level(cfg, check_level(endpoint.durability, "the endpoint's "
                                                    "durability level"))
        return KafkaDriver(endpoint, cfg, stats_interval_ms=stats_interval_ms, kind=self.name)

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        raise BrokerUnavailable(
            f"{self.name} cannot be started by pytest-brokerperf (no artifact it can "
            f"install); point it at a running {self.name} cluster: "
            "--kafka-bootstrap=HOST:PORT (remote mode)")

    def reach_remote(self, settings: BrokerSettings, *, timeout_s: float) -> ManagedBroker:
        from pytest_brokerperf.brokers.kafka.remote import remote_kafka_endpoint

        # nothing to stop: someone else runs it
        return ManagedBroker(remote_kafka_endpoint(settings, timeout_s, kind=self.name))

    def check_client_config(self, settings: BrokerSettings) -> None:
        from pytest_brokerperf.brokers.kafka.remote import check_client_config

        check_client_config(settings)

    def remote_address(self, settings: BrokerSettings) -> str | None:
        return settings.kafka_bootstrap

    def dry_run_endpoint(self, settings: BrokerSettings) -> BrokerEndpoint:
        """The generic dry-run endpoint, plus the security the client config names."""
        from pytest_brokerperf.brokers.kafka.remote import client_config

        endpoint = super().dry_run_endpoint(settings)
        client, _ = client_config(settings)
        if not client or endpoint.security_protocol is not None:
            return endpoint
        return replace(endpoint, security_protocol=client.get("security.protocol", "PLAINTEXT"),
                       sasl_mechanism=client.get("sasl.mechanism"))

    def prometheus_figures(self, series: Series) -> dict[str, float]:
        from pytest_brokerperf.brokers.kafka.metrics import kafka_figures

        return kafka_figures(series)


class KafkaBroker(KafkaProtocolBroker):
    """Apache Kafka: local KRaft clusters (1 or 3 nodes) as processes or containers, or a
    remote cluster."""


    name: ClassVar[str] = "kafka"
    no_durability: ClassVar[str | None] = None
    container_nodes: ClassVar[tuple[int, ...]] = (1, 3)
    memory_cap_modes: ClassVar[tuple[str, ...]] = ("process", "container")
    #: every node's server.properties takes a study's broker settings last
    server_settings_modes: ClassVar[tuple[str, ...]] = ("process", "container")
    power_cut_modes: ClassVar[tuple[str, ...]] = ("process",)
    #: SSL and SASL_SSL listeners with a per-run CA (--brokerperf-tls)
    tls_modes: ClassVar[tuple[str, ...]] = ("process",)
    capabilities: ClassVar[Capabilities] = Capabilities(
        earliest_reader=KafkaEarliestReader(), partition_mover=KafkaPartitionMover(),
        read_back=KafkaReadBack())

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        from pytest_brokerperf.brokers.kafka.container import default_images

        return default_images(settings.kafka_version)

    def memory_floor(self) -> int:
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

        return KafkaProcessCluster().memory_floor()

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

        cluster = KafkaProcessCluster(
            nodes=settings.nodes, version=settings.kafka_version,
            kafka_home=settings.kafka_home, workdir=workdir,
            metrics_agent=settings.broker_metrics, memory_limit=settings.broker_memory,
            powercut_fs=settings.powercut_effective, broker_overrides=dict(server or {}),
            tls=settings.tls,
        )
        return ManagedBroker(cluster.start(), cluster)

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """One or three KRaft nodes in containers (:mod:`.container`)."""
        from pytest_brokerperf.brokers.kafka.container import KafkaContainerCluster

        if settings.kafka_home is not None:
            raise BrokerUnavailable(
                "--kafka-home names local jars, which container mode does not use; drop it, "
                "or use --brokerperf-provision=process")
        cluster = KafkaContainerCluster(
            version=settings.kafka_version, workdir=workdir, run_id=settings.run_id,
            nodes=settings.nodes, image=settings.image_for("kafka"),
            broker_overrides=dict(server or {}))
        cluster.memory_limit = settings.broker_memory
        return ManagedBroker(cluster.start(), cluster)

    def apply_level(self, cfg: KafkaDriverConfig, level: int) -> KafkaDriverConfig:
        return kafka_durability.apply_kafka(cfg, level)

    def level_settings(self, level: int, *, nodes: int = 1,
                       shape: Mapping[str, int | None] | None = None) -> dict[str, Any]:
        return kafka_durability.level_settings(level, nodes, (shape or {}).get("replicationFactor"))

    def durability_settings(self, description: Mapping[str, Any],
                            endpoint: BrokerEndpoint) -> dict[str, Any]:
        return kafka_durability.driver_settings(description)

    def durability_read_back(self, read_back: Mapping[str, Any],
                             endpoint: BrokerEndpoint) -> dict[str, Any]:
        return kafka_durability.read_back_view(read_back)
