"""Durability levels 1-4 and what each one means on every broker: the one place to look.

StreamNative's 2020 report (seed 003, table 6; ``reference/omb.md`` §4.4) splits a
broker's durability guarantee into *replication* (is a write acknowledged only after a
majority of replicas has it?) and *local* durability (is it fsynced before the
acknowledgement, or only in the page cache?), which gives four levels, strongest first:

======  ===========  ==========  ===================================================
level   replication  local       the client's acknowledgement means
======  ===========  ==========  ===================================================
1       sync         fsync       a majority of replicas has it, each one fsynced it
2       sync         page cache  a majority of replicas has it, nobody promised fsync
3       async        fsync       one replica fsynced it; replication may lag
4       async        page cache  one replica has it in memory; nothing else promised
======  ===========  ==========  ===================================================

Comparing brokers means nothing unless both run at the same level (DESIGN §3.10), so a
level is a scenario parameter (``--brokerperf-durability=1,2``,
``@pytest.mark.durability(1)``) and each broker maps it to its own settings here:

* **Kafka** (per topic, so one broker process serves every level):
  ``acks=all`` (sync) or ``acks=1`` (async); ``min.insync.replicas`` = a majority of the
  replication factor (2 of RF 3, as OMB and table 12 of the report); ``flush.messages=1``
  ``flush.ms=0`` (fsync every append before it is acknowledged, level 1 and 3) or both
  at Kafka's default ``Long.MAX_VALUE`` written explicitly (the OS flushes the page
  cache; written out so a broker-wide ``log.flush.*`` cannot change the level behind the
  run's back). The report says Kafka offers 1, 2 and 4; ``acks=1`` with
  ``flush.messages=1`` is level 3 by table 6's definition (the leader fsyncs before it
  answers), so it is offered too. See :func:`kafka_settings`.
* **Pulsar**: the ack quorum is a namespace policy (majority of the write quorum, or 1)
  set by the driver (``PulsarDriverConfig.with_durability`` in :mod:`.drivers.pulsar_config`);
  the bookie journal (``journalSyncData`` true or false) is **bookie-wide**
  (:func:`~pytest_brokerperf.brokers.pulsar.process.journal_settings`), so a local
  standalone is started per level and broker fixtures are keyed by it; on a remote
  cluster the level is the user's declaration. See :func:`pulsar_settings`.
* **RabbitMQ** (per queue): quorum queues fsync before they confirm, streams never
  fsync, with 3 replicas (levels 1, 2) or one (3, 4)
  (:data:`~pytest_brokerperf.brokers.rabbitmq.config.DURABILITY`). Classic queues have
  no level: a persistent message may be confirmed once consumed, before it reaches
  disk. See :func:`rabbitmq_settings`.
* **Tansu** keeps everything in memory (no level); Redpanda and AutoMQ are not mapped.

What "sync replication" means with one replica: nothing. ``acks=all`` on RF 1, a
quorum queue of one, or ack quorum 1 of write quorum 1 all acknowledge after one copy,
which is level 3 or 4. Calling that level 1 or 2 would make an unequal comparison look
equal, so levels 1 and 2 need at least two replicas (in practice three nodes,
``--brokerperf-nodes=3``) and skip with that reason otherwise.

A level a broker cannot offer raises :class:`~pytest_brokerperf.errors.BrokerUnavailable`
(the test skips with the reason); a level outside 1-4 raises
:class:`~pytest_brokerperf.errors.ConfigError`. Results record :func:`result_block`:
the level, the settings applied and the settings read back from the broker.

Standard library only at import time; broker modules are imported inside functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.errors import BrokerPerfError, BrokerUnavailable, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
    from pytest_brokerperf.endpoint import BrokerEndpoint

__all__ = [
    "BROKER_WIDE",
    "DRIVER_DEFINED",
    "KAFKA_NEVER_FLUSH",
    "LEVELS",
    "Level",
    "apply_kafka",
    "apply_pulsar",
    "apply_rabbitmq",
    "check_level",
    "check_offered",
    "describe",
    "kafka_settings",
    "level_id",
    "pulsar_settings",
    "rabbitmq_settings",
    "read_back_view",
    "restart_key",
    "result_block",
]


@dataclass(frozen=True)
class Level:
    """One row of seed 003's table 6."""

    number: int
    replication: str  # "sync" | "async"
    local: str  # "fsync" | "page cache"
    meaning: str

    @property
    def label(self) -> str:
        """``level 2: sync replication + page cache``."""
        return f"level {self.number}: {self.replication} replication + {self.local}"


