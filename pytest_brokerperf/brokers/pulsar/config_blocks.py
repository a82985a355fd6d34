"""The blocks of an OMB Pulsar driver file (``client`` with ``persistence``, ``producer``,
``consumer``): their declared types, every key with OMB's Java-driver default, and the
reader that checks them with file:line errors. :mod:`.config` assembles them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_brokerperf.core.files import closest as _closest
from pytest_brokerperf.core.files import validate
from pytest_brokerperf.core.warnings import BrokerPerfWarning

PYTHON_SOURCE = "<python>"
OMB_PULSAR_DRIVER_CLASS = "io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver"
JAVA_INT_MAX = 2**31 - 1

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
COMPRESSION_TYPES = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
TOPIC_TYPES = ("persistent", "non-persistent")
SEND_MODES = ("async", "sync")
#: ``sendCallbacks``: one Python callback per message (the client's usual use), or one per
#: slice of messages sent together to one partition (docs/reference/pulsar.md).
SEND_CALLBACKS = ("perMessage", "perSlice")
INITIAL_POSITIONS = ("Earliest", "Latest")

_NAMESPACE_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")

Kind = Literal["int", "bool", "str", "choice"]


@dataclass(frozen=True)
class _Key:
    """One YAML key: its Python attribute, type, limits and where it comes from."""

    key: str
    attr: str
    kind: Kind
    minimum: int | None = None
    choices: tuple[str, ...] = ()
    origin: str = "omb"  # omb | streamnative | brokerperf
    nullable: bool = False


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PulsarPersistence:
    """Namespace persistence policy (``client.persistence``); OMB's defaults 3/3/2."""

    ensemble_size: int = 3
    write_quorum: int = 3
    ack_quorum: int = 2
    deduplication_enabled: bool = False


@dataclass(frozen=True)
class PulsarClientConfig:
    """The ``client`` block. ``None`` URLs mean the broker endpoint's."""

    service_url: str | None = None
    http_url: str | None = None
    client_memory_limit_mb: int = 256
    io_threads: int = 8
    connections_per_broker: int = 8
    max_concurrent_lookup_requests: int = 1000
    cluster_name: str | None = None
    namespace_prefix: str = "benchmark/ns"
    topic_type: str = "persistent"
    persistence: PulsarPersistence = field(default_factory=PulsarPersistence)
    tls_allow_insecure_connection: bool = False
    tls_enable_hostname_verification: bool = False
    tls_trust_certs_file_path: str | None = None
    authentication_plugin: str | None = None
    authentication_data: str | None = None
    # extensions: OMB fixes these in code
    operation_timeout_seconds: int = 600
    stats_interval_seconds: int = 0
    listener_threads: int = 1
    # extension: a late subscription needs retained data (a catch-up read reads what retention kept)
    retention_time_minutes: int = -1
    retention_size_mb: int = -1


@dataclass(frozen=True)
class PulsarProducerConfig:
    """The ``producer`` block, OMB Java driver defaults."""

    batching_enabled: bool = True
    batching_max_publish_delay_ms: int = 1
    batching_max_bytes: int = 1048576
    batching_max_messages: int = JAVA_INT_MAX  # OMB fixes Integer.MAX_VALUE in code
    block_if_queue_full: bool = True
    pending_queue_size: int = 0
    max_pending_messages_across_partitions: int = JAVA_INT_MAX
    batching_partition_switch_frequency_by_publish_delay: int = 1
    send_timeout_ms: int = 0  # OMB fixes sendTimeout(0) in code
    compression_type: str = "NONE"
    send_mode: str = "async"
    send_callbacks: str = "perMessage"


@dataclass(frozen=True)
class PulsarConsumerConfig:
    """The ``consumer`` block, OMB Java driver defaults."""

    subscription_type: str = "Failover"
    receiver_queue_size: int = 10000
    max_total_receiver_queue_size_across_partitions: int = JAVA_INT_MAX
    subscription_initial_position: str = "Earliest"


