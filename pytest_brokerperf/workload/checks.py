"""Checks across a workload's keys: everything that would make a run fail or mislead.

Each key's type is the declared model's job (:mod:`pytest_brokerperf.workload.file_model`);
here are the rules that involve several keys or the engine (one entry per topic, a
backlog needs a subscription, a payload of messageSize bytes, ...). A failure is a
:class:`~pytest_brokerperf.workload.keys.Problem`, which the workload renders with
file:line, key, value and fix.
"""

from __future__ import annotations

from typing import Protocol

from pytest_brokerperf.core.files import LINES
from pytest_brokerperf.core.warnings import BrokerPerfWarning
from pytest_brokerperf.workload.keys import BY_ATTR, Problem, warn_at
from pytest_brokerperf.workload.payloads import (
    PAYLOAD_HEADER_BYTES,
    PayloadSpec,
    read_payload_file,
)

__all__ = ["CheckedWorkload", "check_workload"]


class CheckedWorkload(PayloadSpec, Protocol):
    """The keys the checks across keys read (a :class:`~pytest_brokerperf.workload.model.Workload`
    has them; the per-topic ones are read by name): declared here, so the checks need no
    workload class."""

    @property
    def topics(self) -> int: ...
    @property
    def subscriptions_per_topic(self) -> int: ...
    @property
    def consumer_per_subscription(self) -> int: ...
    @property
    def producer_rate(self) -> int: ...
    @property
    def consumer_backlog_size_gb(self) -> int | float: ...
    @property
    def test_duration_minutes(self) -> int | float: ...
    @property
    def warmup_duration_minutes(self) -> int | float: ...
    @property
    def producers_per_topic_list(self) -> tuple[int, ...] | None: ...
    @property
    def producer_rate_list(self) -> tuple[tuple[int | float, ...], ...] | None: ...
    @property
    def log_interval_millis(self) -> int: ...
    @property
    def random_topic_names(self) -> bool: ...
    @property
    def consumer_only(self) -> bool: ...
    @property
    def total_producers(self) -> int: ...


