"""The OMB workload model: OpenMessaging-Benchmark workload YAML in and out, validated.

Users bring workload files written for OMB, so :class:`Workload` reads them *unchanged*:
every field of OMB main's ``Workload.java`` with OMB's defaults (``warmupDurationMinutes: 1``,
``backlogDrainRatio: 1.0``, ``keyDistributor: NO_KEY``), AutoMQ's optional per-topic lists,
``logIntervalMillis`` and ``randomTopicNames``, and Confluent's ``consumerOnly``
(OMB's workloads/*.yaml and its Workload class). Two things differ from OMB on
purpose (docs/reference/workload.md):

* a key that is not honoured is refused, naming the closest known key
  (:mod:`pytest_brokerperf.workload.keys`; ``--brokerperf-lenient`` ignores unknown ones
  with a warning);
* everything that would make a run fail or mean something else is rejected here, before
  any broker starts, with an error naming file, line, key, value and the fix.

Python attribute names are snake_case (``partitions_per_topic``); the YAML keys stay
OMB's camelCase (``partitionsPerTopic``). Derived numbers (:attr:`Workload.total_producers`,
:attr:`Workload.drain_complete_threshold`, ...) are computed exactly as OMB computes them.

The class keeps construction, output and derived numbers; the checks across keys live in
:mod:`pytest_brokerperf.workload.checks`, the payload pool in
:mod:`pytest_brokerperf.workload.payloads`, the rate schedule in
:mod:`pytest_brokerperf.workload.rate_schedule` and the shipped files in
:mod:`pytest_brokerperf.core.shipped`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from pytest_brokerperf.core.errors import WorkloadError
from pytest_brokerperf.core.files import (
    LINES,
    PYTHON_SOURCE,
    closest,
    joined,
    lines,
    load_yaml,
    split_joined,
    validate,
)
from pytest_brokerperf.core.warnings import BrokerPerfWarning
from pytest_brokerperf.workload.checks import check_workload
from pytest_brokerperf.workload.fields import FIELDS, KeyDistributor
from pytest_brokerperf.workload.keys import BY_ATTR, BY_KEY, read_keys, warn_at
from pytest_brokerperf.workload.payloads import (
    PAYLOAD_HEADER_BYTES,
    payload_path,
    payload_pool,
)
from pytest_brokerperf.workload.rate_schedule import RateSchedule

__all__ = [
    "PAYLOAD_HEADER_BYTES",
    "PYTHON_SOURCE",
    "KeyDistributor",
    "Workload",
]

_GIB = 1024**3


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
    for error messages and to find ``payloadFile``; ``ignored_keys`` are the file's keys
    left out under ``--brokerperf-lenient``. Neither takes part in equality.
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
    # not OMB fields: where this workload came from, and the keys of that file left out
    # under --brokerperf-lenient (the record's workload.ignored_keys)
    source: str = field(default=PYTHON_SOURCE, compare=False, repr=False)
    ignored_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

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
        # Keys and types: the declared model (pytest_brokerperf/workload/file_model.py), which
        # takes values as OMB's Jackson would; then the checks across keys below.
        from pytest_brokerperf.workload.file_model import workload_model

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
        found = check_workload(self)
        if found:
            raise WorkloadError(joined([p.render(self.source, line_of) for p in found],
                                       self.source))

    @classmethod
    def from_yaml(cls, path: str | Path, *, lenient: bool = False) -> Workload:
        """Read an OMB workload YAML file; errors cite the file and line. ``lenient``
        ignores (with a warning) keys that are not honoured instead of refusing them."""
        path = Path(path)
        doc = load_yaml(path, WorkloadError, "workload")
        if doc.data is None:
            raise WorkloadError(
                f"{path}: the workload file is empty. Fix: write OMB workload keys such as "
                "`topics: 1`, `partitionsPerTopic: 16`, `messageSize: 1024`."
            )
        for key, line in doc.duplicate_keys():
            warn_at(BrokerPerfWarning(f"{path}:{line}: key {key!r} appears twice; the last "
                                      "value wins. Fix: remove one of them."), str(path), line)
        return cls._from_mapping(doc.data, str(path), doc.line, lenient)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = PYTHON_SOURCE, *,
                  lenient: bool = False) -> Workload:
        """Build from a mapping with OMB's camelCase keys, as ``yaml.safe_load`` returns it."""
        return cls._from_mapping(data, source, None, lenient)

    @classmethod
    def _from_mapping(cls, data: Any, source: str,
                      line_of: Callable[[str], int | None] | None, lenient: bool) -> Workload:
        refused: list[str] = []  # keys not honoured, reported with every other problem
        kwargs, ignored = read_keys(data, source, line_of, lenient=lenient, refused=refused)
        try:
            with lines(line_of):
                workload = cls(**kwargs, source=source, ignored_keys=ignored)
        except WorkloadError as exc:
            if not refused:
                raise
            raise WorkloadError(joined([*refused, *split_joined(str(exc))], source)) from None
        if refused:
            raise WorkloadError(joined(refused, source))
        return workload

    def replace(self, **changes: Any) -> Workload:
        """A copy with ``changes`` applied and validated; camelCase OMB keys are accepted too."""
        normalized = {(BY_KEY[k].attr if k in BY_KEY else k): v for k, v in changes.items()}
        unknown = sorted(set(normalized) - set(BY_ATTR) - {"source", "ignored_keys"})
        if unknown:
            near = closest(unknown[0], list(BY_ATTR))
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

    # ---------------------------------------------------------------- payloads and rate

    def payload_path(self, base_dir: Path | None = None) -> Path:
        """Where ``payloadFile`` is found (:func:`~pytest_brokerperf.workload.payloads.
        payload_path`); record the result: it tells which file was actually sent."""
        return payload_path(self, base_dir)

    def payloads(self, base_dir: Path | None = None, *, seed: int = 0) -> list[bytes]:
        """The payload pool producers pick from, exactly messageSize bytes each
        (:mod:`pytest_brokerperf.workload.payloads`). Random bytes come from
        ``random.Random(seed)``: record the seed with the results. The harness overwrites
        the first :data:`PAYLOAD_HEADER_BYTES` bytes of each payload with its header."""
        return payload_pool(self, base_dir, seed=seed)

    def rate_schedule(self) -> RateSchedule | None:
        """AutoMQ's ``producerRateList`` as a schedule (:mod:`pytest_brokerperf.
        rate_schedule`), or None without one; it replaces ``producerRate``."""
        if self.producer_rate_list is None:
            return None
        return RateSchedule.from_list(self.producer_rate_list)

    def describe(self) -> str:
        """One line for logs and dry-run plans."""
        rate = f"{self.producer_rate} msg/s" if self.producer_rate else "max-rate discovery"
        if self.producer_rate_list is not None:
            rate = f"rate schedule producerRateList ({len(self.producer_rate_list)} points)"
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
