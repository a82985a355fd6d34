"""The record of a run of several phases that a broker death or an interrupt stopped.

Catch-up, mixed, reassign and the throughput ladder run one load session through
several phases (rungs, a backlog build, a drain, a catch-up, a window after). When a
local broker dies (``BrokerDied``) or Ctrl-C / SIGTERM arrives (``RunInterrupted``) in
any of them, the run still leaves a record, as the tail-read run does: the periods of
the phases completed until then plus those of the phase it stopped in, the phase named
in the verdict's reason, ``run_status`` ``failed`` or ``interrupted``
(docs/reference/results.md). The run session
(:class:`~pytest_brokerperf.scenario_library.session.RunSession`) keeps a
:class:`PhaseLog` while it runs and wraps its load in :func:`record_if_stopped`; this
module writes the record through
:func:`~pytest_brokerperf.scenario_library.finish.finish_failed` or
:func:`~pytest_brokerperf.scenario_library.finish.finish_interrupted`, then re-raises so
pytest fails the test (or stops the session) as it would have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_brokerperf.core.errors import BrokerDied, RunInterrupted

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import PhaseRun, RunOutcome, RunPlan
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.finish import Measured

__all__ = ["CALIBRATION", "PhaseLog", "nothing_measured", "record_if_stopped"]

#: What the reason calls the phase before the first period (topics, clients, probe).
SET_UP = "the set-up (topics, clients, readiness probe)"
#: What it calls a throughput run's calibration (before its first rung).
CALIBRATION = "the calibration (before the first rung)"
#: What it calls the session's end (producers stopped, consumers catching up).
SESSION_END = "the session's end (producers stopped, consumers catching up)"


@dataclass
class PhaseLog:
    """Where a run of several phases is, and what its completed phases measured.

    ``now`` is the phase in progress as a reason names it ("the drain", "rung 2/3 at
    2k msg/s"); ``rungs`` the completed fixed-rate windows in order; ``periods`` every
    completed period in order, warm-up periods included (labelled by their phase).
    A run of one window names no phase (``now`` None).
    """

    now: str | None = SET_UP
    rungs: list[RunOutcome] = field(default_factory=list)
    periods: list[PeriodStats] = field(default_factory=list)

    def enter(self, phase: str) -> None:
        """The run begins ``phase`` (what a record of a stop in it will name)."""
        self.now = phase

    def rung_done(self, out: RunOutcome) -> RunOutcome:
        """A fixed-rate window (warm-up and measured periods) completed; ``out`` back."""
        self.rungs.append(out)
        self.periods += [*out.warmup, *out.periods]
        return out

    def phase_done(self, run: PhaseRun) -> PhaseRun:
        """A phase that runs until a condition (build, drain, ...) completed; ``run`` back."""
        self.periods += run.periods
        return run

    def outcomes(self, partial: RunOutcome | None,
                 headline: Callable[[list[RunOutcome]], RunOutcome] | None = None,
                 ) -> tuple[RunOutcome, RunOutcome] | None:
        """The stopped run's (headline, session): the headline is ``headline(rungs)``
        (default the last completed window), else the stopped phase's ``partial``; the
        session holds every period measured, the stopped phase's last. None when nothing
        was measured at all (stopped during the set-up)."""
        if not self.rungs:  # stopped in the first window: it is the whole run
            return None if partial is None else (partial, partial)
        head = (headline or (lambda rungs: rungs[-1]))(self.rungs)
        tail = [*partial.warmup, *partial.periods] if partial is not None else []
        session = replace(head, warmup=[], periods=[*self.periods, *tail],
                          begin_time=self.rungs[0].begin_time,
                          end_time=partial.end_time if partial is not None else head.end_time)
        return head, session


def nothing_measured(plan: RunPlan) -> RunOutcome:
    """The outcome of a run stopped before its first period: no periods, no figures."""
    from datetime import UTC, datetime

    from pytest_brokerperf.engine.delivery import DeliveryReport
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import METRICS

    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    return RunOutcome(
        plan=plan, topics=[], subscriptions=[], warmup=[], warmup_steady=False, periods=[],
        cumulative={m: LatencyHistogram.for_metric(m) for m in METRICS},
        delivery=DeliveryReport(acknowledged=0), totals={}, begin_time=now, end_time=now,
        measure_begin_time=now, probe_wait_s=0.0)


@contextmanager
def record_if_stopped(ctx: RunContext, log: PhaseLog,
                      measured: Callable[..., Measured], *,
                      sampler: BrokerMetricsSampler | None = None,
                      headline: Callable[[list[RunOutcome]], RunOutcome] | None = None,
                      before_measuring: RunPlan | None = None,
                      ) -> Iterator[None]:
    """Inside, a ``BrokerDied`` or an interrupt (Ctrl-C, SIGTERM) writes the run's record
    before it propagates: ``measured(headline=, session=, verdict=)`` is the scenario's
    :class:`~pytest_brokerperf.scenario_library.finish.Measured` for the periods measured
    until then (``functools.partial(Measured, prepared=..., ...)`` will do; the verdict
    is a placeholder the record's writer replaces); ``sampler`` is stopped first (its
    readings go into the record). A plain ``KeyboardInterrupt`` propagates as
    ``RunInterrupted``.

    ``before_measuring`` (the run's plan) wraps a step before the run's first period,
    such as the throughput run's calibration: whatever the step itself measured is not
    the run's, so the record has no periods and no figures, only the stop and where."""
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.scenario_library.finish import (
        INTERRUPTED,
        finish_failed,
        finish_interrupted,
    )

    def stopped(exc: BrokerDied | RunInterrupted) -> Measured | None:
        if sampler is not None:
            sampler.stop()  # its thread ends with the run; stopping twice is harmless
        if before_measuring is not None:
            empty = nothing_measured(before_measuring)
            got: tuple[RunOutcome, RunOutcome] | None = (empty, empty)
        else:
            got = log.outcomes(exc.partial, headline)
        if got is None:
            return None
        head, session = got
        try:
            m = measured(headline=head, session=session, verdict=Verdict(status=INTERRUPTED))
        except Exception as build_exc:  # the stop is the story: say the record is missing
            exc.add_note(f"brokerperf: the stopped run's record could not be made: "
                         f"{build_exc!r}")
            return None
        m.sampler = sampler
        return m

    try:
        yield
    except BrokerDied as exc:
        m = stopped(exc)
        if m is not None:
            finish_failed(ctx, m, exc, phase=log.now)
        raise
    except KeyboardInterrupt as exc:
        stop = RunInterrupted.of(exc)
        m = stopped(stop)
        if m is not None:
            finish_interrupted(ctx, m, stop, phase=log.now)
        if stop is exc:
            raise
        raise stop from exc
