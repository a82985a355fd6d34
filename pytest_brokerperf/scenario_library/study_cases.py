"""The published studies' cases as data, scaled to a profile.

A :class:`StudyCase` holds what one case of a study measured, at the study's own numbers
(partitions, message size, clients, rate, backlog, producer settings). ``scenarios/``
parametrizes tests with them; :meth:`StudyCase.build` turns one into the scenario to
run under the session's ``--brokerperf-profile``:

* ``smoke`` shrinks every case to seconds on a laptop and ``standard`` to minutes
  (:data:`SCALE_LIMITS`: partitions, clients, rate in msg/s and bytes/s, backlog); what was
  shrunk is listed in the record's notes and the case keeps its study id, so a
  ``p2000`` case run as ``smoke`` says it ran 16 partitions.
* ``omb`` keeps the study's numbers. A case this machine cannot produce is refused up
  front, with the reason (:func:`omb_refusals`): a rate above what the calibrated
  generator reaches (the harness ceiling per process times the worker processes), or
  data that does not fit on the local broker's disk.

The studies (:data:`STUDIES`, docs/reference/study-cases.md): Confluent's "Benchmarking
Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the Fastest?", StreamNative's
"Benchmarking Pulsar and Kafka – A More Accurate Perspective on Pulsar's Performance",
Xiaohongshu's and AutoMQ's OpenMessaging Benchmark evaluation of AutoMQ against Apache
Kafka 3.4 (tail read, catch-up read, partition reassignment) and the "Apache Pulsar
performance limit test" (pulsar-perf, sync versus async).

A case never deviates silently: what this suite cannot do as the study did is either a
refusal at collection (:meth:`StudyCase.refusal`: the wrong broker kind is deselected,
too few nodes or a broker setting a local broker cannot take is skipped with the reason)
or a ``deviations`` entry that reaches the record's notes; numbers the study does not
state are ``assumptions``, also in the notes.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.brokers.producer_tweak import ProducerTweak, size_id
from pytest_brokerperf.report.published import STUDIES, Study
from pytest_brokerperf.scenario_library.safety import format_bytes

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.scenario_library.base import Scenario

__all__ = [
    "SCALE_LIMITS",
    "SCENARIO_KINDS",
    "STREAMNATIVE_SERVER",
    "STREAMNATIVE_TUNING",
    "STUDIES",
    "ProducerTweak",
    "ScaleLimits",
    "ScaledCase",
    "Study",
    "StudyCase",
    "drop_page_cache",
    "generator_capacity",
    "omb_refusals",
    "refusals",
    "size_id",
]

KIB: Final = 1024
MIB: Final = 1024**2
GIB: Final = 1024**3
SCENARIO_KINDS: Final = ("tailread", "throughput", "catchup", "mixed", "reassign")


#: StreamNative's Pulsar tuning ("StreamNative framework") this suite does not apply, as
#: deviation notes every StreamNative case carries (its broker setting is applied:
#: :data:`STREAMNATIVE_SERVER`)
STREAMNATIVE_TUNING: Final = (
    "batchingPartitionSwitchFrequencyByPublishDelay=2 (Pulsar producer) is not applied: "
    "the Python client cannot set it (the driver's notes say so)",
    "managedLedgerNewEntriesCheckDelayInMillis=0 (Pulsar broker) is set by the local "
    "Pulsar this suite starts; on a remote cluster it is the operator's",
)


def _server_setting(entry: str) -> tuple[str | None, str, str]:
    """``[kind:]key=value`` as (kind or None, key, value); key "" when malformed."""
    head, eq, value = entry.partition("=")
    scope, colon, key = head.partition(":")
    if not colon:
        scope, key = "", head
    if not eq or not key.strip() or (colon and not scope.strip()):
        return None, "", ""
    return (scope.strip() or None), key.strip(), value.strip()


#: A synchronous producer's throughput ladder (pulsar-perf's sync cases publish between
#: 700 and 4,200 msg/s on the study's hardware): from 100 msg/s, doubling
SYNC_LADDER: Final = (100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 6400.0, 12800.0)

#: StreamNative's Pulsar broker setting, a Pulsar broker of its own is started with it
STREAMNATIVE_SERVER: Final = ("pulsar:bookkeeperNumberOfChannelsPerBookie=64",)


def _rate_id(rate: float) -> str:
    from pytest_brokerperf.judge.ladder import format_rate

    return format_rate(rate)


@dataclass(frozen=True)
class ScaleLimits:
    """What one profile allows a case (the study's number when it is lower)."""

    partitions: int
    clients: int  # producers per topic, consumers per subscription
    subscriptions: int
    rate: float  # msg/s
    bytes_rate: float  # B/s, so large messages shrink their rate too
    backlog_bytes: int
    reassign_after_s: float  # the window after a move
    reassign_delay_s: float = 30.0  # the measured window before it


#: smoke: seconds on a laptop; standard: minutes. ``omb`` has no limits (study numbers).
SCALE_LIMITS: Final[Mapping[str, ScaleLimits]] = {
    "smoke": ScaleLimits(partitions=16, clients=2, subscriptions=10, rate=1000.0,
                         bytes_rate=2.0 * MIB, backlog_bytes=32 * MIB, reassign_after_s=5.0,
                         reassign_delay_s=5.0),
    "standard": ScaleLimits(partitions=1000, clients=4, subscriptions=10, rate=5000.0,
                            bytes_rate=20.0 * MIB, backlog_bytes=GIB,
                            reassign_after_s=30.0, reassign_delay_s=30.0),
}


@dataclass(frozen=True)
class ScaledCase:
    """A case's numbers under one profile, and what was changed to get them."""

    case: StudyCase
    profile: str
    partitions: int
    producers: int
    consumers: int
    subscriptions: int
    rate: float | None
    rates: tuple[float, ...] | None  # the throughput ladder, when the case needs its own
    backlog_bytes: int | None
    reassign_after_s: float | None
    reassign_delay_s: float | None = None
    background_rate: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def labels(self) -> dict[str, Any]:
        """The record's ``params.study``, ``params.case`` and ``params.study_source`` (the
        study's table or figure, as in the published figures' data)."""
        return {"study": self.case.study, "case": self.case.id,
                "study_source": self.case.source}

    def note(self) -> str:
        """The record's note on where the case comes from and what the profile changed."""
        scaled = (f"; scaled for --brokerperf-profile={self.profile}: "
                  + ", ".join(self.notes)) if self.notes else ""
        return (f"study case {self.case.study} {self.case.id} ({self.case.cite()})"
                f"{scaled}")

    def all_notes(self) -> list[str]:
        """:meth:`note`, then each deviation and assumption of the case, one note each."""
        return ([self.note()]
                + [f"study deviation: {d}" for d in self.case.deviations]
                + [f"study assumption: {a}" for a in self.case.assumptions])


@dataclass(frozen=True)
class StudyCase:
    """One case of a published study at the study's numbers.

    ``study`` is a key of :data:`STUDIES` for the shipped cases (any name for your own),
    ``source`` the table or figure (the published figures' ``table``), ``section`` where
    in the study the case's settings are stated. ``scenario`` is one of
    :data:`SCENARIO_KINDS`. ``rate`` is the study's offered rate in msg/s (None: the
    scenario's own, e.g. a throughput ladder); ``rates`` the study's own ladder;
    ``backlog_bytes`` the catch-up or mixed backlog; ``tweak`` the producer settings.

    Reassignment: ``delay_s`` is the measured load *before* the move (the study's "moved
    after 10 minutes"), ``after_s`` the window after it, ``throttle_bytes_s`` the
    replication throttle, ``background_partitions`` and ``background_rate`` (msg/s) the
    background topic beside the moved one (``rate`` is then the moved topic's own).

    How the study ran it: ``drivers`` (broker kind, shipped driver name) pairs: the driver
    file the case starts from on that kind (``--brokerperf-driver`` wins, with a note);
    ``brokers`` the broker kinds or protocols the case is for (empty: any; ``kafka``
    includes the Kafka-protocol brokers; another kind is deselected at collection);
    ``min_nodes`` with ``min_nodes_why``; ``server_settings`` broker or bookie settings
    (``key=value``; ``kind:key=value`` for one kind only), written into a local broker's
    configuration where its kind takes them (``BrokerType.server_settings_modes``; a
    broker of their own, refused elsewhere), a note on a remote one;
    ``drop_page_cache`` drop the host's page cache first; ``deviations`` and
    ``assumptions`` what differs from the study or is not stated in it.
    """

    study: str
    source: str  # where in the study: "table 1", "figure 2"
    scenario: str
    partitions: int = 100
    message_size: int = KIB
    producers: int = 1
    consumers: int = 1
    subscriptions: int = 1
    rate: float | None = None
    backlog_bytes: int | None = None
    tweak: ProducerTweak = field(default_factory=ProducerTweak)
    producers_during_drain: bool = True
    after_s: float | None = None
    throttle_bytes_s: int | None = None
    delay_s: float | None = None
    background_partitions: int | None = None
    background_rate: float | None = None
    rates: tuple[float, ...] | None = None
    section: str = ""
    drivers: tuple[tuple[str, str], ...] = ()
    brokers: tuple[str, ...] = ()
    min_nodes: int = 1
    min_nodes_why: str = ""
    server_settings: tuple[str, ...] = ()
    drop_page_cache: bool = False
    deviations: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    variant: str = ""

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIO_KINDS:
            raise ValueError(f"StudyCase(scenario={self.scenario!r}): expected one of "
                             f"{', '.join(SCENARIO_KINDS)}")
        for name in ("partitions", "message_size", "producers", "consumers", "subscriptions"):
            if getattr(self, name) < 1:
                raise ValueError(f"StudyCase({name}={getattr(self, name)}): must be >= 1")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"StudyCase(rate={self.rate}): a rate is > 0 msg/s (None: the "
                             "scenario's own)")
        if self.scenario in ("catchup", "mixed") and not self.backlog_bytes:
            raise ValueError(f"StudyCase(scenario={self.scenario!r}) needs backlog_bytes")
        for name in ("delay_s", "background_partitions", "background_rate"):
            value = getattr(self, name)
            if value is not None and self.scenario != "reassign":
                raise ValueError(f"StudyCase({name}={value!r}) is a reassignment setting; "
                                 f"scenario={self.scenario!r} has no move")
            if value is not None and value <= 0:
                raise ValueError(f"StudyCase({name}={value!r}): must be > 0")
        if self.background_rate is not None and self.rate is None:
            raise ValueError(f"StudyCase(background_rate={self.background_rate!r}) needs "
                             "rate= (the moved topic's own msg/s)")
        if self.rates is not None and (self.scenario != "throughput" or not self.rates
                                       or any(r <= 0 for r in self.rates)):
            raise ValueError(f"StudyCase(rates={self.rates!r}): a throughput ladder of "
                             "rates > 0 msg/s")
        bad = [s for s in self.server_settings if _server_setting(s)[1] == ""]
        if bad:
            raise ValueError(f"StudyCase(server_settings={bad!r}): each is key=value, or "
                             "kind:key=value for one broker kind")
        if self.min_nodes < 1 or (self.min_nodes > 1 and not self.min_nodes_why):
            raise ValueError(f"StudyCase(min_nodes={self.min_nodes}) needs >= 1 and, above "
                             "1, min_nodes_why (the reason a refusal gives)")

    @property
    def study_info(self) -> Study | None:
        """The study in :data:`STUDIES` (None for a study of your own)."""
        return STUDIES.get(self.study)

    def cite(self) -> str:
        """Where the case comes from: the study's title, its table or figure, the section
        stating the settings."""
        info = self.study_info
        where = self.source + (f", {self.section}" if self.section else "")
        return f"{info.cite()}, {where}" if info else where

    def server_config(self, kind: str) -> tuple[tuple[str, str], ...]:
        """The :attr:`server_settings` a broker of ``kind`` is started with, as (key,
        value) pairs in the study's order: the unscoped ones and ``kind:``'s."""
        out = []
        for entry in self.server_settings:
            scope, key, value = _server_setting(entry)
            if scope is None or scope == kind:
                out.append((key, value))
        return tuple(out)

    def server_settings_for(self, kind: str) -> list[str]:
        """:meth:`server_config` as ``key=value`` text (notes, refusals)."""
        return [f"{k}={v}" for k, v in self.server_config(kind)]

    def refusal(self, kind: str, *, nodes: int, remote: bool,
                mode: str = "process") -> tuple[str, str] | None:
        """Why this case does not run on a broker of ``kind`` with ``nodes`` nodes
        provisioned as ``mode``, as ``("deselect", reason)`` (the case is not for this
        broker kind: it cannot apply) or ``("skip", reason)`` (it could, on another
        setup); None: it runs. Decided at collection, before any broker starts."""
        from pytest_brokerperf import brokers
        from pytest_brokerperf.scenario_library import capability_refusal

        known = brokers.is_known(kind)
        why = capability_refusal(brokers.get(kind), self.scenario) if known else None
        if why:
            return ("deselect", why)
        protocol = brokers.get(kind).protocol if known else kind
        if self.brokers and kind not in self.brokers and protocol not in self.brokers:
            return ("deselect", f"study case {self.study} {self.id} is the study's "
                    f"{'/'.join(self.brokers)} case, not {kind}'s")
        if nodes < self.min_nodes and not remote:
            return ("skip", f"study case {self.study} {self.id} needs --brokerperf-nodes >= "
                    f"{self.min_nodes}: {self.min_nodes_why}")
        takes = brokers.get(kind).server_settings_modes if known else ()
        server = self.server_settings_for(kind)
        if server and not remote and mode not in takes:
            return ("skip", f"study case {self.study} {self.id} needs broker settings "
                    f"{kind} in {mode} mode cannot take: {'; '.join(server)}"
                    ". Fix: run it against a cluster configured so (--brokerperf-provision="
                    "remote)" + (f", or --brokerperf-provision={takes[0]}" if takes else ""))
        return None

    @property
    def id(self) -> str:
        """The pytest id: ``p100-s10-1KiB-r200k``, ``p100-4KiB-backlog1TiB``."""
        parts = [f"p{self.partitions}"]
        if self.subscriptions != 1:
            parts.append(f"s{self.subscriptions}")
        if self.producers != 1 or self.consumers != 1:
            parts.append(f"{self.producers}x{self.consumers}")
        parts.append(size_id(self.message_size))
        if self.rate is not None:
            parts.append(f"r{_rate_id(self.rate)}")
        if self.backlog_bytes:
            parts.append(f"backlog{size_id(self.backlog_bytes)}")
        if not self.producers_during_drain:
            parts.append("consumer-only")
        if self.tweak:
            parts.append(self.tweak.id)
        if self.throttle_bytes_s:
            parts.append(f"throttle{size_id(self.throttle_bytes_s)}")
        if self.delay_s is not None:
            parts.append(f"after{self.delay_s:g}s")
        if self.background_partitions is not None or self.background_rate is not None:
            bg = f"bg-p{self.background_partitions or 1}"
            if self.background_rate is not None:
                bg += f"-r{_rate_id(self.background_rate)}"
            parts.append(bg)
        if self.variant:
            parts.append(self.variant)
        return "-".join(parts)

    def __str__(self) -> str:
        return self.id

    # ----------------------------------------------------------------- scaling

    def _sync_ladder(self) -> tuple[float, ...] | None:
        """:data:`SYNC_LADDER` for a throughput case of a synchronous producer without a
        ladder of its own: one message in flight reaches one per round trip, far below
        the scenario's default first rung (2,000 msg/s), which would bracket nothing."""
        if (self.scenario != "throughput" or self.rates is not None
                or self.tweak.send_mode != "sync"):
            return None
        return SYNC_LADDER

    def scaled(self, profile: str) -> ScaledCase:
        """This case under ``profile`` (``omb``: unchanged)."""
        limits = SCALE_LIMITS.get(profile)
        if limits is None:
            return ScaledCase(
                case=self, profile=profile, partitions=self.partitions,
                producers=self.producers, consumers=self.consumers,
                subscriptions=self.subscriptions, rate=self.rate,
                rates=self.rates if self.rates is not None else self._sync_ladder(),
                backlog_bytes=self.backlog_bytes, reassign_after_s=self.after_s,
                reassign_delay_s=self.delay_s, background_rate=self.background_rate)
        notes: list[str] = []

        def cap(what: str, value: int, limit: int) -> int:
            if value > limit:
                notes.append(f"{what} {value} -> {limit}")
                return limit
            return value

        rate_cap = min(limits.rate, limits.bytes_rate / self.message_size)
        rate: float | None = None
        background: float | None = None
        if self.rate is not None and self.background_rate is not None:
            # the two topics' total within the limit, in the study's ratio: whole msg/s
            # per producer, the producers split as the scenario splits them
            from pytest_brokerperf.scenario_library.reassign import producer_split

            a, b = producer_split(self.rate, self.background_rate)
            total = self.rate + self.background_rate
            per = max(1, math.floor(min(total, rate_cap) / (a + b)))
            rate, background = float(a * per), float(b * per)
            if min(total, rate_cap) < total:
                notes.append(f"rate {_rate_id(self.rate)} + background "
                             f"{_rate_id(self.background_rate)} -> {_rate_id(rate)} + "
                             f"{_rate_id(background)} msg/s")
        elif self.rate is not None or self.scenario != "throughput":
            wanted = self.rate if self.rate is not None else limits.rate
            rate = float(max(1, math.floor(min(wanted, rate_cap))))
            if self.rate is not None and rate < self.rate:
                notes.append(f"rate {_rate_id(self.rate)} -> {_rate_id(rate)} msg/s")
        rates = None
        if self.scenario == "throughput" and self.message_size * limits.rate > limits.bytes_rate:
            # a ladder in bytes: the message-count ladder would start far above the cap
            top = limits.bytes_rate * 8 / self.message_size
            # rungs below 1 msg/s all become 1 msg/s: once (a repeated rung is no rung)
            rates = tuple(dict.fromkeys(float(max(1, round(top / 2**k)))
                                        for k in range(6, -1, -1)))
            notes.append(f"ladder {', '.join(_rate_id(r) for r in rates)} msg/s "
                         f"({size_id(self.message_size)} messages)")
        backlog = None
        if self.backlog_bytes:
            backlog = self.backlog_bytes
            if backlog > limits.backlog_bytes:
                notes.append(f"backlog {format_bytes(backlog)} -> "
                             f"{format_bytes(limits.backlog_bytes)}")
                backlog = limits.backlog_bytes
        if rates is None and self.rates is not None:
            notes.append(f"ladder {', '.join(_rate_id(r) for r in self.rates)} msg/s -> "
                         "the profile's")
        if rates is None and (sync := self._sync_ladder()) is not None:
            rates = sync
            notes.append(f"ladder {', '.join(_rate_id(r) for r in rates)} msg/s (a "
                         "synchronous producer has one message in flight)")
        after = None
        if self.after_s is not None:
            after = min(self.after_s, limits.reassign_after_s)
            if after < self.after_s:
                notes.append(f"window after the move {self.after_s:g} s -> {after:g} s")
        delay = None
        if self.delay_s is not None:
            delay = min(self.delay_s, limits.reassign_delay_s)
            if delay < self.delay_s:
                notes.append(f"move after {self.delay_s:g} s -> {delay:g} s of load")
        return ScaledCase(
            case=self, profile=profile,
            partitions=cap("partitions", self.partitions, limits.partitions),
            producers=cap("producers", self.producers, limits.clients),
            consumers=cap("consumers", self.consumers, limits.clients),
            subscriptions=cap("subscriptions", self.subscriptions, limits.subscriptions),
            rate=rate, rates=rates, backlog_bytes=backlog, reassign_after_s=after,
            reassign_delay_s=delay, background_rate=background, notes=tuple(notes))

    # ----------------------------------------------------------------- scenario

    def build(self, settings: Settings, endpoint: BrokerEndpoint, driver_dir: Path,
              broker: BrokerType | None = None) -> tuple[Scenario, ScaledCase]:
        """The scenario to run for this case under the session's profile.

        A producer tweak is written as a driver file in ``driver_dir`` (the session's
        ``--brokerperf-driver``, else the broker's default, with the tweak applied);
        :class:`~pytest_brokerperf.core.errors.BrokerUnavailable` when the broker has no such
        setting. ``broker``: the run's broker kind (None: the endpoint's, from the registry).
        """
        from pytest_brokerperf import brokers
        from pytest_brokerperf.core.shipped import shipped_driver
        from pytest_brokerperf.scenario_library import (
            CatchUp,
            Mixed,
            Reassign,
            TailRead,
            Throughput,
        )

        s = self.scaled(settings.profile)
        kind = broker if broker is not None else brokers.get(endpoint.kind)
        driver: Path | None = None
        study_driver = dict(self.drivers).get(endpoint.kind)
        if study_driver is not None and not settings.driver:
            driver = shipped_driver(study_driver)
        if self.tweak:
            base = (Path(settings.driver) if settings.driver else driver
                    or kind.default_driver_file(endpoint.nodes, self.scenario))
            driver_dir.mkdir(parents=True, exist_ok=True)
            driver = kind.tweak_driver_file(
                base, self.tweak, driver_dir / f"driver-{self.tweak.id}.yaml")
        common: dict[str, Any] = {"message_size": self.message_size, "driver_file": driver}
        clients: dict[str, Any] = {"partitions": s.partitions, "producers": s.producers,
                                   "consumers": s.consumers, "subscriptions": s.subscriptions}
        run: Scenario
        if self.scenario == "tailread":
            run = TailRead(rate=s.rate, **clients, **common)
        elif self.scenario == "throughput":
            run = Throughput(rates=s.rates, **clients, **common)
        elif self.scenario == "catchup":
            run = CatchUp(rate=s.rate, backlog_bytes=s.backlog_bytes,
                               producers_during_drain=self.producers_during_drain,
                               **clients, **common)
        elif self.scenario == "mixed":
            run = Mixed(rate=s.rate, backlog_bytes=s.backlog_bytes, **clients, **common)
        else:
            run = Reassign(rate=s.rate, delay_s=s.reassign_delay_s, after_s=s.reassign_after_s,
                           throttle_bytes_s=self.throttle_bytes_s,
                           background_partitions=self.background_partitions,
                           background_rate=s.background_rate, **common)
        return run, s

    def with_(self, **changes: Any) -> StudyCase:
        """A copy with fields changed (for sweeps built from one base case)."""
        return replace(self, **changes)


