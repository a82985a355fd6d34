"""Catch-up read: build a backlog while consumers are paused, then drain it.

OMB's backlog phases (``consumerBacklogSizeGB``, ``backlogDrainRatio`` in its
WorkloadGenerator): after a tail-read window at a fixed rate, the consumers pause while
producers go on until the backlog — published and not yet received, over every
subscription — reaches the requested size; then the consumers resume and the drain is
done once at most ``max(1000, (1 - backlogDrainRatio) * backlog / messageSize)``
messages are left. Producers go on during the drain unless ``producers_during_drain``
is false (Confluent's ``consumerOnly``).

Consumers pause through their driver (``ConsumerClient.pause``) so that no rebalance
happens and no backlog hides in client memory; the backlog is read from the broker too
(Kafka: end offsets minus the groups' committed offsets) at the drain's start and end.
The drained messages' age (receive time minus send time) is a histogram of its own,
never mixed into the end-to-end latency of the tail-read window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.core.errors import BrokerUnavailable, MeasurementError
from pytest_brokerperf.scenario_library.backlog import backlog_target, phase_timeouts
from pytest_brokerperf.scenario_library.base import (
    PreparedRun,
    Scenario,
    ScenarioResult,
    base_params,
    driver_file,
    refuse_rate_schedule,
    resolve_workload,
)
from pytest_brokerperf.scenario_library.finish import JUNIT_FIGURES, short_params
from pytest_brokerperf.scenario_library.tailread import fixed_rate_window

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import BrokerBacklog, Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import PhaseRun, RunOutcome, SessionEnd
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.session import RunSession
    from pytest_brokerperf.workload.model import Workload

__all__ = ["BUILD_SECONDS", "CatchUp", "CatchUpPrepared", "CatchUpReport",
           "drain_threshold"]

_GIB = 1024**3
_MIB = 1024**2
#: Without a backlog size from the scenario or a workload file, the backlog is what the
#: producers publish in this many seconds at the run's rate (per subscription).
BUILD_SECONDS: dict[str, float] = {"smoke": 10.0, "standard": 60.0, "omb": 60.0}
#: OMB's floor of the drain-done level, in messages.
MIN_BACKLOG = 1000


def drain_threshold(backlog_bytes: int, message_size: int, drain_ratio: float) -> int:
    """Messages at or below which the drain is done (OMB's WorkloadGenerator):
    ``max(1000, (long)((1 - backlogDrainRatio) * (backlog_bytes / messageSize)))``."""
    capacity = backlog_bytes // message_size
    return max(MIN_BACKLOG, int((1.0 - drain_ratio) * capacity))


@dataclass
class CatchUpPrepared(PreparedRun):
    """A catch-up run resolved against the settings (``measure_s``: the tail-read window
    before the backlog is built)."""

    backlog_bytes: int = 0
    drain_ratio: float = 1.0
    drain_threshold: int = MIN_BACKLOG
    producers_during_drain: bool = True
    build_timeout_s: float = 60.0
    drain_timeout_s: float = 120.0


#: share of the drained bytes served without a storage read at or above which the drain
#: was a hot (page-cache) read; at or below ``COLD_SHARE`` a cold (disk) read
HOT_SHARE = 0.9
COLD_SHARE = 0.5


@dataclass(frozen=True)
class CacheReading:
    """Hot or cold: how much of a drain the broker read from storage.

    Only local brokers can be read (their process ids); a remote cluster's drain is
    ``unknown``. ``memory_available_bytes`` is the page cache the host could offer
    (``MemAvailable``, or the broker's memory cgroup limit when lower).
    """

    disk_read_bytes: int | None
    consumed_bytes: int
    memory_available_bytes: int | None
    backlog_bytes: int

    @property
    def served_from_cache(self) -> float | None:
        if self.disk_read_bytes is None or self.consumed_bytes <= 0:
            return None
        return max(0.0, min(1.0, 1.0 - self.disk_read_bytes / self.consumed_bytes))

    @property
    def state(self) -> str:
        share = self.served_from_cache
        if share is None:
            return "unknown"
        if share >= HOT_SHARE:
            return "hot"
        return "cold" if share <= COLD_SHARE else "mixed"

    def reason(self) -> str:
        """The verdict's words for a hot drain."""
        share = self.served_from_cache or 0.0
        mem = (f"; the backlog ({self.backlog_bytes / _MIB:,.0f} MiB) fits in the "
               f"{self.memory_available_bytes / _MIB:,.0f} MiB of memory available"
               if self.memory_available_bytes else "")
        return (f"hot cache: {share:.0%} of the {self.consumed_bytes / _MIB:,.1f} MiB drained "
                "came without a storage read by the broker (its page cache)"
                f"{mem}: a catch-up from memory, not a cold read from disk. A broker memory "
                "limit (smaller than the backlog) produces a cold read")

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "served_from_cache": self.served_from_cache,
                "disk_read_bytes": self.disk_read_bytes, "consumed_bytes": self.consumed_bytes,
                "memory_available_bytes": self.memory_available_bytes,
                "backlog_bytes": self.backlog_bytes}


def broker_disk_reads(endpoint: BrokerEndpoint) -> int | None:
    """Storage bytes read so far by the local broker's processes; None when not local or
    unreadable."""
    from pytest_brokerperf.metrics.broker import proc_figures

    pids = endpoint.processes_record().pids if endpoint.mode != "remote" else ()
    if not pids:
        return None
    total = 0
    for pid in pids:
        value = proc_figures(pid).get("read_bytes")
        if value is None:
            return None
        total += int(value)
    return total


def memory_available(broker_limit: int | None = None) -> int | None:
    """The page cache a local broker can get: ``MemAvailable`` of this host in bytes, or
    the broker node's memory limit (--brokerperf-broker-memory) when that is lower."""
    host = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        host = None
    known = [v for v in (host, broker_limit) if v is not None]
    return min(known) if known else None


@dataclass
class CatchUpReport:
    """The record's ``catchup`` block (docs/reference/results.md)."""

    backlog_bytes_target: int
    drain_ratio: float
    drain_threshold_messages: int
    producers_during_drain: bool
    consumer_pause: str  # how the driver pauses its consumers
    build_s: float
    build_complete: bool
    backlog_at_drain_start_messages: int  # counters: subscriptions x acked - received
    backlog_at_drain_start_bytes: int
    drain_s: float | None  # None: not done within drain_timeout_s
    drain_complete: bool
    drain_timeout_s: float
    consumed_during_drain: int  # distinct messages received, all subscriptions
    consumed_bytes_during_drain: int
    produced_during_drain: int  # acknowledged
    residual_messages: int  # backlog (counters) when the drain was done, never negative
    #: messages received before their acknowledgements reached the counters when the
    #: drain was done (both are read while they go on): consumed = backlog at the start
    #: + produced - residual + this
    received_ahead_of_acks: int
    catchup_rate_msg_s: float | None
    catchup_mib_s: float | None
    net_drain_rate_msg_s: float | None  # backlog reduction per second
    publish_response_p99_before_us: float | None
    publish_response_p99_drain_us: float | None
    drain_publish_p99_ratio: float | None
    #: acknowledged messages per second in the tail-read window before the backlog and
    #: during the drain, and their ratio (AutoMQ's "send throughput during catch-up");
    #: None during the drain when its producers were stopped
    publish_rate_before_msg_s: float | None
    publish_rate_drain_msg_s: float | None
    drain_publish_rate_ratio: float | None
    #: OMB's publish latency (send to acknowledgement), mean, before and during the
    #: drain (AutoMQ's "average send latency during catch-up")
    publish_latency_mean_before_us: float | None
    publish_latency_mean_drain_us: float | None
    drain_host_steal_share: float | None
    #: per subscription, read from the broker: at the drain's start (consumers paused)
    #: and at its end (consumers paused again for the reading); None where the driver
    #: cannot read a backlog
    broker_backlog_at_drain_start: list[dict[str, Any]] | None
    broker_backlog_at_drain_end: list[dict[str, Any]] | None
    counters_at_drain_end: dict[str, int] = field(default_factory=dict)
    age: dict[str, Any] = field(default_factory=dict)  # the drained messages' age (µs)
    #: where the drained bytes came from: the local broker processes' storage reads
    #: (``/proc/PID/io`` read_bytes) over the drain against the bytes consumed
    cache: CacheReading | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cache"] = self.cache.as_dict() if self.cache is not None else None
        return out


@dataclass
class CatchUp(Scenario):
    """Catch-up read: a tail-read window, a backlog built while consumers are paused,
    and its drain while producers go on (or not).

    Fields left ``None`` come from the workload (``--brokerperf-workload`` or the shipped
    ``catch-up-smoke.yaml``) and the profile. ``backlog_bytes`` (all subscriptions,
    like OMB's) defaults to the workload's ``consumerBacklogSizeGB`` (``omb`` profile or a
    file given with ``--brokerperf-workload``), else to what the producers publish in
    :data:`BUILD_SECONDS` of the profile.
    """

    workload: Workload | None = None
    partitions: int | None = None
    message_size: int | None = None
    rate: float | None = None
    producers: int | None = None
    consumers: int | None = None
    subscriptions: int | None = None
    backlog_bytes: int | None = None
    drain_ratio: float | None = None  # OMB's backlogDrainRatio
    producers_during_drain: bool | None = None  # None: not the workload's consumerOnly
    build_timeout_s: float | None = None
    drain_timeout_s: float | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "catchup"

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> CatchUpPrepared:
        notes: list[str] = []
        wl, wl_file = resolve_workload(
            settings, given=self.workload, shipped="catch-up-smoke", notes=notes,
            partitions=self.partitions, message_size=self.message_size,
            producers_per_topic=self.producers, consumer_per_subscription=self.consumers,
            subscriptions_per_topic=self.subscriptions)
        refuse_rate_schedule(wl, "catch-up", "it publishes at one rate while the backlog "
                             "builds and drains")
        rate, period, warmup, measure = fixed_rate_window(
            settings, endpoint, wl, wl_file, self.rate, notes, what="catch-up")
        backlog = backlog_target(
            settings, wl, wl_file, given=self.backlog_bytes,
            scenario_workload=self.workload is not None, rate=rate,
            build_seconds=BUILD_SECONDS, copies=wl.subscriptions_per_topic, owner="CatchUp",
            notes=notes)
        ratio = float(self.drain_ratio if self.drain_ratio is not None
                      else wl.backlog_drain_ratio)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"drain_ratio={ratio} is outside 0..1 (OMB's backlogDrainRatio: "
                             "1.0 drains fully, 0.9 leaves 10 %)")
        during = (self.producers_during_drain if self.producers_during_drain is not None
                  else not wl.consumer_only)
        threshold = drain_threshold(backlog, wl.message_size, ratio)
        build_timeout, drain_timeout = phase_timeouts(
            backlog, rate, wl.message_size, wl.subscriptions_per_topic,
            build_given=self.build_timeout_s, read_given=self.drain_timeout_s)
        wl = wl.replace(producer_rate=round(rate), consumer_backlog_size_gb=backlog / _GIB,
                        backlog_drain_ratio=ratio, consumer_only=not during)
        params = base_params(wl, endpoint, rate)
        params.update(backlog_bytes=backlog, drain_ratio=ratio, producers_during_drain=during)
        return CatchUpPrepared(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file(settings, self.driver_file),
            notes=notes, backlog_bytes=backlog, drain_ratio=ratio, drain_threshold=threshold,
            producers_during_drain=during, build_timeout_s=build_timeout,
            drain_timeout_s=drain_timeout,
        )

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        return run_catchup(ctx, self, extra_slos)


