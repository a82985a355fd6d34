"""Tail-read latency: fixed-rate publishing, consumers reading at the tail.

The studies' core latency question (AutoMQ's tail-read runs, Confluent's latency runs):
one measured window at a fixed offered rate after a warm-up that ends when the run is
steady, measured again when the host's steal time spoiled the window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.engine.plan import TOPOLOGY_CHECK_RATE
from pytest_brokerperf.scenario_library.base import (
    PreparedRun,
    Scenario,
    ScenarioResult,
    backlog_problem,
    base_params,
    driver_file,
    key_source,
    resolve_period,
    resolve_workload,
)
from pytest_brokerperf.scenario_library.finish import Measured, finish

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.workload.model import Workload
    from pytest_brokerperf.workload.rate_schedule import RateSchedule

__all__ = ["TOPOLOGY_CHECK_RATE", "TailRead", "fixed_rate_window"]

@dataclass
class TailRead(Scenario):
    """Tail-read latency: fixed-rate publishing, consumers reading at the tail.

    Any field left ``None`` comes from the workload (``--brokerperf-workload`` or the
    shipped ``tail-read-smoke.yaml``) and the profile (durations, rate, period).
    """

    workload: Workload | None = None
    partitions: int | None = None
    message_size: int | None = None
    rate: float | None = None
    producers: int | None = None
    consumers: int | None = None
    subscriptions: int | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()  # extra SLO expressions for this run
    name: str = "tailread"
    takes_faults: ClassVar[bool] = True

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> PreparedRun:
        notes: list[str] = []
        wl, wl_file = resolve_workload(
            settings, given=self.workload, shipped="tail-read-smoke", notes=notes,
            partitions=self.partitions, message_size=self.message_size,
            producers_per_topic=self.producers, consumer_per_subscription=self.consumers,
            subscriptions_per_topic=self.subscriptions)
        problem = backlog_problem(wl, self.name)
        if problem:
            raise ValueError(problem)
        schedule = wl.rate_schedule()
        if schedule is not None:
            given = ("--brokerperf-rate" if settings.rate is not None
                     else "TailRead(rate=...)" if self.rate is not None else None)
            if given is not None:
                raise ValueError(
                    f"{key_source(wl, 'producerRateList')}: producerRateList = "
                    f"{[list(e) for e in wl.producer_rate_list or ()]}: a rate schedule, and "
                    f"{given} sets a fixed rate as well. Fix: drop {given} to follow the "
                    "schedule, or remove producerRateList for a fixed rate"
                )
        rate, period, warmup, measure = fixed_rate_window(
            settings, endpoint, wl, wl_file, self.rate, notes, what="tail-read",
            schedule_peak=schedule.peak if schedule is not None else None)
        if schedule is not None:
            notes.append(schedule_note(schedule, measure))
        wl = wl.replace(producer_rate=round(rate))
        return PreparedRun(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure,
            params=base_params(wl, endpoint, rate), slos=self.sanity_slos(),
            driver_file=driver_file(settings, self.driver_file), notes=notes,
            rate_schedule=schedule,
        )

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        if ctx.fault is not None:
            from pytest_brokerperf.scenario_library.fault_run import run_with_fault

            return run_with_fault(ctx, self, extra_slos)
        return run_fixed_rate(ctx, self, extra_slos)


def schedule_note(schedule: RateSchedule, measure_s: float) -> str:
    """The note a run following producerRateList carries: what the window covers."""
    if schedule.kind == "clock":
        return ("producerRateList: rate by local time of day (AutoMQ), set at the start of "
                "each stats period; the record's workload.rate_schedule has the points")
    later = [t for t, _ in schedule.points if t >= measure_s]
    tail = (f"; the steps at {', '.join(f'{t:g}' for t in later)} s fall after the "
            f"{measure_s:g}-s measured window (--brokerperf-profile=omb runs the file's "
            "durations)") if later else ""
    return ("producerRateList: the measured window follows the rate schedule from its "
            f"start, rate set at the start of each stats period{tail}")


def fixed_rate_window(settings: Settings, endpoint: BrokerEndpoint, wl: Workload,
                      wl_file: Path | None, given_rate: float | None, notes: list[str], *,
                      what: str, schedule_peak: float | None = None,
                      ) -> tuple[float, float, float, float]:
    """A fixed-rate scenario's (rate, period, warm-up cap, measured window) from the
    flags, the scenario's own rate, the workload file (``omb`` profile or a file given
    with ``--brokerperf-workload``) and the profile, in that order. With a rate schedule
    (``schedule_peak``) the rate is the schedule's highest, for sizing and safety."""
    spec = settings.profile_spec
    from_file = settings.profile == "omb"
    if schedule_peak is not None:
        rate = float(schedule_peak)
    elif settings.rate is not None:
        rate = float(settings.rate)
        notes.append(f"rate {rate:g} msg/s from --brokerperf-rate")
    elif given_rate is not None:
        rate = float(given_rate)
    elif from_file or (wl_file is not None and settings.workload is not None):
        rate = float(wl.producer_rate)
    else:
        rate = float(spec.tailread_rate)
        if endpoint.topology_check and rate > TOPOLOGY_CHECK_RATE:
            rate = TOPOLOGY_CHECK_RATE
            notes.append(
                f"rate {rate:g} msg/s instead of the profile's {spec.tailread_rate:g}: "
                f"{endpoint.nodes} broker nodes share this machine (topology check); "
                "--brokerperf-rate sets another"
            )
    if rate <= 0:
        raise ValueError(
            f"the {what} scenario needs a fixed producerRate > 0; producerRate: 0 "
            "(rate discovery) belongs to the throughput scenario"
        )
    period = resolve_period(settings, wl)
    if settings.warmup is not None:
        warmup = float(settings.warmup)
    elif from_file:
        warmup = wl.warmup_s
    else:
        warmup = float(spec.warmup_s)
    if settings.duration is not None:
        measure = float(settings.duration)
    elif from_file:
        measure = wl.duration_s
    else:
        measure = float(spec.measure_s)
        if wl_file is not None and settings.workload is not None:
            notes.append(
                f"durations from profile {settings.profile!r} (warm-up cap {warmup:g} s, "
                f"measured {measure:g} s), not from the workload file; use "
                "--brokerperf-profile=omb to run the file's durations"
            )
    return rate, period, warmup, measure


