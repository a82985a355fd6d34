"""Mixed workload: a tailing subscription, then a second one that catches up from the start.

StreamNative's mixed workload: producers publish at a fixed rate and a subscription tails
them; once the topic holds a backlog of a set size (the retained data — the tailing
group keeps up, nothing waits for it), a **second subscription starts from the earliest
position** and reads the whole topic while producers and the tailing group go on. The
questions: how fast does the new subscription catch up, and what does its read do to
the others — publish response time and the tailing group's end-to-end response time,
p99 and p99.9, during the catch-up against the window before it.

Windows: *before* is the tail-read window (``measure_s`` at the fixed rate after the
warm-up) and *during* is every period from the catch-up reader's start until it is at
the head (its lag at most ``caught_up_lag`` messages). The ratios are ``during / before``
of the same percentile; an SLO bounds them (``mixed.publish_p99_ratio < 2``).

How each broker starts a subscription at the earliest position:

* Kafka (and Kafka-protocol brokers): a new consumer group with
  ``auto.offset.reset=earliest`` (the topic's retention keeps the data; no commit of
  the group exists before it starts).
* Pulsar: a new subscription with initial position ``Earliest``; messages acknowledged
  by the tailing subscription are kept by the run namespace's retention policy (the
  driver's ``client.retention``, unlimited by default).
* RabbitMQ: only stream queues can replay from the first offset; this driver's
  per-subscription queues hold what was published after they were declared, so the
  scenario skips there with that reason.

The catch-up reader runs in a process of its own (one consumer per topic), outside the
load engine: its deliveries are in no tailing histogram, and its counters are its own.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
from pytest_brokerperf.scenario_library.finish import (
    JUNIT_FIGURES,
    ratios_text,
    short_params,
)
from pytest_brokerperf.scenario_library.tailread import fixed_rate_window

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.capabilities import CapabilityName
    from pytest_brokerperf.brokers.driver import BrokerBacklog, Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import PhaseRun, RunOutcome, SessionEnd
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.session import RunSession
    from pytest_brokerperf.workload.model import Workload

__all__ = ["BUILD_SECONDS", "CATCHUP_INCOMPLETE", "TAIL_BEHIND", "Mixed", "MixedPrepared",
           "MixedReport", "judge_mixed", "mixed_figures"]

_GIB = 1024**3
_MIB = 1024**2
#: Without a backlog size from the scenario or a workload file, the backlog is what the
#: producers publish in this many seconds at the run's rate.
BUILD_SECONDS: dict[str, float] = {"smoke": 8.0, "standard": 60.0, "omb": 60.0}
#: The catch-up reader is at the head once its lag is at most this many seconds of
#: publishing (and at least ``MIN_CAUGHT_UP_LAG`` messages).
CAUGHT_UP_S = 0.5
MIN_CAUGHT_UP_LAG = 100
#: Verdict statuses (not judgeable: the run is INCONCLUSIVE, its ratios withheld).
TAIL_BEHIND = "tail-behind"
CATCHUP_INCOMPLETE = "catchup-incomplete"


@dataclass
class MixedPrepared(PreparedRun):
    """A mixed run resolved against the settings (``measure_s``: the before window)."""

    backlog_bytes: int = 0
    caught_up_lag: int = MIN_CAUGHT_UP_LAG  # messages
    tail_lag_limit: int = MIN_CAUGHT_UP_LAG  # the tailing group's lag that is "behind"
    build_timeout_s: float = 60.0
    catchup_timeout_s: float = 120.0


@dataclass
class MixedReport:
    """The record's ``mixed`` block (docs/reference/results.md)."""

    backlog_bytes_target: int
    catchup_start: str  # how the second subscription starts at the earliest position
    catchup_subscription: str
    build_s: float
    build_complete: bool
    retained_at_catchup_start_messages: int  # acknowledged before the reader started
    tail_lag_at_catchup_start: int  # the tailing groups' backlog then (counters)
    tail_lag_limit: int
    tail_kept_up: bool
    catchup_s: float | None  # None: not at the head within catchup_timeout_s
    catchup_complete: bool
    catchup_timeout_s: float
    caught_up_lag: int
    catchup_consumed: int  # messages the catch-up subscription received
    catchup_consumed_bytes: int
    produced_during_catchup: int  # acknowledged
    catchup_rate_msg_s: float | None
    catchup_mib_s: float | None
    publish_response_before_us: dict[str, float | None]  # p99, p99.9
    publish_response_during_us: dict[str, float | None]
    e2e_response_before_us: dict[str, float | None]  # the tailing group
    e2e_response_during_us: dict[str, float | None]
    #: responses measured during the catch-up (publish, tailing e2e): a percentile needs
    #: 10 / (1 - q) samples (1,000 for p99, 10,000 for p99.9), else its ratio is null
    publish_samples_during: int
    e2e_samples_during: int
    publish_p99_ratio: float | None  # during / before; None when not judgeable
    publish_p999_ratio: float | None
    e2e_p99_ratio: float | None
    e2e_p999_ratio: float | None
    #: the catch-up subscription read from the broker once its reader stopped (its
    #: offsets committed); None where the driver cannot read a backlog
    broker_catchup_position: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Mixed(Scenario):
    """Mixed workload: a tail-read window, a retained backlog, then a second
    subscription from the earliest position catching up while the load goes on.

    ``backlog_bytes`` (the data the topic holds when the catch-up subscription starts)
    defaults to the workload's ``consumerBacklogSizeGB`` (``omb`` profile or a file given
    with ``--brokerperf-workload``), else to what the producers publish in
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
    build_timeout_s: float | None = None
    catchup_timeout_s: float | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "mixed"
    needs: ClassVar[tuple[CapabilityName, ...]] = ("earliest_reader",)

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> MixedPrepared:
        notes: list[str] = []
        wl, wl_file = resolve_workload(
            settings, given=self.workload, shipped="tail-read-smoke", notes=notes,
            partitions=self.partitions, message_size=self.message_size,
            producers_per_topic=self.producers, consumer_per_subscription=self.consumers,
            subscriptions_per_topic=self.subscriptions)
        refuse_rate_schedule(wl, "mixed", "its before/during ratios compare windows at "
                             "one fixed rate")
        rate, period, warmup, measure = fixed_rate_window(
            settings, endpoint, wl, wl_file, self.rate, notes, what="mixed")
        backlog = backlog_target(
            settings, wl, wl_file, given=self.backlog_bytes,
            scenario_workload=self.workload is not None, rate=rate,
            build_seconds=BUILD_SECONDS, copies=1, owner="Mixed", notes=notes)
        caught_up = max(MIN_CAUGHT_UP_LAG, round(rate * CAUGHT_UP_S))
        # the tailing group keeps up: its lag within one second of publishing (as the
        # warm-up's steadiness test), per subscription
        tail_limit = max(MIN_CAUGHT_UP_LAG, round(rate * 1.0)) * max(
            1, wl.subscriptions_per_topic)
        build_timeout, catchup_timeout = phase_timeouts(
            backlog, rate, wl.message_size, 1, build_given=self.build_timeout_s,
            read_given=self.catchup_timeout_s)
        wl = wl.replace(producer_rate=round(rate), consumer_backlog_size_gb=0.0)
        params = base_params(wl, endpoint, rate)
        params.update(backlog_bytes=backlog)
        return MixedPrepared(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file(settings, self.driver_file),
            notes=notes, backlog_bytes=backlog, caught_up_lag=caught_up,
            tail_lag_limit=tail_limit, build_timeout_s=build_timeout,
            catchup_timeout_s=catchup_timeout,
        )

    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        return run_mixed(ctx, self, extra_slos)


# --------------------------------------------------------------------------- earliest


def earliest_reader(broker: BrokerType, driver: Driver) -> tuple[Driver, str]:
    """The driver the catch-up reader (and the run) uses, and how its new subscription
    starts at the earliest position (the broker's ``earliest_reader`` capability);
    raises ``BrokerUnavailable`` (a skip) where the broker cannot replay retained data
    to a new subscription."""
    reader = broker.capabilities.earliest_reader
    if reader is None:
        why = broker.capabilities.missing("earliest_reader")
        raise BrokerUnavailable(f"mixed on {broker.name}: {why}")
    return reader.earliest(driver)


def _reader_main(driver: Driver, topics: list[str], subscription: str, prefix: str,
                 counts: Any, ready: Any, go: Any, stop: Any) -> None:
    """The catch-up reader process: one consumer per topic of ``subscription``, counting
    messages and bytes in ``counts`` (shared array: received, bytes, errors) until
    ``stop``; offsets committed (``pause()``) before it closes."""
    consumers = []
    try:
        ready.set()  # the interpreter is up: the catch-up's clock starts at ``go``
        go.wait()
        if stop.is_set():
            return
        consumers = [driver.consumer(t, subscription, f"{prefix}-catchup-{i}")
                     for i, t in enumerate(topics)]
        while not stop.is_set():
            for c in consumers:
                batch = c.receive(500, 0.05)
                if batch:
                    n = len(batch)
                    size = sum(len(v) for v, _ in batch)
                    with counts.get_lock():
                        counts[0] += n
                        counts[1] += size
        for c in consumers:
            c.pause()  # commits what was received: the group's offsets equal the count
    except Exception:
        with counts.get_lock():
            counts[2] += 1
        ready.set()
        raise
    finally:
        for c in consumers:
            with contextlib.suppress(Exception):
                c.close()


class CatchUpReader:
    """The second subscription, from the earliest position, in its own process."""

    def __init__(self, driver: Driver, topics: list[str], subscription: str,
                 prefix: str) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.counts = ctx.Array("q", 3)
        self._ready = ctx.Event()
        self._go = ctx.Event()
        self._stop = ctx.Event()
        self.subscription = subscription
        self._proc = ctx.Process(
            target=_reader_main, name="brokerperf-catchup",
            args=(driver, topics, subscription, prefix, self.counts, self._ready, self._go,
                  self._stop),
            daemon=True)

    def spawn(self, timeout_s: float = 60.0) -> None:
        """Start the reader's process and wait until it is up (not yet subscribed), so
        the interpreter's start-up is not counted as catch-up time."""

        self._proc.start()
        if not self._ready.wait(timeout_s):
            raise MeasurementError(f"the catch-up reader's process did not start within "
                                   f"{timeout_s:g} s")

    def start(self) -> None:
        """Subscribe from the earliest position and read (the catch-up starts now)."""
        self._go.set()

    def received(self) -> tuple[int, int]:
        with self.counts.get_lock():
            return int(self.counts[0]), int(self.counts[1])

    def failed(self) -> bool:
        """The reader process raised (or died): ``stop()`` says so."""
        return bool(self.counts[2]) or (self._proc.exitcode not in (None, 0))

    def stop(self, timeout_s: float = 60.0) -> tuple[int, int]:
        """Stop reading, commit, close; the final (messages, bytes)."""

        self._stop.set()
        self._go.set()
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
            raise MeasurementError(f"the catch-up reader ({self.subscription}) did not stop "
                                   f"within {timeout_s:g} s")
        if self.counts[2] or self._proc.exitcode:
            raise MeasurementError(
                f"the catch-up reader ({self.subscription}) failed (exit code "
                f"{self._proc.exitcode}); its error is in the test's captured stderr")
        return self.received()

    def kill(self) -> None:
        if self._proc.is_alive():
            self._stop.set()
            self._go.set()
            self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)


