"""Maximum sustainable throughput: the scenario a user writes, ``Throughput(...)``.

What it resolves to (a ladder of fixed rates, or OMB's rate discovery) and how it runs
live in :mod:`pytest_brokerperf.scenario_library.throughput_run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as _replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.judge import ladder as lad
from pytest_brokerperf.scenario_library.base import (
    Scenario,
    backlog_problem,
    base_params,
    driver_file,
    refuse_rate_schedule,
    resolve_period,
    resolve_workload,
)
from pytest_brokerperf.scenario_library.throughput_run import (
    LADDER,
    RATE_DISCOVERY,
    THROUGHPUT_MODES,
    ThroughputPrepared,
    ThroughputResult,
    run_throughput,
)

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.workload.model import Workload

__all__ = ["Throughput"]


@dataclass
class Throughput(Scenario):
    """Maximum sustainable throughput: a ladder of fixed rates that brackets the limit.

    The studies' first question (Confluent's 10K…1M msg/s ladder): each rung offers a
    fixed rate, settles, is measured and judged sustainable or not from the
    *acknowledged* rate, consumer-lag and client-queue trends and publish delay; the
    ladder climbs until a rung fails (or reports "limit not reached"), and says what
    limited it (generator, client library or broker back-pressure). ``rates`` defaults to
    ``--brokerperf-ladder`` or the profile's scaled ladder; ``mode="omb-rate-discovery"``
    (or ``--brokerperf-rate-discovery``) runs OMB's ``producerRate: 0`` controller instead.
    The workload defaults to OMB's ``max-rate-1-topic-16-partitions-1kb``.
    """

    workload: Workload | None = None
    partitions: int | None = None
    message_size: int | None = None
    rates: tuple[float, ...] | None = None
    mode: str | None = None  # "ladder" | "omb-rate-discovery"; None: options decide
    rung_warmup_s: float | None = None  # per-rung warm-up cap
    rung_measure_s: float | None = None  # per-rung measured window
    tolerance: float | None = None  # acknowledged-rate tolerance (default ±5 %)
    #: a rung is sustainable only with ``rung_latency_metric`` at most this (ms)
    rung_latency_bound_ms: float | None = None
    rung_latency_metric: str = "publish_response.p99"
    policy: lad.LadderPolicy | None = None
    subscriptions: int | None = None
    producers: int | None = None  # per topic (Confluent: 4)
    consumers: int | None = None  # per subscription
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "throughput"

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ThroughputResult:
        """Run the ladder (or rate discovery) on ``ctx``'s broker."""
        return run_throughput(ctx, self, extra_slos)

    def _mode(self, settings: Settings, wl: Workload, notes: list[str]) -> str:
        if self.mode is not None and self.mode not in THROUGHPUT_MODES:
            raise ValueError(f"Throughput(mode={self.mode!r}): expected one of "
                             f"{', '.join(THROUGHPUT_MODES)}")
        if settings.rate_discovery:
            return RATE_DISCOVERY
        if self.mode is not None:
            return self.mode
        if settings.ladder or self.rates:
            return LADDER
        if settings.profile == "omb" and wl.producer_rate == 0:
            notes.append("producerRate 0 under --brokerperf-profile=omb: OMB's rate "
                         "discovery (results labelled omb-rate-discovery)")
            return RATE_DISCOVERY
        return LADDER

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> ThroughputPrepared:
        notes: list[str] = []
        wl, wl_file = resolve_workload(
            settings, given=self.workload, shipped="max-rate-1-topic-16-partitions-1kb",
            notes=notes, partitions=self.partitions, message_size=self.message_size,
            subscriptions_per_topic=self.subscriptions, producers_per_topic=self.producers,
            consumer_per_subscription=self.consumers)
        refuse_rate_schedule(wl, "throughput", "it finds the rate itself (ladder or rate "
                             "discovery)")
        problem = backlog_problem(wl, "throughput")
        if problem:
            raise ValueError(problem)
        mode = self._mode(settings, wl, notes)
        spec = settings.profile_spec
        from_file = settings.profile == "omb"
        if settings.rate is not None:
            notes.append("--brokerperf-rate is ignored by the throughput scenario: its rates "
                         "come from --brokerperf-ladder or the profile")
        period = resolve_period(settings, wl)
        policy = self.policy or lad.LadderPolicy()
        if self.tolerance is not None:
            policy = _replace(policy, rate_tolerance=float(self.tolerance))
        if self.rung_latency_bound_ms is not None:
            view, _, q = self.rung_latency_metric.rpartition(".")
            if view not in lad.RUNG_VIEWS or q not in {f"p{x:g}" for x in lad.RUNG_PERCENTILES}:
                raise ValueError(
                    f"Throughput(rung_latency_metric={self.rung_latency_metric!r}): expected "
                    f"VIEW.pQ with VIEW one of {', '.join(lad.RUNG_VIEWS)} and Q one of "
                    + ", ".join(f"p{x:g}" for x in lad.RUNG_PERCENTILES))
            if self.rung_latency_bound_ms <= 0:
                raise ValueError("Throughput(rung_latency_bound_ms=...) must be > 0 ms, got "
                                 f"{self.rung_latency_bound_ms!r}")
            policy = _replace(policy, latency_bound_us=float(self.rung_latency_bound_ms) * 1000,
                              latency_bound_metric=self.rung_latency_metric)
        if mode == LADDER:
            raw = settings.ladder or self.rates or lad.ladder_rates(settings.profile)
            rates = tuple(sorted({float(r) for r in raw}))
            if not rates or rates[0] <= 0:
                raise ValueError(f"a throughput ladder needs rates > 0 msg/s, got {raw!r}")
            lp = lad.LADDER_PROFILES[settings.profile]
            if settings.warmup is not None:
                warmup = float(settings.warmup)
            elif self.rung_warmup_s is not None:
                warmup = float(self.rung_warmup_s)
            else:
                warmup = wl.warmup_s if lp.warmup_max_s is None else lp.warmup_max_s
            if settings.duration is not None:
                measure = float(settings.duration)
            elif self.rung_measure_s is not None:
                measure = float(self.rung_measure_s)
            else:
                measure = wl.duration_s if lp.measure_s is None else lp.measure_s
            until_steady = lp.warmup_until_steady
            top = rates[-1]
        else:
            from pytest_brokerperf.engine.rate_controller import INITIAL_RATE

            rates = ()
            warmup = float(settings.warmup) if settings.warmup is not None else (
                wl.warmup_s if from_file else float(spec.warmup_s))
            measure = float(settings.duration) if settings.duration is not None else (
                wl.duration_s if from_file else float(spec.measure_s))
            until_steady = False
            top = INITIAL_RATE
        wl = wl.replace(producer_rate=0 if mode == RATE_DISCOVERY else round(top))
        params = {
            **base_params(wl, endpoint, top),
            "mode": mode,
            "ladder": ",".join(lad.format_rate(r) for r in rates) if rates else None,
        }
        return ThroughputPrepared(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=top,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file(settings, self.driver_file),
            notes=notes, mode=mode, rates=rates, warmup_until_steady=until_steady,
            policy=policy,
        )
