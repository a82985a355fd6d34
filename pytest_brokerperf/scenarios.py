"""The scenario library: what each study's question becomes as a workload and a plan.

A scenario turns the session settings (profile, overrides, files) into a concrete OMB
workload, a :class:`~pytest_brokerperf.engine.coordinator.RunPlan` and its shipped
sanity SLOs. The shipped tests in ``scenarios/`` and users' own tests both call
``brokerperf.run(TailRead(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.ladder import LadderPolicy
    from pytest_brokerperf.runner import BrokerPerf, ScenarioResult
    from pytest_brokerperf.slo import SLO
    from pytest_brokerperf.workload import Workload

__all__ = [
    "TOPOLOGY_CHECK_RATE", "PreparedRun", "Scenario", "TailRead", "Throughput",
    "ThroughputPrepared",
]

#: The profile's default tail-read rate on a topology check (several local broker nodes
#: on one machine, pitfalls.md §5): three JVMs pinned to one of two cores spend their
#: first minutes compiling (C2 threads took ~40 % of their CPU) and then keep up with a
#: few hundred msg/s at RF 3, not with the smoke profile's 1000. Explicit rates win.
TOPOLOGY_CHECK_RATE = 100.0


@dataclass
class PreparedRun:
    """A scenario resolved against the settings: ready for the engine."""

    scenario: str
    workload: Workload
    workload_file: Path | None
    rate: float
    period_s: float
    warmup_s: float
    measure_s: float
    params: dict[str, Any]
    slos: tuple[SLO, ...]  # the scenario's shipped sanity bounds
    driver_file: Path | None
    notes: list[str] = field(default_factory=list)


def durability_param(endpoint: BrokerEndpoint) -> int | None:
    """The run's durability level (the ``broker`` fixture's), None = driver-defined; a
    scenario parameter, so SLO selectors can say ``when: {params: {durability: 1}}``."""
    return endpoint.durability


class Scenario:
    """Base class: a named question asked of a broker."""

    name = "scenario"

    def sanity_slos(self) -> tuple[SLO, ...]:
        """Loose shipped bounds that hold on small CI machines; real targets come from users."""
        from pytest_brokerperf.slo import SHIPPED_SLOS

        return SHIPPED_SLOS.get(self.name, ())

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> PreparedRun:
        raise NotImplementedError


@dataclass
class TailRead(Scenario):
    """Tail-read latency: fixed-rate publishing, consumers reading at the tail.

    The studies' core latency question (AutoMQ tail read, Confluent's latency runs).
    Any field left ``None`` comes from the workload (``--brokerperf-workload`` or the
    shipped ``tail-read-smoke.yaml``) and the profile (durations, rate, period).
    """

    workload: Workload | None = None
    partitions: int | None = None
    message_size: int | None = None
    rate: float | None = None
    producers: int | None = None
    consumers: int | None = None
    subscriptions: int | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()  # extra SLO expressions for this run
    name: str = "tailread"

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> PreparedRun:
        from pytest_brokerperf.workload import Workload, shipped_workload

        notes: list[str] = []
        wl_file: Path | None = None
        if self.workload is not None:
            wl = self.workload
        elif settings.workload is not None:
            wl_file = Path(settings.workload)
            wl = Workload.from_yaml(wl_file)
        else:
            wl_file = shipped_workload("tail-read-smoke")
            wl = Workload.from_yaml(wl_file)
        changes: dict[str, Any] = {}
        if self.partitions is not None:
            changes["partitions_per_topic"] = self.partitions
        if self.message_size is not None and self.message_size != wl.message_size:
            changes["message_size"] = self.message_size
            if wl.payload_file:
                changes["payload_file"] = None
                notes.append(
                    f"payloadFile {wl.payload_file!r} dropped: it holds {wl.message_size} bytes "
                    f"and this run sends {self.message_size}-byte messages (generated payload)"
                )
        if self.producers is not None:
            changes["producers_per_topic"] = self.producers
        if self.consumers is not None:
            changes["consumer_per_subscription"] = self.consumers
        if self.subscriptions is not None:
            changes["subscriptions_per_topic"] = self.subscriptions
        if changes:
            wl = wl.replace(**changes)
        spec = settings.profile_spec
        from_file = settings.profile == "omb"
        if settings.rate is not None:
            rate = float(settings.rate)
            notes.append(f"rate {rate:g} msg/s from --brokerperf-rate")
        elif self.rate is not None:
            rate = float(self.rate)
        elif from_file or (wl_file is not None and settings.workload is not None):
            rate = float(wl.producer_rate)
        else:
            rate = float(spec.tailread_rate)
            if endpoint.topology_check and rate > TOPOLOGY_CHECK_RATE:
                rate = TOPOLOGY_CHECK_RATE
                notes.append(
                    f"rate {rate:g} msg/s instead of the profile's {spec.tailread_rate:g}: "
                    f"{endpoint.nodes} broker nodes share this machine (topology check); "
                    "--brokerperf-rate sets another"
                )
        if rate <= 0:
            raise ValueError(
                "the tail-read scenario needs a fixed producerRate > 0; producerRate: 0 "
                "(rate discovery) belongs to the throughput scenario"
            )
        if settings.period is not None:
            period = float(settings.period)
        elif from_file and wl.log_interval_millis:
            period = wl.log_interval_millis / 1000.0
        else:
            period = float(spec.period_s)
        if settings.warmup is not None:
            warmup = float(settings.warmup)
        elif from_file:
            warmup = wl.warmup_s
        else:
            warmup = float(spec.warmup_s)
        if settings.duration is not None:
            measure = float(settings.duration)
        elif from_file:
            measure = wl.duration_s
        else:
            measure = float(spec.measure_s)
            if wl_file is not None and settings.workload is not None:
                notes.append(
                    f"durations from profile {settings.profile!r} (warm-up cap {warmup:g} s, "
                    f"measured {measure:g} s), not from the workload file; use "
                    "--brokerperf-profile=omb to run the file's durations"
                )
        wl = wl.replace(producer_rate=round(rate))
        params = {
            "topics": wl.topics,
            "partitions": wl.partitions_per_topic,
            "message_size": wl.message_size,
            "producers": wl.total_producers,
            "subscriptions": wl.subscriptions_per_topic,
            "consumers": wl.total_consumers,
            "rate": rate,
            "durability": durability_param(endpoint),
        }
        driver_file = self.driver_file or (Path(settings.driver) if settings.driver else None)
        return PreparedRun(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file, notes=notes,
        )


LADDER = "ladder"
RATE_DISCOVERY = "omb-rate-discovery"
THROUGHPUT_MODES = (LADDER, RATE_DISCOVERY)


@dataclass
class ThroughputPrepared(PreparedRun):
    """A throughput scenario resolved against the settings.

    ``rate``/``warmup_s``/``measure_s`` of the base class are the top rung's rate and
    the per-rung warm-up cap and measured window (ladder), or the fixed warm-up and
    measured window of OMB's rate discovery.
    """

    mode: str = LADDER
    rates: tuple[float, ...] = ()
    warmup_until_steady: bool = True
    policy: LadderPolicy | None = None


@dataclass
class Throughput(Scenario):
    """Maximum sustainable throughput: a ladder of fixed rates that brackets the limit.

    The studies' first question (Confluent's 10K…1M msg/s ladder): each rung offers a
    fixed rate, settles, is measured and judged sustainable or not from the
    *acknowledged* rate, consumer-lag and client-queue trends and publish delay; the
    ladder climbs until a rung fails (or reports "limit not reached"), and says what
    limited it (generator, client library or broker back-pressure). ``rates`` defaults to
    ``--brokerperf-ladder`` or the profile's scaled ladder; ``mode="omb-rate-discovery"``
    (or ``--brokerperf-rate-discovery``) runs OMB's ``producerRate: 0`` controller instead.
    The workload defaults to OMB's ``max-rate-1-topic-16-partitions-1kb``.
    """

    workload: Workload | None = None
    partitions: int | None = None
    message_size: int | None = None
    rates: tuple[float, ...] | None = None
    mode: str | None = None  # "ladder" | "omb-rate-discovery"; None: options decide
    rung_warmup_s: float | None = None  # per-rung warm-up cap
    rung_measure_s: float | None = None  # per-rung measured window
    tolerance: float | None = None  # acknowledged-rate tolerance (default ±5 %)
    policy: LadderPolicy | None = None
    subscriptions: int | None = None
    driver_file: Path | None = None
    slos: tuple[str, ...] = ()
    name: str = "throughput"
    #: run_throughput builds the safety plan (caps, retention, dry run) before anything
    #: is created, so the runner lets it reach remote clusters and dry runs
    safety_plan: ClassVar[bool] = True

    def execute(self, brokerperf: BrokerPerf, extra_slos: tuple[str, ...]) -> ScenarioResult:
        """Run the ladder (or rate discovery) on ``brokerperf``'s broker."""
        from pytest_brokerperf.throughput import run_throughput

        return run_throughput(brokerperf, self, extra_slos)

    def _mode(self, settings: Settings, wl: Workload, notes: list[str]) -> str:
        if self.mode is not None and self.mode not in THROUGHPUT_MODES:
            raise ValueError(f"Throughput(mode={self.mode!r}): expected one of "
                             f"{', '.join(THROUGHPUT_MODES)}")
        if getattr(settings, "rate_discovery", False):
            return RATE_DISCOVERY
        if self.mode is not None:
            return self.mode
        if getattr(settings, "ladder", None) or self.rates:
            return LADDER
        if settings.profile == "omb" and wl.producer_rate == 0:
            notes.append("producerRate 0 under --brokerperf-profile=omb: OMB's rate "
                         "discovery (results labelled omb-rate-discovery)")
            return RATE_DISCOVERY
        return LADDER

    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> ThroughputPrepared:
        from dataclasses import replace as _replace

        from pytest_brokerperf import ladder as lad
        from pytest_brokerperf.workload import Workload, shipped_workload

        notes: list[str] = []
        wl_file: Path | None = None
        if self.workload is not None:
            wl = self.workload
        elif settings.workload is not None:
            wl_file = Path(settings.workload)
            wl = Workload.from_yaml(wl_file)
        else:
            wl_file = shipped_workload("max-rate-1-topic-16-partitions-1kb")
            wl = Workload.from_yaml(wl_file)
        changes: dict[str, Any] = {}
        if self.partitions is not None:
            changes["partitions_per_topic"] = self.partitions
        if self.message_size is not None and self.message_size != wl.message_size:
            changes["message_size"] = self.message_size
            if wl.payload_file:
                changes["payload_file"] = None
                notes.append(
                    f"payloadFile {wl.payload_file!r} dropped: it holds {wl.message_size} bytes "
                    f"and this run sends {self.message_size}-byte messages (generated payload)"
                )
        if self.subscriptions is not None:
            changes["subscriptions_per_topic"] = self.subscriptions
        if changes:
            wl = wl.replace(**changes)
        mode = self._mode(settings, wl, notes)
        spec = settings.profile_spec
        from_file = settings.profile == "omb"
        if settings.rate is not None:
            notes.append("--brokerperf-rate is ignored by the throughput scenario: its rates "
                         "come from --brokerperf-ladder or the profile")
        if settings.period is not None:
            period = float(settings.period)
        elif from_file and wl.log_interval_millis:
            period = wl.log_interval_millis / 1000.0
        else:
            period = float(spec.period_s)
        policy = self.policy or lad.LadderPolicy()
        if self.tolerance is not None:
            policy = _replace(policy, rate_tolerance=float(self.tolerance))
        if mode == LADDER:
            raw = getattr(settings, "ladder", None) or self.rates or lad.ladder_rates(
                settings.profile)
            rates = tuple(sorted({float(r) for r in raw}))
            if not rates or rates[0] <= 0:
                raise ValueError(f"a throughput ladder needs rates > 0 msg/s, got {raw!r}")
            lp = lad.LADDER_PROFILES[settings.profile]
            if settings.warmup is not None:
                warmup = float(settings.warmup)
            elif self.rung_warmup_s is not None:
                warmup = float(self.rung_warmup_s)
            else:
                warmup = wl.warmup_s if lp.warmup_max_s is None else lp.warmup_max_s
            if settings.duration is not None:
                measure = float(settings.duration)
            elif self.rung_measure_s is not None:
                measure = float(self.rung_measure_s)
            else:
                measure = wl.duration_s if lp.measure_s is None else lp.measure_s
            until_steady = lp.warmup_until_steady
            top = rates[-1]
        else:
            from pytest_brokerperf.engine.rate_controller import INITIAL_RATE

            rates = ()
            warmup = float(settings.warmup) if settings.warmup is not None else (
                wl.warmup_s if from_file else float(spec.warmup_s))
            measure = float(settings.duration) if settings.duration is not None else (
                wl.duration_s if from_file else float(spec.measure_s))
            until_steady = False
            top = INITIAL_RATE
        wl = wl.replace(producer_rate=0 if mode == RATE_DISCOVERY else round(top))
        params = {
            "topics": wl.topics,
            "partitions": wl.partitions_per_topic,
            "message_size": wl.message_size,
            "producers": wl.total_producers,
            "subscriptions": wl.subscriptions_per_topic,
            "consumers": wl.total_consumers,
            "rate": top,
            "durability": durability_param(endpoint),
            "mode": mode,
            "ladder": ",".join(lad.format_rate(r) for r in rates) if rates else None,
        }
        driver_file = self.driver_file or (Path(settings.driver) if settings.driver else None)
        return ThroughputPrepared(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=top,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file, notes=notes, mode=mode,
            rates=rates, warmup_until_steady=until_steady, policy=policy,
        )