# --------------------------------------------------------------------------- figures


def _merged(periods: list[PeriodStats], metric: str) -> LatencyHistogram:
    from pytest_brokerperf.metrics.histogram import LatencyHistogram

    h = LatencyHistogram.for_metric(metric)
    for p in periods:
        h.add(p.histograms[metric])
    return h


def _ratio(during: float | None, before: float | None) -> float | None:
    return during / before if during is not None and before else None


def mixed_figures(prepared: MixedPrepared, *, before: list[PeriodStats], build: PhaseRun,
                  catchup: PhaseRun, catchup_consumed: tuple[int, int], how: str,
                  subscription: str, judgeable: bool = True,
                  broker_position: list[BrokerBacklog] | None = None,
                  ) -> tuple[MixedReport, dict[str, float | None]]:
    """The record block and SLO-checkable figures of one mixed run.

    *before* is the tail-read window's periods; *during* is ``catchup``'s periods (from
    the reader's start until it was at the head). The ratios are withheld (None) when the
    tailing group was behind before the catch-up started, the catch-up did not finish,
    or ``judgeable`` is false.
    """
    pct = {"p99": 99.0, "p99.9": 99.9}

    def window(periods: list[PeriodStats], metric: str) -> dict[str, float | None]:
        h = _merged(periods, metric)
        return {k: h.percentile(q) for k, q in pct.items()}

    def count(periods: list[PeriodStats], metric: str) -> int:
        return int(_merged(periods, metric).total_count)

    pub_b, pub_d = window(before, "publish_response"), window(catchup.periods, "publish_response")
    e2e_b, e2e_d = window(before, "e2e_response"), window(catchup.periods, "e2e_response")
    s = build.end_totals
    tail_lag = max(0, prepared.workload.subscriptions_per_topic * s.get("acked", 0)
                   - s.get("received", 0))
    kept_up = build.done and tail_lag <= prepared.tail_lag_limit
    done = catchup.done
    ok = judgeable and kept_up and done
    msgs, nbytes = catchup_consumed
    secs = catchup.elapsed_s if done else None
    rate = msgs / secs if secs else None
    mib = nbytes / secs / _MIB if secs else None
    ratios = {
        "publish_p99_ratio": _ratio(pub_d["p99"], pub_b["p99"]),
        "publish_p999_ratio": _ratio(pub_d["p99.9"], pub_b["p99.9"]),
        "e2e_p99_ratio": _ratio(e2e_d["p99"], e2e_b["p99"]),
        "e2e_p999_ratio": _ratio(e2e_d["p99.9"], e2e_b["p99.9"]),
    }
    if not ok:
        ratios = dict.fromkeys(ratios)
    report = MixedReport(
        backlog_bytes_target=prepared.backlog_bytes, catchup_start=how,
        catchup_subscription=subscription, build_s=build.elapsed_s,
        build_complete=build.done,
        retained_at_catchup_start_messages=catchup.start_totals.get("acked", 0),
        tail_lag_at_catchup_start=tail_lag, tail_lag_limit=prepared.tail_lag_limit,
        tail_kept_up=kept_up, catchup_s=secs, catchup_complete=done,
        catchup_timeout_s=prepared.catchup_timeout_s, caught_up_lag=prepared.caught_up_lag,
        catchup_consumed=msgs, catchup_consumed_bytes=nbytes,
        produced_during_catchup=(catchup.end_totals.get("acked", 0)
                                 - catchup.start_totals.get("acked", 0)),
        catchup_rate_msg_s=rate, catchup_mib_s=mib,
        publish_response_before_us=pub_b, publish_response_during_us=pub_d,
        e2e_response_before_us=e2e_b, e2e_response_during_us=e2e_d,
        publish_samples_during=count(catchup.periods, "publish_response"),
        e2e_samples_during=count(catchup.periods, "e2e_response"),
        broker_catchup_position=(None if broker_position is None
                                 else [asdict(r) for r in broker_position]),
        **ratios,
    )
    figures: dict[str, float | None] = {
        "mixed.build_s": build.elapsed_s,
        "mixed.catchup_s": secs,
        "mixed.caught_up": 1.0 if done else 0.0,
        "mixed.catchup_rate_msg_s": rate,
        "mixed.catchup_mib_s": mib,
        **{f"mixed.{k}": v for k, v in ratios.items()},
    }
    return report, figures