# --------------------------------------------------------------------- the page cache


DROP_CACHES: Final = Path("/proc/sys/vm/drop_caches")


def drop_page_cache(path: Path | None = None) -> str | None:
    """Write back dirty pages and drop the host's page cache, as StreamNative did before
    each run (so a run does not read what the last one cached). None when done, else
    why not (not root, a read-only /proc in a container): the caller records that as
    the case's deviation."""
    import os

    path = path or DROP_CACHES
    try:
        os.sync()
        path.write_text("3\n")
    except OSError as exc:
        return (f"the page cache was not dropped before the run: writing 3 to {path} "
                f"failed ({exc.strerror or exc}); it needs root on the broker's host "
                "outside a container")
    return None


# --------------------------------------------------------------------- omb refusal


def data_bytes(s: ScaledCase, duration_s: float, replicas: int) -> int:
    """Bytes the case leaves on the broker's disks: the backlog, or the rate over the run,
    times the replicas (an upper bound: retention may delete some). A reassignment's
    topics have one replica each."""
    if s.case.scenario == "reassign":
        # the moved topic and the background topic (at its own rate, else the same),
        # over the window before the move too
        rate = (s.rate or 0.0) + (s.background_rate if s.background_rate is not None
                                  else (s.rate or 0.0))
        written = rate * s.case.message_size * (duration_s + (s.reassign_delay_s or 0.0))
        return int(written)  # both topics have a single replica (the study's)
    written = (s.rate or 0.0) * s.case.message_size * s.producers * duration_s
    total = max(written, float(s.backlog_bytes or 0))
    return int(total * max(1, replicas))


