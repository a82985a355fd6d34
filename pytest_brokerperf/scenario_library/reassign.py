"""Partition reassignment: move a loaded partition with its data to another broker.

AutoMQ's partition-reassignment study: a single-replica topic under steady produce and
consume load, plus background traffic on a second topic, on a cluster with a broker
that holds no replica of the first topic's partition. After a delay the partition is
moved, with its data, to that broker — optionally throttled — while the load goes on.
The questions: how long does the move take, and what does it do to publish and
end-to-end response time, p99 and p99.9, during the move against the window before it.

Windows (``periods.csv`` labels them): *before* is the fixed-rate window after the
warm-up (``measure``, ``delay_s`` long), *during* every period from the reassignment
request until it is complete (``reassign``), *after* ``after_s`` more seconds
(``after``). The ratios are ``during / before`` of the same percentile; an SLO bounds
them (``reassign.publish_p99_ratio < 3``). The engine's histograms hold both topics'
messages (the moved one and the background one, at the same rate each).

The move is complete when all three hold, polled every ``POLL_S``:

* the partition is absent from the controller's in-progress reassignments
  (ListPartitionReassignments, KIP-455);
* its replicas (metadata) equal the target;
* its in-sync replicas include the new replica.

The request and the in-progress list go through kafka-python's ``KafkaAdminClient``
(``alter_partition_reassignments``, ``list_partition_reassignments``; confluent-kafka
has no reassignment API; install with ``pip install 'pytest-brokerperf[reassign]'``);
metadata and the throttle configs through confluent-kafka's ``AdminClient``. A
throttled move sets the brokers' ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` and the topic's
``leader.replication.throttled.replicas`` and ``follower.replication.throttled.replicas``
(as Kafka's ``kafka-reassign-partitions --throttle`` does) and removes them afterwards,
also when the run fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.scenario_library.base import (
    PreparedRun,
    Scenario,
    ScenarioResult,
    base_params,
    driver_file,
    resolve_workload,
)
from pytest_brokerperf.scenario_library.finish import (
    JUNIT_FIGURES,
    ratios_text,
    short_params,
)
from pytest_brokerperf.scenario_library.tailread import fixed_rate_window

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.capabilities import (
        CapabilityName,
        MoveState,
        PartitionMove,
        PartitionMover,
    )
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import PhaseRun
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.session import RunSession
    from pytest_brokerperf.workload.model import Workload

__all__ = ["REASSIGN_INCOMPLETE", "Reassign", "ReassignPrepared", "ReassignReport",
           "judge_reassign", "producer_split", "reassign_figures", "window_ratios"]

#: verdict status (and flag): the move did not complete within its bound
REASSIGN_INCOMPLETE = "reassign-incomplete"
#: seconds after the move by profile (the *after* window)
AFTER_S: dict[str, float] = {"smoke": 5.0, "standard": 30.0, "omb": 60.0}
_PCT = {"p99": 99.0, "p99.9": 99.9}


# --------------------------------------------------------------------------- rules


def _merged(periods: Sequence[PeriodStats], metric: str) -> LatencyHistogram:
    from pytest_brokerperf.metrics.histogram import LatencyHistogram

    h = LatencyHistogram.for_metric(metric)
    for p in periods:
        h.add(p.histograms[metric])
    return h


def _window(periods: Sequence[PeriodStats], metric: str) -> dict[str, float | None]:
    h = _merged(periods, metric)
    return {k: h.percentile(q) for k, q in _PCT.items()}


def _ratio(during: float | None, before: float | None) -> float | None:
    return during / before if during is not None and before else None


def window_ratios(before: Sequence[PeriodStats], during: Sequence[PeriodStats]
                  ) -> dict[str, float | None]:
    """``during / before`` of publish and end-to-end response p99 and p99.9 (None where
    either window has too few responses for the percentile)."""
    out: dict[str, float | None] = {}
    for view, metric in (("publish", "publish_response"), ("e2e", "e2e_response")):
        b, d = _window(before, metric), _window(during, metric)
        out[f"{view}_p99_ratio"] = _ratio(d["p99"], b["p99"])
        out[f"{view}_p999_ratio"] = _ratio(d["p99.9"], b["p99.9"])
    return out


# --------------------------------------------------------------------------- prepare


@dataclass
class ReassignPrepared(PreparedRun):
    """A reassign run resolved against the settings (``measure_s``: the before window)."""

    after_s: float = 5.0
    timeout_s: float = 120.0
    throttle_bytes_s: int | None = None
    target_broker: int | None = None


@dataclass
class ReassignReport:
    """The record's ``reassignment`` block (docs/reference/results.md)."""

    topic: str
    partition: int
    background_topic: str | None
    brokers: list[int]
    replicas_before: list[int]
    target_replicas: list[int]
    replicas_after: list[int]
    isr_after: list[int]
    throttle_bytes_s: int | None
    throttle_removed: bool | None  # None: no throttle was set
    cancelled: bool  # not complete in time: the reassignment was cancelled
    requested_at: str  # ISO time of the request
    duration_s: float | None  # None: not complete within timeout_s
    complete: bool
    timeout_s: float
    polls: int
    publish_response_before_us: dict[str, float | None]
    publish_response_during_us: dict[str, float | None]
    publish_response_after_us: dict[str, float | None]
    e2e_response_before_us: dict[str, float | None]
    e2e_response_during_us: dict[str, float | None]
    e2e_response_after_us: dict[str, float | None]
    publish_samples_during: int
    e2e_samples_during: int
    publish_p99_ratio: float | None
    publish_p999_ratio: float | None
    e2e_p99_ratio: float | None
    e2e_p999_ratio: float | None
    send_errors_before: int
    send_errors_during: int
    send_errors_after: int
    client_errors: int  # errors the workers reported over the whole run
    #: per stats period around the move: phase, seconds from the request to the
    #: period's start, acknowledged and received messages, send errors, p99s
    series: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reassign(Scenario):
    """Partition reassignment under load (AutoMQ's study).

    ``delay_s``: seconds of measured load before the move (the *before* window; default
    the profile's measured window); ``after_s``: seconds of load after it;
    ``timeout_s``: bound of the move (exceeded: INCONCLUSIVE, ``reassign-incomplete``);
    ``throttle_bytes_s``: replication throttle (bytes/s) during the move, None for an
    unthrottled one; ``target_broker``: the broker id to move to (default the lowest id
    holding no replica of the partition).

    The background topic: by default it is shaped like the moved one (one partition) and
    ``rate`` is split evenly over the two. ``background_partitions`` gives it its own
    partition count; ``background_rate`` (msg/s) its own rate, and then ``rate`` is the
    moved topic's alone (AutoMQ: 40 MiB/s on the moved topic, 10 MiB/s on a
    4-partition background topic). The two rates are carried by producers in the same
    ratio (OMB's ``producersPerTopicList``: each producer offers the same rate), so
    their ratio must be one of small whole numbers (at most 16 producers in all).
    """

    workload: Workload | None = None
    message_size: int | None = None
    rate: float | None = None
    delay_s: float | None = None
    after_s: float | None = None
    timeout_s: float | None = None
    throttle_bytes_s: int | None = None
    target_broker: int | None = None
    background_partitions: int | None = None
    background_rate: float | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "reassign"
    needs: ClassVar[tuple[CapabilityName, ...]] = ("partition_mover",)
    cluster_changes: ClassVar[tuple[str, ...]] = (
        "partition reassignment of the run's own topic",
        "replication throttle configs on brokers (set and removed when throttled)")

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> ReassignPrepared:
        notes: list[str] = []
        # two single-partition topics, one producer and one consumer each: the first is
        # moved, the second is the background traffic
        wl, wl_file = resolve_workload(
            settings, given=self.workload, shipped="tail-read-smoke", notes=notes,
            partitions=1, message_size=self.message_size, producers_per_topic=1,
            consumer_per_subscription=1, subscriptions_per_topic=1)
        wl = wl.replace(topics=2)
        producers = (1, 1)
        total_rate = self.rate
        if self.background_rate is not None:
            if self.background_rate <= 0:
                raise ValueError(f"Reassign(background_rate={self.background_rate!r}): the "
                                 "background topic's rate must be > 0 msg/s")
            if self.rate is None:
                raise ValueError(
                    f"Reassign(background_rate={self.background_rate!r}) needs rate= (the "
                    "moved topic's own msg/s): the two rates set the producers' ratio")
            producers = producer_split(float(self.rate), float(self.background_rate))
            total_rate = float(self.rate) + float(self.background_rate)
        parts = (1, 1)
        if self.background_partitions is not None:
            if self.background_partitions < 1:
                raise ValueError(f"Reassign(background_partitions={self.background_partitions!r})"
                                 ": a topic has at least one partition")
            parts = (1, int(self.background_partitions))
        if producers != (1, 1) or parts != (1, 1):
            wl = wl.replace(partitions_per_topic_list=parts, producers_per_topic_list=producers)
            notes.append(
                f"background topic: {parts[1]} partition(s), {producers[1]} producer(s) "
                f"beside the moved topic's {producers[0]} (each producer offers the same "
                f"rate, so the moved topic takes {producers[0]}/{sum(producers)} of it)")
        rate, period, warmup, measure = fixed_rate_window(
            settings, endpoint, wl, wl_file, total_rate, notes, what="reassign")
        if self.delay_s is not None:
            if self.delay_s <= 0:
                raise ValueError(f"Reassign(delay_s={self.delay_s!r}): the window before the "
                                 "move must be > 0 s (e.g. delay_s=10)")
            measure = float(self.delay_s)
        after = float(self.after_s) if self.after_s is not None else AFTER_S.get(
            settings.profile, 30.0)
        if after < 0:
            raise ValueError(f"Reassign(after_s={self.after_s!r}) is negative; give 0 or more")
        timeout = float(self.timeout_s) if self.timeout_s is not None else 300.0
        if timeout <= 0:
            raise ValueError(f"Reassign(timeout_s={self.timeout_s!r}) must be > 0")
        if self.throttle_bytes_s is not None and int(self.throttle_bytes_s) <= 0:
            raise ValueError(f"Reassign(throttle_bytes_s={self.throttle_bytes_s!r}) must be "
                             "> 0 bytes/s, or None for an unthrottled move")
        wl = wl.replace(producer_rate=round(rate), consumer_backlog_size_gb=0.0)
        params = base_params(wl, endpoint, rate)
        params.update(throttle_bytes_s=self.throttle_bytes_s)
        return ReassignPrepared(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file(settings, self.driver_file),
            notes=notes, after_s=after, timeout_s=timeout,
            throttle_bytes_s=(None if self.throttle_bytes_s is None
                              else int(self.throttle_bytes_s)),
            target_broker=self.target_broker,
        )

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        return run_reassign(ctx, self, extra_slos)


