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
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_brokerperf.brokers.kafka.librdkafka import JAVA_TO_LIBRDKAFKA, _redact, translate
from pytest_brokerperf.brokers.kafka.properties import PYTHON_SOURCE, JavaProperties, _to_str
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.files import LINES, lines, validate
from pytest_brokerperf.core.files import closest as _closest
from pytest_brokerperf.core.files import load_yaml as _load_yaml
from pytest_brokerperf.core.shipped import DRIVERS_DIR, shipped_driver, shipped_drivers
from pytest_brokerperf.core.warnings import BrokerPerfWarning

__all__ = [
    "DRIVERS_DIR",
    "JAVA_TO_LIBRDKAFKA",
    "JavaProperties",
    "KafkaDriverConfig",
    "shipped_driver",
    "shipped_drivers",
]


OMB_KAFKA_DRIVER_CLASS = "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"

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
        # The declared model (.driver_file) checks every key; errors
        # cite the file's line while a file is loaded. Properties text is parsed here.
        from pytest_brokerperf.brokers.kafka.driver_file import KafkaDriverFile

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
        settings, notes = translate(merged, role)
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


