"""Open-loop pacing: an absolute schedule of intended send times (docs/explanation/measurement.md).

Message ``n`` is due at ``start + n * 1e9 / rate``. A sender that stalls never loses
slots: when it resumes, every overdue message is sent at once and its lateness shows
up as publish delay. This is OMB's ``UniformRateLimiter`` semantics.
"""

from __future__ import annotations

__all__ = ["Schedule"]


class Schedule:
    """Intended send times for a fixed rate, starting at ``start_ns``."""

    __slots__ = ("interval_ns", "n", "rate", "start_ns")

    def __init__(self, rate: float, start_ns: int) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0 msg/s, got {rate!r}")
        self.rate = float(rate)
        self.interval_ns = 1e9 / self.rate
        self.start_ns = int(start_ns)
        self.n = 0

    def intended(self, n: int) -> int:
        """Intended send time of message ``n`` (ns, CLOCK_MONOTONIC)."""
        return self.start_ns + int(n * self.interval_ns)

    def next_ns(self) -> int:
        """Intended send time of the next message not yet taken."""
        return self.start_ns + int(self.n * self.interval_ns)

    def due(self, now_ns: int) -> int:
        """How many messages are due at ``now_ns`` and not yet taken."""
        if now_ns < self.start_ns:
            return 0
        total_due = int((now_ns - self.start_ns) / self.interval_ns) + 1
        return max(0, total_due - self.n)

    def take(self) -> int:
        """Claim the next message slot; return its intended send time."""
        t = self.start_ns + int(self.n * self.interval_ns)
        self.n += 1
        return t

    def rebased(self, rate: float, now_ns: int) -> Schedule:
        """A new schedule at ``rate`` starting now (OMB ``adjustPublishRate``, 1 msg/s floor)."""
        return Schedule(max(rate, 1.0), now_ns)
