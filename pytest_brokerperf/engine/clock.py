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
from typing import Any, Final

__all__ = ["SLACK_NS", "clock_mismatch"]

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
        if boot_id and other_boot and other_boot != boot_id:
            problems.append(f"worker {worker} runs on another boot ({other_boot[:8]}… vs "
                            f"{boot_id[:8]}…): another machine's clock")
            continue
        mono = int(clock["mono_ns"])
        if mono < asked_ns - slack_ns or mono > answered_ns + slack_ns:
            off = (mono - asked_ns) if mono < asked_ns else (mono - answered_ns)
            problems.append(f"worker {worker}'s CLOCK_MONOTONIC is {off / 1e6:+,.1f} ms "
                            "outside the coordinator's bracket (another time namespace, "
                            "or another host)")
    if not problems:
        return None
    return ("; ".join(problems) + ": send and receive stamps are not on one clock, so "
            "end-to-end figures are not the broker's. Fix: run every worker on the "
            "coordinator's host and time namespace")
