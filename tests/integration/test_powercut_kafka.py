"""A power cut on a real single-node Kafka whose data directory forgets unsynced writes.

The finding: with ``flush.messages=1`` (Kafka fsyncs every append before it answers:
the local half of durability levels 1 and 3) no acknowledged message is lost; with
Kafka's default (no fsync on the write path: levels 2 and 4) the messages acknowledged
since the last fsync are gone after the restart, and the test names them by sequence
number. One node, so one replica: nothing else could keep a copy (docs/reference/faults.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pytest_brokerperf.brokers.kafka.durability import KAFKA_NEVER_FLUSH
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from tests.support.powercut import powercut_kafka, produce_numbered

pytestmark = pytest.mark.integration

N = 400


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProcessCluster]:
    with powercut_kafka(tmp_path_factory.mktemp("kafka-powercut"), nodes=1, heap="512m") as c:
        yield c


def _consume(bootstrap: str, topic: str, expect: int) -> set[int]:
    """Every sequence number the topic holds (reads until end of partition)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                     "auto.offset.reset": "earliest", "enable.partition.eof": True,
                     "log_level": 0})
    c.subscribe([topic])
    seen: set[int] = set()
    try:
        for _ in range(600):  # bounded: 600 polls of at most 0.5 s
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == ck.KafkaError._PARTITION_EOF:
                    break
                continue
            seen.add(int(msg.value()))
    finally:
        c.close()
    return seen


def _cut_and_count(kafka: KafkaProcessCluster, topic: str, flush_messages: str
                   ) -> tuple[list[int], set[int], dict[str, object]]:
    bootstrap = kafka.endpoint.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"flush.messages": flush_messages,
              "flush.ms": "0" if flush_messages == "1" else KAFKA_NEVER_FLUSH}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)
    acked = produce_numbered(bootstrap, topic, N)
    report = kafka.power_cut_node(1)
    kafka.start_node(1, 120)
    return acked, _consume(bootstrap, topic, len(acked)), report


def test_fsync_per_message_loses_nothing_acknowledged(kafka: KafkaProcessCluster) -> None:
    acked, kept, report = _cut_and_count(kafka, "fsync-each", "1")
    assert len(acked) == N
    lost = sorted(set(acked) - kept)
    assert lost == [], f"lost {len(lost)} acknowledged message(s) despite fsync: {lost[:20]}"
    print(f"flush.messages=1: {len(acked)} acknowledged, 0 lost; cut: {report}")


def test_page_cache_loses_acknowledged_messages_and_says_which(
        kafka: KafkaProcessCluster) -> None:
    acked, kept, report = _cut_and_count(kafka, "page-cache", KAFKA_NEVER_FLUSH)
    assert len(acked) == N
    lost = sorted(set(acked) - kept)
    # nothing fsynced the topic's segment since it was created: every acknowledged
    # message was in the page cache only, and the cut took it
    assert lost, f"no acknowledged message lost without fsync; cut report: {report}"
    assert report["bytes_dropped"] > 0  # type: ignore[operator]
    print(f"flush.messages=never: {len(acked)} acknowledged, {len(lost)} lost "
          f"(sequence numbers {lost[0]}..{lost[-1]}); cut: {report}")
