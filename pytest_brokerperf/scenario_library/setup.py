"""What every load-running scenario does at every period: :class:`PeriodWatch`.

The per-period callback of every scenario's run session
(:class:`~pytest_brokerperf.scenario_library.session.RunSession`, which also sets the run
up): appends the period to the artefact directory, feeds the broker-metrics sampler,
stops the run at the byte cap, and prints a progress line every ~5 s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.core.errors import ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext

__all__ = ["PROGRESS_METRICS", "PeriodWatch", "broker_sampler", "live_pids"]

#: The latencies a progress line shows (their p99 since the previous line).
PROGRESS_METRICS = ("publish_response", "e2e_response")


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
        from pytest_brokerperf.scenario_library.progress import format_progress
        from pytest_brokerperf.scenario_library.safety import format_bytes

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


def broker_sampler(broker_type: BrokerType, broker: BrokerEndpoint,
                   settings: Settings) -> BrokerMetricsSampler | None:
    """The broker-metrics sampler of ``broker``: its local processes and agents plus
    ``--brokerperf-prometheus``, read as its kind reads a scrape; None when
    ``--no-brokerperf-broker-metrics`` or there is nothing to read."""
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler

    if not settings.broker_metrics:
        return None
    local = broker.processes_record()
    return BrokerMetricsSampler.for_sources(
        remote=broker.mode == "remote", pids=live_pids(broker), metrics_urls=local.metrics_urls,
        prometheus=[secret.reveal() for secret in settings.prometheus],
        figures=broker_type.prometheus_figures)


def live_pids(broker: BrokerEndpoint) -> tuple[int, ...]:
    """The broker's processes now, in node order: a node a fault restarted earlier in the
    session runs in a new process, which its start's record (``endpoint.local``) does not
    name. The start's pids where this session controls no node (containers, remote) or a
    node is down."""
    from pytest_brokerperf.brokers.node_control import control_for

    started = broker.processes_record().pids
    control = control_for(broker)
    if control is None:
        return started
    now = tuple(control.node_pid(i) for i in range(1, control.node_count() + 1))
    if len(now) != len(started) or any(p is None for p in now):
        return started
    return tuple(p for p in now if p is not None)
