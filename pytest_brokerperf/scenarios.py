"""The scenario library: what each study's question becomes as a workload and a plan.

A scenario turns the session settings (profile, overrides, files) into a concrete OMB
workload, a :class:`~pytest_brokerperf.engine.coordinator.RunPlan` and its shipped
sanity SLOs. The shipped tests in ``scenarios/`` and users' own tests both call
``brokerperf.run(TailRead(...))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.slo import SLO
    from pytest_brokerperf.workload import Workload

__all__ = ["PreparedRun", "Scenario", "TailRead"]


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
        }
        driver_file = self.driver_file or (Path(settings.driver) if settings.driver else None)
        return PreparedRun(
            scenario=self.name, workload=wl, workload_file=wl_file, rate=rate,
            period_s=period, warmup_s=warmup, measure_s=measure, params=params,
            slos=self.sanity_slos(), driver_file=driver_file, notes=notes,
        )
