"""Apache Pulsar: the pulsar-client driver, local standalones, remote clusters.

Everything Pulsar lives in this package: the driver (:mod:`.driver`), its OMB driver
YAML (:mod:`.config`), a local standalone from Maven Central jars with one or three
bookies (:mod:`.process`), remote clusters by ``--pulsar-url`` (:mod:`.remote`) and
durability levels (:mod:`.durability`), whose bookie journal half is broker-wide.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from pytest_brokerperf.brokers.base import BrokerType, ManagedBroker, RemoteFlags
from pytest_brokerperf.brokers.capabilities import Capabilities
from pytest_brokerperf.brokers.durability import check_level
from pytest_brokerperf.brokers.pulsar import durability as pulsar_durability
from pytest_brokerperf.brokers.pulsar.readback import PulsarEarliestReader, PulsarReadBack

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.producer_tweak import ProducerTweak
    from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver

__all__ = ["PulsarBroker"]


class PulsarBroker(BrokerType):
    """Apache Pulsar through pulsar-client."""

    def check_driver_file(self, path: Path) -> None:
        from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig

        PulsarDriverConfig.from_yaml(path)

    name: ClassVar[str] = "pulsar"
    capabilities: ClassVar[Capabilities] = Capabilities(
        earliest_reader=PulsarEarliestReader(), read_back=PulsarReadBack(),
        lacks={"partition_mover": (
            "partition reassignment is a Kafka-protocol operation (AlterPartitionReassignments); "
            "Pulsar moves bundles between brokers, not partitions with their data")})
    protocol: ClassVar[str] = "pulsar"
    broker_wide_durability: ClassVar[bool] = True  # the bookie journal
    no_durability: ClassVar[str | None] = None
    container_nodes: ClassVar[tuple[int, ...]] = (1, 3)  # three: bookies in one JVM
    memory_cap_modes: ClassVar[tuple[str, ...]] = ("process", "container")
    #: standalone.conf (process, one container) or broker.conf and bookkeeper.conf
    #: (three containers) take a study's broker and bookie settings last
    server_settings_modes: ClassVar[tuple[str, ...]] = ("process", "container")
    #: the local standalone's data directory (metadata store, every bookie) on the
    #: power-cut filesystem; one JVM, so node 1's cut is every bookie's at once
    power_cut_modes: ClassVar[tuple[str, ...]] = ("process",)
    #: pulsar+ssl:// and https:// listeners with a per-run CA (--brokerperf-tls)
    tls_modes: ClassVar[tuple[str, ...]] = ("process",)
    power_cut_one_process: ClassVar[str] = (
        "a local Pulsar is one standalone JVM holding the broker, the metadata store and "
        "every bookie, so node 1 is its only node and its power cut is every bookie's")
    remote_flags: ClassVar[RemoteFlags | None] = RemoteFlags(
        address=("pulsar_url", "pulsar_admin_url"),
        needs="pass --pulsar-url=pulsar://HOST:6650 (and --pulsar-admin-url if the admin API "
              "is not http://HOST:8080, --pulsar-config=PATH for TLS or authentication)",
        client_config="pulsar_config",
        client_config_needs="--pulsar-url=pulsar://HOST:6650",
    )

    def complete_remote(self, values: dict[str, Any]) -> None:
        """Both URLs of the cluster: a missing one from the other on Pulsar's default ports
        (6650 / 8080 in plain text, 6651 / 8443 with TLS)."""
        service, admin = values.get("pulsar_url"), values.get("pulsar_admin_url")
        if service is None and admin is None:
            return
        if service is None:
            a = urlsplit(str(admin))
            tls = a.scheme == "https"
            service = (f"{'pulsar+ssl' if tls else 'pulsar'}://{a.hostname}:"
                       f"{6651 if tls else 6650}")
        if admin is None:
            u = urlsplit(str(service))
            tls = u.scheme == "pulsar+ssl"
            admin = f"{'https' if tls else 'http'}://{u.hostname}:{8443 if tls else 8080}"
        values["pulsar_url"], values["pulsar_admin_url"] = service, admin

    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        """OMB's pulsar.yaml needs three bookies (3/3/2); one gets pulsar-local.yaml."""
        from pytest_brokerperf.brokers.kafka.config import shipped_driver

        return shipped_driver("pulsar" if nodes >= 3 else "pulsar-local")

    def tweak_driver_file(self, base: Path, tweak: ProducerTweak, dest: Path) -> Path:
        """Pulsar producer block: ``batchingMaxBytes``, ``batchingMaxPublishDelayMs``,
        ``compressionType`` (gzip is ZLIB) and ``sendMode`` (sync: one message outstanding,
        batching off, as pulsar-perf ``--max-outstanding 1 --disable-batching``)."""
        from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig

        changes: dict[str, Any] = {}
        if tweak.batch_bytes is not None:
            changes["batching_max_bytes"] = tweak.batch_bytes
        if tweak.linger_ms is not None:
            changes["batching_max_publish_delay_ms"] = tweak.linger_ms
        if tweak.compression is not None:
            changes["compression_type"] = {"gzip": "ZLIB"}.get(tweak.compression,
                                                              tweak.compression.upper())
        if tweak.send_mode is not None:
            changes["send_mode"] = tweak.send_mode
            if tweak.send_mode == "sync":
                changes["batching_enabled"] = False
        cfg = PulsarDriverConfig.from_yaml(base)
        if changes:
            cfg = cfg.with_overrides(producer=changes, reason=f"study case sweep {tweak.id}")
        return cfg.to_yaml(dest)

    def create_driver(self, endpoint: BrokerEndpoint, driver_file: Path | None, *,
                      scenario: str = "tailread", stats_interval_ms: int = 5000
                      ) -> PulsarDriver:
        from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
        from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver

        path = driver_file or self.default_driver_file(endpoint.nodes, scenario)
        cfg = PulsarDriverConfig.from_yaml(path)
        if endpoint.durability is not None:  # the namespace half of the level: ack quorum
            cfg = pulsar_durability.apply_pulsar(
                cfg, check_level(endpoint.durability, "the endpoint's durability level"))
        return PulsarDriver(endpoint, cfg)

    def memory_floor(self) -> int:
        from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

        return PulsarStandalone().memory_floor()

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

        # journal fsync is bookie-wide: one standalone serves one durability level
        standalone = PulsarStandalone(nodes=settings.nodes, version=settings.pulsar_version,
                                      workdir=workdir, durability=durability,
                                      memory_limit=settings.broker_memory,
                                      powercut_fs=settings.powercut_effective,
                                      overrides=dict(server or {}), tls=settings.tls)
        return ManagedBroker(standalone.start(), standalone)

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        from pytest_brokerperf.brokers.pulsar.container import default_images

        return default_images(settings.pulsar_version)

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """One standalone in a container (:mod:`.container`), with one or three bookies
        as process mode runs it."""
        from pytest_brokerperf.brokers.pulsar.container import PulsarContainerCluster

        node = PulsarContainerCluster(version=settings.pulsar_version, nodes=settings.nodes,
                                      workdir=workdir,
                                      run_id=settings.run_id, durability=durability,
                                      image=settings.image_for("pulsar"),
                                      overrides=dict(server or {}))
        node.memory_limit = settings.broker_memory
        return ManagedBroker(node.start(), node)

    def reach_remote(self, settings: BrokerSettings, *, timeout_s: float) -> ManagedBroker:
        from pytest_brokerperf.brokers.pulsar.remote import remote_pulsar_endpoint

        # a level is the user's declaration: the bookie journal is not visible remotely
        return ManagedBroker(remote_pulsar_endpoint(settings, timeout_s))  # nothing to stop

    def remote_address(self, settings: BrokerSettings) -> str | None:
        return settings.pulsar_url

    def level_settings(self, level: int, *, nodes: int = 1,
                       shape: Mapping[str, int | None] | None = None) -> dict[str, Any]:
        shape = shape or {}
        return pulsar_durability.level_settings(level, nodes, shape.get("bookkeeperEnsemble"),
                                                shape.get("bookkeeperWriteQuorum"))

    def durability_settings(self, description: Mapping[str, Any],
                            endpoint: BrokerEndpoint) -> dict[str, Any]:
        return pulsar_durability.driver_settings(description, endpoint)

    def durability_read_back(self, read_back: Mapping[str, Any],
                             endpoint: BrokerEndpoint) -> dict[str, Any]:
        return pulsar_durability.read_back_view(read_back, endpoint)
