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
import os
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.judge import ladder as lad
from pytest_brokerperf.judge.verdict import (
    GENERATOR_BOUND,
    HOST_NOISE,
    Thresholds,
    Verdict,
    assess,
    discarded_windows_note,
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
    from pytest_brokerperf.judge.calibration import Ceiling
    from pytest_brokerperf.judge.slo import SLO
    from pytest_brokerperf.results.record import ScenarioBlocks
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.safety import ScenarioPlan

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
    from pytest_brokerperf.judge.calibration import cached_or_measured

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
    from pytest_brokerperf.engine.coordinator import default_generator_cpus
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.scenario_library import safety
    from pytest_brokerperf.scenario_library.setup import PeriodWatch, broker_sampler

    settings, broker = ctx.settings, ctx.broker
    prepared = scenario.prepare(settings, broker)
    if not isinstance(prepared, ThroughputPrepared):
        raise TypeError(f"{type(scenario).__name__}.prepare() must return ThroughputPrepared "
                        f"to run as a throughput scenario, got {type(prepared).__name__}")
    slos = ctx.slos_for(prepared, (*scenario.slos, *extra_slos))
    seed = int.from_bytes(os.urandom(4), "little")
    driver = ctx.broker_type.create_driver(
        broker, prepared.driver_file, scenario="throughput",
        stats_interval_ms=max(1000, int(prepared.period_s * 1000)))
    cpus = default_generator_cpus(broker.broker_cpus())
    test_id = ctx.test_id
    prefix = safety.topic_prefix(settings, prepared.scenario, test_id)
    discovery = prepared.mode == RATE_DISCOVERY
    n_rungs = max(1, len(prepared.rates))
    # The safety plan, worst case: every rung at the top rate (nothing created yet).
    guard_plan = RunPlan(
        rate=prepared.rate, period_s=prepared.period_s,
        warmup_max_s=prepared.warmup_s * n_rungs, measure_s=prepared.measure_s * n_rungs,
        workers=1, topic_prefix=prefix, keep_topics=settings.keep_topics,
        generator_cpus=cpus, seed=seed,
    )
    driver, safety_notes = safety.safe_driver(driver, settings, broker, prepared, guard_plan)
    prepared.notes.extend(safety_notes)
    splan = safety.build_plan(settings, broker, prepared, driver, guard_plan, test_id=test_id)
    ctx.guard(splan)  # prints, refuses over a cap, stops here in a dry run

    from pytest_brokerperf.results.record import ScenarioBlocks
    from pytest_brokerperf.scenario_library.stopped import (
        CALIBRATION,
        PhaseLog,
        record_if_stopped,
    )

    def calibration_stopped(*, headline: RunOutcome, session: RunOutcome,
                            verdict: Verdict) -> Measured:
        return _measured(ctx, driver, prepared, headline, session, verdict, slos, seed,
                         splan, None, extra={}, record_extra=ScenarioBlocks(),
                         row_params="calibration")

    with record_if_stopped(ctx, PhaseLog(now=CALIBRATION), calibration_stopped,
                           before_measuring=guard_plan):
        calib = _calibrate(ctx, driver, prepared, cpus, prefix)
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
                          cpus=cpus, requested=settings.workers,
                          source=(f"calibration ({used.target} {used.driver}, bound "
                                  f"{used.bound})" if used is not None else None),
                          topic_limit=(prepared.workload.topics
                                       if getattr(driver, "TOPIC_IN_ONE_WORKER", False)
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
    plan = replace(guard_plan, rate=prepared.rate, warmup_max_s=prepared.warmup_s,
                   measure_s=prepared.measure_s, workers=workers)
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

    sampler = broker_sampler(broker, settings)
    on_period = PeriodWatch(ctx, broker.kind, prepared.period_s, splan.max_bytes,
                            sampler=sampler, label=prepared.scenario,
                            show=lambda: discovery)

    payloads = wl.payloads(prepared.workload_file.parent if prepared.workload_file else None,
                           seed=seed)
    if sampler is not None:
        sampler.start()
    try:
        if discovery:
            result = _run_discovery(ctx, driver, prepared, plan, payloads, on_period,
                                    ceilings_doc, slos, seed, splan)
        else:
            result = _run_ladder(ctx, driver, prepared, plan, payloads, on_period, policy,
                                 ceilings_doc, slos, seed, splan, sampler,
                                 harness_ceiling=harness_ceiling,
                                 client_ceiling=client_ceiling, producing=producing,
                                 refuse_above=refuse_above)
    finally:
        if sampler is not None:
            sampler.stop()
    return result


def _run_ladder(ctx: RunContext, driver: Driver, prepared: ThroughputPrepared, plan: RunPlan,
                payloads: list[bytes], on_period: Any, policy: lad.LadderPolicy,
                ceilings_doc: dict[str, Any], slos: list[Any], seed: int, splan: Any,
                sampler: Any, *, harness_ceiling: float | None,
                client_ceiling: float | None, producing: int,
                refuse_above: float | None) -> ThroughputResult:
    from pytest_brokerperf.engine.coordinator import run_rates
    from pytest_brokerperf.engine.plan import Rung
    from pytest_brokerperf.scenario_library.stopped import (
        SESSION_END,
        PhaseLog,
        record_if_stopped,
    )

    broker = ctx.broker
    wl = prepared.workload
    rates = prepared.rates
    if refuse_above is not None and rates[0] > refuse_above:
        pytest.fail(
            f"REFUSED before anything was created: the lowest rung {rates[0]:,.0f} msg/s is "
            f"above {policy.refuse_factor:g} x {producing} worker process(es) x the harness's "
            f"calibrated ceiling {harness_ceiling:,.0f} msg/s; lower --brokerperf-ladder",
            pytrace=False)
    ctx.progress(
        f"brokerperf: {broker.kind} throughput ladder "
        f"{','.join(lad.format_rate(r) for r in rates)} msg/s: per rung warm-up"
        f"{'≤' if prepared.warmup_until_steady else '='}{prepared.warmup_s:g}s measure="
        f"{prepared.measure_s:g}s period={prepared.period_s:g}s workers={plan.workers} "
        f"size={wl.message_size}B partitions={wl.partitions_per_topic}")
    results: list[ladres.RungResult] = []
    discarded: list[dict[str, Any]] = []
    retries_left = {r: ctx.settings.noise_retries for r in rates}
    settle_left = dict.fromkeys(rates, 1)  # an unsteady rung is measured again once
    log = PhaseLog()

    def next_rung(done: list[RunOutcome]) -> Rung | None:
        rung = _next_rung()
        log.enter(SESSION_END if rung is None else
                  f"rung {rates.index(rung.rate) + 1}/{len(rates)} at "
                  f"{lad.format_rate(rung.rate)} msg/s")
        return rung

    def _next_rung() -> Rung | None:
        last = results[-1] if results else None
        # (a failed rung limited by the host has the verdict host-noise too)
        budget = None
        if last is not None and last.verdict.get("status") == HOST_NOISE:
            budget, why = retries_left, ("host-noise: measuring it again "
                                         "(--brokerperf-noise-retries)")
        elif last is not None and last.limit == lad.UNSTEADY:
            budget, why = settle_left, ("unsteady (catching up a stall from before its "
                                        "window): measuring it again")
        if last is not None and budget is not None and budget[last.target_rate] > 0:
            # the hypervisor took the CPU during this rung, or the rung was still catching
            # up a stall: its figures say nothing; measure the same rate again instead of
            # ending the ladder on them
            budget[last.target_rate] -= 1
            results.pop()
            discarded.append(noise_note(
                len(discarded) + 1, Verdict(**last.verdict), target_rate_msg_s=last.target_rate))
            ctx.progress(f"brokerperf: {broker.kind} throughput rung {last.index + 1}/"
                         f"{len(rates)} {last.target_rate:,.0f} msg/s is {why}")
            return Rung(rate=last.target_rate, warmup_max_s=prepared.warmup_s,
                        measure_s=prepared.measure_s,
                        warmup_until_steady=prepared.warmup_until_steady,
                        label=f"rung{last.index}-again")
        if last is not None and not last.sustainable:
            return None
        k = len(results)
        if k >= len(rates):
            return None
        rate = rates[k]
        if refuse_above is not None and rate > refuse_above:
            reason = (f"refused: {rate:,.0f} msg/s is above {policy.refuse_factor:g} x "
                      f"{producing} worker process(es) x the harness's calibrated ceiling "
                      f"{harness_ceiling:,.0f} msg/s: only the generator would be measured")
            results.append(ladres.RungResult(
                index=k, target_rate=rate, status="refused", signals=None, failures=[reason],
                limit=lad.GENERATOR, limit_reasons=[reason],
                verdict={"status": GENERATOR_BOUND, "reasons": [reason],
                         "flags": [GENERATOR_BOUND], "details": {}}))
            ctx.progress(f"brokerperf: {broker.kind} throughput rung {k + 1}/{len(rates)} "
                         f"{reason}")
            return None
        return Rung(rate=rate, warmup_max_s=prepared.warmup_s, measure_s=prepared.measure_s,
                    warmup_until_steady=prepared.warmup_until_steady, label=f"rung{k}")

    def on_rung(out: RunOutcome) -> None:
        rr = judge(out, len(results), policy=policy,
                   subscriptions_per_topic=wl.subscriptions_per_topic,
                   producing_workers=producing, harness_ceiling=harness_ceiling,
                   client_ceiling=client_ceiling)
        results.append(rr)
        log.rung_done(out)
        ctx.progress(progress_rung(broker.kind, rr, len(rates)))

    row_params = f"ladder {lad.format_rate(rates[0])}..{lad.format_rate(rates[-1])}"

    def until_stop(*, headline: RunOutcome, session: RunOutcome,
                   verdict: Verdict) -> Measured:
        # the completed rungs, judged; the one it stopped in is in the periods only
        ladder = ladres.summarize(rates, list(results), policy, workers=plan.workers,
                                  ceilings=ceilings_doc)
        extra, blocks = _ladder_blocks(ladder, discarded, ceilings_doc, stopped=log.now)
        return _measured(ctx, driver, prepared, headline, session, verdict, slos, seed,
                         splan, sampler, extra=extra, record_extra=blocks,
                         noise_retries=discarded, ladder=ladder, rung_outcomes=log.rungs,
                         calibration=ceilings_doc, row_params=row_params)

    def top_rung(rungs: list[RunOutcome]) -> RunOutcome:
        top = ladres.summarize(rates, list(results), policy).top_rung
        by_rate = {o.plan.rate: o for o in rungs}
        return by_rate.get(top.target_rate, rungs[0]) if top is not None else rungs[0]

    with record_if_stopped(ctx, log, until_stop, sampler=sampler, headline=top_rung):
        rungs, end = run_rates(driver, wl, plan, next_rung, payloads=payloads,
                               on_period=on_period, on_rung=on_rung)
    if sampler is not None:
        with contextlib.suppress(Exception):
            sampler.stop()
        broker_per_rung(sampler, rungs, results)
    ladder = ladres.summarize(rates, results, policy, workers=plan.workers, ceilings=ceilings_doc)
    if discarded:
        prepared.notes.append(discarded_windows_note(discarded))
    headline = top_rung(rungs)
    verdict = ladder_verdict(ladder)
    ctx.progress(f"brokerperf: {broker.kind} throughput: {ladder.summary()}"
                 + (f"; knee {ladder.knee.rate_msg_s:,.0f} msg/s"
                    if ladder.knee and ladder.knee.rate_msg_s else ""))
    extra, blocks = _ladder_blocks(ladder, discarded, ceilings_doc)
    return _finish(ctx, _measured(ctx, driver, prepared, headline,
                                  _session_outcome(rungs, headline, end), verdict, slos, seed,
                                  splan, sampler, extra=extra, record_extra=blocks,
                                  noise_retries=discarded, ladder=ladder, rung_outcomes=rungs,
                                  calibration=ceilings_doc, row_params=row_params),
                   ladder=ladder, rung_outcomes=rungs, calibration=ceilings_doc)


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


def _run_discovery(ctx: RunContext, driver: Driver, prepared: ThroughputPrepared,
                   plan: RunPlan, payloads: list[bytes], on_period: Any,
                   ceilings_doc: dict[str, Any], slos: list[Any], seed: int,
                   splan: Any) -> ThroughputResult:
    from dataclasses import asdict

    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import Rung
    from pytest_brokerperf.engine.rate_controller import (
        CONTROL_PERIOD_S,
        INITIAL_RATE,
        LABEL,
        DiscoveryLoop,
        RateController,
        RateControllerLimits,
    )
    from pytest_brokerperf.scenario_library.stopped import (
        SESSION_END,
        PhaseLog,
        record_if_stopped,
    )

    limits = RateControllerLimits.from_env()
    loop = DiscoveryLoop(RateController(limits), INITIAL_RATE, CONTROL_PERIOD_S)
    ctx.progress(
        f"brokerperf: {ctx.broker.kind} throughput {LABEL}: start {INITIAL_RATE:,.0f} msg/s, "
        f"control every {CONTROL_PERIOD_S:g}s, warm-up={prepared.warmup_s:g}s "
        f"measure={prepared.measure_s:g}s workers={plan.workers} limits {asdict(limits)}")
    wl = prepared.workload

    def blocks(out: RunOutcome, stopped: str | None = None
               ) -> tuple[dict[str, float | None], ScenarioBlocks, dict[str, Any]]:
        measured_rate = out.ack_rate
        doc = {
            "label": LABEL, "control_period_s": CONTROL_PERIOD_S,
            "initial_rate_msg_s": INITIAL_RATE, "limits": asdict(limits),
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

    def until_stop(*, headline: RunOutcome, session: RunOutcome,
                   verdict: Verdict) -> Measured:
        extra, record_extra, _ = blocks(headline, stopped=log.now)
        return _measured(ctx, driver, prepared, headline, session, verdict, slos, seed, splan,
                         None, extra=extra, record_extra=record_extra,
                         rung_outcomes=[headline], calibration=ceilings_doc, row_params=LABEL,
                         steps_csv=loop.steps)

    log = PhaseLog()
    with record_if_stopped(ctx, log, until_stop), \
            LoadSession(driver, wl, plan, payloads=payloads, on_period=on_period) as session:
        log.enter("the rate-discovery window")
        out = log.rung_done(session.run_rung(
            Rung(INITIAL_RATE, prepared.warmup_s, prepared.measure_s,
                 warmup_until_steady=False, label=LABEL), on_wait=loop.poll))
        log.enter(SESSION_END)
        end = session.finish()
        end.apply(out)
        out.begin_time = end.begin_time
    verdict = assess(out, Thresholds(steal_share=ctx.settings.max_steal / 100))
    verdict.details["target_rate"] = None
    verdict.details["note"] = ("omb-rate-discovery: the target changes every 3 s, so the "
                               "measured window mixes rates")
    extra, record_extra, doc = blocks(out)
    measured_rate = out.ack_rate
    ctx.progress(f"brokerperf: {ctx.broker.kind} throughput {LABEL}: measured "
                 f"{measured_rate:,.0f} msg/s acknowledged, controller at {loop.rate:,.0f} "
                 f"msg/s after {len(loop.steps)} steps")
    prepared.rate = measured_rate
    return _finish(ctx, _measured(ctx, driver, prepared, out, out, verdict, slos, seed, splan,
                                  None, extra=extra, record_extra=record_extra,
                                  rung_outcomes=[out], calibration=ceilings_doc,
                                  row_params=LABEL, steps_csv=loop.steps),
                   discovery=doc, rung_outcomes=[out], calibration=ceilings_doc)


def _measured(ctx: RunContext, driver: Driver, prepared: ThroughputPrepared,
              headline: RunOutcome, session_outcome: RunOutcome, verdict: Verdict,
              slos: list[SLO], seed: int, splan: ScenarioPlan, sampler: Any, *,
              extra: dict[str, float | None], record_extra: ScenarioBlocks,
              noise_retries: list[dict[str, Any]] | None = None,
              ladder: ladres.LadderResult | None = None,
              rung_outcomes: list[RunOutcome] | None = None,
              calibration: dict[str, Any] | None = None, row_params: str = "",
              steps_csv: list[dict[str, Any]] | None = None) -> Measured:
    """What the throughput run hands the scenarios' common
    :func:`~pytest_brokerperf.scenario_library.finish.finish`: its figures, blocks and
    own artefacts (``ladder.csv``, ``rungs/``, ``calibration.json``)."""
    from pytest_brokerperf.results.omb import default_result_filename

    stem = prepared.workload_file.stem if prepared.workload_file else prepared.scenario
    now = datetime.now()

    def write_extra(directory: Path, omb_for: Any) -> None:
        if ladder is not None:
            write_ladder_csv(directory / "ladder.csv", ladder)
            rungs_dir = directory / "rungs"
            for out in rung_outcomes or []:
                k = next((r.index for r in ladder.rungs if r.target_rate == out.plan.rate), 0)
                d = rungs_dir / f"{k + 1:02d}-{lad.format_rate(out.plan.rate)}"
                d.mkdir(parents=True, exist_ok=True)
                (d / default_result_filename(stem, driver.name, now)).write_text(
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
    return Measured(
        prepared=prepared, driver_name=driver.name, headline=headline, verdict=verdict,
        slos=slos, seed=seed, plan=splan, sampler=sampler, session=session_outcome,
        extra_figures=extra,
        record_extra={**record_extra,
                      "target_rate_msg_s": headline.plan.rate if ladder is not None else None},
        noise_retries=list(noise_retries or []),
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
