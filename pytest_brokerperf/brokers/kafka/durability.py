"""Durability levels 1-4 on Kafka: per topic, so one broker process serves every level.

``acks=all`` (sync replication) or ``acks=1`` (async); ``min.insync.replicas`` = a
majority of the replication factor (2 of RF 3, as OMB's Kafka configs and StreamNative's
report use); ``flush.messages=1`` ``flush.ms=0`` (fsync every append before it is
acknowledged: levels 1 and 3) or both at Kafka's default ``Long.MAX_VALUE`` written
explicitly (the OS flushes the page cache; written out so a broker-wide ``log.flush.*``
cannot change the level behind the run's back). StreamNative's report says Kafka offers
1, 2 and 4; ``acks=1`` with ``flush.messages=1`` is level 3 by its definition (the
leader fsyncs before it answers), so it is offered too. See docs/reference/durability.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.brokers.durability import LEVELS, SYNC_MIN_REPLICAS, check_level
from pytest_brokerperf.core.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

__all__ = ["KAFKA_NEVER_FLUSH", "TOPIC_KEYS", "apply_kafka", "driver_settings",
           "kafka_settings", "level_settings", "read_back_view"]

#: Kafka's default ``flush.messages`` / ``flush.ms`` (``Long.MAX_VALUE``): never fsync on
#: the write path, leave it to the OS. Written explicitly for levels 2 and 4.
KAFKA_NEVER_FLUSH: Final = "9223372036854775807"

#: The topic configs a level sets.
TOPIC_KEYS: Final = ("min.insync.replicas", "flush.messages", "flush.ms")


def kafka_settings(level: int, replication_factor: int) -> dict[str, Any]:
    """Kafka's settings of ``level`` for topics of ``replication_factor`` replicas.

    ``acks`` is the producer's; the rest are topic configs. Raises BrokerUnavailable for
    levels 1 and 2 on fewer than two replicas (``acks=all`` on RF 1 is not replication).
    """
    lv = LEVELS[check_level(level)]
    rf = int(replication_factor)
    if lv.replication == "sync" and rf < SYNC_MIN_REPLICAS:
        raise BrokerUnavailable(
            f"Kafka durability level {level} ({lv.replication} replication) needs topics "
            f"with at least {SYNC_MIN_REPLICAS} replicas; this run's topics have "
            f"replicationFactor {rf}, and acks=all on one replica is the leader alone "
            "(level 3 or 4, not replication). Fix: --brokerperf-nodes=3 (OMB's RF 3, "
            "min.insync.replicas=2), or a driver file with replicationFactor >= 2."
        )
    fsync = lv.local == "fsync"
    return {
        "replicationFactor": rf,
        "acks": "all" if lv.replication == "sync" else "1",
        "min.insync.replicas": str(rf // 2 + 1),
        "flush.messages": "1" if fsync else KAFKA_NEVER_FLUSH,
        "flush.ms": "0" if fsync else KAFKA_NEVER_FLUSH,
    }


def apply_kafka(cfg: KafkaDriverConfig, level: int) -> KafkaDriverConfig:
    """``cfg`` with the producer ``acks`` and topic configs of ``level`` (recorded in its
    notes as ``durability level N`` adjustments)."""
    s = kafka_settings(level, cfg.replication_factor)
    idempotent = (cfg.producer_config.get("enable.idempotence")
                  or cfg.common_config.get("enable.idempotence") or "").strip().lower()
    if s["acks"] != "all" and idempotent == "true":
        raise BrokerUnavailable(
            f"Kafka durability level {level} needs acks=1, but driver {cfg.source} sets "
            "enable.idempotence=true, which requires acks=all. Fix: run levels 1-2 with this "
            "driver file, or use one without enable.idempotence for levels 3-4."
        )
    return cfg.with_overrides(
        producer={"acks": s["acks"]},
        topic={k: s[k] for k in TOPIC_KEYS},
        reason=f"durability level {level}",
    )


def level_settings(level: int, nodes: int, replication_factor: int | None) -> dict[str, Any]:
    """Scope, settings and why of ``level`` (RF defaults to the shipped driver files':
    3 from three nodes, else 1)."""
    lv = LEVELS[check_level(level)]
    rf = replication_factor if replication_factor is not None else (3 if nodes >= 3 else 1)
    return {
        "scope": "per topic (topic configs) and producer (acks)",
        "settings": kafka_settings(level, rf),
        "why": ("acks=all: the leader answers once every in-sync replica has the append "
                "(and refuses writes when fewer than min.insync.replicas are in sync)"
                if lv.replication == "sync"
                else "acks=1: the leader answers alone")
        + (", each replica fsyncing every append first (flush.messages=1, flush.ms=0)"
           if lv.local == "fsync"
           else "; nothing fsyncs on the write path, the OS flushes the page cache "
           "(Kafka's default, written explicitly)"),
    }


def driver_settings(desc: Mapping[str, Any]) -> dict[str, Any]:
    """The durability-relevant settings a Kafka driver ran with (its ``describe()``)."""
    topic = desc.get("topic") or {}
    producer = desc.get("producer") or {}
    return {
        "replicationFactor": desc.get("replication_factor"),
        # librdkafka's default is acks=all (-1) when the driver file sets none
        "acks": str(producer.get("acks", producer.get("request.required.acks", "all"))),
        **{k: topic.get(k, "broker default") for k in TOPIC_KEYS},
    }


def read_back_view(read_back: Mapping[str, Any]) -> dict[str, Any]:
    """The durability part of what the Kafka cluster reported (describe_configs)."""
    topics: dict[str, Any] = {}
    for name, t in (read_back.get("topics") or {}).items():
        row: dict[str, Any] = {k: t[k] for k in TOPIC_KEYS if k in t}
        replicas = t.get("replicas") or {}
        if replicas:
            row["replication_factor"] = min(len(r) for r in replicas.values())
        topics[name] = row
    brokers = {
        bid: {k: v for k, v in b.items() if k.startswith("log.flush")
              or k == "min.insync.replicas"}
        for bid, b in (read_back.get("brokers") or {}).items() if isinstance(b, Mapping)
    }
    return {"source": "AdminClient.describe_configs", "topics": topics, "brokers": brokers,
            "note": "acks is a producer setting: the broker does not report it"}
