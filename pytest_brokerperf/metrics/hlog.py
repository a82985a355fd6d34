"""HdrHistogram interval logs (``.hlog``): one file per metric, one line per stats period.

HistogramLogAnalyzer, ``HistogramLogProcessor`` (Java) and ``hdrh.log.HistogramLogReader``
read this format; it keeps every period's full histogram, so any time range of a run can
be re-aggregated later without re-running it.

We write the lines ourselves rather than through ``hdrh.log.HistogramLogWriter``: in
hdrhistogram 0.10.8 its ``output_start_time`` calls a non-existent ``iso_format`` and
treats milliseconds as seconds, and its ``Interval_Max`` is floor-divided to an integer.
The format follows Java's ``HistogramLogWriter`` (log format 1.3)::

    #[Histogram log format version 1.3]
    #[StartTime: 1441753532.570 (seconds since epoch), 2015-09-08T23:05:32.570000+00:00]
    "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
    0.000,10.000,12.345,HISTFAAA...

Values are recorded in microseconds; ``Interval_Max`` is written in milliseconds
(``max_value_unit_ratio`` 1000).  In HistogramLogAnalyzer choose microseconds as the
value unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats

__all__ = ["HLOG_FORMAT_VERSION", "HlogWriter", "write_hlogs", "write_period_hlogs"]

HLOG_FORMAT_VERSION = "1.3"


class HlogWriter:
    """Write interval histograms of one metric to one ``.hlog`` file."""

    def __init__(
        self,
        path: Path,
        *,
        start_epoch_s: float | None = None,
        comment: str | None = None,
        max_value_unit_ratio: float = 1000.0,
    ) -> None:
        self.path = Path(path)
        self.max_value_unit_ratio = max_value_unit_ratio
        self._out: TextIO = self.path.open("w", encoding="ascii", newline="\n")
        if comment:
            for line in comment.splitlines():
                self._out.write(f"#{line}\n")
        self._out.write(f"#[Histogram log format version {HLOG_FORMAT_VERSION}]\n")
        if start_epoch_s is not None:
            stamp = datetime.fromtimestamp(start_epoch_s, UTC).isoformat()
            self._out.write(f"#[StartTime: {start_epoch_s:.3f} (seconds since epoch), {stamp}]\n")
        self._out.write(
            '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n'
        )

    def write_interval(
        self,
        hist: LatencyHistogram,
        start_offset_s: float,
        length_s: float,
        tag: str | None = None,
    ) -> None:
        """One interval: start (seconds after StartTime), length, max, encoded histogram."""
        max_value = (hist.max() or 0.0) / self.max_value_unit_ratio
        prefix = f"Tag={tag}," if tag else ""
        self._out.write(
            f"{prefix}{start_offset_s:.3f},{length_s:.3f},{max_value:.3f},{hist.encode()}\n"
        )

    def flush(self) -> None:
        """Hand the lines written so far to the OS (readable while the run goes on)."""
        self._out.flush()

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> HlogWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def write_period_hlogs(
    directory: Path,
    periods: Sequence[PeriodStats],
    *,
    start_epoch_s: float | None = None,
    metrics: Iterable[str] = METRICS,
    include_warmup: bool = True,
    name_prefix: str = "",
) -> dict[str, Path]:
    """Write ``<prefix><metric>.hlog`` for each metric present in ``periods``.

    Interval start times are offsets from the first period's start (``start_ns`` is
    CLOCK_MONOTONIC); ``start_epoch_s`` is the wall-clock time of that first start, for
    the ``StartTime`` header.  Warm-up periods are tagged ``warmup`` (kept by default:
    the log is for looking at the whole run).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    chosen = [p for p in periods if include_warmup or p.phase != "warmup"]
    written: dict[str, Path] = {}
    if not chosen:
        return written
    base_ns = min(p.start_ns for p in chosen)
    for metric in metrics:
        if not any(metric in p.histograms for p in chosen):
            continue
        path = directory / f"{name_prefix}{metric}.hlog"
        with HlogWriter(
            path, start_epoch_s=start_epoch_s, comment=f"[brokerperf metric {metric}, values in us]"
        ) as writer:
            for p in chosen:
                hist = p.histograms.get(metric)
                if hist is None:
                    continue
                tag = "warmup" if p.phase == "warmup" else None
                writer.write_interval(hist, (p.start_ns - base_ns) / 1e9, p.elapsed_s, tag)
        written[metric] = path
    return written


def _epoch(iso: Any) -> float | None:
    if not isinstance(iso, str) or not iso:
        return None
    try:
        stamp = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def write_hlogs(directory: Path, outcome: Any) -> dict[str, Path]:
    """``.hlog`` per metric for a run outcome (``warmup`` and ``periods`` lists).

    ``StartTime`` is derived from ``outcome.measure_begin_time`` (ISO 8601 wall clock of
    the first measured period), shifted back to the first warm-up period on the
    monotonic clock, so both clocks are never mixed within one subtraction.
    """
    warmup = list(getattr(outcome, "warmup", None) or [])
    measured = list(getattr(outcome, "periods", None) or [])
    periods = [*warmup, *measured]
    start_epoch = _epoch(getattr(outcome, "measure_begin_time", None))
    if start_epoch is not None and measured and periods:
        first_ns = min(p.start_ns for p in periods)
        start_epoch -= (measured[0].start_ns - first_ns) / 1e9
    return write_period_hlogs(directory, periods, start_epoch_s=start_epoch)
