"""What every load-running scenario does before its first message and at every period.

Every scenario's run session (:mod:`~pytest_brokerperf.scenario_library.session`) takes
these steps, so a change to one of them (the seed of the payloads, the generator's CPUs,
the byte cap) reaches every scenario:

* :func:`set_up_run` — prepare the scenario, resolve its SLOs, build the payloads and the
  driver, lay out the generator's CPUs and workers, and name the topics;
* :class:`PeriodWatch` — the per-period callback: appends the period to the artefact
  directory, feeds the broker-metrics sampler, stops the run at the byte cap, and prints
  a progress line every ~5 s.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.errors import ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.base import PreparedRun, Scenario
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.slo import SLO
    from pytest_brokerperf.workload import Workload

__all__ = ["PROGRESS_METRICS", "PeriodWatch", "RunSetup", "set_up_run"]

#: The latencies a progress line shows (their p99 since the previous line).
PROGRESS_METRICS = ("publish_response", "e2e_response")


@dataclass
class RunSetup:
    """A scenario's run, resolved and not yet started."""

    prepared: PreparedRun
    slos: list[SLO]
    workload: Workload
    seed: int
    payloads: list[bytes]
    driver: Driver
    generator_cpus: tuple[int, ...] | None
    workers: int
    plan: RunPlan


def set_up_run(ctx: RunContext, scenario: Scenario, extra_slos: tuple[str, ...], *,
               prepared: PreparedRun | None = None,
               check_driver: Callable[[Driver], None] | None = None,
               driver_for: str | None = None) -> RunSetup:
    """Prepare ``scenario`` on ``ctx``'s broker and build everything its load needs.

    The payload seed is random per run and recorded in the plan, so a run can be
    replayed with the same bytes. ``check_driver`` refuses a driver the scenario cannot
    use (before any topic exists); ``driver_for`` is the scenario kind whose shipped
    driver file the broker picks (default the scenario's name).
    """
    from pytest_brokerperf import safety
    from pytest_brokerperf.brokers import create_driver
    from pytest_brokerperf.engine.coordinator import default_generator_cpus
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.scenario_library.base import auto_workers

    settings, broker = ctx.settings, ctx.broker
    if prepared is None:
        prepared = scenario.prepare(settings, broker)
    slos = ctx.slos_for(prepared, (*scenario.slos, *extra_slos))
    wl = prepared.workload
    base_dir = prepared.workload_file.parent if prepared.workload_file else None
    seed = int.from_bytes(os.urandom(4), "little")
    payloads = wl.payloads(base_dir, seed=seed)
    driver = create_driver(broker, prepared.driver_file, driver_for or prepared.scenario,
                           stats_interval_ms=max(1000, int(prepared.period_s * 1000)))
    if check_driver is not None:
        check_driver(driver)
    cpus = default_generator_cpus(broker.broker_cpus())
    clients = wl.total_producers + wl.total_consumers
    workers = settings.workers or auto_workers(prepared.rate, clients, cpus)
    plan = RunPlan(
        rate=prepared.rate, period_s=prepared.period_s, warmup_max_s=prepared.warmup_s,
        measure_s=prepared.measure_s, workers=workers,
        topic_prefix=safety.topic_prefix(settings, prepared.scenario, ctx.test_id),
        keep_topics=settings.keep_topics, generator_cpus=cpus, seed=seed,
        rate_schedule=prepared.rate_schedule,
    )
    return RunSetup(prepared=prepared, slos=slos, workload=wl, seed=seed,
                    payloads=payloads, driver=driver, generator_cpus=cpus,
                    workers=workers, plan=plan)


@dataclass
class PeriodWatch:
    """The per-period callback of a run: sampler, byte cap, progress lines.

    ``label`` names the scenario in progress lines (it may read the period, e.g. the
    catch-up phase); ``show`` says whether the ~5 s progress lines are printed at all
    (``-v`` prints every period regardless).
    """

    ctx: RunContext
    kind: str
    period_s: float
    max_bytes: int | None
    sampler: BrokerMetricsSampler | None = None
    label: Callable[[PeriodStats], str] | str = ""
    show: Callable[[], bool] = lambda: True
    acked_bytes: int = field(default=0, init=False)
    #: the response histograms since the last progress line, merged: a p99 needs 1,000
    #: samples, which one 1-s period below 1,000 msg/s does not hold
    window: dict[str, LatencyHistogram] = field(default_factory=dict, init=False)

    def __call__(self, p: PeriodStats) -> None:
        from pytest_brokerperf.safety import format_bytes
        from pytest_brokerperf.summary import format_progress

        self.ctx.record_period(p)  # on disk before anything below may stop the run
        if self.sampler is not None:
            self.sampler.on_period(p)
        self.acked_bytes += p.bytes_sent
        if self.max_bytes is not None and self.acked_bytes > self.max_bytes:
            raise ConfigError(f"REFUSED: {format_bytes(self.acked_bytes)} acknowledged, "
                              f"over the byte cap {format_bytes(self.max_bytes)} "
                              "(--brokerperf-max-bytes); the run was stopped")
        for metric in PROGRESS_METRICS:
            hist = p.histograms.get(metric)
            if hist is not None:
                if metric in self.window:
                    self.window[metric].add(hist)
                else:
                    self.window[metric] = hist.copy()
        every = max(1, round(5.0 / self.period_s))
        if p.index % every == every - 1 or self.ctx.verbose:
            if self.ctx.verbose or self.show():
                label = self.label(p) if callable(self.label) else self.label
                self.ctx.progress(format_progress(self.kind, label, p, self.window))
            self.window = {}

    def describe(self) -> dict[str, Any]:
        return {"acked_bytes": self.acked_bytes, "max_bytes": self.max_bytes}