def _merged(periods: list[PeriodStats], metric: str) -> LatencyHistogram:
    from pytest_brokerperf.metrics.histogram import LatencyHistogram

    h = LatencyHistogram.for_metric(metric)
    for p in periods:
        h.add(p.histograms[metric])
    return h


def _backlog_rows(rows: list[BrokerBacklog] | None) -> list[dict[str, Any]] | None:
    return None if rows is None else [asdict(r) for r in rows]


def catchup_figures(prepared: CatchUpPrepared, *, subs_per_topic: int, build: PhaseRun,
                    drain: PhaseRun, before_p99: float | None, consumer_pause: str,
                    before_rate: float | None = None,
                    before_publish_mean: float | None = None,
                    at_start: list[BrokerBacklog] | None = None,
                    at_end: list[BrokerBacklog] | None = None,
                    end_totals: dict[str, int] | None = None,
                    disk_read_bytes: int | None = None,
                    memory_available_bytes: int | None = None,
                    ) -> tuple[CatchUpReport, dict[str, float | None]]:
    """The record block and the SLO-checkable figures of one catch-up run, from the
    build and drain phases' counters and periods."""
    from pytest_brokerperf.judge.verdict import window_steal_share
    from pytest_brokerperf.results.figures import PERCENTILES, percentile_name
    from pytest_brokerperf.results.record import histogram_block

    def raw_backlog(t: dict[str, int]) -> int:
        return subs_per_topic * t.get("acked", 0) - t.get("received", 0)

    def backlog(t: dict[str, int]) -> int:
        # never negative: a message received before its acknowledgement reached the
        # counters is no backlog (the counters are read while both go on)
        return max(0, raw_backlog(t))

    s, e = drain.start_totals, drain.end_totals
    b0 = backlog(s)
    ahead = max(0, -raw_backlog(e))  # kept apart, so the accounting below stays exact
    consumed = e.get("received", 0) - s.get("received", 0)
    consumed_bytes = e.get("received_bytes", 0) - s.get("received_bytes", 0)
    produced = e.get("acked", 0) - s.get("acked", 0)
    residual = backlog(e)
    drain_s = drain.elapsed_s if drain.done else None
    rate = consumed / drain_s if drain_s else None
    mib = consumed_bytes / drain_s / _MIB if drain_s else None
    net = (b0 - residual) / drain_s if drain_s else None
    during = _merged(drain.periods, "publish_response").percentile(99)
    ratio = (during / before_p99 if during is not None and before_p99 else None)
    # the producers' rate while the backlog is read (stopped producers: no such rate)
    rate_drain = (produced / drain.elapsed_s
                  if prepared.producers_during_drain and drain.elapsed_s > 0 else None)
    rate_ratio = (rate_drain / before_rate if rate_drain is not None and before_rate
                  else None)
    drain_send = _merged(drain.periods, "publish_latency")
    age = _merged(drain.periods, "e2e_latency")
    pct = age.percentiles(PERCENTILES)

    report = CatchUpReport(
        backlog_bytes_target=prepared.backlog_bytes, drain_ratio=prepared.drain_ratio,
        drain_threshold_messages=prepared.drain_threshold,
        producers_during_drain=prepared.producers_during_drain,
        consumer_pause=consumer_pause, build_s=build.elapsed_s, build_complete=build.done,
        backlog_at_drain_start_messages=b0,
        backlog_at_drain_start_bytes=b0 * prepared.workload.message_size,
        drain_s=drain_s, drain_complete=drain.done, drain_timeout_s=prepared.drain_timeout_s,
        consumed_during_drain=consumed, consumed_bytes_during_drain=consumed_bytes,
        produced_during_drain=produced, residual_messages=residual,
        received_ahead_of_acks=ahead,
        catchup_rate_msg_s=rate, catchup_mib_s=mib, net_drain_rate_msg_s=net,
        publish_response_p99_before_us=before_p99, publish_response_p99_drain_us=during,
        drain_publish_p99_ratio=ratio,
        publish_rate_before_msg_s=before_rate, publish_rate_drain_msg_s=rate_drain,
        drain_publish_rate_ratio=rate_ratio,
        publish_latency_mean_before_us=before_publish_mean,
        publish_latency_mean_drain_us=drain_send.mean(),
        drain_host_steal_share=window_steal_share(drain.periods),
        broker_backlog_at_drain_start=_backlog_rows(at_start),
        broker_backlog_at_drain_end=_backlog_rows(at_end),
        counters_at_drain_end=dict(end_totals or {}), age=histogram_block(age),
        cache=CacheReading(disk_read_bytes=disk_read_bytes, consumed_bytes=consumed_bytes,
                           memory_available_bytes=memory_available_bytes,
                           backlog_bytes=b0 * prepared.workload.message_size),
    )
    figures: dict[str, float | None] = {
        "build_s": build.elapsed_s,
        "drain_s": drain_s,
        "catchup_rate_msg_s": rate,
        "catchup_mib_s": mib,
        "drained": 1.0 if drain.done else 0.0,
        "drain_publish_p99_ratio": ratio,
        "drain_publish_rate_ratio": rate_ratio,
        "backlog_at_drain_start": float(b0),
    }
    dp = _merged(drain.periods, "publish_response")
    for view, h in (("drain_publish_response", dp), ("drain_publish_latency", drain_send)):
        hp = h.percentiles(PERCENTILES)
        for q in PERCENTILES:
            figures[f"{view}.{percentile_name(q)}"] = hp[q]
        figures[f"{view}.max"] = h.max()
        figures[f"{view}.mean"] = h.mean()
    for q in PERCENTILES:
        figures[f"catchup_age.{percentile_name(q)}"] = pct[q]
    figures["catchup_age.max"] = age.max()
    figures["catchup_age.mean"] = age.mean()
    if at_start is not None:
        figures["broker_backlog_at_drain_start"] = float(sum(r.messages for r in at_start))
    assert report.cache is not None
    share = report.cache.served_from_cache
    figures["drain_served_from_cache"] = share
    figures["drain_disk_read_mib"] = (None if disk_read_bytes is None
                                      else disk_read_bytes / _MIB)
    return report, figures


