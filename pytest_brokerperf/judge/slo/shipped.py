"""The shipped sanity bounds per scenario, and the rule by which user SLOs replace them
(a user SLO for a metric replaces every shipped bound for that metric).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_brokerperf.judge.slo.expression import SLO

_SHIPPED = "shipped sanity bound"

#: Loose bounds for the tail-read scenario that hold on small CI machines (shared two-core
#: runners with steal time): real targets belong in user SLO files.
TAIL_READ_SANITY_SLOS: tuple[SLO, ...] = (
    SLO.parse("lost == 0", source=_SHIPPED),
    SLO.parse("e2e_response.p99 < 5 s", source=_SHIPPED),
    SLO.parse("publish_response.p99 < 5 s", source=_SHIPPED),
)

#: The throughput ladder's sanity bound: every acknowledged message arrives.
THROUGHPUT_SANITY_SLOS: tuple[SLO, ...] = (SLO.parse("lost == 0", source=_SHIPPED),)

#: The catch-up scenario's sanity bounds: nothing lost, and the backlog drained within
#: the run's bound (``drained`` is 1 then).
CATCHUP_SANITY_SLOS: tuple[SLO, ...] = (
    SLO.parse("lost == 0", source=_SHIPPED),
    SLO.parse("drained == 1", source=_SHIPPED),
)

#: The mixed scenario's sanity bounds: nothing lost, and the catch-up subscription at
#: the head within the run's bound.
MIXED_SANITY_SLOS: tuple[SLO, ...] = (
    SLO.parse("lost == 0", source=_SHIPPED),
    SLO.parse("mixed.caught_up == 1", source=_SHIPPED),
)

#: The reassign scenario's sanity bounds: nothing lost, and the move complete within the
#: run's bound.
REASSIGN_SANITY_SLOS: tuple[SLO, ...] = (
    SLO.parse("lost == 0", source=_SHIPPED),
    SLO.parse("reassign.complete == 1", source=_SHIPPED),
)

#: Shipped sanity bounds by scenario name.
SHIPPED_SLOS: dict[str, tuple[SLO, ...]] = {
    "tailread": TAIL_READ_SANITY_SLOS,
    "throughput": THROUGHPUT_SANITY_SLOS,
    "catchup": CATCHUP_SANITY_SLOS,
    "mixed": MIXED_SANITY_SLOS,
    "reassign": REASSIGN_SANITY_SLOS,
}


def merge_slos(
    shipped: Iterable[SLO],
    user: Iterable[SLO],
    *,
    broker: str | None = None,
    scenario: str | None = None,
    params: Mapping[str, Any] | None = None,
    env: str | None = None,
) -> list[SLO]:
    """The SLOs a test is judged by: user SLOs, plus shipped bounds for metrics no user
    SLO covers (a user SLO replaces the shipped bound *for its metric only*).

    Pass the test's ``broker``/``scenario``/``params``/``env`` so that only user SLOs that
    apply to this test replace shipped bounds (an SLO for ``broker: pulsar`` must not
    remove Kafka's sanity bound); without them, every SLO given is taken as applicable.
    """
    shipped, user = list(shipped), list(user)
    if broker is not None or scenario is not None or params or env is not None:
        shipped = [s for s in shipped if s.applies_to(broker, scenario, params, env)]
        user = [u for u in user if u.applies_to(broker, scenario, params, env)]
    replaced = {u.metric for u in user}
    return [s for s in shipped if s.metric not in replaced] + user
