"""OMB Pulsar driver YAML (OMB's ``driver-pulsar/*.yaml``) read unchanged, turned into
pulsar-client settings.

An OMB Pulsar driver file has three blocks::

    client:   serviceUrl, httpUrl, ioThreads, connectionsPerBroker, clientMemoryLimitMB,
              maxConcurrentLookupRequests, clusterName, namespacePrefix, topicType,
              persistence{ensembleSize, writeQuorum, ackQuorum, deduplicationEnabled},
              tls*, authentication{plugin, data}
    producer: batchingEnabled, batchingMaxPublishDelayMs, batchingMaxBytes,
              blockIfQueueFull, pendingQueueSize
    consumer: subscriptionType, receiverQueueSize

plus the keys StreamNative's fork added (``maxPendingMessagesAcrossPartitions``,
``batchingPartitionSwitchFrequencyByPublishDelay``, ``maxTotalReceiverQueueSizeAcrossPartitions``)
and a few pytest-brokerperf extensions for the studies' other knobs
(the durability and batching knobs of the AutoMQ and Confluent studies):
``sendMode`` (``async``, or ``sync`` = one outstanding message as pulsar-perf
``--max-outstanding 1``), ``compressionType``, ``batchingMaxMessages``, ``sendTimeoutMs``,
``subscriptionInitialPosition``, ``retention{timeInMinutes, sizeInMB}``,
``operationTimeoutSeconds``, ``statsIntervalSeconds``, ``listenerThreads``.

Every key has OMB's *Java driver* default, not the Python client's: pulsar-client's own
defaults differ (batching off, ``block_if_queue_full`` off, 1000 pending messages, a 30 s
send timeout, receiver queue 1000, Exclusive subscriptions), so
:meth:`PulsarDriverConfig.producer_kwargs` and :meth:`~PulsarDriverConfig.subscribe_kwargs`
name every setting explicitly. What the Python client cannot set at all
(``connectionsPerBroker``, ``clientMemoryLimitMB``, the partition-switch frequency) is listed
in :attr:`PulsarDriverConfig.notes` and so in every result; the memory limit is enforced by
the driver itself.

This module imports neither pulsar nor anything heavy: enum values stay strings here
and become pulsar-client enums inside the driver.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_brokerperf.brokers.pulsar.config_blocks import (
    _CLIENT_KEYS,
    _CONSUMER_KEYS,
    _NAMESPACE_PREFIX,
    _PERSISTENCE_KEYS,
    _PRODUCER_KEYS,
    _TOP_KEYS,
    JAVA_INT_MAX,
    PYTHON_SOURCE,
    PulsarClientConfig,
    PulsarConsumerConfig,
    PulsarPersistence,
    PulsarProducerConfig,
    _Key,
    _Reader,
)
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.files import LINES, lines
from pytest_brokerperf.core.files import closest as _closest
from pytest_brokerperf.core.files import load_yaml as _load_yaml
from pytest_brokerperf.core.warnings import BrokerPerfWarning

__all__ = [
    "JAVA_INT_MAX",
    "PulsarClientConfig",
    "PulsarConsumerConfig",
    "PulsarDriverConfig",
    "PulsarPersistence",
    "PulsarProducerConfig",
]


def durability_ack_quorum(level: int, write_quorum: int) -> int:
    """The ack quorum of a durability level: a majority of the write quorum for the
    synchronous levels 1 and 2, one bookie for 3 and 4 (docs/reference/durability.md)."""
    if level not in (1, 2, 3, 4):
        raise ConfigError(f"durability level {level!r} is not one of 1, 2, 3, 4")
    return write_quorum // 2 + 1 if level in (1, 2) else 1


@dataclass(frozen=True)
class PulsarDriverConfig:
    """An OMB Pulsar driver file: ``client``, ``producer`` and ``consumer`` blocks.

    ``adjustments`` lists explicit changes made in Python (:meth:`with_durability`,
    :meth:`with_overrides`) so results record them; it is not part of the OMB format and,
    like ``source``, does not take part in equality.
    """

    name: str = "Pulsar"
    driver_class: str | None = None
    client: PulsarClientConfig = field(default_factory=PulsarClientConfig)
    producer: PulsarProducerConfig = field(default_factory=PulsarProducerConfig)
    consumer: PulsarConsumerConfig = field(default_factory=PulsarConsumerConfig)
    source: str = field(default=PYTHON_SOURCE, compare=False, repr=False)
    adjustments: tuple[str, ...] = field(default=(), compare=False)

    def _where(self, *path: str) -> str:
        """``file:line`` of a key while a file is loaded, else the source."""
        line_of = LINES.get()
        line = line_of(*path) if line_of is not None else None
        return f"{self.source}:{line}" if line else self.source

    def __post_init__(self) -> None:
        p = self.client.persistence
        if not p.ensemble_size >= p.write_quorum >= p.ack_quorum >= 1:
            raise ConfigError(
                f"{self._where('client', 'persistence')}: client.persistence ensembleSize "
                f"{p.ensemble_size} / "
                f"writeQuorum {p.write_quorum} / ackQuorum {p.ack_quorum}: BookKeeper needs "
                "ensembleSize >= writeQuorum >= ackQuorum >= 1. Fix: e.g. 3/3/2 (OMB) or "
                "1/1/1 on a single bookie."
            )
        if not _NAMESPACE_PREFIX.match(self.client.namespace_prefix):
            raise ConfigError(
                f"{self._where('client', 'namespacePrefix')}: client.namespacePrefix = "
                f"{self.client.namespace_prefix!r}: "
                "expected <tenant>/<namespace prefix>. Fix: write e.g. "
                "`namespacePrefix: benchmark/ns`."
            )
        if self.producer.send_callbacks == "perSlice" and (
            self.synchronous or not self.producer.batching_enabled
        ):
            why = "sendMode is sync" if self.synchronous else "batchingEnabled is false"
            raise ConfigError(
                f"{self._where('producer', 'sendCallbacks')}: producer.sendCallbacks = "
                f"perSlice but {why}: a slice's one callback stands for messages that share "
                "its Pulsar batch, so it needs asynchronous sends with batching. Fix: set "
                "sendCallbacks: perMessage, or sendMode: async and batchingEnabled: true."
            )
        for key in ("subscription_type", "subscription_initial_position"):
            if getattr(self.consumer, key) is None:
                raise ConfigError(f"{self.source}: consumer.{key} must be set")

    # ---------------------------------------------------------------- loading

    @classmethod
    def from_yaml(cls, path: str | Path) -> PulsarDriverConfig:
        """Read an OMB Pulsar driver YAML file; errors cite the file and line."""
        path = Path(path)
        doc = _load_yaml(path, ConfigError, "Pulsar driver")
        return cls._from_mapping(doc.data, str(path), doc.line)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = PYTHON_SOURCE) -> PulsarDriverConfig:
        """Build from a mapping with OMB's keys (``client``, ``producer``, ``consumer``)."""
        return cls._from_mapping(d, source, None)

    @classmethod
    def _from_mapping(
        cls, d: Any, source: str, line_of: Callable[..., int | None] | None
    ) -> PulsarDriverConfig:
        r = _Reader(source, line_of)
        if not isinstance(d, Mapping):
            raise ConfigError(
                f"{source}: a Pulsar driver file must be a mapping with client, producer and "
                f"consumer blocks, got {type(d).__name__}. Fix: start from "
                "pytest_brokerperf/data/drivers/pulsar-local.yaml."
            )
        for key in d:
            if key not in _TOP_KEYS:
                near = _closest(str(key), list(_TOP_KEYS))
                hint = f" Did you mean {near!r}?" if near else ""
                warnings.warn(
                    BrokerPerfWarning(
                        f"{r.where(str(key))}: unknown Pulsar driver key {key!r} is ignored.{hint}"
                    ),
                    stacklevel=3,
                )

        def section(name: str) -> Mapping[str, Any]:
            value = d.get(name)
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"{r.where(name)}: {name} = {value!r}: expected a mapping of settings. "
                    f"Fix: write `{name}:` followed by indented `key: value` lines."
                )
            return value

        client_map = section("client")
        client_kw = r.block(
            client_map,
            ("client",),
            _CLIENT_KEYS,
            nested=("persistence", "authentication", "retention"),
        )
        pers = client_map.get("persistence")
        if pers is not None:
            if not isinstance(pers, Mapping):
                raise ConfigError(
                    f"{r.where('client', 'persistence')}: client.persistence "
                    "must be a mapping (ensembleSize, writeQuorum, ackQuorum)."
                )
            client_kw["persistence"] = PulsarPersistence(
                **r.block(pers, ("client", "persistence"), _PERSISTENCE_KEYS)
            )
        auth = client_map.get("authentication")
        if auth is not None:
            if not isinstance(auth, Mapping):
                raise ConfigError(
                    f"{r.where('client', 'authentication')}: "
                    "client.authentication must be a mapping (plugin, data)."
                )
            for k, v in auth.items():
                if k not in ("plugin", "data"):
                    warnings.warn(
                        BrokerPerfWarning(
                            f"{r.where('client', 'authentication', str(k))}: unknown key "
                            f"client.authentication.{k} is ignored (plugin, data)."
                        ),
                        stacklevel=3,
                    )
                elif v is not None and str(v).strip():
                    client_kw[f"authentication_{k}"] = str(v).strip()
        ret = client_map.get("retention")
        if ret is not None:
            if not isinstance(ret, Mapping):
                raise ConfigError(
                    f"{r.where('client', 'retention')}: client.retention must "
                    "be a mapping (timeInMinutes, sizeInMB)."
                )
            ret_keys = (
                _Key("timeInMinutes", "retention_time_minutes", "int", minimum=-1),
                _Key("sizeInMB", "retention_size_mb", "int", minimum=-1),
            )
            client_kw.update(r.block(ret, ("client", "retention"), ret_keys))
        kwargs: dict[str, Any] = {
            "source": source,
            "client": PulsarClientConfig(**client_kw),
            "producer": PulsarProducerConfig(
                **r.block(section("producer"), ("producer",), _PRODUCER_KEYS)
            ),
            "consumer": PulsarConsumerConfig(
                **r.block(section("consumer"), ("consumer",), _CONSUMER_KEYS)
            ),
        }
        for key, attr in (("name", "name"), ("driverClass", "driver_class")):
            value = d.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, str | int | float):
                    raise ConfigError(f"{r.where(key)}: {key} = {value!r}: expected text.")
                kwargs[attr] = str(value)
        dc = kwargs.get("driver_class")
        if dc and "pulsar" not in dc.lower():
            warnings.warn(
                BrokerPerfWarning(
                    f"{r.where('driverClass')}: driverClass {dc!r} is not OMB's Pulsar driver; "
                    "the file is read as a Pulsar driver config anyway."
                ),
                stacklevel=3,
            )
        with lines(line_of):
            return cls(**kwargs)

    # ---------------------------------------------------------------- output

    def to_omb_dict(self) -> dict[str, Any]:
        """The OMB driver mapping; ``from_dict(c.to_omb_dict()) == c``."""

        def block(obj: Any, keys: tuple[_Key, ...]) -> dict[str, Any]:
            return {k.key: getattr(obj, k.attr) for k in keys}

        c = self.client
        client = block(c, _CLIENT_KEYS)
        client["persistence"] = block(c.persistence, _PERSISTENCE_KEYS)
        client["authentication"] = {
            "plugin": c.authentication_plugin,
            "data": c.authentication_data,
        }
        client["retention"] = {
            "timeInMinutes": c.retention_time_minutes,
            "sizeInMB": c.retention_size_mb,
        }
        out: dict[str, Any] = {"name": self.name}
        if self.driver_class is not None:
            out["driverClass"] = self.driver_class
        out["client"] = client
        out["producer"] = block(self.producer, _PRODUCER_KEYS)
        out["consumer"] = block(self.consumer, _CONSUMER_KEYS)
        return out

    def to_yaml(self, path: str | Path) -> Path:
        """Write the config as OMB driver YAML (authentication data redacted)."""
        path = Path(path)
        doc = self.to_omb_dict()
        if doc["client"]["authentication"]["data"]:
            doc["client"]["authentication"]["data"] = "***"
        path.write_text(
            "# OMB Pulsar driver config written by pytest-brokerperf\n"
            + yaml.safe_dump(doc, sort_keys=False),
            encoding="utf-8",
        )
        return path

    # ---------------------------------------------------------------- derived

    @property
    def tenant(self) -> str:
        return self.client.namespace_prefix.split("/", 1)[0]

    @property
    def synchronous(self) -> bool:
        return self.producer.send_mode == "sync"

    @property
    def cumulative_acks(self) -> bool:
        """Exclusive and Failover subscriptions allow cumulative acks (one per partition per
        receive batch); Shared and Key_Shared need one ack per message."""
        return self.consumer.subscription_type in ("Exclusive", "Failover")

    def max_outstanding(self, partitions: int) -> int:
        """Messages one producer may have unacknowledged before a send must wait (0 = no
        count limit; then only the client memory limit applies).

        ``sync``: 1. Otherwise what the client would allow: ``pendingQueueSize`` per
        partition, capped by ``maxPendingMessagesAcrossPartitions`` (0 = no limit, as the
        Java client since its memory limit exists).
        """
        if self.synchronous:
            return 1
        per = self.producer.pending_queue_size
        across = self.producer.max_pending_messages_across_partitions
        if per <= 0:
            return across if across > 0 and partitions > 1 else 0
        total = per * max(1, partitions)
        return min(total, across) if across > 0 and partitions > 1 else total

    def memory_limit_bytes(self) -> int:
        """``clientMemoryLimitMB`` in bytes (0 = none), enforced by the driver."""
        return self.client.client_memory_limit_mb * 1024 * 1024

    def client_kwargs(self, service_url: str) -> dict[str, Any]:
        """``pulsar.Client(**kwargs)`` minus ``authentication`` (built by the driver)."""
        c = self.client
        kwargs: dict[str, Any] = {
            "service_url": c.service_url or service_url,
            "io_threads": c.io_threads,
            "message_listener_threads": c.listener_threads,
            "concurrent_lookup_requests": c.max_concurrent_lookup_requests,
            "operation_timeout_seconds": c.operation_timeout_seconds,
            "stats_interval_in_seconds": c.stats_interval_seconds,
            "connection_timeout_ms": 10000,
            "tls_allow_insecure_connection": c.tls_allow_insecure_connection,
            "tls_validate_hostname": c.tls_enable_hostname_verification,
        }
        if c.tls_trust_certs_file_path:
            kwargs["tls_trust_certs_file_path"] = c.tls_trust_certs_file_path
        return kwargs

    def producer_kwargs(self, producer_name: str | None = None) -> dict[str, Any]:
        """``Client.create_producer(topic, **kwargs)``: every setting named explicitly.

        Enum-valued settings are names (``"LZ4"``, ``"RoundRobinDistribution"``); the driver
        turns them into pulsar-client enums. In ``sync`` mode one message may be pending
        and the client never blocks (the engine waits for the ack before the next send).
        """
        p = self.producer
        sync = self.synchronous
        kwargs: dict[str, Any] = {
            "send_timeout_millis": p.send_timeout_ms,
            "compression_type": p.compression_type,
            "max_pending_messages": 1 if sync else p.pending_queue_size,
            "max_pending_messages_across_partitions": 1
            if sync
            else p.max_pending_messages_across_partitions,
            "block_if_queue_full": False if sync else p.block_if_queue_full,
            "batching_enabled": p.batching_enabled,
            "batching_max_messages": p.batching_max_messages,
            "batching_max_allowed_size_in_bytes": p.batching_max_bytes,
            "batching_max_publish_delay_ms": p.batching_max_publish_delay_ms,
            "batching_type": "Default",
            "chunking_enabled": False,
            "message_routing_mode": "RoundRobinDistribution",
            "lazy_start_partitioned_producers": False,
        }
        if producer_name is not None:
            kwargs["producer_name"] = producer_name
        return kwargs

    def subscribe_kwargs(self, consumer_name: str | None = None) -> dict[str, Any]:
        """``Client.subscribe(topic, subscription, **kwargs)``: every setting explicit."""
        c = self.consumer
        kwargs: dict[str, Any] = {
            "consumer_type": c.subscription_type,
            "receiver_queue_size": c.receiver_queue_size,
            "max_total_receiver_queue_size_across_partitions": (
                c.max_total_receiver_queue_size_across_partitions
            ),
            "initial_position": c.subscription_initial_position,
            "batch_index_ack_enabled": False,
            "unacked_messages_timeout_ms": None,
        }
        if consumer_name is not None:
            kwargs["consumer_name"] = consumer_name
        return kwargs

    def namespace_policies(self) -> dict[str, Any]:
        """What the driver sets on its namespace (admin REST bodies)."""
        c = self.client
        pers = c.persistence
        return {
            "persistence": {
                "bookkeeperEnsemble": pers.ensemble_size,
                "bookkeeperWriteQuorum": pers.write_quorum,
                "bookkeeperAckQuorum": pers.ack_quorum,
                "managedLedgerMaxMarkDeleteRate": 1.0,
            },
            "backlogQuota": {"limitSize": -1, "limitTime": -1, "policy": "producer_exception"},
            "retention": {
                "retentionTimeInMinutes": c.retention_time_minutes,
                "retentionSizeInMB": c.retention_size_mb,
            },
            "deduplication": pers.deduplication_enabled,
        }

    def topic_settings(self) -> dict[str, str]:
        """The storage settings every topic of the run gets (as namespace policies), flat,
        for plans and summaries (the Kafka driver's topic configs play this part)."""
        c = self.client
        p = c.persistence
        return {
            "ensembleSize": str(p.ensemble_size),
            "writeQuorum": str(p.write_quorum),
            "ackQuorum": str(p.ack_quorum),
            "deduplicationEnabled": str(p.deduplication_enabled).lower(),
            "retentionTimeInMinutes": str(c.retention_time_minutes),
            "retentionSizeInMB": str(c.retention_size_mb),
            "backlogQuota": "unlimited (producer_exception)",
            # the same retention in the names the remote-safety code reads (Kafka's)
            "retention.ms": str(c.retention_time_minutes * 60_000)
            if c.retention_time_minutes >= 0
            else "-1",
            "retention.bytes": str(c.retention_size_mb * 1024 * 1024)
            if c.retention_size_mb >= 0
            else "-1",
        }

    @property
    def notes(self) -> list[str]:
        """Differences between this file and what the clients really run with."""
        notes = list(self.adjustments)
        c, p = self.client, self.producer
        notes.append(
            f"client: connectionsPerBroker={c.connections_per_broker} not applied: pulsar-client "
            "(Python) cannot set it; the C++ client uses 1 connection per broker"
        )
        if c.client_memory_limit_mb:
            notes.append(
                f"client: clientMemoryLimitMB={c.client_memory_limit_mb} enforced by the driver "
                "(pending payload bytes per worker process); pulsar-client (Python) cannot set "
                "the C++ client's own limit (unlimited)"
            )
        if (p.batching_partition_switch_frequency_by_publish_delay != 1
                and p.send_callbacks != "perSlice"):
            notes.append(
                "producer: batchingPartitionSwitchFrequencyByPublishDelay="
                f"{p.batching_partition_switch_frequency_by_publish_delay} not applied: "
                "pulsar-client (Python) cannot set it (the C++ round-robin router switches "
                "partition every batching delay, i.e. 1)"
            )
        if p.send_callbacks == "perSlice":
            notes.append(
                "producer: sendCallbacks=perSlice: one producer per partition, the driver "
                "routes round robin per batch or batching window (keyed messages by a hash "
                "of the key), one callback per send call's run on a partition (slice); each "
                "message's ack time is its slice's (exact when the slice went as one Pulsar "
                "batch, else an upper bound)"
            )
        if self.synchronous:
            notes.append(
                "producer: sendMode=sync: one message outstanding (pulsar-perf "
                "--max-outstanding 1); a due message waits for the previous ack"
                + (
                    " and batching still delays each send by up to batchingMaxPublishDelayMs"
                    if p.batching_enabled
                    else ""
                )
            )
        return notes

    # ---------------------------------------------------------------- changes

    def with_overrides(
        self,
        *,
        client: Mapping[str, Any] | None = None,
        persistence: Mapping[str, Any] | None = None,
        producer: Mapping[str, Any] | None = None,
        consumer: Mapping[str, Any] | None = None,
        topic: Mapping[str, Any] | None = None,
        reason: str = "override",
    ) -> PulsarDriverConfig:
        """A copy with settings changed by Python attribute name, each change recorded.

        ``topic`` takes the Kafka-named retention settings the remote-safety code asks
        for (``retention.ms``, ``retention.bytes``) and sets the namespace retention
        policy from them (minutes and MB, rounded up); ``segment.ms`` has no per-namespace
        equivalent in Pulsar (ledger roll-over is broker configuration) and is noted.
        """
        adjustments = list(self.adjustments)
        if topic:
            client = dict(client or {})
            for key, value in topic.items():
                if key == "retention.ms":
                    client["retention_time_minutes"] = -(-int(value) // 60_000)
                elif key == "retention.bytes":
                    client["retention_size_mb"] = -(-int(value) // (1024 * 1024))
                elif key == "segment.ms":
                    adjustments.append(
                        f"topic {key}={value} not applied: Pulsar rolls "
                        f"ledgers by broker configuration ({reason})"
                    )
                else:
                    raise ConfigError(f"Pulsar has no per-topic setting {key!r}")

        def apply(obj: Any, label: str, changes: Mapping[str, Any] | None) -> Any:
            if not changes:
                return obj
            known = {f.name for f in dataclasses.fields(obj)}
            for k, v in changes.items():
                if k not in known:
                    raise ConfigError(f"{label} has no setting {k!r} (known: {sorted(known)})")
                before = getattr(obj, k)
                if before != v:
                    adjustments.append(f"{label}.{k}: {before} -> {v} ({reason})")
            return dataclasses.replace(obj, **changes)

        pers = apply(self.client.persistence, "client.persistence", persistence)
        new_client = apply(self.client, "client", client)
        new_client = dataclasses.replace(new_client, persistence=pers)
        return dataclasses.replace(
            self,
            client=new_client,
            producer=apply(self.producer, "producer", producer),
            consumer=apply(self.consumer, "consumer", consumer),
            adjustments=tuple(adjustments),
        )

    def with_durability(self, level: int) -> PulsarDriverConfig:
        """The namespace half of a durability level (docs/reference/durability.md): ack quorum.

        Levels 1 and 2 replicate synchronously to a majority of the write quorum, 3 and 4
        acknowledge after one bookie. The journal half (fsync or not) is bookie-wide and
        belongs to the broker (``PulsarStandalone(durability=...)``).
        """
        ack = durability_ack_quorum(level, self.client.persistence.write_quorum)
        return self.with_overrides(
            persistence={"ack_quorum": ack}, reason=f"durability level {level}"
        )

    def check_bookies(self, bookies: int, where: str) -> None:
        """Refuse an ensemble the cluster cannot place (never lowered silently)."""
        e = self.client.persistence.ensemble_size
        if e > bookies:
            raise ConfigError(
                f"{self.source}: client.persistence.ensembleSize {e} cannot be satisfied by "
                f"the {bookies} bookie(s) of {where}; it is never lowered silently because "
                f"that changes the durability level. Fix: start {e} bookies "
                f"(--brokerperf-nodes={e}) or use a driver file with ensembleSize/writeQuorum/"
                "ackQuorum 1/1/1 (the shipped pulsar-local.yaml)."
            )