LEVELS: Final[Mapping[int, Level]] = {
    1: Level(1, "sync", "fsync", "acknowledged once a majority of replicas has the write "
             "and every one of them has fsynced it"),
    2: Level(2, "sync", "page cache", "acknowledged once a majority of replicas has the "
             "write; no replica promises it reached disk"),
    3: Level(3, "async", "fsync", "acknowledged once one replica has fsynced the write; "
             "replication to others is not waited for"),
    4: Level(4, "async", "page cache", "acknowledged once one replica has the write in "
             "memory; neither replication nor fsync is promised"),
}

#: What results say when no level was asked for: the driver file's settings as they are.
DRIVER_DEFINED: Final = "driver-defined"

#: Kafka's default ``flush.messages`` / ``flush.ms`` (``Long.MAX_VALUE``): never fsync on
#: the write path, leave it to the OS. Written explicitly for levels 2 and 4.
KAFKA_NEVER_FLUSH: Final = "9223372036854775807"

#: Brokers whose level is a property of the broker process (a different level = a
#: restart), not of a topic or queue.
BROKER_WIDE: Final = frozenset({"pulsar"})

_KAFKA_FLAVOURS_UNMAPPED: Final = frozenset({"redpanda", "automq"})
_SYNC_MIN_REPLICAS: Final = 2


def check_level(level: object, where: str = "durability level") -> int:
    """``level`` as an int 1-4, or ConfigError naming it, where it came from and the fix."""
    if isinstance(level, int) and not isinstance(level, bool) and level in LEVELS:
        return level
    raise ConfigError(
        f"{where}: {level!r} is not a durability level; expected 1, 2, 3 or 4 "
        f"({'; '.join(lv.label for lv in LEVELS.values())}; seed 003 table 6)."
    )


def level_id(level: int | None) -> str:
    """The test-id part of a level: ``d2`` (``test_x[kafka-d2]``)."""
    return f"d{level}" if level is not None else DRIVER_DEFINED


def restart_key(kind: str, level: int | None) -> int | None:
    """The part of a level that needs its own broker process (None: any process serves)."""
    return level if kind in BROKER_WIDE else None


# ------------------------------------------------------------------------------- Kafka


def kafka_settings(level: int, replication_factor: int) -> dict[str, Any]:
    """Kafka's settings of ``level`` for topics of ``replication_factor`` replicas.

    ``acks`` is the producer's; the rest are topic configs. Raises BrokerUnavailable for
    levels 1 and 2 on fewer than two replicas (``acks=all`` on RF 1 is not replication).
    """
    lv = LEVELS[check_level(level)]
    rf = int(replication_factor)
    if lv.replication == "sync" and rf < _SYNC_MIN_REPLICAS:
        raise BrokerUnavailable(
            f"Kafka durability level {level} ({lv.replication} replication) needs topics "
            f"with at least {_SYNC_MIN_REPLICAS} replicas; this run's topics have "
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


_KAFKA_TOPIC_KEYS: Final = ("min.insync.replicas", "flush.messages", "flush.ms")


def apply_kafka(cfg: KafkaDriverConfig, level: int, kind: str = "kafka") -> KafkaDriverConfig:
    """``cfg`` with the producer ``acks`` and topic configs of ``level`` (recorded in its
    notes as ``durability level N`` adjustments)."""
    if kind == "tansu":
        from pytest_brokerperf.brokers.tansu.process import IN_MEMORY_NOTE

        raise BrokerUnavailable(f"durability level {level} on Tansu: {IN_MEMORY_NOTE}")
    if kind in _KAFKA_FLAVOURS_UNMAPPED:
        raise BrokerUnavailable(f"durability levels are not mapped for {kind} in this version")
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
        topic={k: s[k] for k in _KAFKA_TOPIC_KEYS},
        reason=f"durability level {level}",
    )


