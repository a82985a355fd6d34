"""Are the workers' stamps on the coordinator's clock?

End-to-end latency subtracts a send stamp taken in one worker process from a receive
stamp taken in another, both ``CLOCK_MONOTONIC``. That is one clock only within one
kernel boot and one time namespace (Linux ``time_namespaces(7)`` gives a namespace its
own monotonic offset). At each period snapshot every worker reports its boot id and a
monotonic reading; the reading must fall between the coordinator's own readings before
it asked and after the last answer. A worker outside that bracket, or on another boot,
stamps on another clock: the run is ``clock-uncertain`` and its end-to-end figures are
not reported as the broker's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["CLOCK_UNCERTAINTY_SHARE", "SLACK_NS", "ClockExchange", "ClockIdentity",
           "OffsetEstimate", "TaskClock", "clock_mismatch", "drift_ppm", "estimate_offset",
           "pair_uncertainty_ns", "uncertainty_note"]

#: allowance around the bracket for the pipe round trip's own rounding (1 ms)
SLACK_NS: Final = 1_000_000


def clock_mismatch(snaps: Sequence[dict[str, Any]], asked_ns: int, answered_ns: int,
                   boot_id: str | None, slack_ns: int = SLACK_NS) -> str | None:
    """Why a worker's clock differs from the coordinator's (None: all on one clock).

    ``asked_ns``/``answered_ns``: the coordinator's CLOCK_MONOTONIC before it sent the
    snapshot request and after the last answer arrived.
    """
    problems = []
    for s in snaps:
        clock = s.get("clock")
        if not clock:
            continue
        worker = s.get("worker", "?")
        other_boot = clock.get("boot_id")
        # a corrected task (another host or namespace) stamps on the coordinator's clock
        # within its measured uncertainty: the bracket, widened by it, checks that
        corrected = bool(clock.get("corrected"))
        slack = slack_ns + int(clock.get("uncertainty_ns") or 0)
        if boot_id and other_boot and other_boot != boot_id and not corrected:
            problems.append(f"worker {worker} runs on another boot ({other_boot[:8]}… vs "
                            f"{boot_id[:8]}…): another machine's clock")
            continue
        mono = int(clock["mono_ns"])
        if mono < asked_ns - slack or mono > answered_ns + slack:
            off = (mono - asked_ns) if mono < asked_ns else (mono - answered_ns)
            problems.append(f"worker {worker}'s CLOCK_MONOTONIC is {off / 1e6:+,.1f} ms "
                            "outside the coordinator's bracket (another time namespace, "
                            "or another host)")
    if not problems:
        return None
    return ("; ".join(problems) + ": send and receive stamps are not on one clock, so "
            "end-to-end figures are not the broker's. Fix: run every worker on the "
            "coordinator's host and time namespace")


# ----------------------------------------------------------------------------- offsets
#
# A generator task on another host (or in another time namespace) has its own
# CLOCK_MONOTONIC. The coordinator measures it NTP-style over the task's channel: it
# reads its clock (t0), asks the task for its clock (t1, read while it answers), reads
# its clock again when the answer is back (t3). If the request and the answer took
# equally long, the task's clock minus the coordinator's is ``t1 - (t0 + t3) / 2``; if
# not, the truth is within ``(t3 - t0) / 2`` of that (the answer cannot have been read
# before t0 nor after t3). Of many exchanges the one with the smallest round trip bounds
# the offset tightest, so it is the one kept.
#
# The task then stamps on the coordinator's clock (its reading minus the offset), so
# every stamp it puts in a message header and every latency it records is on one clock
# with every other task's. Later exchanges (every period, and after the window) measure
# what is left: the *residual* offset of the corrected clock, which drift and the first
# estimate's error leave; a task's uncertainty is the largest ``|residual| + RTT/2`` seen.


@dataclass(frozen=True)
class ClockExchange:
    """One NTP-style exchange, in ns: the coordinator's clock before asking (``t0``) and
    after the answer (``t3``), the task's clock read while it answered (``task``)."""

    t0: int
    task: int
    t3: int

    @property
    def rtt_ns(self) -> int:
        return self.t3 - self.t0

    @property
    def offset_ns(self) -> int:
        """The task's clock minus the coordinator's."""
        return self.task - (self.t0 + self.t3) // 2


@dataclass(frozen=True)
class OffsetEstimate:
    """A task clock's offset to the coordinator's: ``offset_ns ± uncertainty_ns``, from
    the minimum-round-trip exchange of ``samples``, taken at coordinator time ``at_ns``."""

    offset_ns: int
    uncertainty_ns: int
    rtt_ns: int
    samples: int
    at_ns: int


