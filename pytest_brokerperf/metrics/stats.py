"""Per-period and cumulative statistics of one scenario run, merged across workers.

These are the values the engine hands to results writers (OMB JSON, JSONL, CSV).
Counters come in two kinds (docs/explanation/measurement.md): *window* counters
cover one stats period
and feed rates; *lifetime* counters cover the whole run (warm-up included) and feed
backlog and delivery accounting. Warm-up resets only latency histograms and window
figures, never lifetime counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.sysstats import ProcessResources

__all__ = ["METRICS", "PeriodStats", "WorkerSample"]

#: Latency views recorded for every message (docs/explanation/measurement.md), all in microseconds.
#: publish_latency: actual send -> ack (OMB "publish latency")
#: publish_delay: intended send -> actual send (OMB "publish delay")
#: publish_response: intended send -> ack (coordinated-omission corrected)
#: e2e_latency: actual send -> receive (OMB "end to end")
#: e2e_response: intended send -> receive (coordinated-omission corrected)
METRICS: tuple[str, ...] = (
    "publish_latency",
    "publish_delay",
    "publish_response",
    "e2e_latency",
    "e2e_response",
)


@dataclass
class WorkerSample:
    """Resource use of one worker process over one period."""

    worker: int
    cpu_s: float  # user+system CPU seconds of the whole process in the period
    runq_delay_s: float  # time spent runnable but waiting for a CPU (schedstat)
    elapsed_s: float
    queue_full: int = 0  # client-side "local queue full" events (back-pressure)
    client_queue_depth: int = 0  # messages waiting in client libraries at period end
    #: what the worker process holds at the period's end (None: not reported)
    resources: ProcessResources | None = None

    @property
    def cpu_share(self) -> float:
        """CPU use as a fraction of one core."""
        return self.cpu_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def runq_share(self) -> float:
        """Run-queue delay as a fraction of the wall time."""
        return self.runq_delay_s / self.elapsed_s if self.elapsed_s > 0 else 0.0


@dataclass
class PeriodStats:
    """One stats period, merged over all workers."""

    index: int
    start_ns: int  # CLOCK_MONOTONIC of the coordinator when the period began
    elapsed_s: float
    # window counters
    messages_sent: int = 0
    bytes_sent: int = 0
    send_errors: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    # lifetime counters at the end of the period
    total_sent: int = 0
    total_send_errors: int = 0
    total_received: int = 0
    backlog: int = 0  # subscriptions * total_sent - total_received, clamped at 0
    histograms: dict[str, LatencyHistogram] = field(default_factory=dict)
    workers: list[WorkerSample] = field(default_factory=list)
    target_rate: float = 0.0  # offered rate during the period (msg/s)
    #: busy share of the generator's CPUs over the period, every process counted
    #: (/proc/stat; None when not sampled): tells a starved generator from one
    #: whose own threads queue behind each other
    generator_cpu_busy: float | None = None
    #: share of the machine's CPU time the hypervisor took over the period (/proc/stat
    #: steal; None when not sampled): a VM paused by its host delays every message
    host_steal_share: float | None = None
    phase: str = "measure"  # warmup | measure
    #: why a worker's stamps were not on the coordinator's clock (engine/clock.py; None:
    #: one clock)
    clock_note: str | None = None
    #: each local broker process's RSS, open files and threads at the period's end, keyed
    #: ``node <n> (pid <pid>)``; filled from the broker-metrics sampler after the run
    #: (:meth:`~pytest_brokerperf.metrics.broker.BrokerMetricsSampler.attach_resources`)
    broker_resources: dict[str, ProcessResources] = field(default_factory=dict)

    def held(self, side: str, key: str) -> int | None:
        """``key`` (``rss_bytes``, ``open_fds``, ``threads``) summed over the workers
        (``side="worker"``) or the local broker processes (``"broker"``) at the period's
        end; None when none reported it."""
        held = (self.broker_resources.values() if side == "broker"
                else (w.resources for w in self.workers if w.resources is not None))
        values = [v for r in held if (v := getattr(r, key)) is not None]
        return sum(values) if values else None

    @property
    def publish_rate(self) -> float:
        return self.messages_sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def consume_rate(self) -> float:
        return self.messages_received / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def publish_mib_s(self) -> float:
        return self.bytes_sent / self.elapsed_s / 1048576 if self.elapsed_s > 0 else 0.0

    @property
    def consume_mib_s(self) -> float:
        return self.bytes_received / self.elapsed_s / 1048576 if self.elapsed_s > 0 else 0.0

    @property
    def error_rate(self) -> float:
        return self.send_errors / self.elapsed_s if self.elapsed_s > 0 else 0.0
