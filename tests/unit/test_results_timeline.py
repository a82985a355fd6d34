"""The record's ``timeline``: every stats period, in order, as ``periods.csv`` has it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats
from pytest_brokerperf.results.record import TIMELINE_VIEWS, timeline_block


def _period(index: int, phase: str, start_s: float, n: int, e2e_us: int) -> PeriodStats:
    hists = {m: LatencyHistogram.for_metric(m) for m in METRICS}
    hists["e2e_latency"].record_batch(np.full(n, e2e_us, dtype=np.int64))
    return PeriodStats(index=index, start_ns=int(start_s * 1e9), elapsed_s=1.0,
                       messages_sent=n, messages_received=2 * n, phase=phase,
                       histograms=hists, target_rate=1000.0, backlog=index)


def test_timeline_has_every_period_in_order_with_per_period_figures() -> None:
    outcome = SimpleNamespace(
        warmup=[_period(0, "warmup", 100.0, 1500, 900)],
        periods=[_period(0, "measure", 101.0, 1200, 1100),
                 _period(1, "measure", 102.0, 500, 1300),  # too few for a p99
                 _period(0, "drain", 103.5, 2000, 5000)])
    t = timeline_block(outcome)  # type: ignore[arg-type]
    assert t["periods"] == 4
    assert t["phase"] == ["warmup", "measure", "measure", "drain"]
    assert t["t_s"] == [1.0, 2.0, 3.0, 4.5]  # period ends since the first one began
    assert t["publish_rate_msg_s"] == [1500, 1200, 500, 2000]
    assert t["consume_rate_msg_s"] == [3000, 2400, 1000, 4000]
    assert t["backlog"] == [0, 0, 1, 0]
    assert t["e2e_latency_count"] == [1500, 1200, 500, 2000]
    p50 = t["e2e_latency_p50_us"]
    assert [round(x, -1) for x in p50] == [900, 1100, 1300, 5000]
    assert t["e2e_latency_p99_us"][2] is None and None not in (
        t["e2e_latency_p99_us"][:2] + t["e2e_latency_p99_us"][3:])
    assert t["publish_latency_p50_us"] == [None] * 4  # nothing recorded: no figure
    for v in TIMELINE_VIEWS:
        assert all(len(t[f"{v}_{s}"]) == 4 for s in ("p50_us", "p99_us", "count"))


def test_timeline_of_a_run_without_periods_is_empty() -> None:
    t = timeline_block(SimpleNamespace(warmup=[], periods=[]))  # type: ignore[arg-type]
    assert t["periods"] == 0 and t["t_s"] == []