# --------------------------------------------------------------------------- the broker


# --------------------------------------------------------------------------- figures


def producer_split(moved: float, background: float, most: int = 16) -> tuple[int, int]:
    """Producers (moved topic, background topic) whose ratio is ``moved / background``:
    the smallest pair within 1 %; ValueError when none has at most ``most`` producers."""
    want = moved / background
    for total in range(2, most + 1):
        for a in range(1, total):
            b = total - a
            if abs(a / b - want) <= 0.01 * want:
                return a, b
    raise ValueError(
        f"Reassign(rate={moved:g}, background_rate={background:g}): a ratio of {want:.3g} "
        f"needs more than {most} producers (each producer offers the same rate). Fix: "
        "rates in a ratio of small whole numbers, e.g. 4:1")


def _count(periods: Sequence[PeriodStats], metric: str) -> int:
    return int(_merged(periods, metric).total_count)


def _series(periods: Sequence[PeriodStats], request_ns: int) -> list[dict[str, Any]]:
    out = []
    for p in periods:
        pub = p.histograms.get("publish_response")
        e2e = p.histograms.get("e2e_response")
        out.append({
            "phase": p.phase, "t_s": round((p.start_ns - request_ns) / 1e9, 3),
            "elapsed_s": round(p.elapsed_s, 3), "acked": p.messages_sent,
            "received": p.messages_received, "send_errors": p.send_errors,
            "publish_p99_us": pub.percentile(99.0, allow_undersampled=True) if pub else None,
            "e2e_p99_us": e2e.percentile(99.0, allow_undersampled=True) if e2e else None,
        })
    return out