def run_fixed_rate(ctx: RunContext, scenario: Scenario, extra_slos: tuple[str, ...], *,
                   judge: Callable[[Measured], None] | None = None) -> ScenarioResult:
    """Prepare ``scenario``, guard it, run one fixed-rate window, judge it and record it.

    A window the host spoiled is measured again up to ``--brokerperf-noise-retries``
    times, an unsteady one (still catching up a stall) once, on fresh topics; the
    discarded windows stay in the record's ``noise_retries``. ``judge`` adds the
    scenario's own findings, flags and record blocks to the measured window before it
    is recorded (the soak's growth rule).
    """
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.judge.slo import judged_percentile
    from pytest_brokerperf.scenario_library.session import RunSession
    from pytest_brokerperf.scenario_library.setup import broker_sampler

    settings, broker = ctx.settings, ctx.broker
    run = RunSession(ctx, scenario, extra_slos, phases=False)
    prepared, plan = run.prepared, run.plan
    watch = run.guard(label=prepared.scenario, sample=False)
    ctx.progress(
        f"brokerperf: {broker.kind} {prepared.scenario} rate={prepared.rate:g} msg/s "
        f"warm-up≤{prepared.warmup_s:g}s measure={prepared.measure_s:g}s "
        f"period={prepared.period_s:g}s workers={run.workers}"
    )
    run.thresholds = replace(run.thresholds, publish_delay_q=judged_percentile(run.slos))

    def window(attempt: int) -> RunOutcome:
        run.sampler = watch.sampler = broker_sampler(ctx.broker_type, broker, settings)
        fresh = plan if attempt == 1 else replace(
            plan, topic_prefix=f"{plan.topic_prefix}-m{attempt}")  # fresh topics
        # the sampler stops before a stopped run's record (which has no broker metrics)
        with run.stopped_records(record_sampler=False), run.sampling():
            return run_workload(run.driver, run.prepared.workload, fresh,
                                payloads=run.payloads, on_period=watch)

    outcome, verdict = run.remeasured(
        window, lambda attempt: f"{prepared.scenario}: measured window {attempt}")
    run.note_discarded()
    measured = run.measured(outcome, verdict)
    if judge is not None:
        judge(measured)
    return finish(ctx, measured)
