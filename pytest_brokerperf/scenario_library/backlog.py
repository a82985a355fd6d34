"""The backlog a catch-up or mixed run builds, and how long its phases may take.

Both scenarios take the backlog from the scenario's ``backlog_bytes``, else the workload's
``consumerBacklogSizeGB`` (under ``--brokerperf-profile=omb``, ``--brokerperf-workload``
or a scenario workload), else a profile's seconds of publishing; and bound the build and
the read-back by multiples of the expected build time.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.workload.model import Workload

__all__ = ["backlog_target", "phase_timeouts"]

_MIB = 1024**2


def backlog_target(settings: Settings, wl: Workload, wl_file: Path | None, *,
                   given: int | None, scenario_workload: bool, rate: float,
                   build_seconds: Mapping[str, float], copies: int, owner: str,
                   notes: list[str]) -> int:
    """The backlog in bytes. ``copies`` is how many subscriptions hold each published
    message in the backlog; ``owner`` names the scenario in messages (``Mixed``)."""
    from_file = settings.profile == "omb" or (
        wl_file is not None and settings.workload is not None) or scenario_workload
    if given is not None:
        backlog = int(given)
    elif from_file and wl.consumer_backlog_size_gb > 0:
        backlog = wl.backlog_bytes
    else:
        seconds = build_seconds.get(settings.profile, 60.0)
        backlog = int(rate * seconds * wl.message_size * max(1, copies))
        notes.append(
            f"backlog {backlog / _MIB:.1f} MiB: {seconds:g} s of publishing at "
            f"{rate:g} msg/s ({settings.profile} profile); {owner}(backlog_bytes=...) or "
            "a workload's consumerBacklogSizeGB sets another")
    if backlog < wl.message_size:
        raise ValueError(
            f"{owner}(backlog_bytes={backlog}) is below one {wl.message_size}-byte "
            "message; give a backlog of at least a few thousand messages")
    return backlog


def phase_timeouts(backlog: int, rate: float, message_size: int, copies: int, *,
                   build_given: float | None, read_given: float | None
                   ) -> tuple[float, float]:
    """(build timeout, read-back timeout) in seconds: the given ones, else 3× and 10× the
    expected build time (the backlog grows by ``copies`` copies of each message)."""
    expected = backlog / (rate * message_size * max(1, copies))
    build = float(build_given) if build_given is not None else max(30.0, 3.0 * expected + 10.0)
    read = float(read_given) if read_given is not None else max(60.0, 10.0 * expected)
    return build, read
