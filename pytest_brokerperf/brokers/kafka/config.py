"""OMB Kafka driver YAML (OMB's ``driver-kafka/*.yaml``) read unchanged, turned into
librdkafka settings.

OMB's Kafka driver files hold Java client properties as multi-line strings
(``producerConfig: |`` ...). pytest-brokerperf drives Kafka with confluent-kafka
(librdkafka), whose property names mostly match Java's but not always. This module

* parses those strings like ``java.util.Properties`` (``k=v``, ``k: v``, ``k v``, ``#``/``!``
  comments, backslash continuations and escapes), keeping insertion order;
* translates Java-only properties to their librdkafka equivalent or drops them, and
  records every translation and drop in :attr:`KafkaDriverConfig.notes`, so the effective
  settings written to results say what the client really ran with;
* keeps ``reset`` so the remote-safety code can refuse it.

Deliberate differences from Java's parser: trailing whitespace of values is stripped
(``acks=all `` would otherwise reach librdkafka as ``"all "``). The shipped driver files
under ``pytest_brokerperf/data/drivers`` leave out OMB's ``bootstrap.servers=localhost:9092``
because a YAML bootstrap wins over the endpoint's (see :meth:`producer_settings`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_brokerperf.errors import ConfigError
from pytest_brokerperf.files import LINES, lines, validate
from pytest_brokerperf.files import closest as _closest
from pytest_brokerperf.files import load_yaml as _load_yaml
from pytest_brokerperf.warnings import BrokerPerfWarning
from pytest_brokerperf.workload import DATA_DIR

__all__ = [
    "DRIVERS_DIR",
    "JAVA_TO_LIBRDKAFKA",
    "JavaProperties",
    "KafkaDriverConfig",
    "shipped_driver",
    "shipped_drivers",
]

DRIVERS_DIR = DATA_DIR / "drivers"

PYTHON_SOURCE = "<python>"
OMB_KAFKA_DRIVER_CLASS = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"

_SECRET_WORDS = ("password", "secret", "jaas", "token", "key.pem", "private")


# --------------------------------------------------------------------------------------
# Java properties
# --------------------------------------------------------------------------------------


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first physical line number, logical line) with backslash continuations joined."""
    pending: str | None = None
    start = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = n, ""
        pending += line
        trailing = len(pending) - len(pending.rstrip("\\"))
        if trailing % 2 == 1:  # odd number of backslashes: line continues
            pending = pending[:-1]
            continue
        yield start, pending
        pending = None
    if pending is not None:
        yield start, pending


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest.rstrip())


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class JavaProperties(Mapping[str, str]):
    """An immutable, ordered, hashable and picklable ``str -> str`` mapping.

    Immutable so :class:`KafkaDriverConfig` can be a frozen dataclass that is safe to
    send to worker processes; ordered so effective settings print in the user's order.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        merged: dict[str, str] = {}
        for k, v in pairs:
            merged[str(k)] = _to_str(v)
        self._items: tuple[tuple[str, str], ...] = tuple(merged.items())

    @classmethod
    def parse(cls, text: str, *, source: str = PYTHON_SOURCE, key: str = "") -> JavaProperties:
        """Parse a Java properties string; the last of duplicate keys wins (as in Java)."""
        pairs: list[tuple[str, str]] = []
        for n, line in _logical_lines(text):
            name, value = _split_property(line)
            if not name:
                where = f"{key}, property line {n}" if key else f"property line {n}"
                raise ConfigError(
                    f"{source}: {where} = {line!r}: the property has no name. "
                    "Fix: write `name=value`, e.g. `linger.ms=1`."
                )
            pairs.append((name, value))
        return cls(pairs)

    def to_text(self) -> str:
        """``k=v`` lines that :meth:`parse` (and Java) read back to the same mapping."""

        def esc(s: str, is_key: bool) -> str:
            s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
            if is_key:
                s = re.sub(r"([=: ])", r"\\\1", s)
            elif s.startswith(" "):
                s = "\\" + s
            return s

        return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in self._items)

    def merged(self, *others: Mapping[str, Any]) -> JavaProperties:
        """A copy with ``others`` applied in order; a ``None`` value removes the key."""
        result = dict(self._items)
        for other in others:
            for k, v in other.items():
                if v is None:
                    result.pop(k, None)
                else:
                    result[k] = _to_str(v)
        return JavaProperties(result)

    def __getitem__(self, key: str) -> str:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"JavaProperties({dict(self._items)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (JavaProperties, (self._items,))


# --------------------------------------------------------------------------------------
# Java -> librdkafka
# --------------------------------------------------------------------------------------

#: Java client property -> (librdkafka name or None to drop, reason). Names that are the
#: same in both (acks, linger.ms, batch.size, max.partition.fetch.bytes, ...) are absent.
JAVA_TO_LIBRDKAFKA: dict[str, tuple[str | None, str]] = {
    "key.serializer": (None, "the harness sends raw bytes; librdkafka has no serializers"),
    "value.serializer": (None, "the harness sends raw bytes; librdkafka has no serializers"),
    "key.deserializer": (None, "the harness reads raw bytes; librdkafka has no deserializers"),
    "value.deserializer": (None, "the harness reads raw bytes; librdkafka has no deserializers"),
    "default.api.timeout.ms": (
        None,
        "Java-only API-call timeout; librdkafka uses per-call timeouts set by the harness",
    ),
    "max.block.ms": (
        None,
        "Java-only; librdkafka produce() never blocks, a full queue is counted as back-pressure",
    ),
    "max.poll.records": (None, "Java-only; the harness chooses the consume() batch size"),
    "partitioner.class": (None, "Java class; librdkafka's default partitioner is used"),
    "interceptor.classes": (None, "Java classes cannot run in librdkafka"),
    "metric.reporters": (None, "Java classes cannot run in librdkafka"),
    "auto.include.jmx.reporter": (None, "Java-only (JMX)"),
    "ssl.truststore.location": (
        None,
        "librdkafka cannot read JKS trust stores; convert to PEM and set ssl.ca.location",
    ),
    "ssl.truststore.password": (None, "JKS trust store setting; librdkafka needs ssl.ca.location"),
    "ssl.truststore.type": (None, "JKS trust store setting; librdkafka needs ssl.ca.location"),
    "ssl.keystore.type": (None, "librdkafka's ssl.keystore.location is always PKCS#12"),
    "buffer.memory": ("queue.buffering.max.kbytes", "bytes converted to KiB"),
    "max.request.size": ("message.max.bytes", "librdkafka's request/message size limit"),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", "renamed"),
    "send.buffer.bytes": ("socket.send.buffer.bytes", "renamed; Java -1 (OS default) -> 0"),
    "receive.buffer.bytes": (
        "socket.receive.buffer.bytes",
        "renamed; Java -1 (OS default) -> 0",
    ),
    "partition.assignment.strategy": (
        "partition.assignment.strategy",
        "Java assignor class names mapped to librdkafka assignor names",
    ),
    "sasl.jaas.config": ("sasl.username", "username/password taken from the JAAS line"),
}

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

#: librdkafka's upper limits for settings OMB files exceed (CONFIGURATION.md ranges).
_LIBRDKAFKA_MAX = {
    "request.timeout.ms": 900000,
    "linger.ms": 900000,
    "queue.buffering.max.ms": 900000,
}

_PRODUCER_ONLY = frozenset(
    {
        "acks",
        "request.required.acks",
        "linger.ms",
        "queue.buffering.max.ms",
        "batch.size",
        "batch.num.messages",
        "compression.type",
        "compression.codec",
        "compression.level",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "retries",
        "message.send.max.retries",
        "request.timeout.ms",
        "transactional.id",
        "transaction.timeout.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "partitioner",
        "sticky.partitioning.linger.ms",
    }
)
_CONSUMER_ONLY = frozenset(
    {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "partition.assignment.strategy",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "check.crcs",
        "enable.partition.eof",
    }
)

_JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


def _translate(props: Mapping[str, str], role: str) -> tuple[dict[str, str], list[str]]:
    """librdkafka settings for one client ``role`` (producer|consumer|admin) plus notes."""
    out: dict[str, str] = {}
    notes: list[str] = []
    for key, value in props.items():
        new_key, new_value = key, value
        if key in JAVA_TO_LIBRDKAFKA:
            target, reason = JAVA_TO_LIBRDKAFKA[key]
            if target is None:
                notes.append(f"{role}: dropped {key}={value} ({reason})")
                continue
            if key == "buffer.memory":
                try:
                    new_value = str(max(1, math.ceil(int(value) / 1024)))
                except ValueError:
                    notes.append(f"{role}: dropped {key}={value} (not a number of bytes)")
                    continue
            elif key in ("send.buffer.bytes", "receive.buffer.bytes") and value.strip() == "-1":
                new_value = "0"
            elif key == "partition.assignment.strategy":
                names = [_ASSIGNORS.get(c.strip(), c.strip()) for c in value.split(",")]
                unknown = [n for n in names if "." in n]
                if unknown:
                    notes.append(
                        f"{role}: dropped {key}={value} (no librdkafka assignor for {unknown})"
                    )
                    continue
                new_value = ",".join(names)
            elif key == "sasl.jaas.config":
                fields = {
                    m.group(1): next(g for g in m.groups()[1:] if g is not None)
                    for m in _JAAS_RE.finditer(value)
                }
                if "username" not in fields:
                    notes.append(f"{role}: dropped sasl.jaas.config (no username= in it)")
                    continue
                out["sasl.username"] = fields["username"]
                if "password" in fields:
                    out["sasl.password"] = fields["password"]
                notes.append(f"{role}: sasl.jaas.config -> sasl.username, sasl.password")
                continue
            new_key = target
            if new_key != key or new_value != value:
                notes.append(f"{role}: {key}={value} -> {new_key}={new_value} ({reason})")
        elif key == "auto.offset.reset" and value.strip() == "none":
            new_value = "error"
            notes.append(f"{role}: auto.offset.reset=none -> error (librdkafka's name)")
        elif key == "ssl.endpoint.identification.algorithm" and value.strip() == "":
            new_value = "none"
            notes.append(f"{role}: ssl.endpoint.identification.algorithm='' -> none")
        wrong = _CONSUMER_ONLY if role != "consumer" else _PRODUCER_ONLY
        if role == "admin":
            wrong = _CONSUMER_ONLY | _PRODUCER_ONLY
        if new_key in wrong:
            notes.append(f"{role}: {new_key}={new_value} not passed (not a {role}-client setting)")
            continue
        limit = _LIBRDKAFKA_MAX.get(new_key)
        if limit is not None and new_value.strip().isdigit() and int(new_value) > limit:
            notes.append(f"{role}: {new_key}={new_value} capped at {limit} (librdkafka's maximum)")
            new_value = str(limit)
        if "{zone.id}" in new_value:
            notes.append(
                f"{role}: {new_key} contains OMB's {{zone.id}} placeholder (a JVM property in "
                "OMB); it is passed literally"
            )
        out[new_key] = new_value
    return out, notes


def _redact(settings: Mapping[str, str]) -> dict[str, str]:
    return {
        k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in settings.items()
    }


# --------------------------------------------------------------------------------------
# Driver config
# --------------------------------------------------------------------------------------


_KEYS = {
    "name": "name",
    "driverClass": "driver_class",
    "replicationFactor": "replication_factor",
    "reset": "reset",
    "topicConfig": "topic_config",
    "commonConfig": "common_config",
    "producerConfig": "producer_config",
    "consumerConfig": "consumer_config",
}
_PROPS_KEYS = ("topicConfig", "commonConfig", "producerConfig", "consumerConfig")


@dataclass(frozen=True)
class KafkaDriverConfig:
    """An OMB Kafka driver file: replication factor plus four Java-properties blocks.

    ``replication_factor=-1`` (the default when the YAML has none) means the broker's
    ``default.replication.factor`` (KIP-464; Java OMB passes -1 through the same way).
    ``adjustments`` lists explicit changes made in Python (:meth:`with_overrides`) so
    results record them; it is not part of the OMB format and, like ``source``, does not
    take part in equality.
    """

    name: str = "Kafka"
    driver_class: str | None = None
    replication_factor: int = -1
    topic_config: JavaProperties = field(default_factory=JavaProperties)
    common_config: JavaProperties = field(default_factory=JavaProperties)
    producer_config: JavaProperties = field(default_factory=JavaProperties)
    consumer_config: JavaProperties = field(default_factory=JavaProperties)
    reset: bool = False
    source: str = field(default=PYTHON_SOURCE, compare=False, repr=False)
    adjustments: tuple[str, ...] = field(default=(), compare=False)

    def _where(self, key: str) -> str:
        line_of = LINES.get()
        line = line_of(key) if line_of is not None else None
        return f"{self.source}:{line}" if line else self.source

    def __post_init__(self) -> None:
        # The declared model (pytest_brokerperf/models/kafka.py) checks every key; errors
        # cite the file's line while a file is loaded. Properties text is parsed here.
        from pytest_brokerperf.models.kafka import KafkaDriverFile

        fields = KafkaDriverFile.model_fields
        data = {info.alias or name: getattr(self, name) for name, info in fields.items()}
        model = validate(KafkaDriverFile, data, source=self.source, line_of=LINES.get())
        for name, info in fields.items():
            value = getattr(model, name)
            if name.endswith("_config") and not isinstance(value, JavaProperties):
                if isinstance(value, str):
                    key = info.alias or name
                    value = JavaProperties.parse(value, source=self._where(key), key=key)
                else:
                    value = JavaProperties(value)
            object.__setattr__(self, name, value)
        if not isinstance(self.adjustments, tuple):
            object.__setattr__(self, "adjustments", tuple(self.adjustments))
        misr = self.topic_config.get("min.insync.replicas")
        if misr is not None and self.replication_factor >= 1:
            if not misr.strip().isdigit():
                raise ConfigError(
                    f"{self._where('topicConfig')}: topicConfig min.insync.replicas = {misr!r}: "
                    "not a whole number. Fix: write `min.insync.replicas=2`."
                )
            if int(misr) > self.replication_factor:
                raise ConfigError(
                    f"{self._where('topicConfig')}: topicConfig min.insync.replicas = {misr} is "
                    f"larger than replicationFactor = {self.replication_factor}: every acks=all "
                    "write would fail with NOT_ENOUGH_REPLICAS. Fix: lower min.insync.replicas or "
                    "raise replicationFactor."
                )

    # ---------------------------------------------------------------- loading

    @classmethod
    def from_yaml(cls, path: str | Path) -> KafkaDriverConfig:
        """Read an OMB Kafka driver YAML file; errors cite the file and line."""
        path = Path(path)
        doc = _load_yaml(path, ConfigError, "Kafka driver")
        return cls._from_mapping(doc.data, str(path), doc.line)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = PYTHON_SOURCE) -> KafkaDriverConfig:
        """Build from a mapping with OMB's keys (``replicationFactor``, ``producerConfig``...)."""
        return cls._from_mapping(d, source, None)

    @classmethod
    def _from_mapping(
        cls, d: Any, source: str, line_of: Callable[[str], int | None] | None
    ) -> KafkaDriverConfig:
        def where(key: str) -> str:
            line = line_of(key) if line_of is not None else None
            return f"{source}:{line}" if line else source

        if not isinstance(d, Mapping):
            raise ConfigError(
                f"{source}: a Kafka driver file must be a mapping with keys such as "
                f"replicationFactor and producerConfig, got {type(d).__name__}. "
                "Fix: start from pytest_brokerperf/data/drivers/kafka-local.yaml."
            )
        kwargs: dict[str, Any] = {"source": source}
        for key, value in d.items():
            if key not in _KEYS:
                near = _closest(str(key), list(_KEYS))
                hint = f" Did you mean {near!r}?" if near else ""
                warnings.warn(
                    BrokerPerfWarning(
                        f"{where(str(key))}: unknown Kafka driver key {key!r} is ignored.{hint}"
                    ),
                    stacklevel=3,
                )
                continue
            if value is not None:  # null keeps the default, as in OMB
                kwargs[_KEYS[key]] = value
        driver_class = kwargs.get("driver_class")
        if isinstance(driver_class, str) and "kafka" not in driver_class.lower():
            warnings.warn(
                BrokerPerfWarning(
                    f"{where('driverClass')}: driverClass {driver_class!r} is not "
                    "OMB's Kafka driver; the file is read as a Kafka driver config anyway."
                ),
                stacklevel=3,
            )
        with lines(line_of):
            return cls(**kwargs)

    # ---------------------------------------------------------------- output

    def to_omb_dict(self) -> dict[str, Any]:
        """The OMB driver mapping; ``from_dict(c.to_omb_dict()) == c``."""
        out: dict[str, Any] = {"name": self.name}
        if self.driver_class is not None:
            out["driverClass"] = self.driver_class
        out["replicationFactor"] = self.replication_factor
        if self.reset:
            out["reset"] = True
        out["topicConfig"] = self.topic_config.to_text()
        out["commonConfig"] = self.common_config.to_text()
        out["producerConfig"] = self.producer_config.to_text()
        out["consumerConfig"] = self.consumer_config.to_text()
        return out

    def to_yaml(self, path: str | Path) -> Path:
        """Write the config as OMB driver YAML, properties as ``|`` block strings."""
        path = Path(path)
        text = yaml.dump(self.to_omb_dict(), Dumper=_BlockDumper, sort_keys=False)
        path.write_text(
            "# OMB Kafka driver config written by pytest-brokerperf\n" + text, encoding="utf-8"
        )
        return path

    # ---------------------------------------------------------------- client settings

    def _role_settings(
        self, role: str, bootstrap: str, client_config: Mapping[str, str] | None
    ) -> tuple[dict[str, str], list[str]]:
        sections: list[Mapping[str, str]] = [self.common_config]
        if role == "producer":
            sections.append(self.producer_config)
        elif role == "consumer":
            sections.append(self.consumer_config)
        merged = JavaProperties(client_config or {}).merged(*sections)
        settings, notes = _translate(merged, role)
        yaml_bootstrap = settings.get("bootstrap.servers")
        if yaml_bootstrap is None:
            settings = {"bootstrap.servers": bootstrap, **settings}
        elif (
            yaml_bootstrap != bootstrap
            and (client_config or {}).get("bootstrap.servers") != yaml_bootstrap
        ):
            notes.append(
                f"{role}: bootstrap.servers={yaml_bootstrap} from the driver YAML is used "
                f"instead of the endpoint's {bootstrap}"
            )
        return settings, notes

    def producer_settings(
        self, bootstrap: str, client_config: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """librdkafka producer config: endpoint ``client_config`` (TLS/SASL), then
        commonConfig, then producerConfig, translated; ``bootstrap.servers`` is the
        endpoint's unless the YAML sets one (OMB's files set localhost:9092)."""
        return self._role_settings("producer", bootstrap, client_config)[0]

    def consumer_settings(
        self, bootstrap: str, group_id: str, client_config: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """librdkafka consumer config; ``group.id`` is always ``group_id`` (one group per
        subscription, as OMB does) and OMB's ``auto.offset.reset=earliest`` and
        ``enable.auto.commit=false`` apply when the YAML does not say otherwise."""
        settings, _ = self._role_settings("consumer", bootstrap, client_config)
        settings["group.id"] = group_id
        settings.setdefault("auto.offset.reset", "earliest")
        settings.setdefault("enable.auto.commit", "false")
        return settings

    def admin_settings(
        self, bootstrap: str, client_config: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """AdminClient config: commonConfig only (as OMB), translated."""
        return self._role_settings("admin", bootstrap, client_config)[0]

    def topic_settings(self) -> dict[str, str]:
        """Topic configs for ``NewTopic(config=...)``; broker-side names need no translation."""
        return dict(self.topic_config)

    @property
    def notes(self) -> list[str]:
        """What differs between this file and what the clients get: explicit adjustments,
        Java->librdkafka translations, drops, caps and role filtering. The same change for
        several clients is one note (``admin, producer: dropped ...``)."""
        roles_of: dict[str, list[str]] = {}
        for role in ("admin", "producer", "consumer"):
            _, notes = self._role_settings(role, "<endpoint>", None)
            if role == "consumer":
                group = self.consumer_config.get("group.id") or self.common_config.get("group.id")
                if group is not None:
                    notes.append(
                        f"consumer: group.id={group} replaced by one group per subscription "
                        "(as OMB does)"
                    )
            for note in notes:
                body = note.split(": ", 1)[1]
                roles_of.setdefault(body, []).append(role)
        return list(self.adjustments) + [
            f"{', '.join(roles)}: {body}" for body, roles in roles_of.items()
        ]

    def effective(
        self, bootstrap: str, client_config: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """JSON-safe effective settings for results, secrets redacted."""
        return {
            "name": self.name,
            "source": self.source,
            "replicationFactor": self.replication_factor,
            "reset": self.reset,
            "topic": self.topic_settings(),
            "admin": _redact(self.admin_settings(bootstrap, client_config)),
            "producer": _redact(self.producer_settings(bootstrap, client_config)),
            "consumer": _redact(
                self.consumer_settings(bootstrap, "<per-subscription>", client_config)
            ),
            "notes": self.notes,
        }

    # ---------------------------------------------------------------- changes

    def with_overrides(
        self,
        *,
        name: str | None = None,
        replication_factor: int | None = None,
        topic: Mapping[str, Any] | None = None,
        common: Mapping[str, Any] | None = None,
        producer: Mapping[str, Any] | None = None,
        consumer: Mapping[str, Any] | None = None,
        reset: bool | None = None,
        reason: str = "override",
    ) -> KafkaDriverConfig:
        """A copy with settings changed (a ``None`` property value removes the key).

        Every change is appended to :attr:`adjustments` with ``reason`` so results show
        e.g. ``replicationFactor 3 -> 1 (single-node broker)``.
        """
        adjustments = list(self.adjustments)
        kwargs: dict[str, Any] = {}
        if name is not None and name != self.name:
            kwargs["name"] = name
        if replication_factor is not None and replication_factor != self.replication_factor:
            adjustments.append(
                f"replicationFactor {self.replication_factor} -> {replication_factor} ({reason})"
            )
            kwargs["replication_factor"] = replication_factor
        if reset is not None and reset != self.reset:
            adjustments.append(f"reset {self.reset} -> {reset} ({reason})")
            kwargs["reset"] = reset
        for attr, label, changes in (
            ("topic_config", "topicConfig", topic),
            ("common_config", "commonConfig", common),
            ("producer_config", "producerConfig", producer),
            ("consumer_config", "consumerConfig", consumer),
        ):
            if not changes:
                continue
            old: JavaProperties = getattr(self, attr)
            new = old.merged(changes)
            for k, v in changes.items():
                before = old.get(k)
                after = None if v is None else _to_str(v)
                if before != after:
                    adjustments.append(f"{label} {k}: {before} -> {after} ({reason})")
            kwargs[attr] = new
        kwargs["adjustments"] = tuple(adjustments)
        # topic and RF change together (min.insync.replicas <= RF): validate the result only
        return dataclasses.replace(self, **kwargs)

    def check_nodes(self, nodes: int) -> None:
        """Refuse a replication factor the cluster cannot hold: OMB's own
        files use RF 3, which a single-node broker cannot create."""
        if self.replication_factor > nodes:
            raise ConfigError(
                f"{self._where('replicationFactor')}: replicationFactor = "
                f"{self.replication_factor} but the broker has {nodes} node(s), so topics "
                "cannot be created. Fix: use the shipped kafka-local.yaml (RF 1) on one node, "
                "start 3 nodes, or call fit_to_nodes() to lower RF explicitly (that lowers "
                "the durability level and is recorded in the results)."
            )

    def fit_to_nodes(self, nodes: int) -> KafkaDriverConfig:
        """Lower RF (and min.insync.replicas) to ``nodes`` *explicitly*; the change is in
        :attr:`notes`, e.g. ``replicationFactor 3 -> 1 (only 1 broker node; ...)``."""
        if self.replication_factor <= nodes:
            return self
        reason = f"only {nodes} broker node(s); replication is no longer across nodes"
        topic: dict[str, Any] = {}
        misr = self.topic_config.get("min.insync.replicas")
        if misr is not None and misr.strip().isdigit() and int(misr) > nodes:
            topic["min.insync.replicas"] = str(nodes)
        return self.with_overrides(replication_factor=nodes, topic=topic, reason=reason)


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings as ``|`` blocks, the way OMB's driver files look."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


# --------------------------------------------------------------------------------------
# Shipped driver files
# --------------------------------------------------------------------------------------


def shipped_drivers() -> list[str]:
    """Names (without ``.yaml``) of the driver configs shipped in ``pytest_brokerperf/data``."""
    return sorted(p.stem for p in DRIVERS_DIR.glob("*.yaml"))


def shipped_driver(name: str) -> Path:
    """Path of a shipped driver YAML, by name with or without ``.yaml``."""
    stem = name.removesuffix(".yaml").removesuffix(".yml")
    path = DRIVERS_DIR / f"{stem}.yaml"
    if path.is_file():
        return path
    names = shipped_drivers()
    near = _closest(stem, names)
    hint = f" Did you mean {near!r}?" if near else ""
    raise ConfigError(
        f"no shipped driver config named {name!r}.{hint} Shipped: {', '.join(names)}. "
        "Fix: use one of these names or pass a path to your own OMB driver YAML."
    )
