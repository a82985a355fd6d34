"""Broker drivers: one module per client library behind :mod:`.base`'s protocol."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.endpoint import BrokerEndpoint

__all__ = ["KAFKA_PROTOCOL", "create_driver", "default_driver_file"]

#: Broker kinds spoken to through the Kafka driver.
KAFKA_PROTOCOL = frozenset({"kafka", "tansu", "redpanda", "automq"})


def default_driver_file(kind: str, nodes: int, scenario: str = "tailread") -> Path:
    """The shipped OMB driver YAML a scenario uses when the user names none.

    OMB's own Kafka configs need replication factor 3; a single local node gets the
    shipped ``kafka-local.yaml`` (RF 1) instead of a silently lowered RF.
    """
    from pytest_brokerperf.brokers.kafka.config import shipped_driver

    if kind == "automq":  # AutoMQ's own config: RF 1 + flush.messages=1 (WAL durability)
        return shipped_driver("automq")
    if kind == "redpanda" and nodes >= 3:  # Raft, fsync per batch by Redpanda's default
        return shipped_driver("redpanda")
    if kind in KAFKA_PROTOCOL:
        if nodes >= 3:
            return shipped_driver("kafka-throughput" if scenario == "throughput" else
                                  "kafka-latency")
        return shipped_driver("kafka-local")
    if kind == "pulsar":  # OMB's pulsar.yaml needs 3 bookies (3/3/2)
        return shipped_driver("pulsar" if nodes >= 3 else "pulsar-local")
    if kind == "rabbitmq":  # direct exchange: the workload's partitions become routing keys
        return shipped_driver("rabbitmq-quorum")
    raise BrokerUnavailable(f"no driver for broker kind {kind!r} yet")


def create_driver(endpoint: BrokerEndpoint, driver_file: Path | None,
                  scenario: str = "tailread", stats_interval_ms: int = 5000) -> Driver:
    """Build the driver for ``endpoint`` from an OMB driver YAML (or the shipped default).

    A durability level in ``endpoint.info["durability"]`` (set by the ``broker`` fixture)
    is applied on top of the file through :mod:`pytest_brokerperf.durability`; a level
    the broker cannot offer raises BrokerUnavailable (the test skips with the reason).
    """
    from pytest_brokerperf import durability

    raw = endpoint.info.get("durability")
    level = durability.check_level(raw, "endpoint.info['durability']") if raw is not None else None
    if endpoint.kind == "loopback":
        from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

        return LoopbackDriver()
    if endpoint.kind in KAFKA_PROTOCOL:
        from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
        from pytest_brokerperf.brokers.kafka.driver import KafkaDriver

        path = driver_file or default_driver_file(endpoint.kind, endpoint.nodes, scenario)
        kcfg = KafkaDriverConfig.from_yaml(path)
        if level is not None:  # per topic: producer acks and topic configs of that level
            kcfg = durability.apply_kafka(kcfg, level, endpoint.kind)
        return KafkaDriver(endpoint, kcfg, stats_interval_ms=stats_interval_ms,
                           kind=endpoint.kind)
    if endpoint.kind == "rabbitmq":
        from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
        from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

        path = driver_file or default_driver_file(endpoint.kind, endpoint.nodes, scenario)
        rcfg = RabbitMQDriverConfig.from_yaml(path)
        if level is not None:  # per queue: queue type, replicas and persistence
            rcfg = durability.apply_rabbitmq(rcfg, level, endpoint.nodes)
        return RabbitMQDriver(endpoint, rcfg)
    if endpoint.kind == "pulsar":
        from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
        from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver

        path = driver_file or default_driver_file(endpoint.kind, endpoint.nodes, scenario)
        cfg = PulsarDriverConfig.from_yaml(path)
        if level is not None:  # the namespace half of the broker's level: ack quorum
            cfg = durability.apply_pulsar(cfg, level)
        return PulsarDriver(endpoint, cfg)
    raise BrokerUnavailable(
        f"broker kind {endpoint.kind!r} has no driver in this version of pytest-brokerperf"
    )
