"""One scenario's run from its set-up to its record: the part every scenario shares.

A scenario is its ``prepare()``, a short phase script and its figures; everything around
the script lives here once (docs/explanation/architecture.md, "Adding a scenario"):

* :class:`RunSession` itself — prepare, SLOs, payloads, driver, workers, load plan;
* :meth:`RunSession.guard` — the safety-bounded driver, the safety plan over the
  longest the phases may produce, the guard (refusal, dry run), the broker-metrics
  sampler and the per-period watch
  (:class:`~pytest_brokerperf.scenario_library.setup.PeriodWatch`);
* :meth:`RunSession.load` — one load session whose stop (a broker death, Ctrl-C,
  SIGTERM) still writes the record of the phases measured until then
  (:mod:`~pytest_brokerperf.scenario_library.stopped`);
* :meth:`RunSession.window` and :meth:`RunSession.phase` — the phase script's steps,
  logged so a stopped record names the phase; :meth:`RunSession.remeasured` — a window
  the host spoiled measured again within ``--brokerperf-noise-retries``;
* :meth:`RunSession.finish` — the verdict's record, artefacts and summary row
  (:func:`~pytest_brokerperf.scenario_library.finish.finish`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.scenario_library.finish import JUNIT_FIGURES, Measured, finish
from pytest_brokerperf.scenario_library.stopped import SESSION_END, PhaseLog, record_if_stopped

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import PhaseRun, RunOutcome, RunPlan, SessionEnd
    from pytest_brokerperf.judge.slo import SLO
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.base import PreparedRun, Scenario, ScenarioResult
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.safety import ScenarioPlan
    from pytest_brokerperf.scenario_library.setup import PeriodWatch

__all__ = ["RunSession"]

#: ``measured(headline=, session=, verdict=)``: a stopped run's record, as
#: :func:`~pytest_brokerperf.scenario_library.stopped.record_if_stopped` takes it
StoppedMeasured = Callable[..., Measured]


class RunSession:
    """A scenario's run: set up, guarded, loaded through phases, judged and recorded.

    ``driver`` is the run's driver: the one the broker kind made until :meth:`guard`,
    then the safety-bounded one every load uses.
    ``log`` names the phase in progress; ``discarded`` holds the windows measured again.
    ``summary_params`` and ``junit_figures`` are the record's defaults for every
    :class:`~pytest_brokerperf.scenario_library.finish.Measured` this run hands on.
    """

    def __init__(self, ctx: RunContext, scenario: Scenario, extra_slos: tuple[str, ...], *,
                 prepared: PreparedRun | None = None,
                 check_driver: Callable[[Driver], None] | None = None,
                 driver_for: str | None = None, phases: bool = True) -> None:
        """Prepare ``scenario`` on ``ctx``'s broker (unless ``prepared``) and build what its
        load needs: SLOs, payloads, driver, generator CPUs, workers, the load plan.

        The payload seed is random per run and recorded in the plan, so a run can be
        replayed with the same bytes. ``check_driver`` refuses a driver the scenario
        cannot use (before any topic exists); ``driver_for`` is the scenario kind whose
        shipped driver file the broker picks (default the scenario's name); a run of one
        window (``phases=False``) names no phase in a stopped record."""
        from pytest_brokerperf.engine.coordinator import default_generator_cpus
        from pytest_brokerperf.engine.plan import RunPlan
        from pytest_brokerperf.judge.verdict import Thresholds
        from pytest_brokerperf.scenario_library import safety
        from pytest_brokerperf.scenario_library.base import auto_workers

        settings, broker = ctx.settings, ctx.broker
        if prepared is None:
            prepared = scenario.prepare(settings, broker)
        self.ctx, self.scenario, self.prepared = ctx, scenario, prepared
        self.slos: list[SLO] = ctx.slos_for(prepared, (*scenario.slos, *extra_slos))
        wl = prepared.workload
        base_dir = prepared.workload_file.parent if prepared.workload_file else None
        self.seed = int.from_bytes(os.urandom(4), "little")
        self.payloads: list[bytes] = wl.payloads(base_dir, seed=self.seed)
        self.driver: Driver = ctx.broker_type.create_driver(
            broker, prepared.driver_file, scenario=driver_for or prepared.scenario,
            stats_interval_ms=max(1000, int(prepared.period_s * 1000)))
        if check_driver is not None:
            check_driver(self.driver)
        self.generator_cpus = default_generator_cpus(broker.broker_cpus())
        clients = wl.total_producers + wl.total_consumers
        if settings.executor == "spark":  # one generator task per --brokerperf-generators
            from pytest_brokerperf.config.options import DEFAULT_GENERATORS

            self.workers: int = settings.generators or DEFAULT_GENERATORS
        else:
            self.workers = settings.workers or auto_workers(prepared.rate, clients,
                                                            self.generator_cpus)
        self.plan: RunPlan = RunPlan(
            rate=prepared.rate, period_s=prepared.period_s, warmup_max_s=prepared.warmup_s,
            measure_s=prepared.measure_s, workers=self.workers,
            topic_prefix=safety.topic_prefix(settings, prepared.scenario, ctx.test_id),
            keep_topics=settings.keep_topics, generator_cpus=self.generator_cpus,
            seed=self.seed, rate_schedule=prepared.rate_schedule, launcher=ctx.launcher)
        self.splan: ScenarioPlan | None = None
        self.sampler: BrokerMetricsSampler | None = None
        self.watch: PeriodWatch | None = None
        self.log = PhaseLog() if phases else PhaseLog(now=None)
        self.discarded: list[dict[str, Any]] = []
        self.thresholds = Thresholds(steal_share=settings.max_steal / 100)
        self.summary_params: str | None = None
        self.junit_figures: tuple[str, ...] = JUNIT_FIGURES

    @property
    def kind(self) -> str:
        return self.ctx.broker.kind

    # -- before the first message ---------------------------------------------------------

    def guard(self, *, producing_s: float | None = None, plan: RunPlan | None = None,
              cluster_change: str | None = None,
              cluster_changes: tuple[str, ...] | None = None,
              label: Callable[[PeriodStats], str] | str | None = None,
              show: Callable[[], bool] | None = None, sample: bool = True,
              phases: str | None = None) -> PeriodWatch:
        """Bound the driver, build the safety plan and guard it (prints it, refuses it
        over a cap, stops a dry run), then make the sampler and the period watch.

        The safety plan counts ``producing_s`` seconds of measured load (the longest all
        phases may produce) or ``plan``; ``cluster_change`` must be allowed on this
        cluster (``--brokerperf-allow-cluster-changes``); ``label`` names the run in
        progress lines (default ``scenario:phase``); ``phases`` spells out the measured
        load's phases in the printed plan. The period watch back."""
        from pytest_brokerperf.scenario_library import safety
        from pytest_brokerperf.scenario_library.setup import PeriodWatch, broker_sampler

        ctx, prepared = self.ctx, self.prepared
        settings, broker = ctx.settings, ctx.broker
        if plan is None:
            plan = (self.plan if producing_s is None
                    else replace(self.plan, measure_s=producing_s))
        self.driver, notes = safety.safe_driver(self.driver, settings, broker, prepared, plan)
        prepared.notes.extend(notes)
        if cluster_change is not None:
            safety.require_cluster_change(settings, broker, cluster_change)
        self.splan = safety.build_plan(
            settings, broker, prepared, self.driver, plan, test_id=ctx.test_id,
            cluster_changes=(self.scenario.cluster_changes if cluster_changes is None
                             else cluster_changes))
        self.splan.phases = phases
        ctx.guard(self.splan)
        if sample:
            self.sampler = broker_sampler(ctx.broker_type, broker, settings)
        self.watch = PeriodWatch(
            ctx, broker.kind, prepared.period_s, self.splan.max_bytes, sampler=self.sampler,
            label=label if label is not None else lambda p: f"{prepared.scenario}:{p.phase}",
            **({"show": show} if show is not None else {}))
        return self.watch

    # -- the load -------------------------------------------------------------------------

    @contextmanager
    def sampling(self) -> Iterator[BrokerMetricsSampler | None]:
        """The broker-metrics sampler runs inside (stopping it twice is harmless)."""
        sampler = self.sampler
        if sampler is not None:
            sampler.start()
        try:
            yield sampler
        finally:
            if sampler is not None:
                sampler.stop()

    def stopped_records(self, measured: StoppedMeasured | None = None, *,
                        headline: Callable[[list[RunOutcome]], RunOutcome] | None = None,
                        record_sampler: bool = True,
                        before_measuring: RunPlan | None = None,
                        ) -> AbstractContextManager[None]:
        """Inside, a broker death or an interrupt writes the record of what was measured
        until then (``measured``, default :meth:`stopped_measured`) and propagates."""
        return record_if_stopped(self.ctx, self.log, measured or self.stopped_measured,
                                 sampler=self.sampler if record_sampler else None,
                                 headline=headline, before_measuring=before_measuring)

    @contextmanager
    def load(self, measured: StoppedMeasured | None = None, *,
             record_sampler: bool = True) -> Iterator[LoadSession]:
        """One load session (topics, workers, clients) with the sampler running and its
        stopped record armed; the phase script runs inside."""
        from pytest_brokerperf.engine.coordinator import LoadSession

        assert self.watch is not None, "RunSession.guard() comes before the load"
        with self.sampling(), \
                self.stopped_records(measured, record_sampler=record_sampler), \
                LoadSession(self.driver, self.prepared.workload, self.plan,
                            payloads=self.payloads, on_period=self.watch) as s:
            yield s

    def window(self, s: LoadSession, phase: str, *, remeasure: str | None = None,
               ) -> RunOutcome:
        """The fixed-rate window at the run's rate (warm-up, measured); ``remeasure``
        names it in the progress line when the host spoiled it and it runs again."""
        from pytest_brokerperf.engine.plan import Rung

        prepared = self.prepared
        rung = Rung(prepared.rate, prepared.warmup_s, prepared.measure_s,
                    warmup_until_steady=self.ctx.settings.profile_spec.warmup_until_steady)
        self.log.enter(phase)
        if remeasure is None:
            return self.log.rung_done(s.run_rung(rung))
        out, _ = self.remeasured(lambda _n: self.log.rung_done(s.run_rung(rung)),
                                 lambda _n: remeasure)
        return out

    def phase(self, s: LoadSession, name: str, done: Callable[[dict[str, int]], bool],
              timeout_s: float, *, enter: str | None = None,
              begin: Callable[[], object] | None = None) -> PhaseRun:
        """Periods labelled ``name`` until ``done(totals)`` or ``timeout_s``; ``enter``
        is the phase a stopped record names (unless entered already)."""
        if enter is not None:
            self.log.enter(enter)
        return self.log.phase_done(s.run_until(name, done, timeout_s, begin=begin))

    def end(self, s: LoadSession) -> SessionEnd:
        """Producers stopped, consumers caught up, delivery reconciled."""
        self.log.enter(SESSION_END)
        end = s.finish()
        self.note_discarded()
        return end

    def remeasured(self, measure: Callable[[int], RunOutcome], what: Callable[[int], str],
                   ) -> tuple[RunOutcome, Verdict]:
        """``measure(attempt)`` until its window stands (host noise: up to
        ``--brokerperf-noise-retries`` times; unsteady: once); the discarded windows go
        to :attr:`discarded`, each announced as ``what(attempt)``."""
        from pytest_brokerperf.judge.verdict import Remeasure, assess, noise_note

        again = Remeasure(self.ctx.settings.noise_retries)
        attempt = 1
        while True:
            out = measure(attempt)
            verdict = assess(out, self.thresholds)
            why = again.why(verdict, out.warmup_steady, self.prepared.warmup_s)
            if why is None:
                return out, verdict
            self.discarded.append(noise_note(len(self.discarded) + 1, verdict))
            self.ctx.progress(f"brokerperf: {self.kind} {what(attempt)} is {why}")
            attempt += 1

    def note_discarded(self) -> None:
        """The result note naming the windows measured again (none: no note)."""
        from pytest_brokerperf.judge.verdict import discarded_windows_note

        if self.discarded:
            self.prepared.notes.append(discarded_windows_note(self.discarded))

    # -- after the last message -----------------------------------------------------------

    def assess(self, outcome: RunOutcome) -> Verdict:
        """The validity verdict of ``outcome`` (host noise, rate, lag, ...)."""
        from pytest_brokerperf.judge.verdict import assess

        return assess(outcome, self.thresholds)

    @staticmethod
    def joined(before: RunOutcome, end: SessionEnd, *phases: PhaseRun) -> RunOutcome:
        """One outcome spanning the session: ``before``'s figures with every phase's
        periods (periods.csv, hlogs, begin and end times)."""
        periods = [*before.periods, *(p for ph in phases for p in ph.periods)]
        return replace(before, periods=periods, end_time=end.end_time,
                       worker_errors=list(end.worker_errors))

    def measured(self, headline: RunOutcome, verdict: Verdict, **fields: Any) -> Measured:
        """What this run hands :func:`finish`: the run's own fields, ``fields`` over them."""
        assert self.splan is not None, "RunSession.guard() comes before a record"
        base: dict[str, Any] = {
            "prepared": self.prepared, "driver_name": self.driver.name, "slos": self.slos,
            "seed": self.seed, "plan": self.splan, "sampler": self.sampler,
            "noise_retries": self.discarded, "summary_params": self.summary_params,
            "junit_figures": self.junit_figures}
        return Measured(headline=headline, verdict=verdict, **{**base, **fields})

    def stopped_measured(self, *, headline: RunOutcome, session: RunOutcome,
                         verdict: Verdict) -> Measured:
        """A stopped run's record (the stop's writer attaches the sampler)."""
        return self.measured(headline, verdict, session=session, sampler=None)

    def finish(self, headline: RunOutcome, verdict: Verdict, **fields: Any) -> ScenarioResult:
        """Judge the SLOs, write the record and artefacts, add the summary row."""
        return finish(self.ctx, self.measured(headline, verdict, **fields))