@dataclass
class _Drained:
    """What the catch-up's phases measured, for its figures."""

    before: RunOutcome
    build: PhaseRun
    drain: PhaseRun
    end: SessionEnd
    at_start: list[BrokerBacklog] | None
    at_end: list[BrokerBacklog] | None
    end_totals: dict[str, int]
    disk_read_bytes: int | None


def run_catchup(ctx: RunContext, scenario: CatchUp,
                extra_slos: tuple[str, ...]) -> ScenarioResult:
    """Prepare, guard, run the four phases (tail-read window, build, drain, end), judge
    and record."""
    from pytest_brokerperf.brokers.driver import consumer_pause
    from pytest_brokerperf.scenario_library.safety import format_bytes
    from pytest_brokerperf.scenario_library.session import RunSession

    broker = ctx.broker
    prepared = scenario.prepare(ctx.settings, broker)

    def pausable(driver: Driver) -> None:
        if consumer_pause(driver) is None:
            why = driver.CONSUMER_PAUSE_MISSING
            raise BrokerUnavailable(
                f"catch-up on {broker.kind}: its driver cannot pause consumers without a "
                f"rebalance or a backlog held in client memory{': ' + why if why else ''}")

    run = RunSession(ctx, scenario, extra_slos, prepared=prepared,
                            check_driver=pausable)
    how = consumer_pause(run.driver) or ""
    # the safety plan counts the longest producing time: window + build + drain bounds
    run.guard(producing_s=prepared.measure_s + prepared.build_timeout_s
              + prepared.drain_timeout_s)
    ctx.progress(
        f"brokerperf: {broker.kind} {prepared.scenario} rate={prepared.rate:g} msg/s "
        f"warm-up≤{prepared.warmup_s:g}s measure={prepared.measure_s:g}s then backlog "
        f"{format_bytes(prepared.backlog_bytes)} (drain done at ≤{prepared.drain_threshold:,} "
        f"messages, producers {'on' if prepared.producers_during_drain else 'off'}) "
        f"workers={run.workers}")
    run.summary_params = (f"{short_params(prepared.params)} "
                          f"backlog={format_bytes(prepared.backlog_bytes).replace(' ', '')}")
    run.junit_figures = (*JUNIT_FIGURES, "build_s", "drain_s", "catchup_rate_msg_s",
                         "catchup_mib_s", "catchup_age.p99", "drain_publish_response.p99")
    with run.load() as s:
        got = _catchup_phases(run, s, prepared)
    return _catchup_record(run, prepared, got, how)


