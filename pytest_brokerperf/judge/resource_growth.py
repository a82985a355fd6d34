"""Does a process's memory, open files or thread count grow without bound over a soak?
(docs/reference/soak.md)

A leak shows as a figure that keeps rising at a steady rate for as long as the load
runs; a cache filling once, a pool opening its connections or a JVM touching its heap
shows as a step or a ramp that levels off. One rule tells them apart, per process and
resource, over the measured periods (after warm-up):

* the least-squares slope is positive and, projected over the window, exceeds both an
  absolute floor (RSS 64 MiB, 64 descriptors, 16 threads) and a share (20 %) of the
  starting value: smaller drifts are noise or bookkeeping;
* the second half's mean exceeds the first half's, and the second half alone still
  rises at a rate that, over the window, clears both thresholds: the growth goes on to
  the end instead of levelling off;
* no single period's rise makes up half or more of the whole rise: that is a one-off
  step (a buffer pool allocated, a segment opened), not growth;
* for a JVM whose heap was not pre-touched (``-XX:+AlwaysPreTouch``), an RSS rise no
  larger than ``-Xmx`` is the heap's pages touched for the first time: bounded by the
  heap, not a leak (a native leak smaller than that goes unseen; pre-touch to see it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.judge.trend import slope

if TYPE_CHECKING:
    from pytest_brokerperf.metrics.stats import PeriodStats

__all__ = ["RESOURCES", "GrowthLimits", "ResourceTrend", "growth_findings", "judge_series",
           "process_series", "trends"]

_MIB = 1048576.0

#: the resources a soak watches, as :class:`~pytest_brokerperf.metrics.sysstats.
#: ProcessResources` fields, with the unit their messages use
RESOURCES: dict[str, str] = {"rss_bytes": "MiB", "open_fds": "fds", "threads": "threads"}


@dataclass(frozen=True)
class GrowthLimits:
    """Thresholds of the growth rule (``Soak(limits=GrowthLimits(...))``)."""

    #: projected rise over the window must exceed these to count as growth
    rss_floor_bytes: float = 64 * _MIB
    fds_floor: float = 64
    threads_floor: float = 16
    #: ... and this share of the starting value
    relative: float = 0.20
    #: a single period's rise this share of the whole rise or more is a step
    step_share: float = 0.5
    #: fewer measured periods than this: no judgement (too short to tell a trend)
    min_periods: int = 6

    def __post_init__(self) -> None:
        for name in ("rss_floor_bytes", "fds_floor", "threads_floor", "relative"):
            if getattr(self, name) < 0:
                raise ValueError(f"GrowthLimits({name}={getattr(self, name)!r}): must be >= 0")
        if not 0 < self.step_share <= 1:
            raise ValueError(f"GrowthLimits(step_share={self.step_share!r}): must be in (0, 1]")
        if self.min_periods < 4:
            raise ValueError(f"GrowthLimits(min_periods={self.min_periods!r}): a trend in "
                             "two halves needs at least 4 periods")

    def floor(self, resource: str) -> float:
        return {"rss_bytes": self.rss_floor_bytes, "open_fds": self.fds_floor,
                "threads": self.threads_floor}[resource]


@dataclass(frozen=True)
class ResourceTrend:
    """One process's resource over the measured window, and whether it grows."""

    process: str  # "worker 1", "broker node 1 (pid 4242)"
    resource: str  # a RESOURCES key
    periods: int
    start: float  # first measured period's value
    end: float  # last measured period's value
    slope_per_min: float  # least-squares slope, units per minute
    projected: float  # slope x window: the rise the trend predicts over the window
    first_half_mean: float
    second_half_mean: float
    late_slope_per_min: float  # the second half's own slope
    largest_step: float  # the largest rise between two consecutive periods
    grows: bool
    why: str  # which condition decided (for the record)

    def _fmt(self, value: float) -> str:
        if self.resource == "rss_bytes":
            return f"{value / _MIB:,.1f} MiB"
        return f"{value:,.0f}"

    def message(self) -> str:
        """The test's failure line: process, resource, start→end, slope per minute."""
        rate = (f"{self.slope_per_min / _MIB:+,.2f} MiB/min" if self.resource == "rss_bytes"
                else f"{self.slope_per_min:+,.2f} {RESOURCES[self.resource]}/min")
        return (f"resource-growth: {self.process} {self.resource} {self._fmt(self.start)} → "
                f"{self._fmt(self.end)} over {self.periods} measured periods, {rate} "
                f"(projected rise {self._fmt(self.projected)}): it grew without levelling off")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("start", "end", "slope_per_min", "projected", "first_half_mean",
                  "second_half_mean", "late_slope_per_min", "largest_step"):
            d[k] = round(d[k], 3)
        return d