def judge_mixed(verdict: Verdict, report: MixedReport) -> None:
    """Make ``verdict`` say what kept the ratios from being judged: the tailing group
    behind when the catch-up started, or a catch-up that never reached the head. Either
    makes a judgeable verdict INCONCLUSIVE (its status); an already inconclusive one
    (host noise, ...) keeps its status and gets the flag."""
    from pytest_brokerperf.judge.verdict import UNDERSAMPLED

    problems: list[tuple[str, str]] = []
    if not report.tail_kept_up:
        problems.append((TAIL_BEHIND, (
            f"the tailing subscription was {report.tail_lag_at_catchup_start:,} messages "
            f"behind (more than {report.tail_lag_limit:,}) when the catch-up subscription "
            "started: the impact ratios would compare a lagging group; ratios withheld")))
    if not report.catchup_complete:
        problems.append((CATCHUP_INCOMPLETE, (
            f"the catch-up subscription was not at the head within "
            f"{report.catchup_timeout_s:g} s ({report.catchup_consumed:,} messages read); "
            "Mixed(catchup_timeout_s=...) waits longer; ratios withheld")))
    for i, (flag, reason) in enumerate(problems):
        if i == 0 and verdict.judgeable:
            verdict.status = flag
        verdict.flags.append(flag)
        verdict.reasons.append(reason)
    missing = [k for k in ("publish_p99_ratio", "publish_p999_ratio", "e2e_p99_ratio",
                           "e2e_p999_ratio") if getattr(report, k) is None]
    if not problems and verdict.judgeable and missing:
        # a short catch-up: too few responses during it for these percentiles
        if UNDERSAMPLED not in verdict.flags:
            verdict.flags.append(UNDERSAMPLED)
        secs = f"{report.catchup_s:.1f} s" if report.catchup_s is not None else "the catch-up"
        verdict.details["mixed_undersampled"] = (
            f"{', '.join(missing)} n/a: the catch-up lasted {secs} with "
            f"{report.publish_samples_during:,} publish and {report.e2e_samples_during:,} "
            "tailing e2e responses (p99 needs 1,000, p99.9 10,000); a larger "
            "Mixed(backlog_bytes=...) or a higher rate lengthens it")


