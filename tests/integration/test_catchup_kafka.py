"""Catch-up read on a real local Kafka, checked against the broker's own offsets.

The engine's catch-up phases (pause, build, drain) run with the real Kafka driver;
the checks read the consumer group's committed offsets and the partitions' end offsets
with a plain confluent-kafka client of their own — not the scenario's counters, not the
driver's backlog reader — and require:

* no message reaches a paused consumer, and the group keeps its members (no rebalance);
* consumed during the drain = backlog at the drain's start + produced during the drain
  - residual, with every term read from the broker, equal to the engine's count;
* the driver's broker-side backlog reading agrees with the independent one;
* the whole scenario through the plugin reports build and drain times and a catch-up
  rate, and its record holds the broker-side backlog next to the counters' figure.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.engine.coordinator import LoadSession, default_generator_cpus
from pytest_brokerperf.engine.plan import Rung, RunPlan
from pytest_brokerperf.workload.model import Workload


@pytest.fixture
def kafka(kafka_one: BrokerEndpoint) -> BrokerEndpoint:
    """The one-node Kafka these tests share with others (tests/integration/conftest.py)."""
    return kafka_one


def _offsets(endpoint: BrokerEndpoint, topic: str, group: str) -> tuple[int, int]:
    """(sum of end offsets, sum of the group's committed offsets), read independently."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10)
        parts = [TopicPartition(topic, p) for p in md.topics[topic].partitions]
        end = sum(c.get_watermark_offsets(tp, timeout=10)[1] for tp in parts)
        committed = sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=10))
        return end, committed
    finally:
        c.close()


