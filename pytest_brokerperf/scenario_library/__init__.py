"""The scenario library: each study's question as a workload, a plan and a run.

Not to be confused with the shipped test suite (``scenarios/`` in a checkout, installed
as ``pytest_brokerperf.suite``), whose tests call these scenarios::

    def test_tail_read(brokerperf):
        brokerperf.run(TailRead(partitions=16))

One protocol (:class:`~pytest_brokerperf.scenario_library.base.Scenario`: ``prepare`` and
``execute``) and one ending
(:func:`~pytest_brokerperf.scenario_library.finish.finish`) for every scenario.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_brokerperf.scenario_library.base import PreparedRun, Scenario, ScenarioResult
from pytest_brokerperf.scenario_library.catchup import CatchUp
from pytest_brokerperf.scenario_library.mixed import Mixed
from pytest_brokerperf.scenario_library.reassign import Reassign
from pytest_brokerperf.scenario_library.soak import Soak
from pytest_brokerperf.scenario_library.tailread import TOPOLOGY_CHECK_RATE, TailRead
from pytest_brokerperf.scenario_library.throughput import Throughput
from pytest_brokerperf.scenario_library.throughput_run import (
    LADDER,
    RATE_DISCOVERY,
    ThroughputPrepared,
    ThroughputResult,
)

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType

__all__ = [
    "LADDER",
    "RATE_DISCOVERY",
    "SCENARIOS",
    "TOPOLOGY_CHECK_RATE",
    "CatchUp",
    "Mixed",
    "PreparedRun",
    "Reassign",
    "Scenario",
    "ScenarioResult",
    "Soak",
    "TailRead",
    "Throughput",
    "ThroughputPrepared",
    "ThroughputResult",
    "capability_refusal",
]

#: every shipped scenario by its name (its marker, a study case's ``scenario``)
SCENARIOS: dict[str, type[Scenario]] = {
    s.name: s for s in (TailRead, Throughput, CatchUp, Mixed, Reassign, Soak)}


def capability_refusal(broker: BrokerType, scenario: str) -> str | None:
    """Why the ``scenario`` named so cannot run on ``broker``: the first capability it
    ``needs`` that the broker lacks, in the broker's words; None when it can (or the
    name is no shipped scenario)."""
    cls = SCENARIOS.get(scenario)
    if cls is None:
        return None
    return broker.capabilities.refusal(cls.needs, broker.name, f"the {scenario} scenario")
