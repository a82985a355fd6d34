"""Our OMB result must look like a real one to OMB's scripts: keys, order, types, units."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import PeriodStats
from pytest_brokerperf.results.omb import (
    OMB_EXTRA_KEYS,
    OMB_KEYS,
    build_omb_result,
    default_result_filename,
    read_omb_result,
    write_omb_result,
)

REAL = Path(__file__).parents[1] / "data/omb/1-topic-1-partition-1kb-Kafka-2024-02-08-10-51-41.json"

#: Keys we write beyond that (2024) OMB main file: the p99.999 series that current OMB
#: main's TestResult declares, and Redpanda-named extras.
DOCUMENTED_EXTRAS = {
    "publishLatency99999pct",
    "publishDelayLatency99999pct",
    "endToEndLatency99999pct",
    "aggregatedPublishLatency99999pct",
    "aggregatedPublishDelayLatency99999pct",
    "aggregatedEndToEndLatency99999pct",
    *OMB_EXTRA_KEYS,
}

VIEWS = ("publish_latency", "publish_delay", "e2e_latency")


def _period(index: int, phase: str, rng: np.random.Generator, n: int = 2_000) -> PeriodStats:
    p = PeriodStats(
        index=index,
        start_ns=index * 10_000_000_000,
        elapsed_s=10.0,
        messages_sent=500_000,
        bytes_sent=500_000 * 1024,
        send_errors=1,
        messages_received=499_000,
        bytes_received=499_000 * 1024,
        total_sent=500_000 * (index + 1),
        total_received=499_000 * (index + 1),
        backlog=1_000 * (index + 1),
        phase=phase,
    )
    for metric in VIEWS:
        h = LatencyHistogram.for_metric(metric)
        h.record_batch(rng.lognormal(8, 1, n).astype(np.int64))
        p.histograms[metric] = h
    return p


def _build(periods: list[PeriodStats] | None = None, **overrides: Any) -> dict[str, Any]:
    rng = np.random.default_rng(42)
    if periods is None:
        periods = [_period(0, "warmup", rng)] + [_period(i, "measure", rng) for i in range(1, 4)]
    cumulative = {m: LatencyHistogram.for_metric(m) for m in VIEWS}
    for p in periods:
        if p.phase == "measure":
            for m in VIEWS:
                if m in p.histograms:
                    cumulative[m].add(p.histograms[m])
    kwargs: dict[str, Any] = dict(
        workload_name="1 topic / 1 partition / 1Kb",
        driver_name="Kafka",
        message_size=1024,
        topics=1,
        partitions=1,
        producers_per_topic=1,
        consumers_per_topic=1,
        periods=periods,
        cumulative=cumulative,
        period_s=10.0,
        begin_time="2024-02-08T10:41:41Z",
        end_time="2024-02-08T10:51:41Z",
    )
    kwargs.update(overrides)
    return build_omb_result(**kwargs)


def _kind(value: Any) -> str:
    """JSON-level type of a value, with element types for arrays and maps."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list[" + "|".join(sorted({_kind(v) for v in value})) + "]"
    if isinstance(value, dict):
        return "map[" + "|".join(sorted({_kind(v) for v in value.values()})) + "]"
    return type(value).__name__


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    return json.loads(REAL.read_text())


@pytest.fixture(scope="module")
def ours() -> dict[str, Any]:
    return json.loads(json.dumps(_build(), allow_nan=False))


def test_same_keys_as_real_omb_file_plus_documented_extras(real, ours) -> None:
    assert set(real) <= set(ours)
    assert set(ours) - set(real) == DOCUMENTED_EXTRAS


def test_key_order_is_omb_order(real, ours) -> None:
    assert [k for k in ours if k in real] == list(real)
    assert tuple(ours) == (*OMB_KEYS, *OMB_EXTRA_KEYS)


def test_same_value_types_as_real_omb_file(real, ours) -> None:
    for key, value in real.items():
        assert _kind(ours[key]) == _kind(value), key
    for key in DOCUMENTED_EXTRAS - set(OMB_EXTRA_KEYS):
        twin = key.replace("99999pct", "9999pct")
        assert _kind(ours[key]) == _kind(real[twin]), key
    assert _kind(ours["sampleRateMillis"]) == "int"
    assert _kind(ours["beginTime"]) == _kind(ours["endTime"]) == "str"


def test_quantile_keys_are_java_doubles(real, ours) -> None:
    for name in (
        "aggregatedPublishLatencyQuantiles",
        "aggregatedPublishDelayLatencyQuantiles",
        "aggregatedEndToEndLatencyQuantiles",
    ):
        keys = list(ours[name])
        assert keys[-1] == "100.0" == list(real[name])[-1]
        floats = [float(k) for k in keys]
        assert floats == sorted(floats)
        assert all("." in k for k in keys)  # Java prints 100.0, never 100