# ------------------------------------------------------------------------------ Pulsar


def pulsar_settings(level: int, ensemble: int, write_quorum: int) -> dict[str, Any]:
    """Namespace persistence (ensemble, write and ack quorum) and bookie journal of ``level``.

    Raises BrokerUnavailable for levels 1 and 2 when entries go to fewer than two bookies.
    """
    from pytest_brokerperf.brokers.pulsar.config import durability_ack_quorum
    from pytest_brokerperf.brokers.pulsar.process import journal_settings

    lv = LEVELS[check_level(level)]
    if lv.replication == "sync" and write_quorum < _SYNC_MIN_REPLICAS:
        raise BrokerUnavailable(
            f"Pulsar durability level {level} ({lv.replication} replication) needs entries "
            f"written to at least {_SYNC_MIN_REPLICAS} bookies; this driver writes each "
            f"entry to {write_quorum} (ensemble {ensemble}, write quorum {write_quorum}), "
            "so the ack quorum would be the one bookie (level 3 or 4). Fix: "
            "--brokerperf-nodes=3 (three bookies, OMB's 3/3/2 pulsar.yaml)."
        )
    return {
        "bookkeeperEnsemble": int(ensemble),
        "bookkeeperWriteQuorum": int(write_quorum),
        "bookkeeperAckQuorum": durability_ack_quorum(level, write_quorum),
        **journal_settings(level),
    }


def apply_pulsar(cfg: PulsarDriverConfig, level: int) -> PulsarDriverConfig:
    """``cfg`` with the ack quorum of ``level`` (the namespace half; the journal half is
    the broker's, see :func:`restart_key`)."""
    p = cfg.client.persistence
    pulsar_settings(level, p.ensemble_size, p.write_quorum)  # refuses what is not offered
    return cfg.with_durability(level)


# ---------------------------------------------------------------------------- RabbitMQ


def rabbitmq_settings(level: int, nodes: int) -> dict[str, Any]:
    """Queue type, persistence and replica count of ``level`` on a ``nodes``-node broker."""
    cfg = apply_rabbitmq(None, level, nodes)
    args = dict(cfg.queue_arguments)
    return {
        "queueType": cfg.queue_type,
        "messagePersistence": cfg.message_persistence,
        **{k: v for k, v in args.items() if k in _RABBITMQ_REPLICA_ARGS},
    }


_RABBITMQ_REPLICA_ARGS: Final = ("x-quorum-initial-group-size", "x-initial-cluster-size")


def apply_rabbitmq(cfg: RabbitMQDriverConfig | None, level: int, nodes: int
                   ) -> RabbitMQDriverConfig:
    """``cfg`` with the queue type and persistence of ``level`` (the shipped DIRECT
    exchange when ``cfg`` is None); BrokerUnavailable when the cluster size does not fit."""
    from pytest_brokerperf.brokers.rabbitmq.config import config_for_durability

    return config_for_durability(check_level(level), nodes, cfg)


# ----------------------------------------------------------------------------- any broker


def _unmapped(kind: str, level: int) -> BrokerUnavailable:
    if kind == "tansu":
        from pytest_brokerperf.brokers.tansu.process import IN_MEMORY_NOTE

        return BrokerUnavailable(f"durability level {level} on Tansu: {IN_MEMORY_NOTE}")
    return BrokerUnavailable(f"durability levels are not mapped for {kind} in this version")