def omb_refusals(s: ScaledCase, *, generator_rate: float | None, generator_what: str,
                 disk_free_bytes: int | None, disk_where: str, duration_s: float,
                 replicas: int) -> list[str]:
    """Why this machine cannot run ``s`` at the study's numbers (empty: it can).

    ``generator_rate`` is what the calibrated generator reaches in msg/s across its worker
    processes (None: unknown, not checked); ``disk_free_bytes`` the free space where the
    local broker keeps its data (None: a remote cluster, not checked).
    """
    out: list[str] = []
    rate = s.rate
    if rate is not None and generator_rate is not None and rate > generator_rate:
        out.append(
            f"the study's {_rate_id(rate)} msg/s of {size_id(s.case.message_size)} messages "
            f"exceeds what the calibrated generator reaches here: {generator_what}; a "
            "number above it would measure the generator, not the broker. Fix: run the case "
            "with --brokerperf-profile=standard, or from a machine with more cores")
    if disk_free_bytes is not None:
        need = data_bytes(s, duration_s, replicas)
        if need > 0.9 * disk_free_bytes:
            out.append(
                f"the case leaves about {format_bytes(need)} on the local broker's disk "
                f"({'backlog' if s.backlog_bytes else 'rate x duration'} x {replicas} "
                f"replica(s)), and {disk_where} has {format_bytes(disk_free_bytes)} free. "
                "Fix: --basetemp on a larger disk, a remote cluster, or "
                "--brokerperf-profile=standard")
    return out