def _members(endpoint: BrokerEndpoint, group: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    (desc,) = [f.result(timeout=30) for f in
               admin.describe_consumer_groups([group], request_timeout=30).values()]
    return {m.member_id for m in desc.members}


def _written(rate: int, seconds: float) -> float:
    """At most what a producer at ``rate`` writes in ``seconds``, with a margin."""
    return rate * seconds * 1.2 + 200


def test_drain_accounting_matches_the_broker_offsets(kafka: BrokerEndpoint) -> None:
    wl = Workload(name="it-cu", topics=1, partitions_per_topic=4, message_size=1024,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=2, producer_rate=2000,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=2000, period_s=1.0, warmup_max_s=10.0, measure_s=2.0, workers=1,
                   topic_prefix="it-catchup", probe_timeout_s=60, drain_timeout_s=60,
                   generator_cpus=default_generator_cpus(kafka.info.get("cpu_affinity")))
    driver = create_driver(kafka, None, "catchup")
    with LoadSession(driver, wl, plan, payloads=wl.payloads(None, seed=9)) as s:
        (topic,), (group,) = s.topics, s.subscriptions
        s.run_rung(Rung(2000, 10.0, 2.0))
        members = _members(kafka, group)
        paused = s.pause_consumers(True)
        build = s.run_until("build", lambda t: s.backlog(t) >= 10_000, 60.0)
        assert build.done, f"backlog {s.backlog(build.end_totals)} after 60 s"
        assert build.end_totals["received"] == paused["received"]  # nothing while paused
        t0 = time.monotonic()
        counted = s.totals()
        e0, k0 = _offsets(kafka, topic, group)
        t1 = time.monotonic()
        driver_view = s.broker_backlog()
        t2 = time.monotonic()
        assert _members(kafka, group) == members  # the group kept its members
        drain = s.run_until("drain", lambda t: s.backlog(t) <= 1000, 60.0,
                            begin=lambda: s.pause_consumers(False))
        assert drain.done
        end_paused = s.pause_consumers(True)  # consumers commit what they counted
        e1, k1 = _offsets(kafka, topic, group)
        s.pause_consumers(False)
        end = s.finish()

    backlog0, produced, residual = e0 - k0, e1 - e0, e1 - k1
    consumed = end_paused["received"] - drain.start_totals["received"]
    # every term from the broker; the engine's count must equal their balance
    assert consumed == backlog0 + produced - residual
    assert backlog0 >= 10_000
    # the counters' backlog at the drain's start is the broker's, give or take what the
    # producer wrote (2,000 msg/s) between the two readings, however long they took
    assert 0 <= backlog0 - s.backlog(counted) <= _written(2000, t1 - t0)
    # the driver's own reading (AdminClient list_offsets / committed offsets) agrees
    assert driver_view is not None
    (row,) = driver_view
    assert row.subscription == group and row.how == "end offsets - committed offsets"
    assert row.position == k0 and 0 <= row.end - e0 <= _written(2000, t2 - t1)
    # nothing lost or duplicated across pause and resume
    d = end.delivery
    (sub,) = d.subscriptions
    assert sub.received == sub.acknowledged == d.acknowledged
    assert (sub.lost, sub.duplicates) == (0, 0)


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def broker(broker_kind):
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
    # the module's broker, with its process ids (what the scenario reads /proc of)
    yield BrokerEndpoint(kind="kafka", bootstrap="{bootstrap}", mode="process",
                         local=LocalProcesses(pids=tuple({pids})))
"""


def test_catchup_scenario_through_the_plugin(kafka: BrokerEndpoint, pytester: Any) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(bootstrap=kafka.bootstrap,
                                          pids=list(kafka.processes_record().pids)))
    pytester.makepyfile(test_cu="""
import pytest
from pytest_brokerperf import CatchUp

@pytest.mark.catchup
def test_cu(brokerperf):
    brokerperf.run(CatchUp(rate=2000, backlog_bytes=20 * 1024**2))
""")
    res = Path(pytester.path) / "res"
    result = pytester.runpytest_subprocess(
        "--broker=kafka", "--brokerperf-duration=3", "--brokerperf-warmup=10",
        "--brokerperf-calibration=off", f"--brokerperf-results={res}", "-p",
        "no:cacheprovider", "-s", timeout=600)
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    cu = rec["catchup"]
    print(json.dumps({k: v for k, v in cu.items() if k != "age"}, indent=1))
    assert cu["build_complete"] and cu["drain_complete"], result.stdout.str()
    assert cu["backlog_at_drain_start_bytes"] >= 20 * 1024**2
    (start,) = cu["broker_backlog_at_drain_start"]
    # the broker's backlog (paused consumers) and the counters' one, side by side: read
    # one after the other while producers go on, so apart by what was published between
    assert abs(start["messages"] - cu["backlog_at_drain_start_messages"]) <= 1000
    assert cu["catchup_rate_msg_s"] > 0 and cu["drain_s"] > 0
    assert cu["consumed_during_drain"] == (cu["backlog_at_drain_start_messages"]
                                           + cu["produced_during_drain"]
                                           - cu["residual_messages"]
                                           + cu["received_ahead_of_acks"])
    assert cu["residual_messages"] >= 0 and cu["received_ahead_of_acks"] >= 0
    assert rec["delivery"]["lost"] == 0
    # a backlog of tens of MiB just written, on a host with GiBs free: the broker served
    # the drain from its page cache (no storage read), and the verdict says so
    cache = cu["cache"]
    assert cache["disk_read_bytes"] is not None and cache["consumed_bytes"] > 0, cache
    assert cache["state"] == "hot", cache
    assert "hot-cache" in rec["verdict"]["flags"], rec["verdict"]
    assert "page cache" in rec["verdict"]["details"]["hot_cache"]
    if rec["verdict"]["status"] in ("valid", "broker-backpressure"):
        assert {s["metric"]: s["status"] for s in rec["slo"]} == {"lost": "pass",
                                                                   "drained": "pass"}
    else:  # the host or a fresh broker's stall spoiled the "before" window: never judged
        assert rec["verdict"]["status"] in ("host-noise", "unsteady") or (
            rec["verdict"]["status"] in ("rate-not-sustained", "consumer-bound")
            and rec["verdict"]["details"].get("warmup_capped")), rec["verdict"]
        assert rec["slo"] == []