def test_units_ms_us_and_warmup_excluded() -> None:
    rng = np.random.default_rng(1)
    warm = _period(0, "warmup", rng)
    measured = _period(1, "measure", rng)
    for metric, value in (
        ("publish_latency", 13_471),
        ("publish_delay", 45),
        ("e2e_latency", 14_000),
    ):
        h = LatencyHistogram.for_metric(metric)
        h.record(value, 1_000)
        measured.histograms[metric] = h
    result = _build([warm, measured])
    assert len(result["publishRate"]) == 1  # warm-up period is not an OMB period
    assert result["publishRate"] == [50_000.0]
    assert result["publishErrorRate"] == [0.1]
    assert result["consumeRate"] == [49_900.0]
    assert result["backlog"] == [2_000]
    assert result["publishLatency50pct"] == [13.471]  # ms
    assert result["publishLatencyMax"] == [13.471]
    assert result["publishLatencyAvg"] == [13.468]  # bucket midpoint, as Java's getMean()
    assert result["publishDelayLatency50pct"] == [45]  # µs, integer
    assert isinstance(result["publishDelayLatencyAvg"][0], float)
    assert result["endToEndLatency99pct"] == [pytest.approx(14.0, rel=1e-3)]  # ms
    assert result["aggregatedPublishDelayLatency50pct"] == 45
    assert result["aggregatedPublishLatency50pct"] == 13.471
    assert result["aggregatedPublishLatencyQuantiles"] == {"100.0": 13.471}
    assert result["aggregatedPublishDelayLatencyQuantiles"] == {"100.0": 45}
    assert result["sampleRateMillis"] == 10_000


def test_undersampled_and_empty_give_numbers_never_nan() -> None:
    rng = np.random.default_rng(2)
    p = _period(1, "measure", rng, n=50)  # p99.99 needs 100,000 samples: undersampled
    p.histograms.pop("e2e_latency")  # no consumer: OMB writes zeros
    result = _build([p], cumulative={"publish_latency": p.histograms["publish_latency"]})
    assert result["publishLatency9999pct"][0] > 0
    assert result["endToEndLatency50pct"] == [0.0]
    assert result["aggregatedEndToEndLatencyAvg"] == 0.0
    assert result["aggregatedPublishDelayLatencyMax"] == 0
    assert result["aggregatedEndToEndLatencyQuantiles"] == {}
    text = json.dumps(result, allow_nan=False)  # would raise on NaN/Infinity
    assert "NaN" not in text


def test_no_periods_still_valid(tmp_path: Path) -> None:
    result = _build([], begin_time=None, end_time=None)
    assert result["publishRate"] == [] and result["beginTime"] is None
    read_omb_result(write_omb_result(result, tmp_path / "empty.json"), strict=True)


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        _build(period_s=math.nan)


def test_default_result_filename() -> None:
    when = datetime(2024, 2, 8, 10, 51, 41)
    assert (
        default_result_filename("1-topic-1-partition-1kb", "Kafka", when)
        == "1-topic-1-partition-1kb-Kafka-2024-02-08-10-51-41.json"
    )
    assert default_result_filename("w", "Kafka/exactly-once", when) == (
        "w-Kafka-exactly-once-2024-02-08-10-51-41.json"
    )


def test_read_round_trips_real_and_ours(tmp_path: Path, real) -> None:
    assert read_omb_result(REAL) == real
    result = _build()
    path = write_omb_result(result, tmp_path / "ours.json")
    assert read_omb_result(path, strict=True) == json.loads(json.dumps(result))


def test_read_rejects_broken_files(tmp_path: Path, real) -> None:
    missing = dict(real)
    del missing["aggregatedEndToEndLatency99pct"]
    (tmp_path / "missing.json").write_text(json.dumps(missing))
    with pytest.raises(ValueError, match="aggregatedEndToEndLatency99pct"):
        read_omb_result(tmp_path / "missing.json")

    nan = REAL.read_text().replace(
        '"aggregatedPublishLatencyAvg" : 19.62518268806993', '"aggregatedPublishLatencyAvg" : NaN'
    )
    (tmp_path / "nan.json").write_text(nan)
    with pytest.raises(ValueError, match="NaN"):
        read_omb_result(tmp_path / "nan.json")

    ragged = dict(real, backlog=real["backlog"][:-1])
    (tmp_path / "ragged.json").write_text(json.dumps(ragged))
    with pytest.raises(ValueError, match="length"):
        read_omb_result(tmp_path / "ragged.json")

    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError, match="object"):
        read_omb_result(tmp_path / "list.json")

    with pytest.raises(ValueError, match="missing"):
        read_omb_result(REAL, strict=True)  # a 2024 file predates the p99.999 keys
