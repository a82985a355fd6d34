"""Open-loop pacing: an absolute schedule of intended send times.

Message ``n`` is due at ``start + n * 1e9 / rate``. A sender that stalls never loses
slots: when it resumes, every overdue message is sent at once and its lateness shows
up as publish delay (OMB's ``UniformRateLimiter`` semantics; why it matters:
docs/explanation/measurement.md). A rate change (a ladder rung, a drain, a step of rate
discovery) keeps that promise too: the slots that were already due under the old rate
and not yet sent are carried into the new schedule with their original intended times,
ahead of the new rate's slots. OMB's ``adjustPublishRate`` drops them, which hides the
lateness of every message the sender owed when the rate changed.
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["Schedule"]


class _Owed:
    """Slots ``n .. end - 1`` of an earlier rate, due and not yet sent."""

    __slots__ = ("end", "interval_ns", "n", "start_ns")

    def __init__(self, start_ns: int, interval_ns: float, n: int, end: int) -> None:
        self.start_ns, self.interval_ns, self.n, self.end = start_ns, interval_ns, n, end

    def next_ns(self) -> int:
        return self.start_ns + int(self.n * self.interval_ns)


class Schedule:
    """Intended send times for a fixed rate from ``start_ns``, after any slots an
    earlier rate still owes (see :meth:`rebased`)."""

    __slots__ = ("interval_ns", "n", "owed", "rate", "start_ns")

    def __init__(self, rate: float, start_ns: int) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0 msg/s, got {rate!r}")
        self.rate = float(rate)
        self.interval_ns = 1e9 / self.rate
        self.start_ns = int(start_ns)
        self.n = 0
        self.owed: deque[_Owed] = deque()

    def intended(self, n: int) -> int:
        """Intended send time of this rate's message ``n`` (ns, CLOCK_MONOTONIC)."""
        return self.start_ns + int(n * self.interval_ns)

    def owed_count(self) -> int:
        """Slots of earlier rates still to send."""
        return sum(o.end - o.n for o in self.owed)

    def next_ns(self) -> int:
        """Intended send time of the next message not yet taken."""
        if self.owed:
            return self.owed[0].next_ns()
        return self.start_ns + int(self.n * self.interval_ns)

    def _own_due(self, now_ns: int) -> int:
        if now_ns < self.start_ns:
            return 0
        total_due = int((now_ns - self.start_ns) / self.interval_ns) + 1
        return max(0, total_due - self.n)

    def due(self, now_ns: int) -> int:
        """How many messages are due at ``now_ns`` and not yet taken (owed ones first:
        they were due before the rate changed)."""
        return self.owed_count() + self._own_due(now_ns) if self.owed else self._own_due(now_ns)

    def take(self) -> int:
        """Claim the next message slot; return its intended send time."""
        if self.owed:
            o = self.owed[0]
            t = o.start_ns + int(o.n * o.interval_ns)
            o.n += 1
            if o.n >= o.end:
                self.owed.popleft()
            return t
        t = self.start_ns + int(self.n * self.interval_ns)
        self.n += 1
        return t

    def take_many(self, k: int) -> list[int]:
        """Claim the next ``k`` slots at once; their intended send times, in order (the
        pacer's batch of due messages: one call, not one per message)."""
        if self.owed:
            return [self.take() for _ in range(k)]
        n0, start, iv = self.n, self.start_ns, self.interval_ns
        self.n = n0 + k
        if k < 32:
            return [start + int(n * iv) for n in range(n0, n0 + k)]
        # the same float64 products truncated toward zero as int(n * iv), as one array op
        offsets = (np.arange(n0, n0 + k, dtype=np.float64) * iv).astype(np.int64)
        return (offsets + start).tolist()

    def rebased(self, rate: float, now_ns: int) -> Schedule:
        """The schedule at ``rate`` from ``now_ns`` (1 msg/s floor, as OMB's
        ``adjustPublishRate``), still owing every slot this one had due by ``now_ns``."""
        new = Schedule(max(rate, 1.0), now_ns)
        new.owed.extend(o for o in self.owed if o.n < o.end)
        own = self._own_due(now_ns)
        if own > 0:
            new.owed.append(_Owed(self.start_ns, self.interval_ns, self.n, self.n + own))
        return new
