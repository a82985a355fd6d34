"""A period's latency histograms from the recording threads' buffers.

The threads flush after every batch, so a period holds tens of thousands of tiny chunks.
Building the histograms from them must stay cheap: it runs on the worker's command
thread while the pacer waits for the GIL, and every millisecond it holds the GIL is
publish delay charged to the run (see ``_Buffers``).
"""

from __future__ import annotations

import random
from array import array

import numpy as np
import pytest

from pytest_brokerperf.engine.worker import _Buffers, period_histograms
from pytest_brokerperf.metrics.histogram import LatencyHistogram


def _fill(bufs: list[_Buffers], flushes: int, seed: int) -> dict[str, list[int]]:
    """``flushes`` flushes of 1-3 values per view into ``bufs``, round robin; every value
    recorded, per view."""
    rnd = random.Random(seed)
    written: dict[str, list[int]] = {n: [] for n in _Buffers.NAMES}
    for i in range(flushes):
        local = {n: array("q") for n in _Buffers.NAMES}
        for n in _Buffers.NAMES:
            for _ in range(rnd.randint(1, 3)):
                v = rnd.randint(20, 50_000)
                local[n].append(v)
                written[n].append(v)
        bufs[i % len(bufs)].flush(local)
        assert all(not b for b in local.values())  # flushed buffers start again empty
    return written


def test_every_value_of_every_thread_lands_in_its_view() -> None:
    bufs = [_Buffers(), _Buffers(), _Buffers()]  # the publisher and two subscriptions
    written = _fill(bufs, 3000, seed=1)
    hists = period_histograms([b.take() for b in bufs])
    for name, values in written.items():
        h = hists[name]
        assert h.total_count == len(values)
        assert abs((h.min() or 0) - min(values)) <= 1
        assert abs((h.max() or 0) - max(values)) <= max(values) / 500
        expected = float(np.percentile(values, 50))
        assert abs((h.percentile(50) or 0) - expected) <= expected / 100 + 1
    # taken: the next period starts empty
    assert all(h.total_count == 0 for h in period_histograms([b.take() for b in bufs]).values())


def test_a_period_of_small_chunks_becomes_one_array_per_view(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """60,000 flushes (a second at a few hundred thousand msg/s) are joined once per view
    into one array and recorded in one batch: one numpy array per chunk and a
    concatenate held the GIL for ~100 ms per period (the publish delay it charged to the
    run is measured by benchmarks/harness_delay.py, not timed here: a CPU-time bound in a
    test fails on a slow host)."""
    bufs = [_Buffers(), _Buffers()]
    _fill(bufs, 60_000, seed=2)
    taken = [b.take() for b in bufs]
    assert sum(len(t[n]) for t in taken for n in _Buffers.NAMES) >= 60_000 * len(
        _Buffers.NAMES)  # tens of thousands of chunks per view
    joins: list[int] = []
    batches: list[int] = []
    values = _Buffers.values
    monkeypatch.setattr(_Buffers, "values", staticmethod(
        lambda chunks: joins.append(len(chunks)) or values(chunks)))
    record = LatencyHistogram.record_batch
    monkeypatch.setattr(LatencyHistogram, "record_batch",
                        lambda self, v: batches.append(len(v)) or record(self, v))
    hists = period_histograms(taken)
    assert len(joins) == len(batches) == len(_Buffers.NAMES)  # once per view
    assert all(n >= 60_000 for n in joins)  # every chunk of both threads in that join
    assert sum(h.total_count for h in hists.values()) == sum(batches)
