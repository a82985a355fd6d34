"""The words of an SLO expression: metrics (views x stats, scalars), operators, units.

Kept apart so the parser, the file loader and the judge share one vocabulary.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from pytest_brokerperf.core.errors import SLOSyntaxError

VIEWS: tuple[str, ...] = (
    "publish_latency",
    "publish_delay",
    "publish_response",
    "e2e_latency",
    "e2e_response",
    # catch-up scenario: publish response time (and OMB's publish latency) during the
    # drain, and the drained messages' age (receive time minus send time), never mixed
    # into e2e latency
    "drain_publish_response",
    "drain_publish_latency",
    "catchup_age",
)
STATS: tuple[str, ...] = ("p50", "p75", "p95", "p99", "p99.9", "p99.99", "max", "mean")
#: Scalar metrics and their kind.
SCALARS: dict[str, str] = {
    "ack_rate": "rate",
    "consume_rate": "rate",
    "publish_mib_s": "throughput",
    "consume_mib_s": "throughput",
    "lost": "count",
    "duplicates": "count",
    "reordered": "count",
    "send_errors": "count",
    # throughput scenario: the ladder's highest sustainable rate (OMB rate discovery: the
    # measured window's acknowledged rate) and the knee of its p99 curve
    "max_sustainable_rate": "rate",
    "knee_rate": "rate",
    # catch-up scenario: backlog build and drain times, the drain's consume rate, 1 when
    # the drain was done within its bound, publish-response p99 during / before it
    "build_s": "duration",
    "drain_s": "duration",
    "catchup_rate_msg_s": "rate",
    "catchup_mib_s": "throughput",
    "drained": "count",
    "drain_publish_p99_ratio": "ratio",
    "drain_publish_rate_ratio": "ratio",  # acknowledged rate during / before the drain
    "drain_served_from_cache": "ratio",  # 1 = every drained byte from the page cache
    "backlog_at_drain_start": "count",
    "broker_backlog_at_drain_start": "count",
    # mixed scenario: the catch-up subscription's time and rate, 1 when it reached the
    # head within its bound, and during / before ratios of publish response and the
    # tailing group's end-to-end response (None when the run was not judgeable)
    "mixed.build_s": "duration",
    "mixed.catchup_s": "duration",
    "mixed.caught_up": "count",
    "mixed.catchup_rate_msg_s": "rate",
    "mixed.catchup_mib_s": "throughput",
    "mixed.publish_p99_ratio": "ratio",
    "mixed.publish_p999_ratio": "ratio",
    "mixed.e2e_p99_ratio": "ratio",
    "mixed.e2e_p999_ratio": "ratio",
    # fault runs: time the producers got under half their rate acknowledged, the longest
    # a message waited for its acknowledgement, how long the node was down, send errors
    "fault.unavailable_s": "duration",
    "fault.longest_publish_wait_s": "duration",
    "fault.node_down_s": "duration",
    "fault.send_errors": "count",
    # reassign scenario: the move's duration from the request until complete, 1 when it
    # completed within its bound, send errors during and after it, and during / before
    # ratios of publish and end-to-end response (None when the run was not judgeable)
    "reassign.duration_s": "duration",
    "reassign.complete": "count",
    "reassign.send_errors": "count",
    "reassign.publish_p99_ratio": "ratio",
    "reassign.publish_p999_ratio": "ratio",
    "reassign.e2e_p99_ratio": "ratio",
    "reassign.e2e_p999_ratio": "ratio",
}
METRICS: tuple[str, ...] = tuple(f"{v}.{s}" for v in VIEWS for s in STATS) + tuple(SCALARS)

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}

#: Accepted units per metric kind -> factor to the figure's unit (µs, msg/s, MiB/s, count).
UNITS: dict[str, dict[str, float]] = {
    "time": {"us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6},
    "rate": {"": 1.0, "msg/s": 1.0},
    "throughput": {"": 1.0, "MiB/s": 1.0},
    "count": {"": 1.0},
    "duration": {"": 1.0, "s": 1.0, "ms": 1e-3, "min": 60.0},
    "ratio": {"": 1.0, "x": 1.0},
}
#: Metrics that also accept ``%`` and the figure that is the 100 % denominator.
PERCENT_OF: dict[str, str] = {"lost": "acked"}

_UNIT_HINTS = {
    "MB/s": "pytest-brokerperf reports MiB/s (2^20 bytes/s, what OMB prints as MB/s); write MiB/s",
    "mb/s": "write MiB/s (2^20 bytes/s)",
    "sec": "write s",
    "msec": "write ms",
    "usec": "write us",
}

_EXPR_RE = re.compile(
    r"""^\s*
    (?P<metric>[A-Za-z_][A-Za-z0-9_.]*)\s*
    (?P<op><=|>=|==|!=|<|>|=)\s*
    (?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*
    (?P<unit>.*?)\s*$""",
    re.VERBOSE,
)
_VALUE_RE = re.compile(
    r"^\s*(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>.*?)\s*$"
)

EXPR_SOURCE = "<expr>"


class SLOStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


def metric_kind(metric: str) -> str:
    """``time``, ``rate``, ``throughput`` or ``count``; KeyError for unknown metrics."""
    if metric in SCALARS:
        return SCALARS[metric]
    view, _, stat = metric.partition(".")
    if view in VIEWS and stat in STATS:
        return "time"
    raise KeyError(metric)


def _fmt(x: float) -> str:
    """Short, unambiguous numbers for messages: 73.2, 5, 0.000123, 123457."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    if abs(x) >= 1000:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}".rstrip("0").rstrip(".")
    return f"{x:.3g}"


def _err(source: str, key: str, value: Any, problem: str, fix: str) -> SLOSyntaxError:
    return SLOSyntaxError(f"{source}: {key} = {value!r}: {problem}. Fix: {fix}.")
