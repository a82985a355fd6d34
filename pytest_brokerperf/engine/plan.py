"""What a load run is asked to do and what it hands back: plans, rungs, outcomes.

Plain values shared by the coordinator, the scenarios and the verdict, so readers of a
result need not import the machinery that produced it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.engine.delivery import DeliveryReport
from pytest_brokerperf.metrics.stats import PeriodStats

if TYPE_CHECKING:
    from pytest_brokerperf.engine.executor import ExecutorReport, WorkerLauncher
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.workload.rate_schedule import RateSchedule

__all__ = ["DEFAULT_PER_PROCESS_RATE", "TOPOLOGY_CHECK_RATE", "PhaseRun", "RunOutcome",
           "RunPlan", "Rung", "SessionEnd", "auto_workers"]

#: Rough per-process ceiling used to size worker pools until calibration measures one.
DEFAULT_PER_PROCESS_RATE = 15_000.0

#: The profile's default tail-read rate on a topology check (several local broker nodes
#: on one machine): three JVMs pinned to one of two cores spend their first minutes
#: compiling (C2 threads took ~40 % of their CPU) and then keep up with a few hundred
#: msg/s at RF 3, not with the smoke profile's 1000. Explicit rates win.
TOPOLOGY_CHECK_RATE = 100.0


def auto_workers(rate: float, clients: int, cpus: tuple[int, ...] | None) -> int:
    """Worker processes for a target rate: enough for the rate, at most one per CPU."""
    limit = len(cpus) if cpus else (os.cpu_count() or 1)
    want = max(1, math.ceil(rate / DEFAULT_PER_PROCESS_RATE))
    return max(1, min(want, limit, max(clients, 1)))


@dataclass(frozen=True)
class RunPlan:
    """How long and how to run a workload; the profile and options decide these."""

    rate: float  # aggregate target msg/s over all producers
    period_s: float
    warmup_max_s: float
    measure_s: float
    warmup_min_periods: int = 3
    steady_periods: int = 3
    steady_rate_tolerance: float = 0.10  # ack rate within ±10 % of target
    steady_p99_tolerance: float = 0.50  # publish-response p99 within ±50 % across periods
    #: ... and the consumers at the tail: the last period's backlog under this many
    #: seconds of publishing (a warm-up that ends with consumers behind hands its queue
    #: to the measured window)
    steady_lag_s: float = 1.0
    workers: int = 1
    probe_timeout_s: float = 60.0
    flush_timeout_s: float = 30.0
    drain_timeout_s: float = 30.0
    topic_prefix: str = "brokerperf"
    keep_topics: bool = False
    generator_cpus: tuple[int, ...] | None = None
    seed: int = 0
    #: AutoMQ's producerRateList: the measured window follows it (``rate`` is then the
    #: warm-up's rate, the schedule's first); see :mod:`pytest_brokerperf.workload.rate_schedule`
    rate_schedule: RateSchedule | None = None
    #: starts the generators (``--brokerperf-executor``): None, local worker processes;
    #: the plugin injects a cluster's launcher (plugin/spark_executor.py)
    launcher: WorkerLauncher | None = field(default=None, compare=False, repr=False)


@dataclass
class RunOutcome:
    """Everything one run measured, before any verdict or SLO is applied."""

    plan: RunPlan
    topics: list[str]
    subscriptions: list[str]
    warmup: list[PeriodStats]
    warmup_steady: bool
    periods: list[PeriodStats]
    cumulative: dict[str, LatencyHistogram]
    delivery: DeliveryReport
    totals: dict[str, int]
    begin_time: str
    end_time: str
    measure_begin_time: str
    probe_wait_s: float
    read_back: dict[str, Any] = field(default_factory=dict)
    client_stats: list[str] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    drain_complete: bool = True
    outstanding_after_flush: int = 0
    driver_description: dict[str, Any] = field(default_factory=dict)
    #: the CPUs the pytest process (coordinator, metrics sampler) was pinned to during
    #: the run; None: not pinned (all its CPUs)
    coordinator_cpus: tuple[int, ...] | None = None
    #: which executor ran the generators, each task's host and clock (None: before any)
    executor: ExecutorReport | None = None

    @property
    def measured_s(self) -> float:
        return sum(p.elapsed_s for p in self.periods)

    @property
    def ack_rate(self) -> float:
        s = self.measured_s
        return sum(p.messages_sent for p in self.periods) / s if s else 0.0

    @property
    def consume_rate(self) -> float:
        s = self.measured_s
        return sum(p.messages_received for p in self.periods) / s if s else 0.0

    @property
    def publish_mib_s(self) -> float:
        s = self.measured_s
        return sum(p.bytes_sent for p in self.periods) / s / 1048576 if s else 0.0

    @property
    def consume_mib_s(self) -> float:
        s = self.measured_s
        return sum(p.bytes_received for p in self.periods) / s / 1048576 if s else 0.0


@dataclass(frozen=True)
class Rung:
    """One fixed-rate step of a session: settle (warm-up), then a measured window.

    ``warmup_until_steady`` ends the warm-up early once the last periods are steady
    (rate and p99, :func:`_is_steady`), capped at ``warmup_max_s``; otherwise the
    warm-up lasts exactly ``warmup_max_s`` (OMB). ``drain_before_s`` > 0 first lowers
    the rate to the 1 msg/s floor and waits (bounded) until the client queues and the
    consumer backlog are empty, so an overdriven step does not leak into the next.
    """

    rate: float
    warmup_max_s: float
    measure_s: float
    warmup_until_steady: bool = True
    drain_before_s: float = 0.0
    label: str = ""


@dataclass
class SessionEnd:
    """What the end of a session adds: delivery over the whole session, final totals."""

    delivery: DeliveryReport
    totals: dict[str, int]
    client_stats: list[str]
    worker_errors: list[str]
    drain_complete: bool
    outstanding_after_flush: int
    end_time: str
    begin_time: str = ""  # the session's start, before topics were created

    def apply(self, outcome: RunOutcome, *, end_time: bool = True) -> RunOutcome:
        """Fill the session-wide fields of ``outcome`` (one rung) in place; return it."""
        outcome.delivery = self.delivery
        outcome.totals = self.totals
        outcome.client_stats = self.client_stats
        outcome.drain_complete = self.drain_complete
        outcome.outstanding_after_flush = self.outstanding_after_flush
        if end_time:  # the outcome is the whole session (run_workload)
            outcome.end_time = self.end_time
            outcome.worker_errors = list(self.worker_errors)
        return outcome


@dataclass
class PhaseRun:
    """A phase that lasts until a condition on the lifetime counters holds (catch-up's
    backlog build and drain): its periods, the last one cut short at that moment."""

    phase: str
    periods: list[PeriodStats]
    done: bool  # False: the timeout came first
    elapsed_s: float  # from the phase's start until done() held (or the timeout)
    start_totals: dict[str, int]
    end_totals: dict[str, int]  # lifetime totals read when done() held
