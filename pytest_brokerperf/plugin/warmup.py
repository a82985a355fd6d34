"""Warm each broker once per session before any measured scenario: a cold JVM's figures
are its JIT compiler's (docs/explanation/measurement.md).

A JVM broker needs load before C2 has compiled its hot paths; a scenario that starts
on a cold broker measures the JIT. The warm-up runs a fixed small workload through the
same engine and records what it did in every manifest.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings

__all__ = ["TOPOLOGY_WARMUP_CAP_S", "broker_warmup_s", "warm_broker"]

#: Several broker JVMs sharing one (pinned) CPU compile their hot paths slowly: on two
#: cores a three-node cluster needs 40-90 s of load before it keeps up with 1000 msg/s.
#: Their warm-up therefore runs until steady (ack rate and p99), capped here.
TOPOLOGY_WARMUP_CAP_S = 180.0


def broker_warmup_s(settings: Settings) -> tuple[float, str]:
    """The session's broker warm-up length and where it came from: the flag (env, ini)
    when given, else the profile's."""
    if settings.broker_warmup is None:
        return float(settings.profile_spec.broker_warmup_s), f"the {settings.profile} profile"
    return float(settings.broker_warmup), settings.sources.get(
        "broker_warmup", "--brokerperf-broker-warmup")


def warm_broker(endpoint: BrokerEndpoint, settings: Settings,
                broker_type: BrokerType) -> dict[str, Any]:
    """Run the profile's broker warm-up load; return what it did (for manifests)."""
    from pytest_brokerperf.core.shipped import shipped_workload
    from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
    from pytest_brokerperf.engine.plan import TOPOLOGY_CHECK_RATE, RunPlan
    from pytest_brokerperf.workload.model import Workload

    seconds, where = broker_warmup_s(settings)
    if seconds <= 0:
        return {"seconds": 0.0, "skipped": f"broker warm-up 0 s (from {where}): the first "
                "scenario met a cold broker, its own warm-up absorbed the JIT"}
    wl = Workload.from_yaml(shipped_workload("tail-read-smoke"))
    rate = float(settings.profile_spec.tailread_rate)
    driver = broker_type.create_driver(endpoint, None, scenario="warmup", stats_interval_ms=0)
    until_steady = endpoint.nodes > 1  # a topology check: JIT on a shared CPU is slow
    if until_steady:  # warm at the rate the session will run
        rate = float(settings.rate) if settings.rate is not None else min(
            rate, TOPOLOGY_CHECK_RATE)
    plan = RunPlan(
        rate=rate, period_s=1.0, warmup_max_s=TOPOLOGY_WARMUP_CAP_S if until_steady else 0.0,
        measure_s=seconds, workers=1,
        topic_prefix=f"bp-{settings.run_id}-broker-warmup",
        generator_cpus=default_generator_cpus(endpoint.broker_cpus()),
        drain_timeout_s=10.0,
    )
    t0 = time.monotonic()
    outcome = run_workload(driver, wl, plan, payloads=wl.payloads(None, seed=1))
    return {
        "seconds": round(time.monotonic() - t0, 2),
        "rate_msg_s": rate,
        "acknowledged": outcome.delivery.acknowledged,
        "received": outcome.delivery.received,
        "message_size": wl.message_size,
        "partitions": wl.partitions_per_topic,
        "until_steady": until_steady,
        "steady_after_s": round(sum(p.elapsed_s for p in outcome.warmup), 1)
        if until_steady else None,
        "steady": outcome.warmup_steady if until_steady else None,
    }
