"""Harness micro-cost: batched histogram recording vs one ``record_value`` call per value.

Run: ``python -m pytest benchmarks/test_bench_histogram.py -p no:brokerperf``.
A worker records every message's latencies; at 100k msg/s x 5 views a per-value
``record_value`` (0.7-2.7 µs) would eat most of a core on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from pytest_brokerperf.metrics.hdr_layout import E2E_HIGHEST_US, PUBLISH_HIGHEST_US
from pytest_brokerperf.metrics.histogram import LatencyHistogram

N = 100_000


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    rng = np.random.default_rng(12345)
    return np.clip(rng.lognormal(8, 1.5, N), 1, PUBLISH_HIGHEST_US).astype(np.int64)


def _report(benchmark: Any, n: int) -> None:
    stats = benchmark.stats.stats  # median: this runs on shared, noisy CI machines
    benchmark.extra_info["values"] = n
    benchmark.extra_info["values_per_s"] = round(n / stats.median)
    benchmark.extra_info["values_per_s_best"] = round(n / stats.min)


def test_record_batch_100k(benchmark: Any, values: np.ndarray) -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    benchmark(h.record_batch, values)
    _report(benchmark, N)
    assert h.total_count % N == 0


def test_record_batch_100k_list_input(benchmark: Any, values: np.ndarray) -> None:
    """Workers that collect plain Python ints pay the list->array conversion too."""
    h = LatencyHistogram(E2E_HIGHEST_US)
    as_list = values.tolist()
    benchmark(h.record_batch, as_list)
    _report(benchmark, N)


def test_record_value_per_value_100k(benchmark: Any, values: np.ndarray) -> None:
    as_list = values.tolist()

    def one_by_one() -> None:
        h = HdrHistogram(1, PUBLISH_HIGHEST_US, 3)
        record = h.record_value
        for v in as_list:
            record(v)

    benchmark.pedantic(one_by_one, rounds=3, iterations=1)
    _report(benchmark, N)


def test_percentiles_and_mean(benchmark: Any, values: np.ndarray) -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch(values)
    qs = (50, 75, 95, 99, 99.9, 99.99, 100)

    def query() -> None:
        h._cache = None  # measure a fresh cumulative pass, as after new records
        h.percentiles(qs, allow_undersampled=True)
        h.mean()

    benchmark(query)


def test_encode(benchmark: Any, values: np.ndarray) -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch(values)
    blob = benchmark(h.encode)
    benchmark.extra_info["blob_bytes"] = len(blob)