def disk_free(path: Path) -> int | None:
    """Free bytes on the filesystem holding ``path`` (its nearest existing parent)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def refusals(s: ScaledCase, settings: Settings, *, nodes: int, remote: bool,
             data_dir: Path | None, generator: tuple[float, str] | None) -> list[str]:
    """:func:`omb_refusals` with this session's numbers: the omb profile's durations,
    the default drivers' replicas (3 from three nodes), the broker data directory's free
    space (local brokers only) and ``generator`` (msg/s and how it was found)."""
    spec = settings.profile_spec
    free = None if remote or data_dir is None else disk_free(data_dir)
    return omb_refusals(
        s, generator_rate=generator[0] if generator else None,
        generator_what=generator[1] if generator else "",
        disk_free_bytes=free, disk_where=str(data_dir), duration_s=spec.warmup_s + spec.measure_s,
        replicas=3 if nodes >= 3 else 1)


def generator_capacity(s: ScaledCase, settings: Settings, cpus: tuple[int, ...] | None,
                       *, measure: bool, driver: Driver | None = None,
                       broker: tuple[str, str] | None = None) -> tuple[float, str] | None:
    """What the generator reaches for ``s`` in msg/s: the per-process ceiling times the
    worker processes the run would use. The ceiling is the lower of the harness ceiling
    (the in-process loopback driver) and, given ``driver`` and ``broker`` (kind,
    version), the broker client's; both calibrated and cached per machine. Only
    process-bound ceilings count (a broker-bound one is a lower bound). None when
    calibration is off, nothing is known, or not cached and ``measure`` is False."""
    from pytest_brokerperf.brokers import HARNESS, harness_driver
    from pytest_brokerperf.judge.calibration import cached_or_measured, calibration_key, load_cached
    from pytest_brokerperf.scenario_library.base import auto_workers

    if settings.calibration == "off" or s.rate is None:
        return None
    size, parts = s.case.message_size, s.partitions
    targets: list[tuple[str, Driver, str, str]] = [
        ("harness", harness_driver(parts), HARNESS, "in-process")]
    if driver is not None and broker is not None:
        targets.append(("driver", driver, *broker))
    found: list[tuple[float, str]] = []
    for target, drv, kind, version in targets:
        if measure:
            ceiling = cached_or_measured(drv, target=target, broker=kind,
                                         broker_version=version, message_size=size,
                                         partitions=parts, generator_cpus=cpus,
                                         mode=settings.calibration)
        else:
            ceiling = load_cached(calibration_key(drv, broker_version=version,
                                                  message_size=size, partitions=parts,
                                                  generator_cpus=cpus))
        if ceiling is not None and ceiling.client_ceiling is not None:
            found.append((ceiling.client_ceiling,
                          f"{ceiling.client_ceiling:,.0f} msg/s per worker process "
                          f"({'cached' if ceiling.cached else 'measured'} {target} ceiling, "
                          f"{kind})"))
    if not found:
        return None
    per, what = min(found)
    clients = s.producers + s.consumers * s.subscriptions
    workers = settings.workers or auto_workers(s.rate, clients, cpus)
    total = per * workers
    return total, f"{what} x {workers} process(es) = {total:,.0f} msg/s"