def _catchup_phases(run: RunSession, s: LoadSession, prepared: CatchUpPrepared) -> _Drained:
    """The phase script: the tail-read window (measured again when the host spoiled it),
    the backlog built with consumers paused, its drain, the session's end."""
    from pytest_brokerperf.scenario_library.safety import format_bytes

    broker, size = run.ctx.broker, prepared.workload.message_size
    before = run.window(s, "the tail-read window before the backlog",
                        remeasure="catchup: the window before the backlog")
    run.log.enter("the backlog build")
    s.pause_consumers(True)
    build = run.phase(s, "build", lambda t: s.backlog(t) * size >= prepared.backlog_bytes,
                      prepared.build_timeout_s)
    if not build.done:
        have = s.backlog(build.end_totals) * size
        raise MeasurementError(
            f"backlog not built within {prepared.build_timeout_s:g} s: "
            f"{format_bytes(have)} of {format_bytes(prepared.backlog_bytes)} at "
            f"{prepared.rate:g} msg/s; raise CatchUp(build_timeout_s=...) or the rate, "
            "or lower backlog_bytes")
    run.ctx.progress(f"brokerperf: {broker.kind} catchup: backlog "
                     f"{format_bytes(s.backlog(build.end_totals) * size)} built in "
                     f"{build.elapsed_s:.1f} s; draining")
    run.log.enter("the drain")
    at_start = s.broker_backlog()
    reads0 = broker_disk_reads(broker)
    if not prepared.producers_during_drain:
        s.stop_producers()
    drain = run.phase(s, "drain", lambda t: s.backlog(t) <= prepared.drain_threshold,
                      prepared.drain_timeout_s, begin=lambda: s.pause_consumers(False))
    reads1 = broker_disk_reads(broker)
    # one exact reading at the drain's end: consumers paused (offsets committed)
    end_totals = s.pause_consumers(True)
    at_end = s.broker_backlog()
    s.pause_consumers(False)
    return _Drained(before=before, build=build, drain=drain, end=run.end(s),
                    at_start=at_start, at_end=at_end, end_totals=end_totals,
                    disk_read_bytes=None if reads0 is None or reads1 is None
                    else reads1 - reads0)


