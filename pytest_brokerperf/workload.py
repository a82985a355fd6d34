"""The OMB workload model: OpenMessaging-Benchmark workload YAML in and out, validated.

Users bring workload files written for OMB, so :class:`Workload` reads them *unchanged*:
every field of OMB main's ``Workload.java`` with OMB's defaults (``warmupDurationMinutes: 1``,
``backlogDrainRatio: 1.0``, ``keyDistributor: NO_KEY``), AutoMQ's optional per-topic lists,
``logIntervalMillis`` and ``randomTopicNames``, and Confluent's ``consumerOnly``
(OMB's workloads/*.yaml and its Workload class). Two things differ from OMB on
purpose (docs/reference/workload.md):

* unknown keys are not silently ignored: they raise a :class:`BrokerPerfWarning` naming
  the closest known key;
* everything that would make a run fail or mean something else is rejected here, before
  any broker starts, with an error naming file, line, key, value and the fix.

Python attribute names are snake_case (``partitions_per_topic``); the YAML keys stay
OMB's camelCase (``partitionsPerTopic``). Derived numbers (:attr:`Workload.total_producers`,
:attr:`Workload.drain_complete_threshold`, ...) are computed exactly as OMB computes them.
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from pytest_brokerperf.errors import ConfigError, WorkloadError
from pytest_brokerperf.files import (
    LINES,
    PYTHON_SOURCE,
    YamlDoc,
    closest,
    lines,
    load_yaml,
    parse_label,
    type_name,
    validate,
)
from pytest_brokerperf.models.workload_fields import FIELDS, KeyDistributor, WorkloadField
from pytest_brokerperf.warnings import BrokerPerfWarning

__all__ = [
    "PAYLOAD_HEADER_BYTES",
    "PYTHON_SOURCE",
    "KeyDistributor",
    "Workload",
    "shipped_workload",
    "shipped_workloads",
]

#: Bytes at the start of every payload that the harness overwrites with its own header
#: (intended and actual send time, producer id, sequence). Payloads must be at least this big.
PAYLOAD_HEADER_BYTES = 32

DATA_DIR = Path(__file__).resolve().parent / "data"
WORKLOADS_DIR = DATA_DIR / "workloads"

_GIB = 1024**3

# YAML with line numbers lives in files.py (shared by every file the plugin reads); the old
# private names stay for code that imported them from here.
_YamlDoc = YamlDoc
_load_yaml = load_yaml
_closest = closest
_Field = WorkloadField
_FIELDS = FIELDS
#: Line lookup of the file being loaded (files.LINES), under its old name.
_LINE_OF = LINES
_lines = lines
_type_name = type_name


_BY_ATTR = {f.attr: f for f in FIELDS}
_BY_KEY = {f.key: f for f in FIELDS}

#: Keys of OMB forks and older OMB versions that are known but not implemented.
_FOREIGN_KEYS: dict[str, str] = {
    "existingTopicList": "Redpanda fork: pre-existing topics",
    "existingProduceTopicList": "Redpanda fork: pre-existing topics",
    "existingConsumeTopicList": "Redpanda fork: pre-existing topics",
    "sampleRateMillis": "Redpanda fork: use logIntervalMillis instead",
    "drainProducerRate": "Redpanda fork: producer rate during backlog drain",
    "nameFormat": "OMB workload *template* key (WorkloadGenerationTool), not a workload key",
    "messageRateReceivedForSubscription": "old OMB fork key",
    "producerStartRate": "old OMB fork key (rate discovery start)",
    "acceptableBacklog": "old OMB fork key (rate discovery)",
    "producerIncrementRate": "old OMB fork key",
    "producerIncrementSeconds": "old OMB fork key",
    "producerPauseBeforeDrain": "old OMB fork key",
    "producerPauseDuringDrain": "old OMB fork key",
}


class _Problem(Exception):
    """One validation failure, rendered into a :class:`WorkloadError` with the source."""

    def __init__(self, attr: str, value: Any, problem: str, fix: str, key: str | None = None):
        super().__init__(problem)
        self.attr, self.value, self.problem, self.fix = attr, value, problem, fix
        self.key = key or _BY_ATTR[attr].key

    def render(self, source: str, line_of: Callable[..., int | None] | None) -> str:
        line = line_of(*parse_label(self.key)) if line_of else None
        where = f"{source}:{line}" if line else source
        key = self.key
        if source == PYTHON_SOURCE and self.attr != self.key:
            key = f"{self.key} (Python: {self.attr})"
        unset = " (not in the file: OMB's default)" if line_of and line is None else ""
        return f"{where}: {key} = {self.value!r}{unset}: {self.problem}. Fix: {self.fix}."


# --------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One OMB workload; construction validates, so an instance is always runnable.

    Build it from YAML (:meth:`from_yaml`), a mapping with OMB keys (:meth:`from_dict`) or
    keyword arguments with snake_case names. Durations and ``consumer_backlog_size_gb`` may
    be fractional (an extension for short CI runs: OMB's Java ints would truncate them);
    everything else has OMB's Java type. ``source`` (file path or ``"<python>"``) is kept
    for error messages and to find ``payloadFile``; it does not take part in equality.
    """

    name: str | None = None
    topics: int = 0
    partitions_per_topic: int = 0
    key_distributor: KeyDistributor = KeyDistributor.NO_KEY
    message_size: int = 0
    use_randomized_payloads: bool = False
    random_bytes_ratio: float = 0.0
    randomized_payload_pool_size: int = 0
    payload_file: str | None = None
    subscriptions_per_topic: int = 0
    producers_per_topic: int = 0
    consumer_per_subscription: int = 0
    producer_rate: int = 0
    consumer_backlog_size_gb: int | float = 0
    backlog_drain_ratio: float = 1.0
    test_duration_minutes: int | float = 0
    warmup_duration_minutes: int | float = 1
    # AutoMQ extensions
    partitions_per_topic_list: tuple[int, ...] | None = None
    producers_per_topic_list: tuple[int, ...] | None = None
    producer_rate_list: tuple[tuple[int | float, ...], ...] | None = None
    log_interval_millis: int = 10000
    random_topic_names: bool = True
    # Confluent extension
    consumer_only: bool = False
    # not an OMB field: where this workload came from
    source: str = field(default=PYTHON_SOURCE, compare=False, repr=False)

    #: Extension fields written by :meth:`to_omb_dict` only when they differ from these.
    _EXTENSION_DEFAULTS: ClassVar[dict[str, Any]] = {
        "partitions_per_topic_list": None,
        "producers_per_topic_list": None,
        "producer_rate_list": None,
        "log_interval_millis": 10000,
        "random_topic_names": True,
        "consumer_only": False,
    }

    # ---------------------------------------------------------------- construction

    def __post_init__(self) -> None:
        # Keys and types: the declared model (pytest_brokerperf/models/workload.py), which
        # takes values as OMB's Jackson would; then the checks across keys below.
        from pytest_brokerperf.models.workload import workload_model

        line_of = LINES.get()
        model = validate(
            workload_model(),
            {f.key: getattr(self, f.attr) for f in FIELDS},
            source=self.source,
            line_of=line_of,
            error=WorkloadError,
            unset_note="OMB's default",
        )
        for f in FIELDS:
            value = getattr(model, f.attr)
            if value is not getattr(self, f.attr):
                object.__setattr__(self, f.attr, value)
        try:
            self._validate()
        except _Problem as p:
            raise WorkloadError(p.render(self.source, line_of)) from None

    def _validate(self) -> None:
        """Cross-field checks: everything that would make a run fail or mislead."""
        if self.topics < 1:
            raise _Problem(
                "topics",
                self.topics,
                "a workload needs at least one topic (the harness creates its own topics; "
                "pre-existing topic lists are not supported)",
                "write `topics: 1` or more",
            )
        self._validate_per_topic(
            "partitions_per_topic", "partitions_per_topic_list", minimum=1, what="partition"
        )
        self._validate_per_topic(
            "producers_per_topic", "producers_per_topic_list", minimum=0, what="producer"
        )
        if self.total_producers < 1:
            raise _Problem(
                "producers_per_topic_list",
                self.producers_per_topic_list,
                "no topic has a producer, so nothing would be sent",
                "give at least one topic a producer",
            )
        if self.message_size < PAYLOAD_HEADER_BYTES:
            raise _Problem(
                "message_size",
                self.message_size,
                f"messages must be at least {PAYLOAD_HEADER_BYTES} bytes: pytest-brokerperf "
                f"writes a {PAYLOAD_HEADER_BYTES}-byte header (intended and actual send time, "
                "producer id, sequence) at the start of every payload",
                f"write `messageSize: {PAYLOAD_HEADER_BYTES}` or more (OMB's smallest shipped "
                "payload is 100 bytes)",
            )
        for attr in (
            "subscriptions_per_topic",
            "consumer_per_subscription",
            "randomized_payload_pool_size",
            "producer_rate",
        ):
            value = getattr(self, attr)
            if value < 0:
                raise _Problem(attr, value, "must not be negative", "use 0 or a positive number")
        if self.subscriptions_per_topic > 0 and self.consumer_per_subscription < 1:
            raise _Problem(
                "consumer_per_subscription",
                self.consumer_per_subscription,
                f"subscriptionsPerTopic is {self.subscriptions_per_topic} but no subscription "
                "would have a consumer, so nothing would be received",
                "write `consumerPerSubscription: 1` or more (or `subscriptionsPerTopic: 0` "
                "for a producer-only test)",
            )
        if self.consumer_backlog_size_gb < 0:
            raise _Problem(
                "consumer_backlog_size_gb",
                self.consumer_backlog_size_gb,
                "must not be negative",
                "use 0 (no backlog phase) or a positive size in GiB",
            )
        if self.consumer_backlog_size_gb > 0:
            if self.producer_rate == 0:
                raise _Problem(
                    "producer_rate",
                    self.producer_rate,
                    "Cannot probe producer sustainable rate when building backlog "
                    f"(consumerBacklogSizeGB is {self.consumer_backlog_size_gb}; OMB refuses "
                    "this combination too)",
                    "set a fixed `producerRate:` (e.g. 10000) or `consumerBacklogSizeGB: 0`",
                )
            if self.subscriptions_per_topic < 1:
                raise _Problem(
                    "consumer_backlog_size_gb",
                    self.consumer_backlog_size_gb,
                    "a backlog needs at least one subscription to build up behind",
                    "write `subscriptionsPerTopic: 1` or `consumerBacklogSizeGB: 0`",
                )
        for attr in ("backlog_drain_ratio", "random_bytes_ratio"):
            value = getattr(self, attr)
            if not 0.0 <= value <= 1.0:
                raise _Problem(
                    attr,
                    value,
                    "must be between 0.0 and 1.0",
                    f"write e.g. `{_BY_ATTR[attr].key}: 1.0`",
                )
        if self.use_randomized_payloads and self.randomized_payload_pool_size < 1:
            raise _Problem(
                "randomized_payload_pool_size",
                self.randomized_payload_pool_size,
                "useRandomizedPayloads is true but the pool would be empty",
                "write `randomizedPayloadPoolSize: 1000` (or another positive number)",
            )
        if self.test_duration_minutes <= 0:
            raise _Problem(
                "test_duration_minutes",
                self.test_duration_minutes,
                "OMB treats <= 0 as 'run forever'; a test needs a finite measured phase",
                "write `testDurationMinutes: 5` (fractions such as 0.5 are allowed)",
            )
        if self.warmup_duration_minutes < 0:
            raise _Problem(
                "warmup_duration_minutes",
                self.warmup_duration_minutes,
                "must not be negative",
                "write `warmupDurationMinutes: 0` to disable warm-up, or a positive number",
            )
        if self.log_interval_millis < 1:
            raise _Problem(
                "log_interval_millis",
                self.log_interval_millis,
                "the stats period must be positive",
                "write `logIntervalMillis: 10000` (OMB's period) or 1000 for 1-s series",
            )
        self._validate_rate_list()
        if not self.use_randomized_payloads and self.payload_file is not None:
            self._read_payload_file(None)
        if self.consumer_only and self.consumer_backlog_size_gb == 0:
            warnings.warn(
                BrokerPerfWarning(
                    f"{self.source}: consumerOnly = True has no effect without a backlog "
                    "phase (consumerBacklogSizeGB is 0); it only pauses producers after the "
                    "backlog is built. Fix: remove it or set consumerBacklogSizeGB."
                ),
                stacklevel=4,
            )

    def _validate_per_topic(self, attr: str, list_attr: str, *, minimum: int, what: str) -> None:
        values: tuple[int, ...] | None = getattr(self, list_attr)
        key = _BY_ATTR[attr].key
        if values is None:
            if getattr(self, attr) < 1:
                raise _Problem(
                    attr,
                    getattr(self, attr),
                    f"every topic needs at least one {what}",
                    f"write `{key}: 1` or more",
                )
            return
        if getattr(self, attr) < 0:
            raise _Problem(attr, getattr(self, attr), "must not be negative", f"write `{key}: 1`")
        list_key = _BY_ATTR[list_attr].key
        if len(values) != self.topics:
            raise _Problem(
                list_attr,
                list(values),
                f"has {len(values)} entries but topics is {self.topics}; it needs one per topic",
                f"give exactly {self.topics} entries or change `topics:`",
            )
        for i, v in enumerate(values):
            if v < minimum:
                raise _Problem(
                    list_attr,
                    list(values),
                    f"entry {i} is {v}; each topic needs at least {minimum} {what}(s)",
                    f"make every entry of {list_key} at least {minimum}",
                    key=f"{list_key}[{i}]",
                )

    def _validate_rate_list(self) -> None:
        entries = self.producer_rate_list
        if entries is None:
            return
        fix = "use `[[minutesFromStart, rate], ...]` or `[[hour, minute, rate], ...]`"
        if not entries:
            raise _Problem("producer_rate_list", [], "is empty", fix + " or remove the key")
        width = len(entries[0])
        for i, entry in enumerate(entries):
            key = f"producerRateList[{i}]"
            if len(entry) not in (2, 3) or len(entry) != width:
                raise _Problem(
                    "producer_rate_list",
                    list(entry),
                    "entries must all have 2 elements [minutes, rate] or all 3 [hour, minute, "
                    "rate] (AutoMQ RateGenerator)",
                    fix,
                    key=key,
                )
            if any(v < 0 for v in entry):
                raise _Problem("producer_rate_list", list(entry), "negative value", fix, key=key)
            if width == 3 and (entry[0] >= 24 or entry[1] >= 60):
                raise _Problem(
                    "producer_rate_list",
                    list(entry),
                    "hour must be 0-23 and minute 0-59",
                    fix,
                    key=key,
                )

    @classmethod
    def from_yaml(cls, path: str | Path) -> Workload:
        """Read an OMB workload YAML file; errors cite the file and line."""
        path = Path(path)
        doc = _load_yaml(path, WorkloadError, "workload")
        if doc.data is None:
            raise WorkloadError(
                f"{path}: the workload file is empty. Fix: write OMB workload keys such as "
                "`topics: 1`, `partitionsPerTopic: 16`, `messageSize: 1024`."
            )
        for key, line in doc.duplicate_keys():
            warnings.warn(
                BrokerPerfWarning(
                    f"{path}:{line}: key {key!r} appears twice; the last value wins. "
                    "Fix: remove one of them."
                ),
                stacklevel=2,
            )
        return cls._from_mapping(doc.data, str(path), doc.line)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = PYTHON_SOURCE) -> Workload:
        """Build from a mapping with OMB's camelCase keys, as ``yaml.safe_load`` returns it."""
        return cls._from_mapping(data, source, None)

    @classmethod
    def _from_mapping(
        cls, data: Any, source: str, line_of: Callable[[str], int | None] | None
    ) -> Workload:
        if not isinstance(data, Mapping):
            raise WorkloadError(
                f"{source}: a workload must be a mapping of OMB keys, got {_type_name(data)}. "
                "Fix: write `key: value` lines such as `topics: 1`."
            )
        kwargs: dict[str, Any] = {}
        known = [f.key for f in FIELDS]
        for key, value in data.items():
            f = _BY_KEY.get(key) if isinstance(key, str) else None
            if f is not None:
                if value is not None:  # Jackson: null leaves the default in place
                    kwargs[f.attr] = value
                continue
            line = line_of(key) if line_of and isinstance(key, str) else None
            where = f"{source}:{line}" if line else source
            foreign = _FOREIGN_KEYS.get(key) if isinstance(key, str) else None
            if foreign is not None and key.startswith("existing") and value:
                raise WorkloadError(
                    f"{where}: {key} = {value!r}: pre-existing topic lists ({foreign}) are not "
                    "supported; the harness creates and deletes its own topics. "
                    "Fix: remove the key and set `topics:`."
                )
            if foreign is not None:
                msg = f"{where}: key {key!r} ({foreign}) is not implemented and is ignored."
            else:
                near = _closest(str(key), known)
                hint = f" Did you mean {near!r}?" if near else ""
                msg = (
                    f"{where}: unknown workload key {key!r} is ignored (OMB would ignore it "
                    f"silently).{hint}"
                )
            warnings.warn(BrokerPerfWarning(msg), stacklevel=3)
        with lines(line_of):
            return cls(**kwargs, source=source)

    def replace(self, **changes: Any) -> Workload:
        """A copy with ``changes`` applied and validated; camelCase OMB keys are accepted too."""
        normalized = {(_BY_KEY[k].attr if k in _BY_KEY else k): v for k, v in changes.items()}
        unknown = sorted(set(normalized) - set(_BY_ATTR) - {"source"})
        if unknown:
            near = _closest(unknown[0], list(_BY_ATTR))
            hint = f" Did you mean {near!r}?" if near else ""
            raise WorkloadError(
                f"{self.source}: Workload.replace() got unknown field(s) {unknown}.{hint} "
                "Fix: use the snake_case attribute or the OMB key."
            )
        return dataclasses.replace(self, **normalized)

    # ---------------------------------------------------------------- output

    def to_omb_dict(self) -> dict[str, Any]:
        """OMB camelCase mapping; ``Workload.from_dict(w.to_omb_dict()) == w``.

        Main OMB keys are always written (``None`` ones left out); fork extensions only
        when they differ from their defaults, so the output stays a plain OMB workload.
        """
        out: dict[str, Any] = {}
        for f in FIELDS:
            value = getattr(self, f.attr)
            if f.attr in self._EXTENSION_DEFAULTS and value == self._EXTENSION_DEFAULTS[f.attr]:
                continue
            if value is None:
                continue
            if isinstance(value, KeyDistributor):
                value = value.value
            elif f.kind == "int_list":
                value = list(value)
            elif f.kind == "rate_list":
                value = [list(entry) for entry in value]
            elif isinstance(value, float) and f.kind == "num" and value.is_integer():
                value = int(value)
            out[f.key] = value
        return out

    def to_yaml(self, path: str | Path) -> Path:
        """Write the workload as OMB YAML (readable by OMB itself) and return the path."""
        path = Path(path)
        text = yaml.safe_dump(
            self.to_omb_dict(), sort_keys=False, default_flow_style=None, allow_unicode=True
        )
        path.write_text("# OMB workload written by pytest-brokerperf\n" + text, encoding="utf-8")
        return path

    # ---------------------------------------------------------------- derived numbers

    def partitions_for_topic(self, i: int) -> int:
        """Partitions of topic ``i`` (AutoMQ ``partitionsPerTopicList`` wins if given)."""
        self._check_topic_index(i)
        if self.partitions_per_topic_list is not None:
            return self.partitions_per_topic_list[i]
        return self.partitions_per_topic

    def producers_for_topic(self, i: int) -> int:
        """Producers of topic ``i`` (AutoMQ ``producersPerTopicList`` wins if given)."""
        self._check_topic_index(i)
        if self.producers_per_topic_list is not None:
            return self.producers_per_topic_list[i]
        return self.producers_per_topic

    def rate_for_topic(self, i: int) -> float:
        """Offered msg/s into topic ``i``: ``producerRate`` is an aggregate split evenly
        over producers (OMB's WorkloadGenerator), so a topic gets its share of producers."""
        return self.producer_rate * self.producers_for_topic(i) / self.total_producers

    def _check_topic_index(self, i: int) -> None:
        if not 0 <= i < self.topics:
            raise IndexError(f"topic index {i} out of range: the workload has {self.topics} topics")

    @property
    def total_partitions(self) -> int:
        return sum(self.partitions_for_topic(i) for i in range(self.topics))

    @property
    def total_producers(self) -> int:
        """OMB: ``topics * producersPerTopic`` (or the sum of AutoMQ's per-topic list)."""
        if self.producers_per_topic_list is not None:
            return sum(self.producers_per_topic_list)
        return self.topics * self.producers_per_topic

    @property
    def total_subscriptions(self) -> int:
        """One consumer group (Kafka) / subscription (Pulsar) per topic and subscription."""
        return self.topics * self.subscriptions_per_topic

    @property
    def total_consumers(self) -> int:
        """OMB: ``topics * subscriptionsPerTopic * consumerPerSubscription``."""
        return self.topics * self.subscriptions_per_topic * self.consumer_per_subscription

    @property
    def expected_consume_rate(self) -> float:
        """OMB: ``producerRate * subscriptionsPerTopic`` (0 while the rate is discovered)."""
        return float(self.producer_rate * self.subscriptions_per_topic)

    @property
    def offered_bytes_per_s(self) -> float:
        """Bytes per second producers are asked to send (0 for rate discovery)."""
        return float(self.producer_rate * self.message_size)

    @property
    def backlog_bytes(self) -> int:
        """OMB ``requestedBacklogSize = consumerBacklogSizeGB * 1024^3`` (GiB, not GB)."""
        return int(self.consumer_backlog_size_gb * _GIB)

    @property
    def backlog_capacity_messages(self) -> int:
        """OMB ``backlogMessageCapacity = requestedBacklogSize / messageSize`` (integer)."""
        return self.backlog_bytes // self.message_size

    @property
    def drain_complete_threshold(self) -> int:
        """Backlog (messages) at or below which the drain counts as complete.

        OMB: ``max(1000, (long)((1 - backlogDrainRatio) * backlogMessageCapacity))``.
        """
        empty_level = int((1.0 - self.backlog_drain_ratio) * self.backlog_capacity_messages)
        return max(1000, empty_level)

    @property
    def warmup_s(self) -> float:
        return float(self.warmup_duration_minutes) * 60.0

    @property
    def duration_s(self) -> float:
        """Measured phase length; with a backlog OMB runs build + drain + this (OMB's
        WorkloadGenerator)."""
        return float(self.test_duration_minutes) * 60.0

    @property
    def log_interval_s(self) -> float:
        return self.log_interval_millis / 1000.0

    # ---------------------------------------------------------------- payloads

    def _search_dirs(self, base_dir: Path | None) -> list[tuple[str, Path]]:
        dirs: list[tuple[str, Path]] = []
        if base_dir is not None:
            dirs.append(("base directory", Path(base_dir)))
        elif not (self.source.startswith("<") and self.source.endswith(">")):
            dirs.append(("workload file's directory", Path(self.source).resolve().parent))
        dirs.append(("current directory", Path.cwd()))
        dirs.append(("pytest-brokerperf's shipped workloads", WORKLOADS_DIR))
        return dirs

    def payload_path(self, base_dir: Path | None = None) -> Path:
        """Where ``payloadFile`` is found: an absolute path as is; a relative one in
        ``base_dir`` (default: the workload file's directory), then the current directory
        (OMB's rule), then the payloads shipped with pytest-brokerperf. Record the result:
        it tells which file was actually sent."""
        if self.payload_file is None:
            raise WorkloadError(f"{self.source}: payloadFile is not set")
        rel = Path(self.payload_file)
        if rel.is_absolute():
            candidates = [("absolute path", rel)]
        else:
            candidates = [(label, d / rel) for label, d in self._search_dirs(base_dir)]
        for _, candidate in candidates:
            if candidate.is_file():
                return candidate
        tried = "; ".join(f"{label}: {p}" for label, p in candidates)
        raise WorkloadError(
            _Problem(
                "payload_file",
                self.payload_file,
                f"payload file not found (tried {tried})",
                "give a path relative to the workload file or the current directory, or "
                "remove payloadFile to use a generated payload",
            ).render(self.source, LINES.get())
        )

    def _read_payload_file(self, base_dir: Path | None) -> bytes:
        path = self.payload_path(base_dir)
        data = path.read_bytes()
        if len(data) != self.message_size:
            raise _Problem(
                "payload_file",
                self.payload_file,
                f"Payload length mismatch. Actual is: {len(data)}, but expected: "
                f"{self.message_size} (messageSize; file {path})",
                f"use a payload file of exactly {self.message_size} bytes or set "
                f"`messageSize: {len(data)}`",
            )
        return data

    def payloads(self, base_dir: Path | None = None, *, seed: int = 0) -> list[bytes]:
        """The payload pool producers pick from, exactly messageSize bytes each.

        * ``useRandomizedPayloads``: ``randomizedPayloadPoolSize`` payloads, each
          ``int(messageSize * randomBytesRatio)`` random bytes then zeros (OMB's
          compression-test payloads);
        * else ``payloadFile`` (see :meth:`payload_path`), with OMB's length check;
        * else one payload of pseudo-random bytes (OMB has no such default; random rather
          than zeros so compression cannot flatter the result).

        Random bytes come from ``random.Random(seed)``: the same seed gives the same pool,
        so record the seed with the results. The harness overwrites the first
        :data:`PAYLOAD_HEADER_BYTES` bytes of each payload with its header.
        """
        rng = random.Random(seed)
        if self.use_randomized_payloads:
            n_random = int(self.message_size * self.random_bytes_ratio)
            zeros = bytes(self.message_size - n_random)
            return [
                rng.randbytes(n_random) + zeros for _ in range(self.randomized_payload_pool_size)
            ]
        if self.payload_file is not None:
            try:
                return [self._read_payload_file(base_dir)]
            except _Problem as p:
                raise WorkloadError(p.render(self.source, None)) from None
        return [rng.randbytes(self.message_size)]

    def describe(self) -> str:
        """One line for logs and dry-run plans."""
        rate = f"{self.producer_rate} msg/s" if self.producer_rate else "max-rate discovery"
        parts: object = self.partitions_per_topic
        if self.partitions_per_topic_list is not None:
            parts = list(self.partitions_per_topic_list)
        backlog = ""
        if self.consumer_backlog_size_gb:
            backlog = f", backlog {self.consumer_backlog_size_gb} GiB"
        return (
            f"{self.name or '(unnamed)'}: {self.topics} topic(s) x {parts} partitions, "
            f"{self.message_size} B, {self.total_producers} producer(s), "
            f"{self.total_subscriptions} subscription(s) / {self.total_consumers} consumer(s), "
            f"{rate}{backlog}, warm-up {self.warmup_s:g} s, test {self.duration_s:g} s"
        )


# --------------------------------------------------------------------------------------
# Shipped workloads
# --------------------------------------------------------------------------------------


def shipped_workloads() -> list[str]:
    """Names (without ``.yaml``) of the workloads shipped in ``pytest_brokerperf/data``."""
    return sorted(p.stem for p in WORKLOADS_DIR.glob("*.yaml"))


def shipped_workload(name: str) -> Path:
    """Path of a shipped workload YAML, by name with or without ``.yaml``."""
    stem = name.removesuffix(".yaml").removesuffix(".yml")
    path = WORKLOADS_DIR / f"{stem}.yaml"
    if path.is_file():
        return path
    names = shipped_workloads()
    near = _closest(stem, names)
    hint = f" Did you mean {near!r}?" if near else ""
    raise ConfigError(
        f"no shipped workload named {name!r}.{hint} Shipped: {', '.join(names)}. "
        "Fix: use one of these names or pass a path to your own OMB workload YAML."
    )
