"""AutoMQ's ``producerRateList``: the offered rate as a schedule over the run.

AutoMQ's OMB fork (github.com/AutoMQ/openmessaging-benchmark) documents two forms in its
``Workload.java``; "producerRate will be ignored" when the list is given:

* ``[[hour, minute, rate], ...]`` — a rate by time of day. Its ``RateGenerator.java``
  interpolates linearly between the points and wraps around midnight (before the first
  point of the day the line runs from the last point of the previous day), at the
  machine's local time (``LocalTime``);
* ``[[minutes, rate], ...]`` — "the rate will be set at the given duration (in minutes)
  after the test starts": a step at each point, held until the next one.

pytest-brokerperf applies the schedule to the measured window: the minutes count from its
start, the warm-up runs at the schedule's first rate (the rate of the time of day for the
clock form), and the rate is set at the start of every stats period to the schedule's
rate then, so each period's ``target_rate_msg_s`` is the schedule's. A change goes
through the coordinator's rate adjustment: sends that are overdue at the change are
still sent (open loop). A rate of 0 sends at OMB's floor of 1 msg/s per worker.
Entries may be fractional here (short CI runs); AutoMQ's are Java ints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = ["RateSchedule"]

_DAY_S = 24 * 60 * 60


@dataclass(frozen=True)
class RateSchedule:
    """A validated ``producerRateList`` (checked by the workload): ``points`` are
    (seconds, msg/s) sorted by time — seconds after the measured window starts
    (``elapsed``) or seconds of the day (``clock``); a repeated time keeps its last rate,
    as AutoMQ's map does."""

    kind: Literal["elapsed", "clock"]
    points: tuple[tuple[float, float], ...]

    @classmethod
    def from_list(cls, entries: Sequence[Sequence[float]]) -> RateSchedule:
        by_time: dict[float, float] = {}
        kind: Literal["elapsed", "clock"] = "clock" if len(entries[0]) == 3 else "elapsed"
        for entry in entries:
            if kind == "clock":
                hour, minute, rate = entry
                t = float(hour) * 3600 + float(minute) * 60
            else:
                minutes, rate = entry
                t = float(minutes) * 60
            by_time[t] = float(rate)
        return cls(kind, tuple(sorted(by_time.items())))

    def rate_at(self, elapsed_s: float, now: datetime | None = None) -> float:
        """The offered rate ``elapsed_s`` into the measured window (``elapsed``), or at
        the local time ``now`` (``clock``; default: the current local time)."""
        if self.kind == "elapsed":
            rate = self.points[0][1]
            for t, r in self.points:
                if t > elapsed_s + 1e-9:
                    break
                rate = r
            return rate
        if now is None:
            now = datetime.now().astimezone()
        x = now.hour * 3600 + now.minute * 60 + now.second + now.microsecond / 1e6
        return self._interpolate(x)

    def _interpolate(self, x: float) -> float:
        # AutoMQ RateGenerator.get: floor and ceiling points of the day, wrapping around
        before = [p for p in self.points if p[0] <= x]
        after = [p for p in self.points if p[0] >= x]
        x1, y1 = before[-1] if before else (self.points[-1][0] - _DAY_S, self.points[-1][1])
        x2, y2 = after[0] if after else (self.points[0][0] + _DAY_S, self.points[0][1])
        if x1 == x2:
            return y1
        return y1 + (x - x1) * (y2 - y1) / (x2 - x1)

    @property
    def peak(self) -> float:
        """The highest rate the schedule asks for (sizing and safety estimates)."""
        return max(r for _, r in self.points)

    def describe(self) -> dict[str, Any]:
        """The record's ``workload.rate_schedule`` block."""
        if self.kind == "clock":
            points = [{"time": _clock(t), "rate_msg_s": r} for t, r in self.points]
            how = ("rate by local time of day, linear between points, wrapping at midnight "
                   "(AutoMQ RateGenerator)")
        else:
            points = [{"after_s": t, "rate_msg_s": r} for t, r in self.points]
            how = "steps: each rate from its time after the measured window starts"
        return {"kind": self.kind, "how": how, "points": points,
                "applied": "at the start of each stats period"}


def _clock(t: float) -> str:
    minutes = (t % 3600) / 60
    shown = f"{int(minutes):02d}" if minutes.is_integer() else f"{minutes:g}"
    return f"{int(t // 3600):02d}:{shown}"