def reassign_figures(prepared: ReassignPrepared, *, before: Sequence[PeriodStats],
                     during: Sequence[PeriodStats], after: Sequence[PeriodStats],
                     mover: Mapping[str, Any], judgeable: bool = True,
                     client_errors: int = 0,
                     ) -> tuple[ReassignReport, dict[str, float | None]]:
    """The record block and the SLO-checkable figures of one run.

    ``mover`` holds what the move said: ``topic``, ``partition``, ``background_topic``,
    ``brokers``, ``replicas_before``, ``target``, ``final`` (the last
    :class:`MoveState`, or None), ``duration_s`` (None: not complete), ``polls``,
    ``requested_at``, ``request_ns``, ``throttle_removed``. The ratios
    are withheld (None) when the move did not complete or the before window was not
    judgeable.
    """
    done = mover.get("duration_s") is not None
    ratios = window_ratios(before, during)
    if not (done and judgeable):
        ratios = dict.fromkeys(ratios)
    final: MoveState | None = mover.get("final")
    report = ReassignReport(
        topic=mover["topic"], partition=mover.get("partition", 0),
        background_topic=mover.get("background_topic"), brokers=list(mover.get("brokers", [])),
        replicas_before=list(mover.get("replicas_before", [])),
        target_replicas=list(mover["target"]),
        replicas_after=list(final.replicas) if final else [],
        isr_after=list(final.isr) if final else [],
        throttle_bytes_s=prepared.throttle_bytes_s,
        throttle_removed=mover.get("throttle_removed"),
        cancelled=bool(mover.get("cancelled", False)),
        requested_at=mover.get("requested_at", ""), duration_s=mover.get("duration_s"),
        complete=done, timeout_s=prepared.timeout_s, polls=int(mover.get("polls", 0)),
        publish_response_before_us=_window(before, "publish_response"),
        publish_response_during_us=_window(during, "publish_response"),
        publish_response_after_us=_window(after, "publish_response"),
        e2e_response_before_us=_window(before, "e2e_response"),
        e2e_response_during_us=_window(during, "e2e_response"),
        e2e_response_after_us=_window(after, "e2e_response"),
        publish_samples_during=_count(during, "publish_response"),
        e2e_samples_during=_count(during, "e2e_response"),
        send_errors_before=sum(p.send_errors for p in before),
        send_errors_during=sum(p.send_errors for p in during),
        send_errors_after=sum(p.send_errors for p in after),
        client_errors=client_errors,
        series=_series([*before, *during, *after], int(mover.get("request_ns", 0))),
        **ratios,
    )
    figures: dict[str, float | None] = {
        "reassign.duration_s": report.duration_s,
        "reassign.complete": 1.0 if done else 0.0,
        "reassign.send_errors": float(report.send_errors_during + report.send_errors_after),
        **{f"reassign.{k}": v for k, v in ratios.items()},
    }
    return report, figures