_CLIENT_KEYS: tuple[_Key, ...] = (
    _Key("serviceUrl", "service_url", "str", nullable=True),
    _Key("httpUrl", "http_url", "str", nullable=True),
    _Key("clientMemoryLimitMB", "client_memory_limit_mb", "int", minimum=0),
    _Key("ioThreads", "io_threads", "int", minimum=1),
    _Key("connectionsPerBroker", "connections_per_broker", "int", minimum=1),
    _Key("maxConcurrentLookupRequests", "max_concurrent_lookup_requests", "int", minimum=1),
    _Key("clusterName", "cluster_name", "str", nullable=True),
    _Key("namespacePrefix", "namespace_prefix", "str"),
    _Key("topicType", "topic_type", "choice", choices=TOPIC_TYPES),
    _Key("tlsAllowInsecureConnection", "tls_allow_insecure_connection", "bool"),
    _Key("tlsEnableHostnameVerification", "tls_enable_hostname_verification", "bool"),
    _Key("tlsTrustCertsFilePath", "tls_trust_certs_file_path", "str", nullable=True),
    _Key(
        "operationTimeoutSeconds",
        "operation_timeout_seconds",
        "int",
        minimum=1,
        origin="brokerperf",
    ),
    _Key("statsIntervalSeconds", "stats_interval_seconds", "int", minimum=0, origin="brokerperf"),
    _Key("listenerThreads", "listener_threads", "int", minimum=1, origin="brokerperf"),
)
_PERSISTENCE_KEYS: tuple[_Key, ...] = (
    _Key("ensembleSize", "ensemble_size", "int", minimum=1),
    _Key("writeQuorum", "write_quorum", "int", minimum=1),
    _Key("ackQuorum", "ack_quorum", "int", minimum=1),
    _Key("deduplicationEnabled", "deduplication_enabled", "bool"),
)
_PRODUCER_KEYS: tuple[_Key, ...] = (
    _Key("batchingEnabled", "batching_enabled", "bool"),
    _Key("batchingMaxPublishDelayMs", "batching_max_publish_delay_ms", "int", minimum=0),
    _Key("batchingMaxBytes", "batching_max_bytes", "int", minimum=1),
    _Key(
        "batchingMaxMessages",
        "batching_max_messages",
        "int",
        minimum=2,  # client's rule
        origin="brokerperf",
    ),
    _Key("blockIfQueueFull", "block_if_queue_full", "bool"),
    _Key("pendingQueueSize", "pending_queue_size", "int", minimum=0),
    _Key(
        "maxPendingMessagesAcrossPartitions",
        "max_pending_messages_across_partitions",
        "int",
        minimum=0,
        origin="streamnative",
    ),
    _Key(
        "batchingPartitionSwitchFrequencyByPublishDelay",
        "batching_partition_switch_frequency_by_publish_delay",
        "int",
        minimum=1,
        origin="streamnative",
    ),
    _Key("sendTimeoutMs", "send_timeout_ms", "int", minimum=0, origin="brokerperf"),
    _Key(
        "compressionType",
        "compression_type",
        "choice",
        choices=COMPRESSION_TYPES,
        origin="brokerperf",
    ),
    _Key("sendMode", "send_mode", "choice", choices=SEND_MODES, origin="brokerperf"),
    _Key("sendCallbacks", "send_callbacks", "choice", choices=SEND_CALLBACKS,
         origin="brokerperf"),
)
_CONSUMER_KEYS: tuple[_Key, ...] = (
    _Key("subscriptionType", "subscription_type", "choice", choices=SUBSCRIPTION_TYPES),
    _Key("receiverQueueSize", "receiver_queue_size", "int", minimum=1),
    _Key(
        "maxTotalReceiverQueueSizeAcrossPartitions",
        "max_total_receiver_queue_size_across_partitions",
        "int",
        minimum=1,
        origin="streamnative",
    ),
    _Key(
        "subscriptionInitialPosition",
        "subscription_initial_position",
        "choice",
        choices=INITIAL_POSITIONS,
        origin="brokerperf",
    ),
)
_TOP_KEYS = ("name", "driverClass", "client", "producer", "consumer")


class _Reader:
    """Reads one driver mapping, citing ``file:line`` in every error and warning."""

    def __init__(self, source: str, line_of: Callable[..., int | None] | None) -> None:
        self.source = source
        self.line_of = line_of

    def where(self, *path: str) -> str:
        line = self.line_of(*path) if self.line_of is not None else None
        return f"{self.source}:{line}" if line else self.source

    def block(
        self,
        data: Mapping[str, Any],
        path: tuple[str, ...],
        keys: tuple[_Key, ...],
        nested: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        raw: dict[str, Any] = {}
        by_key = {k.key: k for k in keys}
        for raw_key, value in data.items():
            key = str(raw_key)
            if key in nested:
                continue
            spec = by_key.get(key)
            if spec is None:
                near = _closest(key, [*by_key, *nested])
                hint = f" Did you mean {near!r}?" if near else ""
                warnings.warn(
                    BrokerPerfWarning(
                        f"{self.where(*path, key)}: unknown Pulsar driver key "
                        f"{'.'.join((*path, key))!r} is ignored.{hint}"
                    ),
                    stacklevel=4,
                )
                continue
            raw[key] = value
        # The block's declared model (.driver_file) checks the values.
        from pytest_brokerperf.brokers.pulsar.driver_file import block_model

        model = validate(
            block_model(".".join(path) or "driver", keys),
            raw,
            source=self.source,
            line_of=self.line_of,
            prefix=path,
            label_prefix=".".join(path),
        )
        return {name: getattr(model, name) for name in model.model_fields_set}
