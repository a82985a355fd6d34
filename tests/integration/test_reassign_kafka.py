"""The reassign scenario on a real local three-node Kafka, read back from the broker.

The whole scenario runs through the plugin (500 msg/s, a few seconds before and after a
throttled move); the checks then read the cluster with clients of their own — kafka-python
for the topic's replicas and in-sync replicas, confluent-kafka for the configs — not the
scenario's record, and require:

* the moved partition's replicas are now exactly the target broker, which held no
  replica before, and that broker is in the ISR; no reassignment is left in progress;
* the background topic was not moved;
* no throttle config is left: neither the brokers' throttle rates nor the topic's
  throttled-replica lists are set dynamically any more;
* nothing was lost, and the record holds the move's duration and, for a judgeable run,
  the publish and e2e p99 ratios (or the flag ``undersampled`` saying why not).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

pytest.importorskip("kafka", reason="kafka-python (the reassign extra) is not installed")


@pytest.fixture
def kafka3(kafka_three: BrokerEndpoint) -> BrokerEndpoint:
    """The three-node Kafka these tests share with others (tests/integration/conftest.py)."""
    return kafka_three


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def broker(broker_kind):
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    yield BrokerEndpoint(kind="kafka", bootstrap="{bootstrap}", mode="process",
                         nodes=3, info={{"pids": {pids}}})
"""


def _replicas(bootstrap: str, topic: str) -> tuple[list[int], list[int], dict[Any, Any]]:
    """(replicas, ISR) of the topic's partition 0 and the in-progress reassignments, read
    with kafka-python."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        (t,) = admin.describe_topics([topic])
        (p,) = t["partitions"]
        pending = admin.list_partition_reassignments()
        # kafka-python 3 names them after the protocol fields, 2.x "replicas" and "isr"
        replicas = p.get("replica_nodes", p.get("replicas"))
        isr = p.get("isr_nodes", p.get("isr"))
        return list(replicas), list(isr), pending
    finally:
        admin.close()


def _dynamic_throttles(bootstrap: str, topic: str, brokers: list[int]) -> dict[str, str]:
    """Every throttle config still set dynamically (name@resource -> value)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = [ConfigResource(ResourceType.BROKER, str(b)) for b in brokers]
    res.append(ConfigResource(ResourceType.TOPIC, topic))
    left: dict[str, str] = {}
    # one resource per call: confluent-kafka sends a broker resource to that broker
    for r, fut in [kv for one in res for kv in admin.describe_configs([one]).items()]:
        for name, entry in fut.result(timeout=30).items():
            if "throttled" not in name:
                continue
            if entry.source in (ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                                ConfigSource.DYNAMIC_TOPIC_CONFIG.value) or (
                    r.restype == ResourceType.TOPIC and entry.value):
                left[f"{name}@{r.name}"] = entry.value
    return left


def test_throttled_move_under_load_read_back_from_the_broker(
        kafka3: BrokerEndpoint, pytester: Any) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(bootstrap=kafka3.bootstrap,
                                          pids=list(kafka3.processes_record().pids)))
    pytester.makepyfile(test_ra="""
import pytest
from pytest_brokerperf import Reassign

@pytest.mark.reassign
def test_ra(brokerperf):
    brokerperf.run(Reassign(rate=500, delay_s=6, after_s=3, timeout_s=120,
                            throttle_bytes_s=2 * 1024**2))
""")
    res = Path(pytester.path) / "res"
    result = pytester.runpytest_subprocess(
        "-m", "reassign", "--broker=kafka", "--brokerperf-warmup=10",
        "--brokerperf-calibration=off", "--brokerperf-keep-topics",
        "--brokerperf-inconclusive=warn", f"--brokerperf-results={res}",
        "-p", "no:cacheprovider", "-s", timeout=600)
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    ra = rec["reassignment"]
    print(json.dumps({k: v for k, v in ra.items() if k != "series"}, indent=1))
    print(json.dumps(rec["verdict"], indent=1))
    assert rec["scenario"] == "reassign"
    assert ra["complete"], result.stdout.str()
    assert ra["duration_s"] > 0 and ra["polls"] >= 1
    (dest,) = ra["target_replicas"]
    assert dest not in ra["replicas_before"] and len(ra["replicas_before"]) == 1
    # read back with a client of our own
    replicas, isr, pending = _replicas(kafka3.bootstrap, ra["topic"])
    assert replicas == [dest] and dest in isr
    assert not pending
    bg_replicas, _, _ = _replicas(kafka3.bootstrap, ra["background_topic"])
    assert len(bg_replicas) == 1  # single-replica background topic, left in place
    assert ra["throttle_bytes_s"] == 2 * 1024**2 and ra["throttle_removed"] is True
    assert _dynamic_throttles(kafka3.bootstrap, ra["topic"], ra["brokers"]) == {}
    assert rec["delivery"]["lost"] == 0
    phases = {row["phase"] for row in ra["series"]}
    assert {"measure", "reassign", "after"} <= phases
    if rec["verdict"]["status"] in ("valid", "broker-backpressure"):
        if ra["publish_samples_during"] >= 1000 and ra["e2e_samples_during"] >= 1000:
            assert ra["publish_p99_ratio"] > 0 and ra["e2e_p99_ratio"] > 0, ra
        else:
            assert "undersampled" in rec["verdict"]["flags"], rec["verdict"]
        assert {s["metric"]: s["status"] for s in rec["slo"]} == {
            "lost": "pass", "reassign.complete": "pass"}
    else:  # a window this host spoiled: never a ratio
        assert ra["publish_p99_ratio"] is None, rec["verdict"]
