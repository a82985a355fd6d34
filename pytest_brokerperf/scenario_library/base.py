"""The scenario protocol: what every scenario declares, and the types it hands on.

A scenario is a question asked of a broker (tail-read latency, maximum sustainable
throughput, …). It has two steps, both declared here so the runner never probes for them:

* :meth:`Scenario.prepare` resolves the session settings (profile, overrides, workload
  and driver files) into a :class:`PreparedRun` — before anything is created, so bad
  input fails fast;
* :meth:`Scenario.execute` runs it through a
  :class:`~pytest_brokerperf.scenario_library.context.RunContext` and returns a
  :class:`ScenarioResult`, ending in
  :func:`~pytest_brokerperf.scenario_library.finish.finish` like every other scenario.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.engine.plan import DEFAULT_PER_PROCESS_RATE, auto_workers
from pytest_brokerperf.results.prepared import PreparedRun, workload_block

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.capabilities import CapabilityName
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.judge.slo import SLO, SLOResult
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.results.record import ResultRecord
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.workload.model import Workload

__all__ = [
    "DEFAULT_PER_PROCESS_RATE", "NO_BACKLOG", "NO_RATE_SCHEDULE", "PreparedRun", "Scenario",
    "ScenarioResult", "auto_workers", "backlog_problem", "durability_param", "key_source",
    "refuse_rate_schedule", "resolve_period", "resolve_workload", "workload_block",
    "workload_refusals",
]


@dataclass
class ScenarioResult:
    """What one scenario run produced, after verdict and SLO evaluation."""

    prepared: PreparedRun
    outcome: RunOutcome
    verdict: Verdict
    figures: dict[str, float | None]
    slo_results: list[SLOResult]
    record: ResultRecord  # the results.jsonl line (docs/reference/results.md)
    artefacts: Path
    failures: list[str] = field(default_factory=list)  # SLOs violated, findings
    inconclusive: list[str] = field(default_factory=list)
    #: regressions against a baseline (``--brokerperf-fail-on``): never SLO failures
    regressions: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures and not self.inconclusive and not self.regressions


class Scenario(ABC):
    """Base class: a named question asked of a broker.

    Subclasses are dataclasses whose fields are the user's overrides (``None`` = from the
    workload and profile) and declare ``name``, ``prepare`` and ``execute``.
    """

    name: str = "scenario"
    #: extra SLO expressions for this run (``TailRead(slos=("e2e_response.p99 < 50ms",))``)
    slos: tuple[str, ...] = ()
    #: the scenario builds a safety plan (caps, retention, dry-run printout) before it
    #: creates anything; without one it is refused on remote clusters and in dry runs
    safety_plan: ClassVar[bool] = True
    #: changes the scenario makes to the cluster beyond its own topics (partition
    #: reassignment, broker restarts), listed in the safety plan
    cluster_changes: ClassVar[tuple[str, ...]] = ()
    #: injects the test's fault (``--brokerperf-fault``) in its measured window; other
    #: scenarios refuse a fault rather than run without it
    takes_faults: ClassVar[bool] = False
    #: what the scenario needs of a broker beyond a driver (``BrokerType.capabilities``):
    #: a test of it on a kind that lacks one is deselected at collection with the reason
    needs: ClassVar[tuple[CapabilityName, ...]] = ()

    def sanity_slos(self) -> tuple[SLO, ...]:
        """Loose shipped bounds that hold on small CI machines; real targets come from users."""
        from pytest_brokerperf.judge.slo import SHIPPED_SLOS

        return SHIPPED_SLOS.get(self.name, ())

    @abstractmethod
    def prepare(self, settings: Settings, endpoint: BrokerEndpoint) -> PreparedRun:
        """Resolve the settings into a run; raises ``ValueError``/``ConfigError`` on bad input."""

    @abstractmethod
    def execute(self, ctx: RunContext, extra_slos: tuple[str, ...]) -> ScenarioResult:
        """Run on ``ctx``'s broker, judge, and record (through ``finish``)."""


def durability_param(endpoint: BrokerEndpoint) -> int | None:
    """The run's durability level (the ``broker`` fixture's), None = driver-defined; a
    scenario parameter, so SLO selectors can say ``when: {params: {durability: 1}}``."""
    return endpoint.durability


def resolve_workload(settings: Settings, *, given: Workload | None, shipped: str,
                     notes: list[str], partitions: int | None = None,
                     message_size: int | None = None,
                     **counts: int | None) -> tuple[Workload, Path | None]:
    """The run's workload and the file it came from.

    The scenario's own ``Workload`` wins, then ``--brokerperf-workload``, then the shipped
    file named ``shipped``; ``partitions``, ``message_size`` and the client ``counts``
    (``producers_per_topic``, ``consumer_per_subscription``, ``subscriptions_per_topic``)
    override it. A payload file of another size is dropped with a note.
    """
    from pytest_brokerperf.core.shipped import shipped_workload
    from pytest_brokerperf.workload.model import Workload

    wl_file: Path | None = None
    if given is not None:
        wl = given
    elif settings.workload is not None:
        wl_file = Path(settings.workload)
        wl = Workload.from_yaml(wl_file, lenient=settings.lenient)
    else:
        wl_file = shipped_workload(shipped)
        wl = Workload.from_yaml(wl_file, lenient=settings.lenient)
    changes: dict[str, Any] = {k: v for k, v in counts.items() if v is not None}
    if partitions is not None:
        changes["partitions_per_topic"] = partitions
    if message_size is not None and message_size != wl.message_size:
        changes["message_size"] = message_size
        if wl.payload_file:
            changes["payload_file"] = None
            notes.append(
                f"payloadFile {wl.payload_file!r} dropped: it holds {wl.message_size} bytes "
                f"and this run sends {message_size}-byte messages (generated payload)"
            )
    return (wl.replace(**changes) if changes else wl), wl_file


