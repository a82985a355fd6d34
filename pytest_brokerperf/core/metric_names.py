"""The names of a record's metrics: the five latency views, their statistics and the
rates. Options (``--brokerperf-fail-on``), SLOs and the report all spell them this way."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["LATENCY_STATS", "PERCENTILE_NAMES", "RATE_METRICS", "VIEWS"]

#: Latency views of a record (the same names as ``pytest_brokerperf.metrics.stats``).
VIEWS: tuple[str, ...] = (
    "publish_latency", "publish_delay", "publish_response", "e2e_latency", "e2e_response",
)
#: Percentile names and their values, as ``figures.percentile_name`` spells them.
PERCENTILE_NAMES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p75", 75.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9),
    ("p99.99", 99.99),
)
LATENCY_STATS: tuple[str, ...] = (*(n for n, _ in PERCENTILE_NAMES), "max", "mean", "min")
#: Rate metrics (higher is better) and the record field they come from.
RATE_METRICS: Mapping[str, str] = {
    "ack_rate": "ack_rate_msg_s",
    "consume_rate": "consume_rate_msg_s",
    "publish_mib_s": "publish_mib_s",
    "consume_mib_s": "consume_mib_s",
    "max_sustainable_rate": "throughput.highest_sustainable_rate_msg_s",
}