def _catchup_record(run: RunSession, prepared: CatchUpPrepared, got: _Drained,
                    how: str) -> ScenarioResult:
    """Judge the window before the backlog, compute the catch-up's figures, record."""
    from pytest_brokerperf.judge.verdict import HOT_CACHE
    from pytest_brokerperf.results.summary_rows import CatchupFigures

    before, end, drain, broker = got.before, got.end, got.drain, run.ctx.broker
    end.apply(before, end_time=False)
    before.begin_time = end.begin_time
    verdict = run.assess(before)
    report, extra = catchup_figures(
        prepared, subs_per_topic=prepared.workload.subscriptions_per_topic, build=got.build,
        drain=drain, before_p99=before.cumulative["publish_response"].percentile(99),
        before_rate=before.ack_rate or None,
        before_publish_mean=before.cumulative["publish_latency"].mean(),
        consumer_pause=how, at_start=got.at_start, at_end=got.at_end,
        end_totals=got.end_totals, disk_read_bytes=got.disk_read_bytes,
        memory_available_bytes=memory_available(
            broker.processes_record().memory_limit_bytes))
    if report.cache is not None and report.cache.state == "hot":
        verdict.flags.append(HOT_CACHE)
        verdict.details["hot_cache"] = report.cache.reason()
    run.ctx.progress(
        f"brokerperf: {broker.kind} catchup: build {report.build_s:.1f} s, drain "
        + (f"{report.drain_s:.1f} s at {report.catchup_rate_msg_s:,.0f} msg/s "
           f"({report.catchup_mib_s:.1f} MiB/s)" if report.drain_s is not None
           else f"not done in {prepared.drain_timeout_s:g} s "
                f"({report.residual_messages:,} messages left)"))
    if not drain.done:
        prepared.notes.append(
            f"the backlog was not drained within {prepared.drain_timeout_s:g} s: "
            f"{report.residual_messages:,} messages left, done at "
            f"≤{prepared.drain_threshold:,} (CatchUp(drain_timeout_s=...) waits longer)")
    return run.finish(
        before, verdict, session=run.joined(before, end, got.build, drain),
        extra_figures=extra, record_extra={"catchup": report.as_dict()},
        summary_catchup=CatchupFigures(
            backlog_bytes=report.backlog_at_drain_start_bytes, build_s=report.build_s,
            drain_s=report.drain_s, rate_msg_s=report.catchup_rate_msg_s,
            mib_s=report.catchup_mib_s,
            cache=report.cache.state if report.cache is not None else "unknown"))
