"""Durability levels on a real local Kafka: level 1 and level 4 on one three-node cluster.

What can fail: the level's topic configs must be on the broker itself (asked here with
AdminClient.describe_configs while the cluster runs, not taken from the harness's own
read-back): ``min.insync.replicas=2`` at both levels, ``flush.messages=1``/``flush.ms=0``
at level 1 and Kafka's never-flush default written explicitly at level 4, all as
``DYNAMIC_TOPIC_CONFIG``; the producer must run ``acks=all`` / ``acks=1``; the JSONL
record, the OMB result and the summary must carry the level; and both levels must share
one broker process (a Kafka level is per topic, so no restart between them). Levels 1
and 2 need replication, so the cluster has three nodes (a topology check).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.kafka.durability import KAFKA_NEVER_FLUSH

REPO = Path(__file__).resolve().parents[2]

INNER = '''
import json, os
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType, ConfigSource
from pytest_brokerperf import TailRead


@pytest.mark.durability(1, 4)
def test_level(brokerperf, broker, broker_durability):
    result = brokerperf.run(TailRead(partitions=1), check=False)
    topics = sorted(result.outcome.read_back["topics"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    on_broker = {}
    for r, fut in admin.describe_configs(res, request_timeout=30).items():
        entries = fut.result(timeout=60)
        on_broker[r.name] = {k: [entries[k].value, ConfigSource(entries[k].source).name]
                             for k in ("min.insync.replicas", "flush.messages", "flush.ms")}
    md = admin.list_topics(timeout=10)
    rf = {t: sorted({len(p.replicas) for p in md.topics[t].partitions.values()})
          for t in topics}
    admin.delete_topics(topics, operation_timeout=30)  # kept only to be described here
    out = os.path.join(os.environ["DURABILITY_OUT"], f"d{broker_durability}.json")
    with open(out, "w") as fh:
        json.dump({"on_broker": on_broker, "rf": rf, "record": result.record["durability"],
                   "pids": broker.info.get("pids"), "lost": result.outcome.delivery.lost,
                   "acked": result.outcome.delivery.acknowledged,
                   "params": result.record["params"]}, fh)
'''


def test_levels_1_and_4_set_their_topic_configs_on_the_broker(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    results = pytester.path / "res"
    out = pytester.path / "out"
    out.mkdir()
    monkeypatch.setenv("DURABILITY_OUT", str(out))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_inner=INNER)
    run = pytester.runpytest_subprocess(
        "--broker=kafka", "--brokerperf-nodes=3", f"--brokerperf-results={results}",
        "--brokerperf-keep-topics",  # described on the broker, then deleted by the test
        # a functional check: 100 msg/s (the topology-check rate) for a few seconds
        "--brokerperf-duration=4", "--brokerperf-warmup=2", "-v", "-p", "no:cacheprovider",
        "-p", "no:randomly", "--rootdir", str(pytester.path), timeout=900,
    )
    run.assert_outcomes(passed=2)
    run.stdout.fnmatch_lines([
        "*test_level[[]kafka-d1[]] PASSED*",
        "*test_level[[]kafka-d4[]] PASSED*",
    ])
    run.stdout.fnmatch_lines(["*kafka*tailread*p=1*d=1 rate=100*", "*kafka*tailread*d=4*"])
    one = json.loads((out / "d1.json").read_text())
    four = json.loads((out / "d4.json").read_text())
    dyn = "DYNAMIC_TOPIC_CONFIG"
    for topic, configs in one["on_broker"].items():
        assert configs == {"min.insync.replicas": ["2", dyn], "flush.messages": ["1", dyn],
                           "flush.ms": ["0", dyn]}, topic
        assert one["rf"][topic] == [3]
    for topic, configs in four["on_broker"].items():
        assert configs == {"min.insync.replicas": ["2", dyn],
                           "flush.messages": [KAFKA_NEVER_FLUSH, dyn],
                           "flush.ms": [KAFKA_NEVER_FLUSH, dyn]}, topic
    assert one["on_broker"] and four["on_broker"]
    # the record: the level, the settings the clients ran with, the broker's read-back
    assert one["record"]["level"] == 1 and four["record"]["level"] == 4
    assert one["record"]["settings"]["acks"] == "all"
    assert four["record"]["settings"]["acks"] == "1"
    for topic, row in one["record"]["read_back"]["topics"].items():
        assert row["flush.messages"] == {"value": "1", "source": dyn}, topic
        assert row["replication_factor"] == 3
    assert one["params"]["durability"] == 1 and four["params"]["durability"] == 4
    assert one["lost"] == four["lost"] == 0 and one["acked"] > 0 and four["acked"] > 0
    # one Kafka cluster served both levels
    assert one["pids"] and one["pids"] == four["pids"]
    # the JSONL records and the OMB result files carry the level
    recs = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    assert sorted(r["durability"]["level"] for r in recs) == [1, 4]
    for rec in recs:
        art = Path(rec["artefacts"])
        (omb,) = [p for p in art.glob("*.json")
                  if p.name not in ("manifest.json", "record.json", "broker-settings.json")]
        assert json.loads(omb.read_text())["durability"]["level"] == rec["durability"]["level"]