def key_source(wl: Workload, key: str) -> str:
    """``file:line`` of ``key`` in the file ``wl`` was read from (the file alone when the
    line cannot be found, ``<python>`` for a workload built in Python)."""
    from pytest_brokerperf.core.errors import WorkloadError
    from pytest_brokerperf.core.files import load_yaml

    path = Path(wl.source)
    if wl.source.startswith("<") or not path.is_file():
        return wl.source
    try:
        line = load_yaml(path, WorkloadError, "workload").line(key)
    except (WorkloadError, OSError):
        line = None
    return f"{path}:{line}" if line else str(path)


def refuse_rate_schedule(wl: Workload, scenario: str, why: str) -> None:
    """A workload with AutoMQ's ``producerRateList`` is an error in a scenario that sets
    its own rates (``why``): the schedule would be dropped."""
    problem = _rate_schedule_problem(wl, scenario, why)
    if problem:
        raise ValueError(problem)


def _rate_schedule_problem(wl: Workload, scenario: str, why: str) -> str | None:
    if wl.producer_rate_list is None:
        return None
    value = [list(e) for e in wl.producer_rate_list]
    return (
        f"{key_source(wl, 'producerRateList')}: producerRateList = {value}: the {scenario} "
        f"scenario cannot follow a rate schedule ({why}), so it would be dropped. Fix: run "
        "it as a tail-read (`-m tailread`, TailRead()), which follows the schedule, or "
        "remove producerRateList from the workload"
    )


#: Scenarios that would ignore a workload's backlog (``consumerBacklogSizeGB``).
NO_BACKLOG = ("tailread", "soak", "throughput")
#: Scenarios that set their own rates, and why: a ``producerRateList`` would be dropped.
NO_RATE_SCHEDULE = {
    "throughput": "it finds the rate itself (ladder or rate discovery)",
    "catchup": "it publishes at one rate while the backlog builds and drains",
    "mixed": "its before/during ratios compare windows at one fixed rate",
}


def backlog_problem(wl: Workload, scenario: str) -> str | None:
    """Why ``scenario`` cannot run ``wl``'s backlog (it would ignore it), or None."""
    if scenario not in NO_BACKLOG or wl.consumer_backlog_size_gb <= 0:
        return None
    return (
        f"{key_source(wl, 'consumerBacklogSizeGB')}: consumerBacklogSizeGB = "
        f"{wl.consumer_backlog_size_gb}: a backlog to build and drain, which the {scenario} "
        "scenario would ignore. Fix: run it as a catch-up read (`-m catchup`, CatchUp()), "
        "or set consumerBacklogSizeGB: 0"
    )


def workload_refusals(scenario: str, wl: Workload) -> list[str]:
    """Why the ``scenario`` kind (its marker's name) cannot run ``wl`` as the file says:
    checked before any broker starts (the plugin's preflight) and again in ``prepare``."""
    problems = [backlog_problem(wl, scenario)]
    if scenario in NO_RATE_SCHEDULE:
        problems.append(_rate_schedule_problem(wl, scenario, NO_RATE_SCHEDULE[scenario]))
    return [p for p in problems if p]


def resolve_period(settings: Settings, wl: Workload) -> float:
    """The statistics period: the flag, else the OMB file's ``logIntervalMillis`` under
    ``--brokerperf-profile=omb``, else the profile's."""
    if settings.period is not None:
        return float(settings.period)
    if settings.profile == "omb" and wl.log_interval_millis:
        return wl.log_interval_millis / 1000.0
    return float(settings.profile_spec.period_s)


def base_params(wl: Workload, endpoint: BrokerEndpoint, rate: float) -> dict[str, Any]:
    """The parameters every scenario reports (matrix keys for SLO selectors and reports).

    With AutoMQ's per-topic lists, ``partitions`` is the list (one entry per topic) and
    ``producers_per_topic`` the producers list; ``producers`` stays the total."""
    lists: dict[str, Any] = {}
    if wl.producers_per_topic_list is not None:
        lists["producers_per_topic"] = list(wl.producers_per_topic_list)
    return {
        "topics": wl.topics,
        "partitions": (list(wl.partitions_per_topic_list)
                       if wl.partitions_per_topic_list is not None
                       else wl.partitions_per_topic),
        **lists,
        "message_size": wl.message_size,
        "producers": wl.total_producers,
        "subscriptions": wl.subscriptions_per_topic,
        "consumers": wl.total_consumers,
        "rate": rate,
        "durability": durability_param(endpoint),
    }


def driver_file(settings: Settings, given: Path | None) -> Path | None:
    """The scenario's driver file, else ``--brokerperf-driver``, else the broker's default."""
    return given or (Path(settings.driver) if settings.driver else None)