def describe(kind: str, level: int, *, nodes: int = 1, replication_factor: int | None = None,
             ensemble: int | None = None, write_quorum: int | None = None) -> dict[str, Any]:
    """What ``level`` means on ``kind``: table 6's row, the settings and where they live.

    ``replication_factor`` (Kafka) and ``ensemble``/``write_quorum`` (Pulsar) default to
    the shipped driver files on ``nodes`` nodes (RF 3 and 3/3/2 from three nodes, else 1
    and 1/1/1). Raises BrokerUnavailable when the broker cannot offer the level.
    """
    lv = LEVELS[check_level(level)]
    out: dict[str, Any] = {"level": lv.number, "label": lv.label,
                           "replication": lv.replication, "local": lv.local,
                           "meaning": lv.meaning}
    if kind == "kafka":
        rf = replication_factor if replication_factor is not None else (3 if nodes >= 3 else 1)
        out.update(scope="per topic (topic configs) and producer (acks)",
                   settings=kafka_settings(level, rf),
                   why=("acks=all: the leader answers once min.insync.replicas in-sync "
                        "replicas have the append" if lv.replication == "sync"
                        else "acks=1: the leader answers alone")
                   + (", each replica fsyncing every append first (flush.messages=1, "
                      "flush.ms=0)" if lv.local == "fsync"
                      else "; nothing fsyncs on the write path, the OS flushes the page "
                      "cache (Kafka's default, written explicitly)"))
    elif kind == "pulsar":
        default = 3 if nodes >= 3 else 1
        qw = write_quorum if write_quorum is not None else default
        e = ensemble if ensemble is not None else max(qw, default)
        out.update(scope="namespace (ack quorum) and bookie-wide (journal): one broker "
                         "process per level",
                   settings=pulsar_settings(level, e, qw),
                   why=("a majority of the write quorum acknowledges"
                        if lv.replication == "sync" else "the first bookie acknowledges")
                   + (", after fsyncing its journal" if lv.local == "fsync"
                      else "; journals reach disk every second (journalSyncData=false)"))
    elif kind == "rabbitmq":
        from pytest_brokerperf.brokers.rabbitmq.config import DURABILITY

        out.update(scope="per queue (queue type, replicas) and message (persistence)",
                   settings=rabbitmq_settings(level, nodes), why=DURABILITY[level]["why"])
    else:
        raise _unmapped(kind, level)
    return out


def check_offered(kind: str, level: int | None, nodes: int, *, remote: bool = False) -> None:
    """Before a broker starts: raise BrokerUnavailable if ``level`` cannot run on ``kind``
    with ``nodes`` nodes whatever the driver file says (RF and quorums are checked again
    when the driver is built). A remote cluster's size is unknown here: only the kind."""
    if level is None:
        return
    check_level(level)
    if kind not in ("kafka", "pulsar", "rabbitmq"):
        raise _unmapped(kind, level)
    if remote:
        return
    if LEVELS[level].replication == "sync" and nodes < _SYNC_MIN_REPLICAS:
        describe(kind, level, nodes=nodes)  # raises with the broker's own reason
    if kind == "rabbitmq":
        rabbitmq_settings(level, nodes)


# ----------------------------------------------------------------------------- results


def _driver_settings(kind: str, desc: Mapping[str, Any], endpoint: BrokerEndpoint
                     ) -> dict[str, Any]:
    """The durability-relevant settings a driver ran with (its ``describe()``)."""
    if kind == "kafka":
        topic = desc.get("topic") or {}
        producer = desc.get("producer") or {}
        return {
            "replicationFactor": desc.get("replication_factor"),
            # librdkafka's default is acks=all (-1) when the driver file sets none
            "acks": str(producer.get("acks", producer.get("request.required.acks", "all"))),
            **{k: topic.get(k, "broker default") for k in _KAFKA_TOPIC_KEYS},
        }
    if kind == "pulsar":
        pers = (desc.get("namespace_policies") or {}).get("persistence") or {}
        out = {k: pers.get(k) for k in ("bookkeeperEnsemble", "bookkeeperWriteQuorum",
                                        "bookkeeperAckQuorum")}
        journal = endpoint.info.get("journal")
        if isinstance(journal, Mapping):
            out.update({k: journal[k] for k in ("journalWriteData", "journalSyncData",
                                                "journalPageCacheFlushIntervalMSec")
                        if k in journal})
        return out
    if kind == "rabbitmq":
        args = desc.get("queue_arguments") or {}
        return {
            "queueType": desc.get("queue_type"),
            "messagePersistence": desc.get("message_persistence"),
            **{k: args[k] for k in _RABBITMQ_REPLICA_ARGS if k in args},
        }
    return {}