@dataclass
class _CaughtUp:
    """What the mixed run's phases measured, for its figures."""

    before: RunOutcome
    build: PhaseRun
    catchup: PhaseRun
    end: SessionEnd
    consumed: tuple[int, int]
    subscription: str
    position: list[BrokerBacklog] | None


def run_mixed(ctx: RunContext, scenario: Mixed, extra_slos: tuple[str, ...]) -> ScenarioResult:
    """Prepare, guard, run the phases (tail-read window, build, catch-up, end), judge and
    record."""
    from pytest_brokerperf.scenario_library.safety import format_bytes
    from pytest_brokerperf.scenario_library.session import RunSession

    broker = ctx.broker
    prepared = scenario.prepare(ctx.settings, broker)

    def replayable(driver: Driver) -> None:
        earliest_reader(ctx.broker_type, driver)  # refused or skipped before any topic exists

    run = RunSession(ctx, scenario, extra_slos, prepared=prepared,
                            check_driver=replayable)
    run.guard(producing_s=prepared.measure_s + prepared.build_timeout_s
              + prepared.catchup_timeout_s)
    # the catch-up reader: the run's (safety-bounded) driver, started at the earliest offset
    reader_driver, how = earliest_reader(ctx.broker_type, run.driver)
    ctx.progress(
        f"brokerperf: {broker.kind} {prepared.scenario} rate={prepared.rate:g} msg/s "
        f"warm-up≤{prepared.warmup_s:g}s measure={prepared.measure_s:g}s then a "
        f"subscription from the earliest position once "
        f"{format_bytes(prepared.backlog_bytes)} are retained workers={run.workers}")
    run.summary_params = (f"{short_params(prepared.params)} "
                          f"backlog={format_bytes(prepared.backlog_bytes).replace(' ', '')}")
    run.junit_figures = (*JUNIT_FIGURES, "mixed.catchup_s", "mixed.catchup_rate_msg_s",
                         "mixed.publish_p99_ratio", "mixed.e2e_p99_ratio")
    readers: list[CatchUpReader] = []
    try:
        with run.load() as s:
            got = _mixed_phases(run, s, prepared, reader_driver, readers)
    finally:
        for reader in readers:
            reader.kill()  # a reader that stopped already is left as it is
    end, before = got.end, got.before
    end.apply(before, end_time=False)
    verdict = run.assess(before)
    report, extra = mixed_figures(
        prepared, before=before.periods, build=got.build, catchup=got.catchup,
        catchup_consumed=got.consumed, how=how, subscription=got.subscription,
        judgeable=verdict.judgeable, broker_position=got.position)
    judge_mixed(verdict, report)
    ctx.progress(
        f"brokerperf: {broker.kind} mixed: catch-up "
        + (f"{report.catchup_s:.1f} s at {report.catchup_rate_msg_s:,.0f} msg/s "
           f"({report.catchup_mib_s:.1f} MiB/s)" if report.catchup_s is not None
           else f"not at the head in {prepared.catchup_timeout_s:g} s")
        + ratios_text(report.publish_p99_ratio, report.e2e_p99_ratio, "tailing e2e"))
    return run.finish(before, verdict, session=run.joined(before, end, got.build, got.catchup),
                      extra_figures=extra, record_extra={"mixed": report.as_dict()})


