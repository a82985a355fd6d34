"""Running the throughput scenario: calibrate, climb the ladder (or run OMB's rate
discovery), judge, and write the results.

Called by :meth:`pytest_brokerperf.scenario_library.throughput.Throughput.execute`. One
session of topics and worker processes runs every rung (setup once → per rung: set rate,
settle, measure, judge → teardown); the ladder stops at the first rung that is not
sustainable, or reports "limit not reached". The JSONL record is the usual
one (its top-level figures are the highest sustainable rung's) plus ``ladder``,
``throughput`` and ``calibration`` fields; the artefact directory adds ``ladder.csv``,
``calibration.json`` and one OMB result per rung under ``rungs/``.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.engine.plan import Rung
from pytest_brokerperf.judge import ladder as lad
from pytest_brokerperf.judge.verdict import (
    GENERATOR_BOUND,
    HOST_NOISE,
    Verdict,
    noise_note,
)
from pytest_brokerperf.results import ladder as ladres
from pytest_brokerperf.scenario_library.base import (
    PreparedRun,
    Scenario,
    ScenarioResult,
)
from pytest_brokerperf.scenario_library.finish import (
    JUNIT_FIGURES,
    Measured,
    finish,
    short_params,
)
from pytest_brokerperf.scenario_library.stopped import CALIBRATION, SESSION_END, SET_UP
from pytest_brokerperf.scenario_library.throughput_judge import (
    broker_per_rung,
    ceiling_dict,
    judge,
    ladder_verdict,
    plan_workers,
    progress_rung,
    write_ladder_csv,
)

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.plan import RunOutcome, RunPlan
    from pytest_brokerperf.engine.rate_controller import DiscoveryLoop
    from pytest_brokerperf.judge.calibration import Ceiling
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.results.record import ScenarioBlocks
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.session import RunSession

__all__ = ["LADDER", "RATE_DISCOVERY", "THROUGHPUT_MODES",
           "ThroughputPrepared", "ThroughputResult", "run_throughput"]

LADDER = "ladder"
RATE_DISCOVERY = "omb-rate-discovery"
THROUGHPUT_MODES = (LADDER, RATE_DISCOVERY)


@dataclass
class ThroughputPrepared(PreparedRun):
    """A throughput scenario resolved against the settings.

    ``rate``/``warmup_s``/``measure_s`` of the base class are the top rung's rate and
    the per-rung warm-up cap and measured window (ladder), or the fixed warm-up and
    measured window of OMB's rate discovery.
    """

    mode: str = LADDER
    rates: tuple[float, ...] = ()
    warmup_until_steady: bool = True
    policy: lad.LadderPolicy | None = None


@dataclass
class ThroughputResult(ScenarioResult):
    """A throughput run: the usual result (headline = highest sustainable rung) plus the
    ladder (or the rate-discovery log) and the calibration it used."""

    ladder: ladres.LadderResult | None = None
    discovery: dict[str, Any] | None = None
    calibration: dict[str, Any] = field(default_factory=dict)
    rung_outcomes: list[RunOutcome] = field(default_factory=list)


# ------------------------------------------------------------------------------ helpers


def _calibrate(ctx: RunContext, driver: Driver, prepared: ThroughputPrepared,
               cpus: tuple[int, ...] | None, prefix: str) -> dict[str, Any]:
    """The harness and driver ceilings (cached per machine and version)."""
    from pytest_brokerperf.brokers import HARNESS, harness_driver
    from pytest_brokerperf.judge.calibration import (
        DRIVER_START_RATE,
        HARNESS_START_RATE,
        cached_or_measured,
    )

    mode = ctx.settings.calibration
    wl = prepared.workload
    out: dict[str, Any] = {"mode": mode, "harness": None, "driver": None, "notes": []}
    if mode == "off":
        out["notes"].append("calibration off (--brokerperf-calibration=off): no per-process "
                            "ceilings; rungs are judged from CPU, run-queue, queue and lag "
                            "signals only")
        return out
    cache = ctx.session_info.setdefault("calibration", {})

    def get(target: str, drv: Driver, broker_kind: str, version: str) -> Ceiling | None:
        memo = (target, drv.kind, drv.name, version, wl.message_size, wl.partitions_per_topic)
        if memo in cache:
            return cache[memo]
        c = cached_or_measured(
            drv, target=target, broker=broker_kind, broker_version=version,
            message_size=wl.message_size, partitions=wl.partitions_per_topic,
            generator_cpus=cpus, mode=mode, progress=ctx.progress,
            topic_prefix=f"{prefix}-cal-{target}",
            # the user's steal limit holds for calibration steps as for rungs
            policy=lad.LadderPolicy(steal_share=ctx.settings.max_steal / 100),
            start_rate=HARNESS_START_RATE if target == "harness" else DRIVER_START_RATE,
        )
        cache[memo] = c
        return c

    harness = get("harness", harness_driver(wl.partitions_per_topic), HARNESS, "in-process")
    out["harness"] = harness
    if ctx.broker_type.capabilities.harness_only:
        out["driver"] = harness
    elif ctx.broker.mode == "remote":
        out["notes"].append("no driver calibration against a remote cluster (it would add "
                            "load the run's caps do not cover); harness ceiling only")
    else:
        out["driver"] = get("driver", driver, ctx.broker.kind, ctx.broker.version)
    return out


def _session_outcome(rungs: list[RunOutcome], headline: RunOutcome, end: Any) -> RunOutcome:
    """One outcome spanning the whole session (every rung's periods in order), for the
    shared artefacts (periods.csv, hlogs, manifest); figures stay the headline's."""
    periods = [p for r in rungs for p in (*r.warmup, *r.periods)]
    return replace(headline, warmup=[], periods=periods, begin_time=end.begin_time,
                   end_time=end.end_time, measure_begin_time=rungs[0].begin_time,
                   worker_errors=list(end.worker_errors))


# ------------------------------------------------------------------------------ main


def run_throughput(ctx: RunContext, scenario: Scenario,
                   extra_slos: tuple[str, ...]) -> ThroughputResult:
    """Run ``scenario`` on ``ctx``'s broker; judge it; write record and artefacts."""
    from pytest_brokerperf.scenario_library.session import RunSession

    prepared = scenario.prepare(ctx.settings, ctx.broker)
    if not isinstance(prepared, ThroughputPrepared):
        raise TypeError(f"{type(scenario).__name__}.prepare() must return ThroughputPrepared "
                        f"to run as a throughput scenario, got {type(prepared).__name__}")
    run = RunSession(ctx, scenario, extra_slos, prepared=prepared,
                            driver_for="throughput")
    discovery = prepared.mode == RATE_DISCOVERY
    n_rungs = max(1, len(prepared.rates))
    # The safety plan, worst case: every rung at the top rate (nothing created yet).
    guard_plan = replace(run.plan, warmup_max_s=prepared.warmup_s * n_rungs,
                         measure_s=prepared.measure_s * n_rungs, workers=1)
    # prints, refuses over a cap, stops here in a dry run
    run.guard(plan=guard_plan, label=prepared.scenario, show=lambda: discovery)
    sized = _size(run, prepared, guard_plan, discovery)
    run.plan = replace(guard_plan, rate=prepared.rate, warmup_max_s=prepared.warmup_s,
                       measure_s=prepared.measure_s, workers=sized.workers)
    run.log.enter(SET_UP)
    if discovery:
        return _run_discovery(run, prepared, sized)
    return _run_ladder(run, prepared, sized)


@dataclass
class _Sizing:
    """The calibrated ceilings and the worker processes a throughput run got."""

    workers: int
    producing: int  # worker processes that produce
    policy: lad.LadderPolicy
    harness_ceiling: float | None
    client_ceiling: float | None
    refuse_above: float | None  # no rung above this rate (the harness would be measured)
    ceilings_doc: dict[str, Any]  # the record's ``calibration`` block


def _size(run: RunSession, prepared: ThroughputPrepared, guard_plan: RunPlan,
          discovery: bool) -> _Sizing:
    """Calibrate (a stop in it leaves a record with no figures), size the worker pool
    and give every worker process producers and consumers."""
    ctx = run.ctx
    run.log.enter(CALIBRATION)
    with run.stopped_records(partial(_calibration_stopped, run), record_sampler=False,
                             before_measuring=guard_plan):
        calib = _calibrate(ctx, run.driver, prepared, run.generator_cpus,
                           guard_plan.topic_prefix)
    harness: Ceiling | None = calib["harness"]
    drv_c: Ceiling | None = calib["driver"]
    harness_ceiling = harness.rate_msg_s if harness is not None and harness.bound == "client" \
        else None
    client_ceiling = drv_c.client_ceiling if drv_c is not None else None
    known = [c for c in (harness, drv_c) if c is not None and c.sizing_rate]
    used = min(known, key=lambda c: c.sizing_rate or 0.0) if known else None
    per_process = used.sizing_rate if used is not None else None
    # OMB's controller may climb anywhere: give it every generator CPU
    sizing = plan_workers(None if discovery else prepared.rate, per_process=per_process,
                          cpus=run.generator_cpus, requested=ctx.settings.workers,
                          source=(f"calibration ({used.target} {used.driver}, bound "
                                  f"{used.bound})" if used is not None else None),
                          topic_limit=(prepared.workload.topics
                                       if getattr(run.driver, "TOPIC_IN_ONE_WORKER", False)
                                       else None))
    workers = sizing.workers
    ctx.progress(f"brokerperf: {sizing.describe()}")
    wl = prepared.workload
    if wl.total_producers < workers or wl.total_consumers < workers:
        subs = max(1, wl.topics * wl.subscriptions_per_topic)
        wl = wl.replace(
            producers_per_topic=max(wl.producers_per_topic, math.ceil(workers / wl.topics)),
            consumer_per_subscription=max(wl.consumer_per_subscription,
                                          math.ceil(workers / subs)))
        prepared.notes.append(
            f"{workers} worker processes: producers per topic raised to "
            f"{wl.producers_per_topic} and consumers per subscription to "
            f"{wl.consumer_per_subscription} so every process generates and consumes")
        prepared.workload = wl
        prepared.params.update(producers=wl.total_producers, consumers=wl.total_consumers)
    producing = min(workers, wl.total_producers)
    policy = replace(prepared.policy or lad.LadderPolicy(),
                     steal_share=ctx.settings.max_steal / 100)
    refuse_above = (policy.refuse_factor * producing * harness_ceiling
                    if harness_ceiling else None)
    ceilings_doc = {
        "mode": calib["mode"], "notes": calib["notes"],
        "harness": ceiling_dict(harness), "driver": ceiling_dict(drv_c),
        "harness_ceiling_msg_s": harness_ceiling, "client_ceiling_msg_s": client_ceiling,
        "workers": workers, "producing_workers": producing, "sizing": sizing.as_dict(),
        "generator_capacity_msg_s": per_process * producing if per_process else None,
        "refuse_above_msg_s": refuse_above,
    }
    for c in (harness, drv_c if drv_c is not harness else None):
        if c is not None:
            ctx.progress(f"brokerperf: calibrated ceiling: {c.describe()}")
    return _Sizing(workers=workers, producing=producing, policy=policy,
                   harness_ceiling=harness_ceiling, client_ceiling=client_ceiling,
                   refuse_above=refuse_above, ceilings_doc=ceilings_doc)


def _calibration_stopped(run: RunSession, *, headline: RunOutcome, session: RunOutcome,
                         verdict: Verdict) -> Measured:
    """The record of a run stopped during its calibration: no periods, no figures."""
    from pytest_brokerperf.results.record import ScenarioBlocks

    return _measured(run, headline, session, verdict, None, extra={},
                     record_extra=ScenarioBlocks(), row_params="calibration")


@dataclass
class _Climb:
    """A ladder while it climbs: the judged rungs, each rate's re-measure budgets, and
    the next rung to run (``next_rung``, as :func:`run_rates` asks for it)."""

    run: RunSession
    prepared: ThroughputPrepared
    sized: _Sizing
    results: list[ladres.RungResult] = field(default_factory=list)
    retries_left: dict[float, int] = field(default_factory=dict)
    settle_left: dict[float, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rates = self.prepared.rates
        self.retries_left = {r: self.run.ctx.settings.noise_retries for r in rates}
        self.settle_left = dict.fromkeys(rates, 1)  # an unsteady rung is measured again once

    def next_rung(self, done: list[RunOutcome]) -> Rung | None:
        rates = self.prepared.rates
        rung = self._pick()
        self.run.log.enter(SESSION_END if rung is None else
                           f"rung {rates.index(rung.rate) + 1}/{len(rates)} at "
                           f"{lad.format_rate(rung.rate)} msg/s")
        return rung

    def _rung(self, rate: float, label: str) -> Rung:
        p = self.prepared
        return Rung(rate=rate, warmup_max_s=p.warmup_s, measure_s=p.measure_s,
                    warmup_until_steady=p.warmup_until_steady, label=label)

    def _pick(self) -> Rung | None:
        rates, run, sized = self.prepared.rates, self.run, self.sized
        last = self.results[-1] if self.results else None
        # (a failed rung limited by the host has the verdict host-noise too)
        budget = None
        if last is not None and last.verdict.get("status") == HOST_NOISE:
            budget, why = self.retries_left, ("host-noise: measuring it again "
                                              "(--brokerperf-noise-retries)")
        elif last is not None and last.limit == lad.UNSTEADY:
            budget, why = self.settle_left, ("unsteady (catching up a stall from before "
                                             "its window): measuring it again")
        if last is not None and budget is not None and budget[last.target_rate] > 0:
            # the hypervisor took the CPU during this rung, or the rung was still catching
            # up a stall: its figures say nothing; measure the same rate again instead of
            # ending the ladder on them
            budget[last.target_rate] -= 1
            self.results.pop()
            run.discarded.append(noise_note(
                len(run.discarded) + 1, Verdict(**last.verdict),
                target_rate_msg_s=last.target_rate))
            run.ctx.progress(f"brokerperf: {run.kind} throughput rung {last.index + 1}/"
                             f"{len(rates)} {last.target_rate:,.0f} msg/s is {why}")
            return self._rung(last.target_rate, f"rung{last.index}-again")
        if last is not None and not last.sustainable:
            return None
        k = len(self.results)
        if k >= len(rates):
            return None
        rate = rates[k]
        if sized.refuse_above is not None and rate > sized.refuse_above:
            reason = (f"refused: {rate:,.0f} msg/s is above {sized.policy.refuse_factor:g} x "
                      f"{sized.producing} worker process(es) x the harness's calibrated "
                      f"ceiling {sized.harness_ceiling:,.0f} msg/s: only the generator would "
                      "be measured")
            self.results.append(ladres.RungResult(
                index=k, target_rate=rate, status="refused", signals=None, failures=[reason],
                limit=lad.GENERATOR, limit_reasons=[reason],
                verdict={"status": GENERATOR_BOUND, "reasons": [reason],
                         "flags": [GENERATOR_BOUND], "details": {}}))
            run.ctx.progress(f"brokerperf: {run.kind} throughput rung {k + 1}/{len(rates)} "
                             f"{reason}")
            return None
        return self._rung(rate, f"rung{k}")

    def on_rung(self, out: RunOutcome) -> None:
        sized, wl = self.sized, self.prepared.workload
        rr = judge(out, len(self.results), policy=sized.policy,
                   subscriptions_per_topic=wl.subscriptions_per_topic,
                   producing_workers=sized.producing, harness_ceiling=sized.harness_ceiling,
                   client_ceiling=sized.client_ceiling)
        self.results.append(rr)
        self.run.log.rung_done(out)
        self.run.ctx.progress(progress_rung(self.run.kind, rr, len(self.prepared.rates)))

    def ladder(self, *, ceilings: bool = True) -> ladres.LadderResult:
        if not ceilings:
            return ladres.summarize(self.prepared.rates, list(self.results), self.sized.policy)
        return ladres.summarize(self.prepared.rates, list(self.results), self.sized.policy,
                                workers=self.run.plan.workers,
                                ceilings=self.sized.ceilings_doc)

    def top_rung(self, rungs: list[RunOutcome]) -> RunOutcome:
        top = self.ladder(ceilings=False).top_rung
        by_rate = {o.plan.rate: o for o in rungs}
        return by_rate.get(top.target_rate, rungs[0]) if top is not None else rungs[0]

    def measured(self, headline: RunOutcome, session: RunOutcome, verdict: Verdict, *,
                 rungs: list[RunOutcome], stopped: str | None = None,
                 ladder: ladres.LadderResult | None = None) -> Measured:
        ladder = ladder or self.ladder()
        extra, blocks = _ladder_blocks(ladder, self.run.discarded, self.sized.ceilings_doc,
                                       stopped=stopped)
        return _measured(self.run, headline, session, verdict, self.run.sampler, extra=extra,
                         record_extra=blocks, ladder=ladder, rung_outcomes=rungs,
                         calibration=self.sized.ceilings_doc, row_params=self.row_params)

    @property
    def row_params(self) -> str:
        rates = self.prepared.rates
        return f"ladder {lad.format_rate(rates[0])}..{lad.format_rate(rates[-1])}"

    def until_stop(self, *, headline: RunOutcome, session: RunOutcome,
                   verdict: Verdict) -> Measured:
        # the completed rungs, judged; the one it stopped in is in the periods only
        return self.measured(headline, session, verdict, rungs=self.run.log.rungs,
                             stopped=self.run.log.now)


def _run_ladder(run: RunSession, prepared: ThroughputPrepared,
                sized: _Sizing) -> ThroughputResult:
    from pytest_brokerperf.engine.coordinator import run_rates

    rates, plan = prepared.rates, run.plan
    if sized.refuse_above is not None and rates[0] > sized.refuse_above:
        pytest.fail(
            f"REFUSED before anything was created: the lowest rung {rates[0]:,.0f} msg/s is "
            f"above {sized.policy.refuse_factor:g} x {sized.producing} worker process(es) x "
            f"the harness's calibrated ceiling {sized.harness_ceiling:,.0f} msg/s; lower "
            "--brokerperf-ladder", pytrace=False)
    wl = prepared.workload
    run.ctx.progress(
        f"brokerperf: {run.kind} throughput ladder "
        f"{','.join(lad.format_rate(r) for r in rates)} msg/s: per rung warm-up"
        f"{'≤' if prepared.warmup_until_steady else '='}{prepared.warmup_s:g}s measure="
        f"{prepared.measure_s:g}s period={prepared.period_s:g}s workers={plan.workers} "
        f"size={wl.message_size}B partitions={wl.partitions_per_topic}")
    climb = _Climb(run, prepared, sized)
    with run.sampling(), run.stopped_records(climb.until_stop, headline=climb.top_rung):
        rungs, end = run_rates(run.driver, wl, plan, climb.next_rung,
                               payloads=run.payloads, on_period=run.watch,
                               on_rung=climb.on_rung)
    if run.sampler is not None:
        with contextlib.suppress(Exception):
            run.sampler.stop()
        broker_per_rung(run.sampler, rungs, climb.results)
    ladder = climb.ladder()
    run.note_discarded()
    headline = climb.top_rung(rungs)
    run.ctx.progress(f"brokerperf: {run.kind} throughput: {ladder.summary()}"
                     + (f"; knee {ladder.knee.rate_msg_s:,.0f} msg/s"
                        if ladder.knee and ladder.knee.rate_msg_s else ""))
    m = climb.measured(headline, _session_outcome(rungs, headline, end),
                       ladder_verdict(ladder), rungs=rungs, ladder=ladder)
    return _finish(run.ctx, m, ladder=ladder, rung_outcomes=rungs,
                   calibration=sized.ceilings_doc)


def _ladder_blocks(ladder: ladres.LadderResult, discarded: list[dict[str, Any]],
                   ceilings_doc: dict[str, Any], *, stopped: str | None = None,
                   ) -> tuple[dict[str, float | None], ScenarioBlocks]:
    """The ladder's SLO-checkable figures and record blocks; a ladder ``stopped`` part-way
    (a broker death, Ctrl-C) has the outcome ``stopped`` and says in which phase."""
    extra: dict[str, float | None] = {
        "max_sustainable_rate": ladder.highest_sustainable_rate,
        "knee_rate": ladder.knee.rate_msg_s if ladder.knee else None,
    }
    summary = ladder.summary()
    throughput_doc: dict[str, Any] = {
        "mode": "ladder", "label": "ladder",
        "highest_sustainable_rate_msg_s": ladder.highest_sustainable_rate,
        "limit": ladder.limit, "outcome": ladder.outcome,
        "limit_rate_msg_s": ladder.limit_rate, "summary": summary,
    }
    ladder_doc = {**ladder.as_dict(), "noise_retries": discarded, "stopped_during": stopped}
    if stopped is not None:
        done = len([r for r in ladder.rungs if r.measured])
        summary = (f"stopped during {stopped} after {done} completed rung(s); highest "
                   "sustainable so far "
                   + (f"{ladder.highest_sustainable_rate:,.0f} msg/s"
                      if ladder.highest_sustainable_rate is not None else "none"))
        for doc in (throughput_doc, ladder_doc):
            doc.update(outcome="stopped", summary=summary)
    return extra, {"ladder": ladder_doc, "throughput": throughput_doc,
                   "calibration": ceilings_doc, "rate_discovery": None}


def _run_discovery(run: RunSession, prepared: ThroughputPrepared,
                   sized: _Sizing) -> ThroughputResult:
    from pytest_brokerperf.engine.rate_controller import (
        CONTROL_PERIOD_S,
        INITIAL_RATE,
        LABEL,
        DiscoveryLoop,
        RateController,
        RateControllerLimits,
    )

    limits = RateControllerLimits.from_env()
    loop = DiscoveryLoop(RateController(limits), INITIAL_RATE, CONTROL_PERIOD_S)
    ctx, ceilings_doc = run.ctx, sized.ceilings_doc
    ctx.progress(
        f"brokerperf: {run.kind} throughput {LABEL}: start {INITIAL_RATE:,.0f} msg/s, "
        f"control every {CONTROL_PERIOD_S:g}s, warm-up={prepared.warmup_s:g}s "
        f"measure={prepared.measure_s:g}s workers={run.plan.workers} limits {asdict(limits)}")

    def measured(out: RunOutcome, session: RunOutcome, verdict: Verdict,
                 stopped: str | None = None) -> Measured:
        # no broker metrics in a rate discovery's record (as before the shared session)
        extra, record_extra, _ = _discovery_blocks(out, loop, ceilings_doc, stopped)
        return _measured(run, out, session, verdict, None, extra=extra,
                         record_extra=record_extra, rung_outcomes=[out],
                         calibration=ceilings_doc, row_params=LABEL, steps_csv=loop.steps)

    def until_stop(*, headline: RunOutcome, session: RunOutcome,
                   verdict: Verdict) -> Measured:
        return measured(headline, session, verdict, stopped=run.log.now)

    with run.load(until_stop, record_sampler=False) as session:
        run.log.enter("the rate-discovery window")
        out = run.log.rung_done(session.run_rung(
            Rung(INITIAL_RATE, prepared.warmup_s, prepared.measure_s,
                 warmup_until_steady=False, label=LABEL), on_wait=loop.poll))
        end = run.end(session)
        end.apply(out)
        out.begin_time = end.begin_time
    verdict = run.assess(out)
    verdict.details["target_rate"] = None
    verdict.details["note"] = ("omb-rate-discovery: the target changes every 3 s, so the "
                               "measured window mixes rates")
    doc = _discovery_blocks(out, loop, ceilings_doc)[2]
    ctx.progress(f"brokerperf: {run.kind} throughput {LABEL}: measured "
                 f"{out.ack_rate:,.0f} msg/s acknowledged, controller at {loop.rate:,.0f} "
                 f"msg/s after {len(loop.steps)} steps")
    prepared.rate = out.ack_rate
    return _finish(ctx, measured(out, out, verdict), discovery=doc, rung_outcomes=[out],
                   calibration=ceilings_doc)


def _discovery_blocks(out: RunOutcome, loop: DiscoveryLoop, ceilings_doc: dict[str, Any],
                      stopped: str | None = None,
                      ) -> tuple[dict[str, float | None], ScenarioBlocks, dict[str, Any]]:
    """A rate discovery's SLO-checkable figures, record blocks and ``rate_discovery``
    block; one ``stopped`` part-way says in which phase."""
    from pytest_brokerperf.engine.rate_controller import (
        CONTROL_PERIOD_S,
        INITIAL_RATE,
        LABEL,
    )

    measured_rate = out.ack_rate
    doc = {
        "label": LABEL, "control_period_s": CONTROL_PERIOD_S,
        "initial_rate_msg_s": INITIAL_RATE, "limits": asdict(loop.controller.limits),
        "steps": loop.steps, "final_rate_msg_s": loop.rate,
        "measured_ack_rate_msg_s": measured_rate,
        "measured_publish_rate_msg_s": [p.publish_rate for p in out.periods],
        "note": "OMB's RateController (PR #329) reproduced: the figure is the measured "
                "window's acknowledged rate while the controller keeps adjusting; it is "
                "not a ladder result",
    }
    summary = f"{LABEL}: {measured_rate:,.0f} msg/s acknowledged in the measured window"
    throughput_doc = {
        "mode": LABEL, "label": LABEL, "highest_sustainable_rate_msg_s": measured_rate,
        "limit": None, "outcome": LABEL if stopped is None else "stopped",
        "limit_rate_msg_s": None,
        "summary": summary if stopped is None else f"stopped during {stopped}; {summary}",
    }
    return ({"max_sustainable_rate": measured_rate, "knee_rate": None},
            {"ladder": None, "throughput": throughput_doc, "calibration": ceilings_doc,
             "rate_discovery": doc}, doc)


def _measured(run: RunSession, headline: RunOutcome, session_outcome: RunOutcome,
              verdict: Verdict, sampler: BrokerMetricsSampler | None, *,
              extra: dict[str, float | None], record_extra: ScenarioBlocks,
              ladder: ladres.LadderResult | None = None,
              rung_outcomes: list[RunOutcome] | None = None,
              calibration: dict[str, Any] | None = None, row_params: str = "",
              steps_csv: list[dict[str, Any]] | None = None) -> Measured:
    """What the throughput run hands the scenarios' common
    :func:`~pytest_brokerperf.scenario_library.finish.finish`: its figures, blocks and
    own artefacts (``ladder.csv``, ``rungs/``, ``calibration.json``)."""
    from pytest_brokerperf.results.omb import default_result_filename

    prepared = run.prepared
    assert isinstance(prepared, ThroughputPrepared)
    stem = prepared.workload_file.stem if prepared.workload_file else prepared.scenario
    driver_name = run.driver.name
    now = datetime.now()

    def write_extra(directory: Path, omb_for: Any) -> None:
        if ladder is not None:
            write_ladder_csv(directory / "ladder.csv", ladder)
            rungs_dir = directory / "rungs"
            for out in rung_outcomes or []:
                k = next((r.index for r in ladder.rungs if r.target_rate == out.plan.rate), 0)
                d = rungs_dir / f"{k + 1:02d}-{lad.format_rate(out.plan.rate)}"
                d.mkdir(parents=True, exist_ok=True)
                (d / default_result_filename(stem, driver_name, now)).write_text(
                    json.dumps(omb_for(out), indent=2, allow_nan=False))
        if steps_csv is not None:
            with open(directory / "rate-discovery.csv", "w", newline="",
                      encoding="utf-8") as fh:
                keys = ["t_s", "period_s", "rate_msg_s", "total_published", "total_received",
                        "next_rate_msg_s", "applied_rate_msg_s", "ramping_factor", "reason"]
                w = csv.DictWriter(fh, fieldnames=keys)
                w.writeheader()
                for step in steps_csv:
                    w.writerow(step)
        (directory / "calibration.json").write_text(json.dumps(calibration or {}, indent=2,
                                                               default=str))

    extra_props: list[tuple[str, object]] = []
    if ladder is not None:
        extra_props += [("brokerperf.limit", ladder.limit),
                        ("brokerperf.ladder_outcome", ladder.outcome)]
    return run.measured(
        headline, verdict, sampler=sampler, session=session_outcome, extra_figures=extra,
        record_extra={**record_extra,
                      "target_rate_msg_s": headline.plan.rate if ladder is not None else None},
        noise_retries=list(run.discarded),
        summary_scenario=(prepared.scenario if ladder is not None
                          else f"{prepared.scenario}[{prepared.mode}]"),
        summary_params=f"{short_params(prepared.params, with_rate=False)} {row_params}",
        junit_figures=("max_sustainable_rate", "knee_rate", *JUNIT_FIGURES),
        extra_properties=extra_props, write_extra=write_extra)


def _finish(ctx: RunContext, m: Measured, *, ladder: ladres.LadderResult | None = None,
            discovery: dict[str, Any] | None = None,
            rung_outcomes: list[RunOutcome] | None = None,
            calibration: dict[str, Any] | None = None) -> ThroughputResult:
    """The record (:func:`~pytest_brokerperf.scenario_library.finish.finish`) and the
    ladder row of a throughput run that ran to its end."""
    from pytest_brokerperf.results.summary_rows import LadderRow

    base = finish(ctx, m)
    verdict, extra, headline, prepared = m.verdict, m.extra_figures, m.headline, m.prepared
    assert isinstance(prepared, ThroughputPrepared)
    if ladder is not None:
        top = ladder.top_rung
        cpu_top = (max(top.signals.worker_cpu.values(), default=0.0)
                   if top is not None and top.signals else None)
        ctx.add_ladder_row(LadderRow(
            nodeid=ctx.test_id, broker=ctx.broker.kind, mode="ladder",
            rungs=" ".join(("+" if r.sustainable else ("x" if r.measured else "-"))
                           + lad.format_rate(r.target_rate) for r in ladder.rungs),
            highest=ladder.highest_sustainable_rate,
            highest_mib_s=(top.publish_mib_s if top is not None else None),
            limit=ladder.limit if ladder.outcome != "limit-not-reached" else (
                f"not reached at {lad.format_rate(ladder.rates[-1])}"),
            limit_rate=ladder.limit_rate, knee=ladder.knee.rate_msg_s if ladder.knee else None,
            cpu_top=cpu_top, verdict=verdict.status))
    else:
        ctx.add_ladder_row(LadderRow(
            nodeid=ctx.test_id, broker=ctx.broker.kind, mode=prepared.mode,
            rungs="(controller)", highest=extra.get("max_sustainable_rate"),
            highest_mib_s=headline.publish_mib_s, limit="n/a (omb-rate-discovery)",
            limit_rate=None, knee=None, cpu_top=None, verdict=verdict.status))
    return ThroughputResult(
        **{f.name: getattr(base, f.name) for f in fields(ScenarioResult)},
        ladder=ladder, discovery=discovery, calibration=calibration or {},
        rung_outcomes=list(rung_outcomes or []),
    )