def read_back_view(kind: str, read_back: Mapping[str, Any], endpoint: BrokerEndpoint
                   ) -> dict[str, Any]:
    """The durability part of what the broker reported (the drivers' ``read_back``)."""
    if kind == "kafka":
        topics: dict[str, Any] = {}
        for name, t in (read_back.get("topics") or {}).items():
            row: dict[str, Any] = {k: t[k] for k in _KAFKA_TOPIC_KEYS if k in t}
            replicas = t.get("replicas") or {}
            if replicas:
                row["replication_factor"] = min(len(r) for r in replicas.values())
            topics[name] = row
        brokers = {
            bid: {k: v for k, v in b.items() if k.startswith("log.flush")
                  or k == "min.insync.replicas"}
            for bid, b in (read_back.get("brokers") or {}).items() if isinstance(b, Mapping)
        }
        return {"source": "AdminClient.describe_configs", "topics": topics,
                "brokers": brokers,
                "note": "acks is a producer setting: the broker does not report it"}
    if kind == "pulsar":
        out: dict[str, Any] = {"source": "admin REST /admin/v2/namespaces/<ns>/persistence",
                               "namespace": read_back.get("namespace"),
                               "persistence": read_back.get("persistence"),
                               "bookies": (read_back.get("cluster") or {}).get("bookies")}
        journal = endpoint.info.get("journal")
        if isinstance(journal, Mapping):
            out["journal"] = dict(journal)
            out["journal_source"] = "standalone.conf this session wrote (bookie-wide)"
        else:
            out["journal_source"] = ("not visible through Pulsar's admin API: the level is "
                                     "the user's declaration")
        return out
    if kind == "rabbitmq":
        queues: dict[str, Any] = {}
        for t in (read_back.get("topics") or {}).values():
            for qname, q in (t.get("queues") or {}).items():
                queues[qname] = {k: q.get(k) for k in ("type", "durable", "arguments")}
        out = {"source": "rabbitmqctl list_queues", "queues": queues}
        if "note" in read_back:
            out["source"] = "declared arguments only"
            out["note"] = read_back["note"]
        if "durability" in read_back:
            out["configured"] = read_back["durability"]
        return out
    return {}


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def result_block(endpoint: BrokerEndpoint, driver_description: Mapping[str, Any],
                 read_back: Mapping[str, Any]) -> dict[str, Any]:
    """The record's ``durability`` field: level (None = driver-defined), the settings the
    clients ran with (the level's mapping, or the driver file's own) and the read-back."""
    raw = endpoint.info.get("durability")
    level = raw if isinstance(raw, int) and raw in LEVELS else None
    kind = endpoint.kind
    block: dict[str, Any] = {
        "level": level,
        "label": LEVELS[level].label if level is not None else DRIVER_DEFINED,
        "settings": _driver_settings(kind, driver_description, endpoint),
        "read_back": read_back_view(kind, read_back, endpoint),
    }
    if level is not None:
        settings = block["settings"]
        try:  # the level's row and scope; its settings are what the clients ran with
            meaning = describe(
                kind, level, nodes=endpoint.nodes,
                replication_factor=_int_or_none(settings.get("replicationFactor")),
                ensemble=_int_or_none(settings.get("bookkeeperEnsemble")),
                write_quorum=_int_or_none(settings.get("bookkeeperWriteQuorum")))
        except BrokerPerfError as exc:  # cannot happen after create_driver applied it
            meaning = {"error": str(exc)}
        block.update({k: v for k, v in meaning.items()
                      if k in ("replication", "local", "meaning", "scope", "why", "error")})
        if kind in BROKER_WIDE and endpoint.mode == "remote":
            block["declared"] = True  # the bookie journal is not visible remotely
    elif kind == "tansu":
        block["label"] = "none (in-memory broker)"
    return block
