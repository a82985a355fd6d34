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

The studies (docs/reference/study-cases.md): Confluent's "Benchmarking Apache Kafka,
Apache Pulsar, and RabbitMQ", StreamNative's "Benchmarking Pulsar and Kafka", AutoMQ's
evaluation against Apache Kafka 3.4 (tail read, catch-up read, partition reassignment)
and the "Apache Pulsar performance limit" test (pulsar-perf, sync versus async).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.safety import format_bytes

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.scenario_library.base import Scenario

__all__ = [
    "SCALE_LIMITS",
    "SCENARIO_KINDS",
    "ProducerTweak",
    "ScaleLimits",
    "ScaledCase",
    "StudyCase",
    "generator_capacity",
    "omb_refusals",
    "refusals",
    "size_id",
]

KIB: Final = 1024
MIB: Final = 1024**2
GIB: Final = 1024**3
SCENARIO_KINDS: Final = ("tailread", "throughput", "catchup", "mixed", "reassign")
COMPRESSIONS: Final = ("none", "lz4", "zstd", "snappy", "gzip")
SEND_MODES: Final = ("async", "sync")


def size_id(n: int) -> str:
    """``128B``, ``1KiB``, ``512KiB``, ``1GiB``: exact binary units for ids."""
    for unit, size in (("TiB", 1024**4), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def _rate_id(rate: float) -> str:
    from pytest_brokerperf.ladder import format_rate

    return format_rate(rate)


@dataclass(frozen=True)
class ProducerTweak:
    """Producer settings a case sweeps, applied to the driver file's producer block.

    ``batch_bytes`` (Kafka ``batch.size``, Pulsar ``batchingMaxBytes``), ``linger_ms``
    (``linger.ms``, ``batchingMaxPublishDelayMs``), ``compression`` (``compression.type``,
    ``compressionType``) and ``send_mode`` (``sync``: one message outstanding, batching
    off, as pulsar-perf ``--max-outstanding 1 --disable-batching``; Pulsar only). ``None``
    keeps the driver file's value.
    """

    batch_bytes: int | None = None
    linger_ms: int | None = None
    compression: str | None = None
    send_mode: str | None = None

    def __post_init__(self) -> None:
        if self.batch_bytes is not None and self.batch_bytes < 1:
            raise ValueError(f"ProducerTweak(batch_bytes={self.batch_bytes}): a batch size "
                             "is at least 1 byte")
        if self.linger_ms is not None and self.linger_ms < 0:
            raise ValueError(f"ProducerTweak(linger_ms={self.linger_ms}): a linger time is "
                             ">= 0 ms")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ValueError(f"ProducerTweak(compression={self.compression!r}): expected one "
                             f"of {', '.join(COMPRESSIONS)}")
        if self.send_mode is not None and self.send_mode not in SEND_MODES:
            raise ValueError(f"ProducerTweak(send_mode={self.send_mode!r}): expected one of "
                             f"{', '.join(SEND_MODES)}")

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.batch_bytes, self.linger_ms, self.compression,
                                           self.send_mode))

    @property
    def id(self) -> str:
        """``batch16KiB-linger5ms-lz4-sync`` (empty when nothing is tweaked)."""
        parts = []
        if self.batch_bytes is not None:
            parts.append(f"batch{size_id(self.batch_bytes)}")
        if self.linger_ms is not None:
            parts.append(f"linger{self.linger_ms}ms")
        if self.compression is not None:
            parts.append(self.compression)
        if self.send_mode is not None:
            parts.append(self.send_mode)
        return "-".join(parts)


@dataclass(frozen=True)
class ScaleLimits:
    """What one profile allows a case (the study's number when it is lower)."""

    partitions: int
    clients: int  # producers per topic, consumers per subscription
    subscriptions: int
    rate: float  # msg/s
    bytes_rate: float  # B/s, so large messages shrink their rate too
    backlog_bytes: int
    reassign_after_s: float


