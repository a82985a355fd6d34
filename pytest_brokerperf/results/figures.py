"""Headline figures of a run as one flat mapping: what SLOs, summaries and records read.

Latency figures are microseconds under ``<view>.<stat>`` names (``e2e_response.p99``);
an undersampled percentile (n < 10/(1−q)) is ``None``, shown as n/a, never a number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_brokerperf.metrics.stats import METRICS

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import RunOutcome

__all__ = ["PERCENTILES", "compute_figures", "percentile_name"]

PERCENTILES: tuple[float, ...] = (50.0, 75.0, 95.0, 99.0, 99.9, 99.99)


def percentile_name(q: float) -> str:
    """``99.9`` → ``p99.9``, ``50.0`` → ``p50``."""
    return "p" + (f"{q:g}")


def compute_figures(outcome: RunOutcome) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for m in METRICS:
        h = outcome.cumulative[m]
        pct = h.percentiles(PERCENTILES)
        for q in PERCENTILES:
            figures[f"{m}.{percentile_name(q)}"] = pct[q]
        figures[f"{m}.max"] = h.max()
        figures[f"{m}.mean"] = h.mean()
        figures[f"{m}.count"] = float(h.total_count)
    d = outcome.delivery
    figures.update(
        {
            "target_rate": outcome.plan.rate,
            "ack_rate": outcome.ack_rate,
            "consume_rate": outcome.consume_rate,
            "publish_mib_s": outcome.publish_mib_s,
            "consume_mib_s": outcome.consume_mib_s,
            "acked": float(d.acknowledged),
            "received": float(d.received),
            "lost": float(d.lost),
            "duplicates": float(d.duplicates),
            "reordered": float(d.reordered),
            "send_errors": float(sum(p.send_errors for p in outcome.periods)),
        }
    )
    return figures