def judge_reassign(verdict: Verdict, report: ReassignReport) -> None:
    """A move not complete within its bound makes a judgeable verdict INCONCLUSIVE
    (status ``reassign-incomplete``); an already inconclusive one keeps its status and
    gets the flag. Ratios n/a for lack of responses during a short move: flag
    ``undersampled`` with a note."""
    from pytest_brokerperf.judge.verdict import UNDERSAMPLED

    if not report.complete:
        if verdict.judgeable:
            verdict.status = REASSIGN_INCOMPLETE
        verdict.flags.append(REASSIGN_INCOMPLETE)
        last = (f"replicas {report.replicas_after}, ISR {report.isr_after}"
                if report.replicas_after else "no reading")
        verdict.reasons.append(
            f"the reassignment of {report.topic}-{report.partition} to brokers "
            f"{report.target_replicas} did not complete within {report.timeout_s:g} s "
            f"(last: {last}"
            + ("; the reassignment was cancelled" if report.cancelled else "")
            + "); Reassign(timeout_s=...) waits longer; ratios withheld")
        return
    missing = [k for k in ("publish_p99_ratio", "publish_p999_ratio", "e2e_p99_ratio",
                           "e2e_p999_ratio") if getattr(report, k) is None]
    if verdict.judgeable and missing:
        if UNDERSAMPLED not in verdict.flags:
            verdict.flags.append(UNDERSAMPLED)
        verdict.details["reassign_undersampled"] = (
            f"{', '.join(missing)} n/a: the move lasted {report.duration_s:.1f} s with "
            f"{report.publish_samples_during:,} publish and {report.e2e_samples_during:,} "
            "e2e responses (p99 needs 1,000, p99.9 10,000); a higher rate, a larger "
            "partition (a longer delay_s) or a throttle lengthens it")


