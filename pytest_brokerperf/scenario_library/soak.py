"""Load held: a tail read at a moderate fixed rate for a long window, watching every
generator worker and every local broker process for memory, open files or threads that
grow without bound (docs/reference/soak.md).

A leak in a broker or a client library shows only when the load is held: a two-minute
latency window ends before a few MiB per minute add up. The soak keeps the tail-read
load (the same warm-up, verdict and SLOs) for ten minutes by default and judges each
process's RSS, open file descriptors and thread count per period with
:mod:`pytest_brokerperf.judge.resource_growth`. Growth fails the test as a finding, with the
verdict flag ``resource-growth``: the figures are true, the process leaks.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.judge.resource_growth import (
    GrowthLimits,
    growth_findings,
    process_series,
    trends,
)
from pytest_brokerperf.judge.verdict import RESOURCE_GROWTH
from pytest_brokerperf.scenario_library.base import PreparedRun, ScenarioResult
from pytest_brokerperf.scenario_library.tailread import (
    TOPOLOGY_CHECK_RATE,
    TailRead,
    run_fixed_rate,
)

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.judge.slo import SLO
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.finish import Measured

__all__ = ["SOAK_RATE", "SOAK_SMOKE_S", "SOAK_WINDOW_S", "Soak"]

#: The soak's default offered rate: moderate, so the generator and a local broker on a
#: small machine hold it for ten minutes with CPU to spare (a leak, not overload).
SOAK_RATE = 1000.0
#: The measured window under the standard and omb profiles ...
SOAK_WINDOW_S = 600.0
#: ... and under smoke: long enough for a trend over 60 one-second periods.
SOAK_SMOKE_S = 60.0


@dataclass
class Soak(TailRead):
    """A tail read held for ``duration_s`` at ``rate``, judged for resource growth.

    ``duration_s`` defaults to 600 s (60 s under ``--brokerperf-profile=smoke``);
    ``--brokerperf-duration`` wins over both. ``rate`` defaults to ``SOAK_RATE``
    (``TOPOLOGY_CHECK_RATE`` with several local nodes on one machine);
    ``--brokerperf-rate`` wins. ``limits`` holds the growth rule's thresholds.
    """

    duration_s: float | None = None
    limits: GrowthLimits = field(default_factory=GrowthLimits)
    name: str = "soak"
    takes_faults: ClassVar[bool] = False

    def sanity_slos(self) -> tuple[SLO, ...]:
        from pytest_brokerperf.judge.slo import SHIPPED_SLOS

        return SHIPPED_SLOS.get("tailread", ())

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> PreparedRun:
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError(f"Soak(duration_s={self.duration_s!r}): the measured window "
                             "must be > 0 seconds")
        rate = self.rate
        if rate is None:
            rate = TOPOLOGY_CHECK_RATE if endpoint.topology_check else SOAK_RATE
        run = TailRead.prepare(self._as_tailread(rate), settings, endpoint)
        run.scenario = self.name
        if settings.duration is None:
            default = SOAK_SMOKE_S if settings.profile == "smoke" else SOAK_WINDOW_S
            run.measure_s = float(self.duration_s if self.duration_s is not None else default)
        run.notes.append(
            f"soak: {run.measure_s:g} s held at {run.rate:g} msg/s; RSS, open files and "
            "threads of every worker and local broker process judged for growth "
            "(docs/reference/soak.md)")
        return run

    def _as_tailread(self, rate: float) -> TailRead:
        return TailRead(
            workload=self.workload, partitions=self.partitions,
            message_size=self.message_size, rate=rate, producers=self.producers,
            consumers=self.consumers, subscriptions=self.subscriptions,
            driver_file=self.driver_file, slos=self.slos, name=self.name)

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        # no faults (takes_faults): a broker's recovery after one would read as growth
        return run_fixed_rate(ctx, self, extra_slos, judge=self.judge)

    def judge(self, m: Measured) -> None:
        """Add the growth rule's trends to the record and a finding per growing one."""
        from pytest_brokerperf.metrics.broker import process_tree
        from pytest_brokerperf.metrics.sysstats import jvm_heap_first_touch

        first_touch: dict[str, float] = {}
        if m.sampler is not None:
            m.sampler.attach_resources(m.headline.periods)
            for label, pid in m.sampler.process_pids().items():
                with contextlib.suppress(ProcessLookupError):
                    # the node's JVM may be a descendant (a container's init, a wrapper)
                    heaps = [h for p in process_tree(pid)
                             if (h := jvm_heap_first_touch(p)) is not None]
                    if heaps:
                        first_touch[f"broker {label}"] = float(sum(heaps))
        judged = trends(process_series(m.headline.periods), self.limits, first_touch)
        growing = growth_findings(judged)
        m.findings.extend(growing)
        if growing:
            m.verdict.flags.append(RESOURCE_GROWTH)
        m.verdict.details["resource_growth"] = [t.message() for t in judged if t.grows]
        m.record_extra["soak"] = {
            "limits": {k: getattr(self.limits, k) for k in (
                "rss_floor_bytes", "fds_floor", "threads_floor", "relative", "step_share",
                "min_periods")},
            "measured_periods": len(m.headline.periods),
            "jvm_heap_first_touch_bytes": first_touch,
            "processes": sorted({t.process for t in judged}),
            "growing": len(growing),
            "trends": [t.as_dict() for t in judged],
        }