def judge_series(process: str, resource: str, points: Sequence[tuple[float, float]],
                 limits: GrowthLimits, *, first_touch: float = 0.0) -> ResourceTrend | None:
    """The trend of ``points`` ((seconds, value), in time order); None when there are
    fewer than ``limits.min_periods`` points. ``first_touch``: how far RSS may rise by a
    JVM touching its heap for the first time (its ``-Xmx`` without
    ``-XX:+AlwaysPreTouch``): a rise within it is bounded by the heap, not a leak."""
    n = len(points)
    if n < limits.min_periods:
        return None
    values = [v for _, v in points]
    window_s = points[-1][0] - points[0][0]
    k = slope(points)  # per second
    half = n // 2
    first, second = values[:half], values[n - half:]
    late = slope(points[n - half:])
    largest_step = max((b - a for a, b in pairwise(values)), default=0.0)
    rise = values[-1] - values[0]
    projected = k * window_s
    floor = limits.floor(resource)
    start = values[0]
    share = limits.relative * abs(start)
    m1, m2 = sum(first) / len(first), sum(second) / len(second)
    floor_text = f"{floor / _MIB:g} MiB" if resource == "rss_bytes" else f"{floor:g}"
    if k <= 0 or projected <= floor:
        why = f"projected rise within the floor {floor_text}"
    elif projected <= share:
        why = f"projected rise within {limits.relative:.0%} of the start"
    elif m2 <= m1:
        why = "second half's mean not above the first's"
    elif late * window_s <= max(floor, share):
        why = "levelled off: the second half's slope projects a rise within the floors"
    elif rise > 0 and largest_step >= limits.step_share * rise:
        why = f"a one-off step ({largest_step:g} of a {rise:g} rise in one period)"
    elif resource == "rss_bytes" and rise <= first_touch:
        why = (f"within the JVM heap's first touch: a {rise / _MIB:,.0f} MiB rise, -Xmx "
               f"{first_touch / _MIB:,.0f} MiB not pre-touched (-XX:+AlwaysPreTouch)")
    else:
        why = "grows"
    return ResourceTrend(
        process=process, resource=resource, periods=n, start=start, end=values[-1],
        slope_per_min=k * 60.0, projected=projected, first_half_mean=m1,
        second_half_mean=m2, late_slope_per_min=late * 60.0, largest_step=largest_step,
        grows=why == "grows", why=why)


def process_series(periods: Sequence[PeriodStats]) -> dict[tuple[str, str],
                                                           list[tuple[float, float]]]:
    """Per (process, resource), the (seconds since the first period began, value) points
    of ``periods``: each worker and each local broker process at each period's end."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    if not periods:
        return out
    t0 = periods[0].start_ns
    for p in periods:
        t = (p.start_ns - t0) / 1e9 + p.elapsed_s
        held = [(f"worker {w.worker}", w.resources) for w in p.workers
                if w.resources is not None]
        held += [(f"broker {name}", r) for name, r in p.broker_resources.items()]
        for process, r in held:
            for resource in RESOURCES:
                value = getattr(r, resource)
                if value is not None:
                    out.setdefault((process, resource), []).append((t, float(value)))
    return out


def trends(series: dict[tuple[str, str], list[tuple[float, float]]], limits: GrowthLimits,
           first_touch: Mapping[str, float] | None = None) -> list[ResourceTrend]:
    """Every judged trend of ``series`` (see :func:`process_series`); ``first_touch`` per
    process as in :func:`judge_series`."""
    out = []
    for (process, resource), points in series.items():
        t = judge_series(process, resource, points, limits,
                         first_touch=(first_touch or {}).get(process, 0.0))
        if t is not None:
            out.append(t)
    return out


def growth_findings(judged: Iterable[ResourceTrend]) -> list[str]:
    """The failure lines of the trends that grow."""
    return [t.message() for t in judged if t.grows]
