"""OMB RabbitMQ driver YAML (OMB's driver-rabbitmq/*.yaml) and the topology it describes.

One model reads both studies' files:

* **OMB main** (``amqpUris``, ``messagePersistence``, ``queueType`` CLASSIC | QUORUM |
  STREAM, ``producer/consumerCreationDelay/BatchSize``): a topic is a durable *fanout*
  exchange and each subscription one durable queue ``<exchange>-<subscription>``;
  OMB refuses ``partitionsPerTopic != 1``.
* **Confluent's fork** (``exchangeType`` DIRECT | FANOUT, ``messagePersistence``,
  ``queueType``, ``exclusive``, ``brokers``): with DIRECT, routing keys ``"0".."P-1"``
  emulate partitions; each (subscription, partition) is a queue
  ``<exchange>-<subscription>-part-<j>`` bound to key ``j``; producers round-robin
  over the keys.

Streams differ from both on purpose (RabbitMQ's streams guide): a stream is a log, so a topic
(or a topic partition) is **one** stream ``<exchange>-stream[-part-<j>]`` and each
subscription reads it as a consumer at its own offset — fanning a message out to one
stream per subscription would store one full copy of the log per subscription.

pytest-brokerperf's own keys (documented in docs/reference/rabbitmq.md):
``prefetchCount``, ``autoAck``, ``maxPendingConfirms``, ``streamOffset``,
``queueArguments``, ``haPolicy`` (classic mirrored queues, RabbitMQ < 4.0).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from pytest_brokerperf.brokers.rabbitmq.choices import EXCHANGE_TYPES, QUEUE_TYPES
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.core.files import LINES, lines, validate
from pytest_brokerperf.core.files import closest as _closest
from pytest_brokerperf.core.files import load_yaml as _load_yaml
from pytest_brokerperf.core.shipped import DATA_DIR
from pytest_brokerperf.core.warnings import BrokerPerfWarning

__all__ = [
    "DURABILITY",
    "EXCHANGE_TYPES",
    "QUEUE_TYPES",
    "QueueSpec",
    "RabbitMQDriverConfig",
    "config_for_durability",
    "durability_of",
    "shipped_rabbitmq_driver",
    "subscription_queues",
    "topic_queues",
]

PYTHON_SOURCE = "<python>"
OMB_RABBITMQ_DRIVER_CLASS = "io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver"
DRIVERS_DIR = DATA_DIR / "drivers"

# OMB YAML key -> attribute
_KEYS: dict[str, str] = {
    "name": "name",
    "driverClass": "driver_class",
    "amqpUris": "amqp_uris",
    "brokers": "brokers",  # Confluent's fork: plain hosts
    "messagePersistence": "message_persistence",
    "queueType": "queue_type",
    "exchangeType": "exchange_type",
    "exclusive": "exclusive",
    "producerCreationDelay": "producer_creation_delay",
    "producerCreationBatchSize": "producer_creation_batch_size",
    "consumerCreationDelay": "consumer_creation_delay",
    "consumerCreationBatchSize": "consumer_creation_batch_size",
    # pytest-brokerperf extensions
    "prefetchCount": "prefetch_count",
    "autoAck": "auto_ack",
    "maxPendingConfirms": "max_pending_confirms",
    "streamOffset": "stream_offset",
    "queueArguments": "queue_arguments",
    "haPolicy": "ha_policy",
}
#: Keys of Confluent's fork that describe its deployment, accepted and recorded only.
_IGNORED = ("topicPrefix", "routingKeyLength", "singleNode")


@dataclass(frozen=True)
class QueueSpec:
    """One queue the topology needs: name, the routing key binding it, its partition."""

    name: str
    routing_key: str
    partition: int


@dataclass(frozen=True)
class RabbitMQDriverConfig:
    """An OMB (or Confluent-fork) RabbitMQ driver file, validated; picklable."""

    name: str = "RabbitMQ"
    driver_class: str | None = None
    amqp_uris: tuple[str, ...] = ()
    brokers: tuple[str, ...] = ()
    message_persistence: bool = False
    queue_type: str = "CLASSIC"
    exchange_type: str = "FANOUT"
    exclusive: bool = False
    producer_creation_delay: int = 100
    producer_creation_batch_size: int = 5
    consumer_creation_delay: int = 100
    consumer_creation_batch_size: int = 5
    prefetch_count: int = 1000
    auto_ack: bool = False
    max_pending_confirms: int = 10_000
    stream_offset: str = "first"
    queue_arguments: tuple[tuple[str, Any], ...] = ()
    ha_policy: tuple[tuple[str, Any], ...] = ()
    ignored: tuple[str, ...] = field(default=(), compare=False)
    source: str = field(default=PYTHON_SOURCE, compare=False, repr=False)

    def __post_init__(self) -> None:
        # The declared model (.driver_file) checks every key and
        # normalises it (upper-case queue types, tuples); errors cite the file's line while
        # a file is loaded.
        from pytest_brokerperf.brokers.rabbitmq.driver_file import RabbitMQDriverFile

        fields = RabbitMQDriverFile.model_fields
        data = {info.alias or name: getattr(self, name) for name, info in fields.items()}
        model = validate(RabbitMQDriverFile, data, source=self.source, line_of=LINES.get())
        for name in fields:
            object.__setattr__(self, name, getattr(model, name))
        for attr in ("ignored",):
            v = getattr(self, attr)
            if not isinstance(v, tuple):
                object.__setattr__(self, attr, tuple(v))

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_yaml(cls, path: str | Path) -> RabbitMQDriverConfig:
        path = Path(path)
        doc = _load_yaml(path, ConfigError, "RabbitMQ driver")
        return cls._from_mapping(doc.data, str(path), doc.line)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = PYTHON_SOURCE
                  ) -> RabbitMQDriverConfig:
        return cls._from_mapping(d, source, None)

    @classmethod
    def _from_mapping(cls, d: Any, source: str, line_of: Callable[[str], int | None] | None
                      ) -> RabbitMQDriverConfig:
        def where(key: str) -> str:
            line = line_of(key) if line_of is not None else None
            return f"{source}:{line}" if line else source

        if not isinstance(d, Mapping):
            raise ConfigError(
                f"{source}: a RabbitMQ driver file must be a mapping with keys such as "
                f"queueType and messagePersistence, got {type(d).__name__}. Fix: start from "
                "pytest_brokerperf/data/drivers/rabbitmq-quorum.yaml.")
        kwargs: dict[str, Any] = {"source": source}
        ignored: list[str] = []
        for key, value in d.items():
            key = str(key)
            if key in _IGNORED:
                ignored.append(f"{key}={value!r}")
                continue
            if key not in _KEYS:
                near = _closest(key, list(_KEYS))
                hint = f" Did you mean {near!r}?" if near else ""
                warnings.warn(BrokerPerfWarning(
                    f"{where(key)}: unknown RabbitMQ driver key {key!r} is ignored.{hint}"),
                    stacklevel=3)
                continue
            if value is not None:  # null keeps the default, as in OMB
                kwargs[_KEYS[key]] = value
        kwargs["ignored"] = tuple(ignored)
        with lines(line_of):
            return cls(**kwargs)

    # ------------------------------------------------------------------ output
    def to_omb_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.driver_class is not None:
            out["driverClass"] = self.driver_class
        if self.amqp_uris:
            out["amqpUris"] = list(self.amqp_uris)
        if self.brokers:
            out["brokers"] = list(self.brokers)
        out.update({
            "messagePersistence": self.message_persistence,
            "queueType": self.queue_type,
            "exchangeType": self.exchange_type,
            "exclusive": self.exclusive,
            "producerCreationDelay": self.producer_creation_delay,
            "producerCreationBatchSize": self.producer_creation_batch_size,
            "consumerCreationDelay": self.consumer_creation_delay,
            "consumerCreationBatchSize": self.consumer_creation_batch_size,
            "prefetchCount": self.prefetch_count,
            "autoAck": self.auto_ack,
            "maxPendingConfirms": self.max_pending_confirms,
            "streamOffset": self.stream_offset,
        })
        if self.queue_arguments:
            out["queueArguments"] = dict(self.queue_arguments)
        if self.ha_policy:
            out["haPolicy"] = dict(self.ha_policy)
        return out

    def to_yaml(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text("# OMB RabbitMQ driver config written by pytest-brokerperf\n"
                        + yaml.safe_dump(self.to_omb_dict(), sort_keys=False), encoding="utf-8")
        return path

    def replace(self, **changes: Any) -> RabbitMQDriverConfig:
        return replace(self, **changes)

    # ------------------------------------------------------------------ semantics
    @property
    def is_stream(self) -> bool:
        return self.queue_type == "STREAM"

    def queue_declare_arguments(self) -> dict[str, Any]:
        """``x-queue-type`` (as OMB's ``QueueType.queueOptions()``) plus ``queueArguments``."""
        args: dict[str, Any] = {}
        if self.queue_type != "CLASSIC":
            args["x-queue-type"] = self.queue_type.lower()
        args.update(dict(self.queue_arguments))
        return args

    def topic_settings(self) -> dict[str, str]:
        """What every topic of the run gets, flat, for plans and summaries (the Kafka
        driver's topic configs play this part)."""
        out = {"exchangeType": self.exchange_type.lower(), "queueType": self.queue_type.lower(),
               "messagePersistence": str(self.message_persistence).lower()}
        out.update({k: str(v) for k, v in self.queue_declare_arguments().items()
                    if k != "x-queue-type"})
        if self.ha_policy:
            out["haPolicy"] = ",".join(f"{k}={v}" for k, v in self.ha_policy)
        return out

    def routing_keys(self, partitions: int) -> list[str]:
        """Confluent's keys ``"0".."P-1"`` (DIRECT); ``[""]`` for fanout (OMB)."""
        if self.exchange_type == "DIRECT":
            return [str(j) for j in range(max(1, partitions))]
        return [""]

    def check_partitions(self, partitions: int) -> None:
        """OMB's fanout topology has no partitions; say so instead of pretending."""
        if self.exchange_type == "FANOUT" and partitions != 1:
            raise BrokerUnavailable(
                f"RabbitMQ driver {self.source}: OMB's fanout topology has no partitions "
                f"(OMB refuses partitionsPerTopic != 1), this workload has {partitions}; use "
                "the direct-exchange topology (exchangeType: DIRECT, e.g. the shipped "
                "rabbitmq-quorum.yaml) or partitionsPerTopic: 1")

    def notes(self) -> list[str]:
        out: list[str] = []
        if self.exchange_type == "DIRECT":
            out.append("partitions emulated with routing keys '0'..'P-1' on a direct exchange "
                       "and one queue per (subscription, partition), as Confluent's fork")
        else:
            out.append("OMB topology: fanout exchange, one queue per subscription, no partitions")
        if self.is_stream:
            out.append("streams: one stream per topic (partition); subscriptions are consumers "
                       f"at their own offset (x-stream-offset={self.stream_offset}), not copies")
        if self.queue_type == "QUORUM" and not self.message_persistence:
            out.append("quorum queues store every message on disk whatever its delivery mode")
        if self.ignored:
            out.append("recorded but not used (deployment keys of Confluent's fork): "
                       + ", ".join(self.ignored))
        if self.brokers and not self.amqp_uris:
            out.append("brokers: hosts of Confluent's deployment; the endpoint's AMQP URIs are "
                       "used instead")
        return out


def topic_queues(topic: str, partitions: int, cfg: RabbitMQDriverConfig) -> list[QueueSpec]:
    """Queues that belong to the topic itself: its stream(s); none for classic/quorum."""
    if not cfg.is_stream:
        return []
    keys = cfg.routing_keys(partitions)
    if cfg.exchange_type == "FANOUT":
        return [QueueSpec(f"{topic}-stream", "", 0)]
    return [QueueSpec(f"{topic}-stream-part-{j}", k, j) for j, k in enumerate(keys)]


def subscription_queues(topic: str, subscription: str, partitions: int,
                        cfg: RabbitMQDriverConfig) -> list[QueueSpec]:
    """The queues one subscription's consumers read (streams: the topic's own streams)."""
    if cfg.is_stream:
        return topic_queues(topic, partitions, cfg)
    keys = cfg.routing_keys(partitions)
    if cfg.exchange_type == "FANOUT":
        return [QueueSpec(f"{topic}-{subscription}", "", 0)]
    return [QueueSpec(f"{topic}-{subscription}-part-{j}", k, j) for j, k in enumerate(keys)]


def owned_queue_prefix(topic: str) -> str:
    """Every queue the topology creates for ``topic`` starts with this."""
    return f"{topic}-"


# ---------------------------------------------------------------------- durability

#: Durability levels (docs/reference/durability.md) as RabbitMQ settings. ``nodes`` is
#: the minimum cluster size the level needs; ``None`` means the level cannot be offered.
DURABILITY: dict[int, dict[str, Any]] = {
    1: {"queueType": "QUORUM", "messagePersistence": True, "nodes": 3,
        "why": "quorum queue: confirmed after a majority of 3 replicas wrote and fsynced"},
    2: {"queueType": "STREAM", "messagePersistence": True, "nodes": 3,
        "why": "stream: confirmed after a majority of replicas wrote it, never fsynced "
               "(page cache only)"},
    3: {"queueType": "QUORUM", "messagePersistence": True, "nodes": 1,
        "why": "single-replica quorum queue: fsync before confirm, no replication"},
    4: {"queueType": "STREAM", "messagePersistence": True, "nodes": 1,
        "why": "single-replica stream: no replication, no fsync"},
}


def config_for_durability(level: int, nodes: int, base: RabbitMQDriverConfig | None = None
                          ) -> RabbitMQDriverConfig:
    """``base`` with the queue type and persistence of durability ``level`` on ``nodes``.

    Raises BrokerUnavailable (a skip) when the cluster cannot offer the level.
    """
    spec = DURABILITY.get(level)
    if spec is None:
        raise ConfigError(f"durability level {level!r}: expected 1, 2, 3 or 4")
    need = int(spec["nodes"])
    if need > 1 and nodes < need:
        raise BrokerUnavailable(
            f"RabbitMQ durability level {level} needs replication to a majority of {need} "
            f"nodes ({spec['why']}); this cluster has {nodes} (--brokerperf-nodes=3)")
    if need == 1 and nodes > 1:
        raise BrokerUnavailable(
            f"RabbitMQ durability level {level} means no replication; on a {nodes}-node "
            "cluster queues replicate, so run it on --brokerperf-nodes=1")
    cfg = base or RabbitMQDriverConfig(exchange_type="DIRECT")
    args = dict(cfg.queue_arguments)
    if spec["queueType"] == "QUORUM":
        args["x-quorum-initial-group-size"] = need
    else:
        args["x-initial-cluster-size"] = need
    return cfg.replace(queue_type=spec["queueType"],
                       message_persistence=bool(spec["messagePersistence"]),
                       queue_arguments=tuple(args.items()), ha_policy=())


def durability_of(cfg: RabbitMQDriverConfig, nodes: int) -> dict[str, Any]:
    """The durability a config gives on ``nodes`` nodes, with the reason (for results)."""
    qt = cfg.queue_type
    args = dict(cfg.queue_arguments)
    if qt == "QUORUM":
        size = int(args.get("x-quorum-initial-group-size", nodes))
        replicas = min(size, nodes)
        level = 1 if replicas >= 3 else 3
        why = (f"quorum queue with {replicas} replica(s): fsync before confirm"
               + (", replicated to a majority" if replicas >= 3 else ", no replication"))
    elif qt == "STREAM":
        size = int(args.get("x-initial-cluster-size", nodes))
        replicas = min(size, nodes)
        level = 2 if replicas >= 3 else 4
        why = f"stream with {replicas} replica(s): never fsynced"
    else:
        mirrored = bool(cfg.ha_policy) and nodes > 1
        level = None
        why = ("classic queue" + (" mirrored by policy" if mirrored else "")
               + ("; persistent messages may be confirmed once consumed, before they reach "
                  "disk, so a fast consumer changes the durability measured"
                  if cfg.message_persistence else "; transient messages: no durability"))
        if not cfg.message_persistence:
            level = 4
    return {"level": level, "queue_type": qt, "message_persistence": cfg.message_persistence,
            "nodes": nodes, "reason": why}


# ---------------------------------------------------------------------- shipped files

def shipped_rabbitmq_driver(name: str) -> Path:
    """Path of a shipped RabbitMQ driver YAML by name (``rabbitmq-quorum``)."""
    from pytest_brokerperf.brokers.kafka.config import shipped_driver

    return shipped_driver(name)


def amqp_uri_host(uri: str) -> str:
    """``host:port`` of an AMQP URI, without credentials (for notes and results)."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host