# --------------------------------------------------------------------------- run


def run_reassign(ctx: RunContext, scenario: Reassign,
                 extra_slos: tuple[str, ...]) -> ScenarioResult:
    """Prepare, guard, run the phases (before window, move, after window, end), judge
    and record."""
    from pytest_brokerperf.core.errors import BrokerUnavailable
    from pytest_brokerperf.scenario_library.session import RunSession

    settings, broker = ctx.settings, ctx.broker
    prepared = scenario.prepare(settings, broker)
    holder: list[Driver] = []
    moves = ctx.broker_type.capabilities.partition_mover
    if moves is None:
        why = ctx.broker_type.capabilities.missing("partition_mover")
        raise BrokerUnavailable(f"reassign on {ctx.broker_type.name}: {why}")

    def check(driver: Driver) -> None:
        # skipped before any topic exists; a dry run asks the broker nothing
        holder.append(moves.movable(driver, ask_broker=not settings.dry_run))

    run = RunSession(ctx, scenario, extra_slos, prepared=prepared, check_driver=check)
    run.driver = holder[0]  # the run's driver with single-replica topics: bounded next
    run.guard(producing_s=prepared.measure_s + prepared.timeout_s + prepared.after_s,
              cluster_change="partition reassignment",
              phases=(f"{prepared.measure_s:g} s measured before the move, then the move "
                      f"(at most {prepared.timeout_s:g} s), then {prepared.after_s:g} s "
                      "after it"))
    wl = prepared.workload
    throttle = _throttle_text(prepared)
    ctx.progress(
        f"brokerperf: {broker.kind} reassign rate={prepared.rate:g} msg/s over 2 topics "
        f"(moved {wl.rate_for_topic(0):g}, background {wl.rate_for_topic(1):g} on "
        f"{wl.partitions_for_topic(1)} partition(s)) "
        f"warm-up≤{prepared.warmup_s:g}s before={prepared.measure_s:g}s then the first "
        f"topic's partition moves to another broker{throttle}, after={prepared.after_s:g}s "
        f"workers={run.workers}")
    run.summary_params = (f"{short_params(prepared.params)}"
                          + (f" throttle={prepared.throttle_bytes_s}" if throttle else ""))
    run.junit_figures = (*JUNIT_FIGURES, "reassign.duration_s", "reassign.publish_p99_ratio",
                         "reassign.e2e_p99_ratio")
    movers: list[PartitionMove] = []
    info: dict[str, Any] = {}
    try:
        with run.load() as s:
            before = run.window(s, "the window before the move")
            move = _move(run, s, moves, holder[0], prepared, info, movers)
            after = run.phase(s, "after", lambda t: False, prepared.after_s,
                              enter="the window after the move")
            end = run.end(s)
    finally:
        for mover in movers:
            mover.close()
    for err in info.get("throttle_errors", []):
        prepared.notes.append(f"{err}; remove the config by hand (incremental alter "
                              "configs, DELETE, or kafka-configs --delete-config)")
    end.apply(before, end_time=False)
    verdict = run.assess(before)
    report, extra = reassign_figures(
        prepared, before=before.periods, during=move.periods, after=after.periods,
        mover=info, judgeable=verdict.judgeable, client_errors=len(end.worker_errors))
    judge_reassign(verdict, report)
    ctx.progress(
        f"brokerperf: {broker.kind} reassign: "
        + (f"moved in {report.duration_s:.2f} s" if report.duration_s is not None
           else f"not complete in {prepared.timeout_s:g} s")
        + ratios_text(report.publish_p99_ratio, report.e2e_p99_ratio, "e2e"))
    return run.finish(before, verdict, session=run.joined(before, end, move, after),
                      extra_figures=extra, record_extra={"reassignment": report.as_dict()})


