"""A power cut of a whole three-node Kafka cluster whose data directories forget
unsynced writes: every node killed and rolled back to its last fsync at the same
instant, then all started together.

The finding: a topic replicated to three nodes with ``acks=all`` and
``min.insync.replicas=2`` keeps every acknowledged message when each replica fsyncs
every append (``flush.messages=1``: durability level 1), and loses acknowledged
messages when none fsyncs (Kafka's default: level 2), since every replica held them in
its page cache only. One cut serves both topics (docs/reference/faults.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pytest_brokerperf.brokers.kafka.durability import KAFKA_NEVER_FLUSH
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from tests.support.powercut import powercut_kafka, produce_numbered

pytestmark = pytest.mark.integration

N = 300


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcessCluster]:
    with powercut_kafka(tmp_path_factory.mktemp("kafka-powercut-all"), nodes=3, heap="384m") as c:
        yield c


def _consume(bootstrap: str, topic: str) -> set[int]:
    """Every sequence number the topic's one partition holds, from the earliest offset
    (an assigned consumer: no group, whose offsets the cut may have taken too). The end
    of the partition is the leader's high watermark, which after the restart catches up
    with its log only as the followers fetch: read on until 5 s pass with nothing new."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                     "enable.auto.commit": False, "enable.partition.eof": True,
                     "log_level": 0})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    seen: set[int] = set()
    ended, last_new = False, time.monotonic()
    deadline = last_new + 60.0  # bounded in time (a poll returns one message)
    try:
        while time.monotonic() < deadline:
            if ended and time.monotonic() - last_new > 5.0:
                break
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                ended = ended or msg.error().code() == ck.KafkaError._PARTITION_EOF
                continue
            seen.add(int(msg.value()))
            last_new = time.monotonic()
    finally:
        c.close()
    return seen


def test_only_fsync_on_every_replica_keeps_what_a_whole_cluster_cut_hits(
        kafka: KafkaProcessCluster) -> None:
    bootstrap = kafka.endpoint.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {"fsync-each": ("1", "0"), "page-cache": (KAFKA_NEVER_FLUSH, KAFKA_NEVER_FLUSH)}
    futures = admin.create_topics([
        NewTopic(t, 1, 3, config={"min.insync.replicas": "2", "flush.messages": fm,
                                  "flush.ms": fms})
        for t, (fm, fms) in topics.items()])
    for f in futures.values():
        f.result(60)
    acked = {t: produce_numbered(bootstrap, t, N) for t in topics}
    assert {t: len(a) for t, a in acked.items()} == {t: N for t in topics}

    report = kafka.power_cut_all()
    kafka.start_all(120)

    lost = {t: sorted(set(acked[t]) - _consume(bootstrap, t)) for t in topics}
    summary = {t: f"{len(acked[t])} acknowledged, {len(lost[t])} lost" for t in topics}
    print(f"whole-cluster power cut: {summary}; dropped {report['bytes_dropped']} bytes")
    assert lost["fsync-each"] == [], (
        f"every replica fsyncs each message, yet {len(lost['fsync-each'])} acknowledged "
        f"message(s) are gone: {lost['fsync-each'][:20]}")
    # nothing fsynced the page-cache topic's segments on any node: the cut took them all
    assert lost["page-cache"], f"no acknowledged message lost without fsync: {report}"
    assert len(report["nodes"]) == 3 and all(
        r["bytes_dropped"] > 0 for r in report["nodes"].values())
