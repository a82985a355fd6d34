"""The cross-key checks of an OMB workload: everything that would make a run fail or
mean something else, found before any broker starts.

Keys and types are the declared model's (:mod:`pytest_brokerperf.models.workload`);
these checks span keys (per-topic lists against ``topics``, the backlog against the
rate, AutoMQ's ``producerRateList`` entries). Each failure is a :class:`Problem`, which
:class:`~pytest_brokerperf.workload.Workload` renders with the file, line and fix.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.files import PYTHON_SOURCE, parse_label
from pytest_brokerperf.models.workload_fields import FIELDS
from pytest_brokerperf.warnings import BrokerPerfWarning

if TYPE_CHECKING:
    from pytest_brokerperf.workload import Workload

__all__ = ["PAYLOAD_HEADER_BYTES", "Problem", "check_workload"]

#: Bytes at the start of every payload that the harness overwrites with its own header
#: (intended and actual send time, producer id, sequence). Payloads must be at least this big.
PAYLOAD_HEADER_BYTES = 32

_BY_ATTR = {f.attr: f for f in FIELDS}
_GIB = 1024**3


class Problem(Exception):
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


def check_workload(self: Workload) -> None:
    """Cross-field checks: everything that would make a run fail or mislead."""
    if self.topics < 1:
        raise Problem(
            "topics",
            self.topics,
            "a workload needs at least one topic (the harness creates its own topics; "
            "pre-existing topic lists are not supported)",
            "write `topics: 1` or more",
        )
    _check_per_topic(self,
        "partitions_per_topic", "partitions_per_topic_list", minimum=1, what="partition"
    )
    _check_per_topic(self,
        "producers_per_topic", "producers_per_topic_list", minimum=0, what="producer"
    )
    if self.total_producers < 1:
        raise Problem(
            "producers_per_topic_list",
            self.producers_per_topic_list,
            "no topic has a producer, so nothing would be sent",
            "give at least one topic a producer",
        )
    if self.message_size < PAYLOAD_HEADER_BYTES:
        raise Problem(
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
            raise Problem(attr, value, "must not be negative", "use 0 or a positive number")
    if self.subscriptions_per_topic > 0 and self.consumer_per_subscription < 1:
        raise Problem(
            "consumer_per_subscription",
            self.consumer_per_subscription,
            f"subscriptionsPerTopic is {self.subscriptions_per_topic} but no subscription "
            "would have a consumer, so nothing would be received",
            "write `consumerPerSubscription: 1` or more (or `subscriptionsPerTopic: 0` "
            "for a producer-only test)",
        )
    if self.consumer_backlog_size_gb < 0:
        raise Problem(
            "consumer_backlog_size_gb",
            self.consumer_backlog_size_gb,
            "must not be negative",
            "use 0 (no backlog phase) or a positive size in GiB",
        )
    if self.consumer_backlog_size_gb > 0:
        if self.producer_rate == 0:
            raise Problem(
                "producer_rate",
                self.producer_rate,
                "Cannot probe producer sustainable rate when building backlog "
                f"(consumerBacklogSizeGB is {self.consumer_backlog_size_gb}; OMB refuses "
                "this combination too)",
                "set a fixed `producerRate:` (e.g. 10000) or `consumerBacklogSizeGB: 0`",
            )
        if self.subscriptions_per_topic < 1:
            raise Problem(
                "consumer_backlog_size_gb",
                self.consumer_backlog_size_gb,
                "a backlog needs at least one subscription to build up behind",
                "write `subscriptionsPerTopic: 1` or `consumerBacklogSizeGB: 0`",
            )
    for attr in ("backlog_drain_ratio", "random_bytes_ratio"):
        value = getattr(self, attr)
        if not 0.0 <= value <= 1.0:
            raise Problem(
                attr,
                value,
                "must be between 0.0 and 1.0",
                f"write e.g. `{_BY_ATTR[attr].key}: 1.0`",
            )
    if self.use_randomized_payloads and self.randomized_payload_pool_size < 1:
        raise Problem(
            "randomized_payload_pool_size",
            self.randomized_payload_pool_size,
            "useRandomizedPayloads is true but the pool would be empty",
            "write `randomizedPayloadPoolSize: 1000` (or another positive number)",
        )
    if self.test_duration_minutes <= 0:
        raise Problem(
            "test_duration_minutes",
            self.test_duration_minutes,
            "OMB treats <= 0 as 'run forever'; a test needs a finite measured phase",
            "write `testDurationMinutes: 5` (fractions such as 0.5 are allowed)",
        )
    if self.warmup_duration_minutes < 0:
        raise Problem(
            "warmup_duration_minutes",
            self.warmup_duration_minutes,
            "must not be negative",
            "write `warmupDurationMinutes: 0` to disable warm-up, or a positive number",
        )
    if self.log_interval_millis < 1:
        raise Problem(
            "log_interval_millis",
            self.log_interval_millis,
            "the stats period must be positive",
            "write `logIntervalMillis: 10000` (OMB's period) or 1000 for 1-s series",
        )
    _check_rate_list(self)
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

def _check_per_topic(self: Workload, attr: str, list_attr: str, *, minimum: int, what: str) -> None:
    values: tuple[int, ...] | None = getattr(self, list_attr)
    key = _BY_ATTR[attr].key
    if values is None:
        if getattr(self, attr) < 1:
            raise Problem(
                attr,
                getattr(self, attr),
                f"every topic needs at least one {what}",
                f"write `{key}: 1` or more",
            )
        return
    if getattr(self, attr) < 0:
        raise Problem(attr, getattr(self, attr), "must not be negative", f"write `{key}: 1`")
    list_key = _BY_ATTR[list_attr].key
    if len(values) != self.topics:
        raise Problem(
            list_attr,
            list(values),
            f"has {len(values)} entries but topics is {self.topics}; it needs one per topic",
            f"give exactly {self.topics} entries or change `topics:`",
        )
    for i, v in enumerate(values):
        if v < minimum:
            raise Problem(
                list_attr,
                list(values),
                f"entry {i} is {v}; each topic needs at least {minimum} {what}(s)",
                f"make every entry of {list_key} at least {minimum}",
                key=f"{list_key}[{i}]",
            )

def _check_rate_list(self: Workload) -> None:
    entries = self.producer_rate_list
    if entries is None:
        return
    fix = "use `[[minutesFromStart, rate], ...]` or `[[hour, minute, rate], ...]`"
    if not entries:
        raise Problem("producer_rate_list", [], "is empty", fix + " or remove the key")
    width = len(entries[0])
    for i, entry in enumerate(entries):
        key = f"producerRateList[{i}]"
        if len(entry) not in (2, 3) or len(entry) != width:
            raise Problem(
                "producer_rate_list",
                list(entry),
                "entries must all have 2 elements [minutes, rate] or all 3 [hour, minute, "
                "rate] (AutoMQ RateGenerator)",
                fix,
                key=key,
            )
        if any(v < 0 for v in entry):
            raise Problem("producer_rate_list", list(entry), "negative value", fix, key=key)
        if width == 3 and (entry[0] >= 24 or entry[1] >= 60):
            raise Problem(
                "producer_rate_list",
                list(entry),
                "hour must be 0-23 and minute 0-59",
                fix,
                key=key,
            )