def estimate_offset(exchanges: Sequence[ClockExchange]) -> OffsetEstimate:
    """The offset of the exchange with the smallest round trip (± half that round trip)."""
    valid = [x for x in exchanges if x.rtt_ns >= 0]
    if not valid:
        raise ValueError("no valid clock exchange (every round trip was negative)")
    best = min(valid, key=lambda x: x.rtt_ns)
    return OffsetEstimate(offset_ns=best.offset_ns, uncertainty_ns=(best.rtt_ns + 1) // 2,
                          rtt_ns=best.rtt_ns, samples=len(exchanges),
                          at_ns=(best.t0 + best.t3) // 2)


def drift_ppm(first: OffsetEstimate, last: OffsetEstimate) -> float | None:
    """How fast the offset moved between two estimates, in µs per second (ppm); None
    when they were taken at the same moment."""
    span = last.at_ns - first.at_ns
    if span <= 0:
        return None
    return (last.offset_ns - first.offset_ns) / span * 1e6


@dataclass(frozen=True)
class ClockIdentity:
    """What makes two CLOCK_MONOTONIC readings comparable: one kernel boot and one time
    namespace (``/proc/self/ns/time``), on one host."""

    host: str
    boot_id: str | None
    time_ns: str | None

    @staticmethod
    def here() -> ClockIdentity:
        import os
        import socket

        try:
            tns: str | None = os.readlink("/proc/self/ns/time")
        except OSError:
            tns = None
        boot = None
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                boot = f.read().strip()
        except OSError:
            pass
        return ClockIdentity(host=socket.gethostname(), boot_id=boot, time_ns=tns)

    def same_clock(self, other: ClockIdentity) -> bool:
        """True only when both are known to read one clock (same boot, same namespace)."""
        return (self.boot_id is not None and self.time_ns is not None
                and self.boot_id == other.boot_id and self.time_ns == other.time_ns)


@dataclass
class TaskClock:
    """One generator task's clock over a run: the offset its stamps are corrected by,
    the estimate that offset came from, and every residual measured after."""

    task: int
    identity: ClockIdentity
    #: subtracted from the task's CLOCK_MONOTONIC readings: 0 for a task on the
    #: coordinator's clock (no correction), else the first estimate (or, for a task
    #: sharing another task's clock, that task's: a same-clock pair is never corrected
    #: relative to itself)
    applied_offset_ns: int = 0
    corrected: bool = False
    first: OffsetEstimate | None = None
    residuals: list[OffsetEstimate] = field(default_factory=list)

    @property
    def uncertainty_ns(self) -> int:
        """Bound on the error of this task's corrected stamps: the largest
        ``|residual| + RTT/2`` measured (the first estimate's RTT/2 before any)."""
        if not self.corrected:
            return 0
        bounds = [abs(r.offset_ns) + r.uncertainty_ns for r in self.residuals]
        if self.first is not None:
            bounds.append(self.first.uncertainty_ns)
        return max(bounds, default=0)

    @property
    def drift_ppm(self) -> float | None:
        if len(self.residuals) < 2:
            return None
        return drift_ppm(self.residuals[0], self.residuals[-1])


def pair_uncertainty_ns(a: TaskClock, b: TaskClock) -> int:
    """Bound on the error of a latency stamped by ``a`` and read by ``b``: none on one
    clock (same boot and time namespace: the same correction, or none, on both), else
    the sum of both tasks' bounds."""
    if a.task == b.task or a.identity.same_clock(b.identity):
        return 0
    return a.uncertainty_ns + b.uncertainty_ns


#: The ``clock-uncertain`` rule for corrected clocks: the run's largest pair uncertainty
#: must stay under this share of the measured window's end-to-end p50 (the smallest
#: latency figure a run reports, so every percentile above it is known at least as well).
CLOCK_UNCERTAINTY_SHARE: Final = 0.10


def uncertainty_note(pair_uncertainty_us: float, e2e_p50_us: float | None,
                     share: float = CLOCK_UNCERTAINTY_SHARE) -> str | None:
    """Why corrected end-to-end figures are not trusted (None: they are)."""
    if pair_uncertainty_us <= 0 or e2e_p50_us is None:
        return None
    if pair_uncertainty_us <= share * e2e_p50_us:
        return None
    return (f"the generator tasks' clock offsets are known to ±{pair_uncertainty_us:,.0f} µs "
            f"per producer→consumer pair, more than {share:.0%} of the end-to-end p50 "
            f"({e2e_p50_us:,.0f} µs): the end-to-end figures are not reported as the broker's")
