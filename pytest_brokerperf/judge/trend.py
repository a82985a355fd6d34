"""Is a quantity growing over a window? One rule for ladder rungs and single windows.

A backlog or client queue "grows" when its least-squares slope exceeds a share of the
target rate per second and it ends above a floor (OMB's backlog limit of 1000 messages,
or 100 ms worth of messages at the target): below that it is jitter, not a trend.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GROWTH_FLOOR_MESSAGES", "GROWTH_FLOOR_S", "GROWTH_TOLERANCE", "grows", "slope"]

GROWTH_TOLERANCE = 0.02  # slope ≤ 2 % of the target per second is no growth
GROWTH_FLOOR_MESSAGES = 1000  # OMB's backlog limit: below it nothing "grows"
GROWTH_FLOOR_S = 0.1  # ... or below 100 ms worth of messages at the target


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points; 0 with fewer than two distinct x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def grows(slope_: float, end: float, target: float, *, tolerance: float = GROWTH_TOLERANCE,
          floor_messages: float = GROWTH_FLOOR_MESSAGES,
          floor_s: float = GROWTH_FLOOR_S) -> bool:
    """True when ``slope_`` (per second) and the final value ``end`` say it grows."""
    return slope_ > tolerance * target and end > max(floor_messages, floor_s * target)
