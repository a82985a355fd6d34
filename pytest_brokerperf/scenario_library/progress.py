"""The live progress lines of scenario runs, and the numbers they and the summary show.

Standard library only: the plugin imports this module at load time. Latencies arrive in
microseconds and are shown in milliseconds; ``None`` (no samples, or too few for the
percentile) is shown as ``n/a``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["NA", "format_mib", "format_ms", "format_msg_rate", "format_progress",
           "format_progress_line"]

NA = "n/a"


def format_ms(us: float | None) -> str:
    """µs → ms with about three significant digits: 0.412, 3.41, 25.3, 1,204."""
    if us is None:
        return NA
    ms = us / 1000.0
    if ms < 1:
        return f"{ms:.3f}"
    if ms < 10:
        return f"{ms:.2f}"
    if ms < 100:
        return f"{ms:.1f}"
    return f"{ms:,.0f}"


def format_msg_rate(rate: float | None) -> str:
    return NA if rate is None else f"{rate:,.0f}"


def format_mib(mib: float | None) -> str:
    if mib is None:
        return NA
    if mib < 10:
        return f"{mib:.2f}"
    if mib < 100:
        return f"{mib:.1f}"
    return f"{mib:,.0f}"


class _Period(Protocol):
    """What :func:`format_progress` reads from a period (``metrics.stats.PeriodStats``)."""

    @property
    def index(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def target_rate(self) -> float: ...
    @property
    def publish_rate(self) -> float: ...
    @property
    def consume_rate(self) -> float: ...
    @property
    def publish_mib_s(self) -> float: ...
    @property
    def backlog(self) -> int: ...
    @property
    def histograms(self) -> Mapping[str, Any]: ...


def format_progress_line(
    period_index: int,
    phase: str,
    *,
    target_rate: float | None = None,
    publish_rate: float | None = None,
    consume_rate: float | None = None,
    mib_s: float | None = None,
    publish_response_p99_us: float | None = None,
    e2e_response_p99_us: float | None = None,
    backlog: int | None = None,
    label: str = "",
) -> str:
    """One live progress line, e.g.::

        brokerperf: kafka tailread #  7 measure  sent 1,000/s (target 1,000)  recv 1,000/s
        0.98 MiB/s  p99 publish 3.41 ms  e2e 5.02 ms  backlog 12

    (on one line). Rates in msg/s, latencies in µs (shown in ms), ``None`` → n/a.
    """
    head = f"brokerperf: {label + ' ' if label else ''}#{period_index:>3} {phase:<7}"
    sent = f"sent {format_msg_rate(publish_rate)}/s"
    if target_rate:
        sent += f" (target {format_msg_rate(target_rate)})"
    parts = [
        head,
        sent,
        f"recv {format_msg_rate(consume_rate)}/s",
        f"{format_mib(mib_s)} MiB/s",
        f"p99 publish {format_ms(publish_response_p99_us)} ms"
        f"  e2e {format_ms(e2e_response_p99_us)} ms",
    ]
    if backlog is not None:
        parts.append(f"backlog {backlog:,}")
    return "  ".join(parts)


def _p99(histograms: Mapping[str, Any], metric: str) -> float | None:
    hist = histograms.get(metric)
    if hist is None:
        return None
    try:
        value = hist.percentile(99)
    except Exception:  # a progress line must never break a run
        return None
    return None if value is None else float(value)


def format_progress(broker: str, scenario: str, period: _Period,
                    histograms: Mapping[str, Any] | None = None) -> str:
    """The progress line of one stats period of ``broker``/``scenario`` (response p99s).

    ``histograms``: the latencies since the previous progress line (several periods
    merged), so a p99 has the samples it needs at low rates; else the period's own.
    """
    hists = period.histograms if histograms is None else histograms
    return format_progress_line(
        period.index,
        period.phase,
        target_rate=period.target_rate,
        publish_rate=period.publish_rate,
        consume_rate=period.consume_rate,
        mib_s=period.publish_mib_s,
        publish_response_p99_us=_p99(hists, "publish_response"),
        e2e_response_p99_us=_p99(hists, "e2e_response"),
        backlog=period.backlog,
        label=f"{broker} {scenario}",
    )
