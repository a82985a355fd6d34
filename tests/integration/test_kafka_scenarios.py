"""The engine against a real local Kafka (the one-node broker these tests share).

The tail-read scenario through pytest on a Kafka the plugin starts (record, JUnit,
artefacts, no orphan) is checked in test_report_end_to_end.py, on the run the report is
made from.

Assertions that can fail: every acknowledged message received exactly once per
subscription, e2e above zero and bounded, publish delay near zero at a low rate, the
verdict valid, and nothing left behind on the broker afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload


@pytest.fixture
def kafka(kafka_one: BrokerEndpoint) -> BrokerEndpoint:
    """The one-node Kafka these tests share with others (tests/integration/conftest.py)."""
    return kafka_one


def _topics(endpoint: BrokerEndpoint) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": endpoint.bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def test_engine_delivers_everything_once_with_honest_latency(
        kafka: BrokerEndpoint, measure_quietly: Callable[..., Any],
        expect_valid: Callable[..., Any]) -> None:
    wl = Workload(name="it", topics=1, partitions_per_topic=4, message_size=512,
                  subscriptions_per_topic=2, producers_per_topic=2,
                  consumer_per_subscription=2, producer_rate=500,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    # this module's broker is cold (no session warm-up): the warm-up ends once three
    # periods are steady, capped at 20 s, so a JIT stall is not caught up in the window
    plan = RunPlan(rate=500, period_s=1.0, warmup_max_s=20.0, measure_s=6.0, workers=2,
                   topic_prefix="it-engine", probe_timeout_s=60,
                   generator_cpus=default_generator_cpus(kafka.info.get("cpu_affinity")))
    out = measure_quietly(lambda k: run_workload(
        create_driver(kafka, None), wl, replace(plan, topic_prefix=f"it-engine-{k}"),
        payloads=wl.payloads(None, seed=2)))

    d = out.delivery
    assert d.acknowledged > 2000
    assert len(d.subscriptions) == 2
    for sub in d.subscriptions:
        assert sub.received == sub.acknowledged == d.acknowledged
        assert (sub.lost, sub.duplicates, sub.reordered, sub.unacked_received) == (0, 0, 0, 0)
    e2e = out.cumulative["e2e_latency"]
    assert e2e.min() > 0
    assert out.cumulative["publish_latency"].percentile(50) > 0
    if expect_valid(out).status == "valid":  # rates and timing say nothing on a noisy host
        assert out.ack_rate == pytest.approx(500, rel=0.1)
        assert out.consume_rate == pytest.approx(1000, rel=0.15)
        assert 0 < e2e.percentile(50) < 1_000_000  # above zero, below a second on loopback
        # a valid window's p99 is within the 10 ms budget; its median near zero at 500/s
        assert out.cumulative["publish_delay"].percentile(50) < 5_000
    # the topic and the consumer groups are gone again
    assert not any(t.startswith("it-engine") for t in _topics(kafka))
    # the broker really applied what the driver asked for
    (topic,) = out.read_back["topics"]
    assert out.read_back["topics"][topic]["min.insync.replicas"]["value"] == "1"
    assert len(out.read_back["topics"][topic]["replicas"]) == 4


def test_replication_factor_the_cluster_cannot_satisfy_is_an_error(
        kafka: BrokerEndpoint) -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-latency"))  # RF 3
    wl = Workload(name="rf", topics=1, partitions_per_topic=1, message_size=64,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=10, test_duration_minutes=1)
    plan = RunPlan(rate=10, period_s=1, warmup_max_s=0, measure_s=1, topic_prefix="it-rf3")
    with pytest.raises(ConfigError, match=r"replicationFactor 3 .* 1 broker.*never lowered"):
        run_workload(KafkaDriver(kafka, cfg), wl, plan, payloads=wl.payloads(None))
    assert not any(t.startswith("it-rf3") for t in _topics(kafka))


def test_an_ack_is_stamped_when_the_broker_answers_not_at_the_next_service_call(
        kafka: BrokerEndpoint) -> None:
    """librdkafka builds a delivery report (and Message.latency()) only inside poll():
    polled from the sender's service() call, an ack waiting 1 s for it showed 1 s."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic("it-ack-stamp", 1, 1)])["it-ack-stamp"].result(30)
    driver = create_driver(kafka, None)
    acks: list[int | None] = []
    sents: list[tuple[int, int | None]] = []

    def on_ack(value: bytes, lat: int | None, sent_ns: int | None = None) -> None:
        acks.append(lat)
        sents.append((before, sent_ns))

    producer = driver.producer("it-ack-stamp", "it-ack", on_ack, lambda v, e: pytest.fail(e))
    try:
        for _ in range(3):  # the first send also pays for the connection
            before = time.monotonic_ns()
            producer.send(b"x" * 64, None)
            time.sleep(1.0)  # the sender is busy elsewhere: no service() for a second
            producer.service()
        assert len(acks) == 3 and all(lat is not None for lat in acks)
        assert acks[-1] is not None and acks[-1] < 500_000_000, acks  # ns: not the 1 s wait
        # sent when produce() took it: after the stamp before send(), well before the
        # service a second later (the driver derives it from the report's own time)
        for stamp, sent in sents:
            assert sent is not None and stamp - 5_000 <= sent < stamp + 500_000_000, sents
    finally:
        producer.close()
        admin.delete_topics(["it-ack-stamp"])["it-ack-stamp"].result(30)
