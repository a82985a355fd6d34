"""A scenario's run resolved against the settings: what the engine, the safety guard and
the record read of it.

:class:`PreparedRun` is what :meth:`~pytest_brokerperf.scenario_library.base.Scenario.prepare`
returns; it lives below the scenarios so that the modules it feeds (the guard, the record)
never import a scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.judge.slo import SLO
    from pytest_brokerperf.workload.model import Workload
    from pytest_brokerperf.workload.rate_schedule import RateSchedule

__all__ = ["PreparedRun", "workload_block"]


@dataclass
class PreparedRun:
    """A scenario resolved against the settings: ready for the engine."""

    scenario: str
    workload: Workload
    workload_file: Path | None
    rate: float
    period_s: float
    warmup_s: float
    measure_s: float
    params: dict[str, Any]
    slos: tuple[SLO, ...]  # the scenario's shipped sanity bounds
    driver_file: Path | None
    notes: list[str] = field(default_factory=list)
    #: AutoMQ's producerRateList, followed by the measured window (tail-read only)
    rate_schedule: RateSchedule | None = None


def workload_block(prepared: PreparedRun) -> dict[str, Any]:
    """The record's ``workload`` block: the file, keys ignored under
    ``--brokerperf-lenient`` and the rate schedule followed (None without one)."""
    wl = prepared.workload
    return {
        "name": wl.name,
        "file": str(prepared.workload_file) if prepared.workload_file else None,
        "ignored_keys": list(wl.ignored_keys),
        "rate_schedule": (prepared.rate_schedule.describe()
                          if prepared.rate_schedule is not None else None),
    }
