"""The OpenMessaging Benchmark ``TestResult`` JSON, built from our period and run stats.

OMB's chart and report scripts (``bin/create_charts.py``, Confluent's ``parse.py``, KPC's
report) read this file, so it keeps the keys, order and units of OMB's ``TestResult`` class
exactly:

* publish latency and end-to-end latency in **milliseconds** (double);
* publish delay in **microseconds** (long integers; its averages are doubles);
* rates in msg/s (double), backlog in messages (long);
* ``aggregated*Quantiles``: Java ``Histogram.percentiles(100)`` iteration, keys are the
  cumulative percentile reached as Java prints a double, values in the view's unit.

OMB has no "n/a": an undersampled percentile (too few samples to resolve it; see
docs/explanation/measurement.md)
is written as HdrHistogram's value anyway, and an empty histogram as 0, as Java does.  The
JSONL record (``results.py``) is where n/a lives and where validity is judged; this file is
for compatibility.  NaN and infinities are never written (they are not JSON).

Extras beyond OMB main, named as the Redpanda fork names them: ``sampleRateMillis`` (the
stats period; OMB's chart script assumes 10 s), ``beginTime`` and ``endTime`` (ISO 8601
strings or null).  Key set and value types are tested against a real OMB result file
(``tests/data/omb/``).  Percentiles use HdrHistogram_py's rank rounding; Java rounds the
rank up, so a percentile here may sit one bucket below Java's on the same data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_brokerperf.metrics.hdr_layout import highest_for
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import PeriodStats

__all__ = [
    "OMB_EXTRA_KEYS",
    "OMB_KEYS",
    "OMB_REQUIRED_KEYS",
    "build_omb_result",
    "default_result_filename",
    "read_omb_result",
    "write_omb_result",
]

#: (key suffix, percentile) in OMB's order; ``99999pct`` is declared by current OMB main.
_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("50pct", 50.0),
    ("75pct", 75.0),
    ("95pct", 95.0),
    ("99pct", 99.0),
    ("999pct", 99.9),
    ("9999pct", 99.99),
    ("99999pct", 99.999),
)

#: (OMB prefix, our metric, unit) for the three views OMB reports.
_VIEWS: tuple[tuple[str, str, str], ...] = (
    ("publishLatency", "publish_latency", "ms"),
    ("publishDelayLatency", "publish_delay", "us"),
    ("endToEndLatency", "e2e_latency", "ms"),
)

_HEADER = (
    "workload",
    "driver",
    "messageSize",
    "topics",
    "partitions",
    "producersPerTopic",
    "consumersPerTopic",
)
_RATES = ("publishRate", "publishErrorRate", "consumeRate", "backlog")


def _series(prefix: str) -> list[str]:
    return [f"{prefix}Avg", *(prefix + s for s, _ in _PERCENTILES), f"{prefix}Max"]


def _aggregated(prefix: str) -> list[str]:
    cap = prefix[0].upper() + prefix[1:]
    return [
        f"aggregated{cap}Avg",
        *(f"aggregated{cap}{s}" for s, _ in _PERCENTILES),
        f"aggregated{cap}Max",
    ]


def _quantiles_key(prefix: str) -> str:
    return f"aggregated{prefix[0].upper()}{prefix[1:]}Quantiles"


#: Every key of OMB main's ``TestResult``, in Jackson's (declaration) order.
OMB_KEYS: tuple[str, ...] = (
    *_HEADER,
    *_RATES,
    *_series("publishLatency"),
    *_series("publishDelayLatency"),
    *_aggregated("publishLatency"),
    *_aggregated("publishDelayLatency"),
    _quantiles_key("publishLatency"),
    _quantiles_key("publishDelayLatency"),
    *_series("endToEndLatency"),
    _quantiles_key("endToEndLatency"),
    *_aggregated("endToEndLatency"),
)

#: Our additions (Redpanda's names).
OMB_EXTRA_KEYS: tuple[str, ...] = ("sampleRateMillis", "beginTime", "endTime")

#: Keys every OMB-family result has (main, Confluent/StreamNative blog forks, Redpanda):
#: what ``read_omb_result`` insists on unless ``strict``.
OMB_REQUIRED_KEYS: frozenset[str] = frozenset(
    {
        "workload",
        "driver",
        "publishRate",
        "consumeRate",
        "backlog",
        *(k for k in _series("publishLatency") if "99999" not in k),
        *(k for k in _aggregated("publishLatency") if "99999" not in k),
        _quantiles_key("publishLatency"),
        *(k for k in _series("endToEndLatency") if "99999" not in k),
        *(k for k in _aggregated("endToEndLatency") if "99999" not in k),
        _quantiles_key("endToEndLatency"),
    }
)

_INT_KEYS = frozenset(
    {
        "messageSize",
        "topics",
        "partitions",
        "producersPerTopic",
        "consumersPerTopic",
        "sampleRateMillis",
    }
)


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} is not a finite number: {value!r}")
    return float(value)


class _ViewStats:
    """OMB's figures of one histogram in the view's unit (ms or µs)."""

    def __init__(self, hist: LatencyHistogram | None, unit: str) -> None:
        self.unit = unit
        h = hist if hist is not None else LatencyHistogram(highest_for("publish_latency"))
        pct = h.percentiles((q for _, q in _PERCENTILES), allow_undersampled=True)
        self.avg = _finite((h.mean() or 0.0) / (1000.0 if unit == "ms" else 1.0), "mean")
        self.pcts = [self._scale(pct[q]) for _, q in _PERCENTILES]
        self.max = self._scale(h.max())

    def _scale(self, value_us: float | None) -> float | int:
        v = value_us or 0.0
        if self.unit == "ms":
            return _finite(v / 1000.0, "latency")
        return int(v)

    def values(self) -> list[float | int]:
        return [self.avg, *self.pcts, self.max]


def build_omb_result(
    *,
    workload_name: str,
    driver_name: str,
    message_size: int,
    topics: int,
    partitions: int,
    producers_per_topic: int,
    consumers_per_topic: int,
    periods: Sequence[PeriodStats],
    cumulative: Mapping[str, LatencyHistogram],
    period_s: float,
    begin_time: str | None = None,
    end_time: str | None = None,
) -> dict[str, Any]:
    """OMB ``TestResult`` dict (key order as OMB writes it) from measured periods.

    Only periods with ``phase == "measure"`` become array elements (OMB discards
    warm-up).  ``cumulative`` maps our metric names (``publish_latency``,
    ``publish_delay``, ``e2e_latency``) to the run's cumulative histograms; a missing
    one reports zeros, as an empty Java histogram does.
    """
    measured = [p for p in periods if p.phase == "measure"]
    result: dict[str, Any] = {
        "workload": workload_name,
        "driver": driver_name,
        "messageSize": int(message_size),
        "topics": int(topics),
        "partitions": int(partitions),
        "producersPerTopic": int(producers_per_topic),
        "consumersPerTopic": int(consumers_per_topic),
        "publishRate": [_finite(p.publish_rate, "publishRate") for p in measured],
        "publishErrorRate": [_finite(p.error_rate, "publishErrorRate") for p in measured],
        "consumeRate": [_finite(p.consume_rate, "consumeRate") for p in measured],
        "backlog": [int(p.backlog) for p in measured],
    }
    per_period = {
        prefix: [_ViewStats(p.histograms.get(metric), unit) for p in measured]
        for prefix, metric, unit in _VIEWS
    }
    totals = {prefix: _ViewStats(cumulative.get(metric), unit) for prefix, metric, unit in _VIEWS}

    def put_series(prefix: str) -> None:
        for i, key in enumerate(_series(prefix)):
            result[key] = [stats.values()[i] for stats in per_period[prefix]]

    def put_aggregated(prefix: str) -> None:
        for key, value in zip(_aggregated(prefix), totals[prefix].values(), strict=True):
            result[key] = value

    def put_quantiles(prefix: str, metric: str, unit: str) -> None:
        hist = cumulative.get(metric)
        raw = hist.omb_quantiles() if hist is not None else {}
        if unit == "ms":
            result[_quantiles_key(prefix)] = {k: v / 1000.0 for k, v in raw.items()}
        else:
            result[_quantiles_key(prefix)] = {k: int(v) for k, v in raw.items()}

    put_series("publishLatency")
    put_series("publishDelayLatency")
    put_aggregated("publishLatency")
    put_aggregated("publishDelayLatency")
    put_quantiles("publishLatency", "publish_latency", "ms")
    put_quantiles("publishDelayLatency", "publish_delay", "us")
    put_series("endToEndLatency")
    put_quantiles("endToEndLatency", "e2e_latency", "ms")
    put_aggregated("endToEndLatency")

    result["sampleRateMillis"] = round(_finite(period_s, "period_s") * 1000)
    result["beginTime"] = begin_time
    result["endTime"] = end_time
    assert tuple(result) == (*OMB_KEYS, *OMB_EXTRA_KEYS)
    return result


def default_result_filename(workload_file_stem: str, driver_name: str, when: datetime) -> str:
    """OMB's result file name: ``<workload stem>-<driver>-<yyyy-MM-dd-HH-mm-ss>.json``.

    A ``/`` in the driver name (OMB does not guard against it) becomes ``-``.
    """
    driver = driver_name.replace("/", "-")
    return f"{workload_file_stem}-{driver}-{when:%Y-%m-%d-%H-%M-%S}.json"


def write_omb_result(result: Mapping[str, Any], path: Path) -> Path:
    """Write a result as pretty JSON; refuses NaN/Infinity (not JSON, breaks OMB's readers)."""
    path = Path(path)
    path.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-JSON number {name} in OMB result")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_omb_result(path: Path, *, strict: bool = False) -> dict[str, Any]:
    """Load and validate an OMB result file (ours or one written by any OMB fork).

    Requires the keys every OMB-family result has (``strict``: every key of OMB main's
    ``TestResult`` as this module writes it, minus our extras); checks that per-period
    arrays are numeric and of one length, quantile maps numeric with numeric-string keys,
    and that no NaN/Infinity is present.  Unknown keys (fork extensions) are kept.
    """
    text = Path(path).read_text(encoding="utf-8")
    data = json.loads(text, parse_constant=_reject_constant)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: OMB result must be a JSON object")
    required = set(OMB_KEYS) if strict else set(OMB_REQUIRED_KEYS)
    missing = sorted(required - data.keys())
    if missing:
        raise ValueError(f"{path}: not an OMB result, missing keys: {', '.join(missing)}")
    lengths: dict[str, int] = {}
    for key, value in data.items():
        if key.endswith("Quantiles"):
            if not isinstance(value, dict):
                raise ValueError(f"{path}: {key} must be an object")
            for k, v in value.items():
                float(k)  # keys are Java-printed doubles
                if not _is_number(v):
                    raise ValueError(f"{path}: {key}[{k!r}] is not a number")
        elif isinstance(value, list):
            if not all(_is_number(v) for v in value):
                raise ValueError(f"{path}: {key} must hold numbers only")
            if key in OMB_KEYS:  # forks may add lists of other shapes
                lengths[key] = len(value)
        elif key in _INT_KEYS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{path}: {key} must be an integer")
        elif key in ("workload", "driver"):
            if not isinstance(value, str):
                raise ValueError(f"{path}: {key} must be a string")
        elif key.startswith("aggregated") and not _is_number(value):
            raise ValueError(f"{path}: {key} must be a number")
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{path}: per-period arrays differ in length: {lengths}")
    return data