def _mixed_phases(run: RunSession, s: LoadSession, prepared: MixedPrepared,
                  reader_driver: Driver, readers: list[CatchUpReader]) -> _CaughtUp:
    """The phase script: the tail-read window, the retained backlog, the second
    subscription from the earliest position until it is at the head, the session's end."""
    from pytest_brokerperf.brokers.driver import BacklogReader
    from pytest_brokerperf.scenario_library.safety import format_bytes

    size = prepared.workload.message_size
    before = run.window(s, "the tail-read window before the backlog")
    build = run.phase(s, "build", lambda t: t.get("acked", 0) * size >= prepared.backlog_bytes,
                      prepared.build_timeout_s, enter="the backlog build")
    if not build.done:
        raise MeasurementError(
            f"backlog not built within {prepared.build_timeout_s:g} s: "
            f"{format_bytes(build.end_totals.get('acked', 0) * size)} of "
            f"{format_bytes(prepared.backlog_bytes)} at {prepared.rate:g} msg/s; "
            "raise Mixed(build_timeout_s=...) or the rate, or lower backlog_bytes")
    run.log.enter("the catch-up")
    sub = f"{s.prefix}-catchup"
    reader = CatchUpReader(reader_driver, s.topics, sub, s.prefix)
    readers.append(reader)
    reader.spawn()  # between phases: in no period
    run.ctx.progress(f"brokerperf: {run.kind} mixed: "
                     f"{format_bytes(build.end_totals.get('acked', 0) * size)} retained; "
                     f"subscription {sub} starts from the earliest position")
    catchup = run.phase(
        s, "catchup", lambda t: reader.failed() or t.get("acked", 0) - reader.received()[0]
        <= prepared.caught_up_lag, prepared.catchup_timeout_s, begin=reader.start)
    consumed = reader.stop()
    position: list[BrokerBacklog] | None = None
    admin = run.driver.admin()
    try:
        if isinstance(admin, BacklogReader):
            position = admin.subscription_backlog({t: [sub] for t in s.topics})
        if not run.ctx.settings.keep_topics:
            admin.delete_groups([sub])
    finally:
        admin.close()
    return _CaughtUp(before=before, build=build, catchup=catchup, end=run.end(s),
                     consumed=consumed, subscription=sub, position=position)
