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

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC
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
from pytest_brokerperf.scenario_library.finish import JUNIT_FIGURES, Measured, finish, short_params
from pytest_brokerperf.scenario_library.tailread import fixed_rate_window

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.metrics.histogram import LatencyHistogram
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.verdict import Verdict
    from pytest_brokerperf.workload import Workload

__all__ = ["POLL_S", "REASSIGN_INCOMPLETE", "THROTTLE_BROKER_KEYS", "THROTTLE_TOPIC_KEYS",
           "MoveState", "Reassign", "ReassignPrepared", "ReassignReport", "judge_reassign",
           "move_complete", "reassign_figures", "throttled", "window_ratios"]

#: metadata and in-progress reassignments are read this often during the move
POLL_S = 0.1
#: verdict status (and flag): the move did not complete within its bound
REASSIGN_INCOMPLETE = "reassign-incomplete"
THROTTLE_BROKER_KEYS = ("leader.replication.throttled.rate",
                        "follower.replication.throttled.rate")
THROTTLE_TOPIC_KEYS = ("leader.replication.throttled.replicas",
                       "follower.replication.throttled.replicas")
#: seconds after the move by profile (the *after* window)
AFTER_S: dict[str, float] = {"smoke": 5.0, "standard": 30.0, "omb": 60.0}
_PCT = {"p99": 99.0, "p99.9": 99.9}


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class MoveState:
    """One reading of the moved partition: in the in-progress list or not, its replicas
    and in-sync replicas (broker ids), and when (seconds since the request)."""

    t_s: float
    in_progress: bool
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def move_complete(state: MoveState, target: Sequence[int]) -> bool:
    """The move is done: no longer in progress, replicas equal ``target`` (as a set of
    brokers: the controller may list them in another order), and every new replica in
    the ISR (a target broker that was already a replica need not be, since it was
    not moved)."""
    want = set(target)
    return (not state.in_progress and len(state.replicas) == len(want)
            and set(state.replicas) == want and want <= set(state.isr))


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
    """

    workload: Workload | None = None
    message_size: int | None = None
    rate: float | None = None
    delay_s: float | None = None
    after_s: float | None = None
    timeout_s: float | None = None
    throttle_bytes_s: int | None = None
    target_broker: int | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "reassign"
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
        rate, period, warmup, measure = fixed_rate_window(
            settings, endpoint, wl, wl_file, self.rate, notes, what="reassign")
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


def movable(driver: Driver) -> KafkaDriver:
    """The run's driver with single-replica topics, or ``BrokerUnavailable`` (a skip)
    where partitions cannot be moved: not a Kafka-protocol driver, a single broker,
    kafka-python missing."""
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.errors import BrokerUnavailable

    if not isinstance(driver, KafkaDriver):
        raise BrokerUnavailable(
            f"reassign on {driver.kind}: partition reassignment is a Kafka-protocol "
            "operation (AlterPartitionReassignments); this broker has no partitions to move")
    if driver.kind == "tansu":
        raise BrokerUnavailable("reassign on tansu: a single stateless broker without "
                                "replication or partition reassignment")
    try:
        import kafka  # noqa: F401
    except ImportError as e:
        raise BrokerUnavailable(
            "reassign needs kafka-python (its admin client has the reassignment API "
            "confluent-kafka lacks): pip install 'pytest-brokerperf[reassign]'") from e
    single = replace(driver, config=driver.config.with_overrides(
        replication_factor=1, topic={"min.insync.replicas": "1"},
        reason="reassign: the moved topic has one replica (AutoMQ's study)"))
    admin = single.admin()
    try:
        n = admin.broker_count()
    finally:
        admin.close()
    if n < 2:
        raise BrokerUnavailable(
            f"reassign on {driver.kind} at {driver.endpoint.bootstrap}: the cluster has "
            f"{n} broker; moving a partition needs a broker without a replica of it "
            "(start a local cluster with --brokerperf-nodes=3, or point at one with 2+)")
    return single


_KAFKA_PYTHON_KEYS = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password", "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


def kafka_python_config(bootstrap: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """``KafkaAdminClient`` arguments from the endpoint's librdkafka client settings
    (connection and security only; others are client tuning the admin does not need)."""
    out: dict[str, Any] = {"bootstrap_servers": bootstrap.split(","),
                           "client_id": "brokerperf-reassign"}
    for k, v in client_config.items():
        if k in _KAFKA_PYTHON_KEYS:
            out[_KAFKA_PYTHON_KEYS[k]] = str(v).upper() if k in (
                "security.protocol", "sasl.mechanism", "sasl.mechanisms") else v
    return out


class Mover:
    """Requests the move and watches it in a thread of its own (every ``POLL_S``)."""

    def __init__(self, driver: KafkaDriver, topic: str, partition: int, target: list[int],
                 timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient
        from kafka import KafkaAdminClient

        from pytest_brokerperf.redaction import SecretDict

        ep = driver.endpoint
        conf = SecretDict(driver.config.admin_settings(ep.bootstrap))
        conf.update(ep.client_config)
        self.admin = AdminClient(conf)
        self.kadmin = KafkaAdminClient(**kafka_python_config(ep.bootstrap, ep.client_config))
        self.topic, self.partition, self.target = topic, partition, target
        self.timeout_s = timeout_s
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.states: list[MoveState] = []
        self.t0 = 0.0
        self.requested_at = ""
        self.duration_s: float | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def read(self, t_s: float = 0.0) -> MoveState:
        from kafka import TopicPartition

        md = self.admin.list_topics(self.topic, timeout=10)
        pm = md.topics[self.topic].partitions[self.partition]
        pending = self.kadmin.list_partition_reassignments(
            [TopicPartition(self.topic, self.partition)], timeout_ms=10_000)
        return MoveState(t_s=t_s, in_progress=any(
            tp.topic == self.topic and tp.partition == self.partition for tp in pending),
            replicas=tuple(pm.replicas), isr=tuple(pm.isrs))

    def start(self) -> None:
        """Request the move (the phase's clock has started) and watch it."""
        from datetime import datetime

        from kafka import TopicPartition

        from pytest_brokerperf.errors import DriverError

        self.requested_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self.t0 = time.monotonic()
        result = self.kadmin.alter_partition_reassignments(
            {TopicPartition(self.topic, self.partition): list(self.target)},
            timeout_ms=30_000)
        errors = {str(tp): err for tp, err in result.items() if err is not None}
        if errors:
            raise DriverError(f"the reassignment of {self.topic}-{self.partition} to brokers "
                              f"{self.target} was refused: {errors}")
        self._thread = threading.Thread(target=self._watch, name="brokerperf-reassign",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        deadline = self.t0 + self.timeout_s
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                s = self.read(time.monotonic() - self.t0)
                self.states.append(s)
                if move_complete(s, self.target):
                    self.duration_s = s.t_s
                    return
                self._stop.wait(POLL_S)
        except BaseException as e:  # said by the run, not swallowed
            self.error = e
        finally:
            self.done.set()

    def cancel(self) -> bool:
        """Cancel the reassignment if it is still in progress (a move that did not
        complete in time is not left running); True when a cancellation was accepted."""
        from kafka import TopicPartition

        tp = TopicPartition(self.topic, self.partition)
        if tp not in self.kadmin.list_partition_reassignments([tp], timeout_ms=10_000):
            return False
        result = self.kadmin.alter_partition_reassignments({tp: None}, timeout_ms=30_000)
        return all(err is None for err in result.values())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(Exception):
            self.kadmin.close()


def _alter(admin: Any, resources: list[Any], what: str) -> None:
    from pytest_brokerperf.errors import DriverError

    for res, fut in admin.incremental_alter_configs(resources).items():
        try:
            fut.result(timeout=30)
        except Exception as e:
            raise DriverError(f"{what} on {res} failed: {e}") from e


def throttle_resources(topic: str, partition: int, source: Sequence[int],
                       target: Sequence[int], rate: int | None, *, remove: bool = False
                       ) -> list[Any]:
    """The config changes of a throttled move (or their removal): the throttle rates on
    every broker taking part, the topic's throttled replicas (leaders: the current
    replicas; followers: the new ones)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    op = AlterConfigOpType.DELETE if remove else AlterConfigOpType.SET
    out = []
    for b in sorted(set(source) | set(target)):
        out.append(ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
            ConfigEntry(k, None if remove else str(rate), incremental_operation=op)
            for k in THROTTLE_BROKER_KEYS]))
    new = [b for b in target if b not in source]
    values = (",".join(f"{partition}:{b}" for b in source),
              ",".join(f"{partition}:{b}" for b in new))
    out.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, None if remove else v, incremental_operation=op)
        for k, v in zip(THROTTLE_TOPIC_KEYS, values, strict=True)]))
    return out


@contextlib.contextmanager
def throttled(admin: Any, topic: str, partition: int, source: Sequence[int],
              target: Sequence[int], rate: int | None, state: dict[str, Any]
              ) -> Iterator[None]:
    """Throttle the move's replication for the ``with`` block (nothing when ``rate`` is
    None), and delete every throttle config afterwards — also when setting them or the
    block failed. ``state["throttle_removed"]``: whether every deletion succeeded
    (``state["throttle_errors"]``: why not)."""
    if not rate:
        yield
        return
    try:
        _alter(admin, throttle_resources(topic, partition, source, target, rate),
               "setting the replication throttle")
        yield
    finally:
        errors: list[str] = []
        for res in throttle_resources(topic, partition, source, target, None, remove=True):
            try:  # each resource on its own: one failure leaves no other config behind
                _alter(admin, [res], "removing the replication throttle")
            except Exception as e:
                errors.append(str(e))
        state["throttle_removed"] = not errors
        if errors:
            state["throttle_errors"] = errors


# --------------------------------------------------------------------------- figures


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
    from pytest_brokerperf.verdict import UNDERSAMPLED

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
    from pytest_brokerperf import safety
    from pytest_brokerperf.engine.coordinator import LoadSession, Rung
    from pytest_brokerperf.errors import MeasurementError
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.scenario_library.setup import PeriodWatch, set_up_run
    from pytest_brokerperf.verdict import Thresholds, assess

    settings, broker = ctx.settings, ctx.broker
    prepared = scenario.prepare(settings, broker)
    holder: list[KafkaDriver] = []

    def check(driver: Driver) -> None:
        holder.append(movable(driver))  # skipped before any topic exists

    run = set_up_run(ctx, scenario, extra_slos, prepared=prepared, check_driver=check)
    slos, wl, plan, payloads, workers = run.slos, run.workload, run.plan, run.payloads, run.workers
    base_driver = holder[0]
    producing = replace(plan, measure_s=prepared.measure_s + prepared.timeout_s
                        + prepared.after_s)
    driver, safety_notes = safety.safe_driver(base_driver, settings, broker, prepared,
                                              producing)
    prepared.notes.extend(safety_notes)
    safety.require_cluster_change(settings, broker, "partition reassignment")
    splan = safety.build_plan(settings, broker, prepared, driver, producing,
                              test_id=ctx.test_id, cluster_changes=scenario.cluster_changes)
    ctx.guard(splan)
    sampler = BrokerMetricsSampler.for_endpoint(broker, settings)
    on_period = PeriodWatch(ctx, broker.kind, prepared.period_s, splan.max_bytes,
                            sampler=sampler, label=lambda p: f"{prepared.scenario}:{p.phase}")
    throttle = (f" throttled to {prepared.throttle_bytes_s:,} B/s"
                if prepared.throttle_bytes_s else "")
    ctx.progress(
        f"brokerperf: {broker.kind} reassign rate={prepared.rate:g} msg/s over 2 topics "
        f"(half each) warm-up≤{prepared.warmup_s:g}s before={prepared.measure_s:g}s then the first "
        f"topic's partition moves to another broker{throttle}, after={prepared.after_s:g}s "
        f"workers={workers}")
    thresholds = Thresholds(steal_share=settings.max_steal / 100)
    mover: Mover | None = None
    info: dict[str, Any] = {}
    if sampler is not None:
        sampler.start()
    try:
        with LoadSession(driver, wl, plan, payloads=payloads, on_period=on_period) as s:
            spec = settings.profile_spec
            before = s.run_rung(Rung(prepared.rate, prepared.warmup_s, prepared.measure_s,
                                     warmup_until_steady=spec.warmup_until_steady))
            topic = s.topics[0]
            mover = Mover(base_driver, topic, 0, [], prepared.timeout_s)
            first = mover.read()
            brokers = sorted(mover.admin.list_topics(timeout=10).brokers)
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
                        target=target,
                        background_topic=s.topics[1] if len(s.topics) > 1 else None)
            if prepared.throttle_bytes_s:
                safety.require_cluster_change(settings, broker, "replication throttles")
            ctx.progress(f"brokerperf: {broker.kind} reassign: {topic}-0 from brokers "
                         f"{source} to {target}{throttle}")
            m = mover
            with throttled(mover.admin, topic, 0, source, target, prepared.throttle_bytes_s,
                           info):
                move = s.run_until("reassign", lambda t: m.done.is_set(),
                                   prepared.timeout_s, begin=m.start)
                mover.stop()
                info["cancelled"] = mover.duration_s is None and mover.cancel()
            if mover.error is not None:
                raise MeasurementError(
                    f"reading the reassignment of {topic}-0 failed: {mover.error}"
                ) from mover.error
            info.update(request_ns=move.periods[0].start_ns if move.periods else 0,
                        duration_s=mover.duration_s, polls=len(mover.states),
                        requested_at=mover.requested_at,
                        final=mover.states[-1] if mover.states else None)
            after = s.run_until("after", lambda t: False, prepared.after_s)
            end = s.finish()
    finally:
        if mover is not None:
            mover.close()
        if sampler is not None:
            sampler.stop()
    for err in info.get("throttle_errors", []):
        prepared.notes.append(f"{err}; remove the config by hand (incremental alter "
                              "configs, DELETE, or kafka-configs --delete-config)")
    end.apply(before, end_time=False)
    verdict = assess(before, thresholds)
    report, extra = reassign_figures(
        prepared, before=before.periods, during=move.periods, after=after.periods,
        mover=info, judgeable=verdict.judgeable, client_errors=len(end.worker_errors))
    judge_reassign(verdict, report)
    session = replace(before, periods=before.periods + move.periods + after.periods,
                      end_time=end.end_time, worker_errors=list(end.worker_errors))
    ctx.progress(
        f"brokerperf: {broker.kind} reassign: "
        + (f"moved in {report.duration_s:.2f} s" if report.duration_s is not None
           else f"not complete in {prepared.timeout_s:g} s")
        + "; during/before publish p99 "
        + (f"{report.publish_p99_ratio:.2f}" if report.publish_p99_ratio is not None else "n/a")
        + ", e2e p99 "
        + (f"{report.e2e_p99_ratio:.2f}" if report.e2e_p99_ratio is not None else "n/a"))
    return finish(ctx, Measured(
        prepared=prepared, driver_name=driver.name, headline=before, verdict=verdict,
        slos=slos, seed=run.seed, plan=splan, sampler=sampler, session=session,
        extra_figures=extra, record_extra={"reassignment": report.as_dict()},
        summary_params=(f"{short_params(prepared.params)}"
                        + (f" throttle={prepared.throttle_bytes_s}" if throttle else "")),
        junit_figures=(*JUNIT_FIGURES, "reassign.duration_s", "reassign.publish_p99_ratio",
                       "reassign.e2e_p99_ratio"),
    ))