def check_workload(w: CheckedWorkload) -> list[Problem]:
    """Cross-field checks: everything that would make a run fail or mislead, every one
    found (a file with two mistakes names both at once)."""
    found: list[Problem] = []
    if w.topics < 1:
        found.append(Problem(
            "topics",
            w.topics,
            "a workload needs at least one topic (the harness creates its own topics; "
            "pre-existing topic lists are not supported)",
            "write `topics: 1` or more",
        ))
    for check in (
        lambda: _check_per_topic(w, "partitions_per_topic", "partitions_per_topic_list",
                                 minimum=1, what="partition"),
        lambda: _check_per_topic(w, "producers_per_topic", "producers_per_topic_list",
                                 minimum=0, what="producer"),
        lambda: _check_payload_pool(w),
    ):
        try:
            check()
        except Problem as p:
            found.append(p)
    if w.total_producers < 1:
        found.append(Problem(
            "producers_per_topic_list",
            w.producers_per_topic_list,
            "no topic has a producer, so nothing would be sent",
            "give at least one topic a producer",
        ))
    if w.message_size < PAYLOAD_HEADER_BYTES:
        found.append(Problem(
            "message_size",
            w.message_size,
            f"messages must be at least {PAYLOAD_HEADER_BYTES} bytes: pytest-brokerperf "
            f"writes a {PAYLOAD_HEADER_BYTES}-byte header (intended and actual send time, "
            "producer id, sequence) at the start of every payload",
            f"write `messageSize: {PAYLOAD_HEADER_BYTES}` or more (OMB's smallest shipped "
            "payload is 100 bytes)",
        ))
    for attr in (
        "subscriptions_per_topic",
        "consumer_per_subscription",
        "randomized_payload_pool_size",
        "producer_rate",
    ):
        value = getattr(w, attr)
        if value < 0:
            found.append(Problem(attr, value, "must not be negative", "use 0 or a positive number"))
    if w.subscriptions_per_topic > 0 and w.consumer_per_subscription < 1:
        found.append(Problem(
            "consumer_per_subscription",
            w.consumer_per_subscription,
            f"subscriptionsPerTopic is {w.subscriptions_per_topic} but no subscription "
            "would have a consumer, so nothing would be received",
            "write `consumerPerSubscription: 1` or more (or `subscriptionsPerTopic: 0` "
            "for a producer-only test)",
        ))
    if w.consumer_backlog_size_gb < 0:
        found.append(Problem(
            "consumer_backlog_size_gb",
            w.consumer_backlog_size_gb,
            "must not be negative",
            "use 0 (no backlog phase) or a positive size in GiB",
        ))
    if w.consumer_backlog_size_gb > 0:
        if w.producer_rate == 0:
            found.append(Problem(
                "producer_rate",
                w.producer_rate,
                "Cannot probe producer sustainable rate when building backlog "
                f"(consumerBacklogSizeGB is {w.consumer_backlog_size_gb}; OMB refuses "
                "this combination too)",
                "set a fixed `producerRate:` (e.g. 10000) or `consumerBacklogSizeGB: 0`",
            ))
        if w.subscriptions_per_topic < 1:
            found.append(Problem(
                "consumer_backlog_size_gb",
                w.consumer_backlog_size_gb,
                "a backlog needs at least one subscription to build up behind",
                "write `subscriptionsPerTopic: 1` or `consumerBacklogSizeGB: 0`",
            ))
    for attr in ("backlog_drain_ratio", "random_bytes_ratio"):
        value = getattr(w, attr)
        if not 0.0 <= value <= 1.0:
            found.append(Problem(
                attr,
                value,
                "must be between 0.0 and 1.0",
                f"write e.g. `{BY_ATTR[attr].key}: 1.0`",
            ))
    if w.use_randomized_payloads and w.randomized_payload_pool_size < 1:
        found.append(Problem(
            "randomized_payload_pool_size",
            w.randomized_payload_pool_size,
            "useRandomizedPayloads is true but the pool would be empty",
            "write `randomizedPayloadPoolSize: 1000` (or another positive number)",
        ))
    if w.test_duration_minutes <= 0:
        found.append(Problem(
            "test_duration_minutes",
            w.test_duration_minutes,
            "OMB treats <= 0 as 'run forever'; a test needs a finite measured phase",
            "write `testDurationMinutes: 5` (fractions such as 0.5 are allowed)",
        ))
    if w.warmup_duration_minutes < 0:
        found.append(Problem(
            "warmup_duration_minutes",
            w.warmup_duration_minutes,
            "must not be negative",
            "write `warmupDurationMinutes: 0` to disable warm-up, or a positive number",
        ))
    if w.log_interval_millis < 1:
        found.append(Problem(
            "log_interval_millis",
            w.log_interval_millis,
            "the stats period must be positive",
            "write `logIntervalMillis: 10000` (OMB's period) or 1000 for 1-s series",
        ))
    try:
        _check_rate_list(w)
    except Problem as p:
        found.append(p)
    if not w.random_topic_names:
        found.append(Problem(
            "random_topic_names",
            w.random_topic_names,
            "fixed topic names cannot be honoured: pytest-brokerperf creates topics named "
            "bp-<owner>-<run id>-<scenario>-<test>-NNN for every run and deletes them "
            "afterwards (what AutoMQ's default `true` does: a unique name per run)",
            "remove the key or write `randomTopicNames: true`",
        ))
    if not w.use_randomized_payloads and w.payload_file is not None:
        try:
            read_payload_file(w, None)
        except Problem as p:
            found.append(p)
    if w.consumer_only and w.consumer_backlog_size_gb == 0:
        line_of = LINES.get()
        line = line_of("consumerOnly") if line_of is not None else None
        where = f"{w.source}:{line}" if line else w.source
        warn_at(BrokerPerfWarning(
            f"{where}: consumerOnly = True has no effect without a backlog "
            "phase (consumerBacklogSizeGB is 0); it only pauses producers after the "
            "backlog is built. Fix: remove it or set consumerBacklogSizeGB."), w.source, line)
    return found


#: What one producer worker's payload pool may hold (every worker builds its own).
MAX_PAYLOAD_POOL_BYTES = 1024**3


def _check_payload_pool(w: CheckedWorkload) -> None:
    """Randomized payloads are built up front, ``randomizedPayloadPoolSize`` of them."""
    count = w.randomized_payload_pool_size if w.use_randomized_payloads else 1
    if count * w.message_size > MAX_PAYLOAD_POOL_BYTES:
        most = max(1, MAX_PAYLOAD_POOL_BYTES // w.message_size)
        raise Problem(
            "randomized_payload_pool_size",
            w.randomized_payload_pool_size,
            f"{count:,} payloads of {w.message_size:,} bytes would take "
            f"{count * w.message_size / 1024**3:.1f} GiB in every producer worker "
            f"(at most {MAX_PAYLOAD_POOL_BYTES // 1024**3} GiB)",
            f"write `randomizedPayloadPoolSize: {most}` or less, or a smaller messageSize",
        )


def _check_per_topic(w: CheckedWorkload, attr: str, list_attr: str, *, minimum: int,
                     what: str) -> None:
    values: tuple[int, ...] | None = getattr(w, list_attr)
    key = BY_ATTR[attr].key
    if values is None:
        if getattr(w, attr) < 1:
            raise Problem(
                attr,
                getattr(w, attr),
                f"every topic needs at least one {what}",
                f"write `{key}: 1` or more",
            )
        return
    if getattr(w, attr) < 0:
        raise Problem(attr, getattr(w, attr), "must not be negative", f"write `{key}: 1`")
    list_key = BY_ATTR[list_attr].key
    if len(values) != w.topics:
        raise Problem(
            list_attr,
            list(values),
            f"has {len(values)} entries but topics is {w.topics}; it needs one per topic",
            f"give exactly {w.topics} entries or change `topics:`",
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


def _check_rate_list(w: CheckedWorkload) -> None:
    entries = w.producer_rate_list
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