#: smoke: seconds on a laptop; standard: minutes. ``omb`` has no limits (study numbers).
SCALE_LIMITS: Final[Mapping[str, ScaleLimits]] = {
    "smoke": ScaleLimits(partitions=16, clients=2, subscriptions=10, rate=1000.0,
                         bytes_rate=2.0 * MIB, backlog_bytes=32 * MIB, reassign_after_s=5.0),
    "standard": ScaleLimits(partitions=1000, clients=4, subscriptions=10, rate=5000.0,
                            bytes_rate=20.0 * MIB, backlog_bytes=GIB,
                            reassign_after_s=30.0),
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
    notes: tuple[str, ...] = ()

    @property
    def labels(self) -> dict[str, Any]:
        """The record's ``params.study`` and ``params.case`` (part of its matrix key)."""
        return {"study": self.case.study, "case": self.case.id}

    def note(self) -> str:
        """The record's note on where the case comes from and what the profile changed."""
        scaled = (f"; scaled for --brokerperf-profile={self.profile}: "
                  + ", ".join(self.notes)) if self.notes else ""
        return (f"study case {self.case.study} {self.case.id} ({self.case.source})"
                f"{scaled}")


@dataclass(frozen=True)
class StudyCase:
    """One case of a published study at the study's numbers.

    ``scenario`` is one of :data:`SCENARIO_KINDS`. ``rate`` is the study's offered rate in
    msg/s (None: the scenario's own, e.g. a throughput ladder); ``backlog_bytes`` the
    catch-up or mixed backlog; ``tweak`` the producer settings swept. ``after_s`` and
    ``throttle_bytes_s`` are the reassignment's delay and replication throttle.
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
        return "-".join(parts)

    def __str__(self) -> str:
        return self.id

    # ----------------------------------------------------------------- scaling

    def scaled(self, profile: str) -> ScaledCase:
        """This case under ``profile`` (``omb``: unchanged)."""
        limits = SCALE_LIMITS.get(profile)
        if limits is None:
            return ScaledCase(
                case=self, profile=profile, partitions=self.partitions,
                producers=self.producers, consumers=self.consumers,
                subscriptions=self.subscriptions, rate=self.rate, rates=None,
                backlog_bytes=self.backlog_bytes, reassign_after_s=self.after_s)
        notes: list[str] = []

        def cap(what: str, value: int, limit: int) -> int:
            if value > limit:
                notes.append(f"{what} {value} -> {limit}")
                return limit
            return value

        rate_cap = min(limits.rate, limits.bytes_rate / self.message_size)
        rate: float | None = None
        if self.rate is not None or self.scenario != "throughput":
            wanted = self.rate if self.rate is not None else limits.rate
            rate = float(max(1, math.floor(min(wanted, rate_cap))))
            if self.rate is not None and rate < self.rate:
                notes.append(f"rate {_rate_id(self.rate)} -> {_rate_id(rate)} msg/s")
        rates = None
        if self.scenario == "throughput" and self.message_size * limits.rate > limits.bytes_rate:
            # a ladder in bytes: the message-count ladder would start far above the cap
            top = limits.bytes_rate * 8 / self.message_size
            rates = tuple(float(max(1, round(top / 2**k))) for k in range(6, -1, -1))
            notes.append(f"ladder {', '.join(_rate_id(r) for r in rates)} msg/s "
                         f"({size_id(self.message_size)} messages)")
        backlog = None
        if self.backlog_bytes:
            backlog = self.backlog_bytes
            if backlog > limits.backlog_bytes:
                notes.append(f"backlog {format_bytes(backlog)} -> "
                             f"{format_bytes(limits.backlog_bytes)}")
                backlog = limits.backlog_bytes
        after = None
        if self.after_s is not None:
            after = min(self.after_s, limits.reassign_after_s)
            if after < self.after_s:
                notes.append(f"reassign after {self.after_s:g} s -> {after:g} s")
        return ScaledCase(
            case=self, profile=profile,
            partitions=cap("partitions", self.partitions, limits.partitions),
            producers=cap("producers", self.producers, limits.clients),
            consumers=cap("consumers", self.consumers, limits.clients),
            subscriptions=cap("subscriptions", self.subscriptions, limits.subscriptions),
            rate=rate, rates=rates, backlog_bytes=backlog, reassign_after_s=after,
            notes=tuple(notes))

    # ----------------------------------------------------------------- scenario

    def build(self, settings: Settings, endpoint: BrokerEndpoint,
              driver_dir: Path) -> tuple[Scenario, ScaledCase]:
        """The scenario to run for this case under the session's profile.

        A producer tweak is written as a driver file in ``driver_dir`` (the session's
        ``--brokerperf-driver``, else the broker's default, with the tweak applied);
        :class:`~pytest_brokerperf.errors.BrokerUnavailable` when the broker has no such
        setting.
        """
        from pytest_brokerperf import brokers
        from pytest_brokerperf.scenario_library import (
            CatchUp,
            Mixed,
            Reassign,
            TailRead,
            Throughput,
        )

        s = self.scaled(settings.profile)
        driver: Path | None = None
        if self.tweak:
            base = (Path(settings.driver) if settings.driver
                    else brokers.get(endpoint.kind).default_driver_file(endpoint.nodes,
                                                                        self.scenario))
            driver_dir.mkdir(parents=True, exist_ok=True)
            driver = brokers.get(endpoint.kind).tweak_driver_file(
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
            run = Reassign(rate=s.rate, after_s=s.reassign_after_s,
                                throttle_bytes_s=self.throttle_bytes_s, **common)
        return run, s

    def with_(self, **changes: Any) -> StudyCase:
        """A copy with fields changed (for sweeps built from one base case)."""
        return replace(self, **changes)


# --------------------------------------------------------------------- omb refusal


def data_bytes(s: ScaledCase, duration_s: float, replicas: int) -> int:
    """Bytes the case leaves on the broker's disks: the backlog, or the rate over the run,
    times the replicas (an upper bound: retention may delete some)."""
    written = (s.rate or 0.0) * s.case.message_size * s.producers * duration_s
    if s.case.scenario == "reassign":
        # the moved topic and the background topic, each at the rate
        written *= 2
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
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.calibration import cached_or_measured, calibration_key, load_cached
    from pytest_brokerperf.scenario_library.base import auto_workers

    if settings.calibration == "off" or s.rate is None:
        return None
    size, parts = s.case.message_size, s.partitions
    targets: list[tuple[str, Driver, str, str]] = [
        ("harness", LoopbackDriver(partitions=parts), "loopback", "in-process")]
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