def _throttle_text(prepared: ReassignPrepared) -> str:
    return (f" throttled to {prepared.throttle_bytes_s:,} B/s"
            if prepared.throttle_bytes_s else "")


def _move(run: RunSession, s: LoadSession, moves: PartitionMover, base_driver: Driver,
          prepared: ReassignPrepared, info: dict[str, Any],
          movers: list[PartitionMove]) -> PhaseRun:
    """The move phase: pick the target broker, request the reassignment (throttled if
    asked) and poll until it is complete or its bound passes; what it said goes to
    ``info`` (:func:`reassign_figures`)."""
    from pytest_brokerperf.core.errors import MeasurementError
    from pytest_brokerperf.scenario_library import safety

    ctx, broker = run.ctx, run.ctx.broker
    run.log.enter("the partition move")
    topic = s.topics[0]
    mover = moves.mover(base_driver, topic, 0, prepared.timeout_s)
    movers.append(mover)
    first = mover.read()
    brokers = mover.brokers()
    source = list(first.replicas)
    if prepared.target_broker is not None:
        if prepared.target_broker not in brokers:
            raise MeasurementError(
                f"Reassign(target_broker={prepared.target_broker}) is not a broker "
                f"of the cluster at {broker.bootstrap} (brokers {brokers})")
        if prepared.target_broker in source:
            raise MeasurementError(
                f"Reassign(target_broker={prepared.target_broker}) already holds "
                f"{topic}-0 (replicas {source}); give a broker without a replica")
        dest = prepared.target_broker
    else:
        free = [b for b in brokers if b not in source]
        if not free:
            raise MeasurementError(f"every broker {brokers} holds a replica of "
                                   f"{topic}-0; nowhere to move it")
        dest = free[0]
    target = [dest]
    mover.target = target
    info.update(topic=topic, partition=0, brokers=brokers, replicas_before=source,
                target=target, background_topic=s.topics[1] if len(s.topics) > 1 else None)
    if prepared.throttle_bytes_s:
        safety.require_cluster_change(ctx.settings, broker, "replication throttles")
    ctx.progress(f"brokerperf: {broker.kind} reassign: {topic}-0 from brokers "
                 f"{source} to {target}{_throttle_text(prepared)}")
    with mover.throttled(source, target, prepared.throttle_bytes_s, info):
        move = run.phase(s, "reassign", lambda t: mover.done.is_set(), prepared.timeout_s,
                         begin=mover.start)
        mover.stop()
        info["cancelled"] = mover.duration_s is None and mover.cancel()
    if mover.error is not None:
        raise MeasurementError(
            f"reading the reassignment of {topic}-0 failed: {mover.error}") from mover.error
    info.update(request_ns=move.periods[0].start_ns if move.periods else 0,
                duration_s=mover.duration_s, polls=len(mover.states),
                requested_at=mover.requested_at,
                final=mover.states[-1] if mover.states else None)
    return move
