"""Three RabbitMQ nodes on one host: a topology check, not a performance figure.

Assertions that can fail: the nodes form one cluster (stop_app/join_cluster/start_app),
the endpoint is labelled a topology check, durability level 1 becomes quorum queues
with three members on the broker itself, a short run loses nothing, and stopping the
cluster leaves no node and no epmd behind.
"""

from __future__ import annotations

import dataclasses

import psutil
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.rabbitmq.process import (
    RabbitMQProcessCluster,
    rabbitmq_available,
)
from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload


@pytest.fixture(scope="module", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)


def test_three_nodes_cluster_and_replicate_quorum_queues(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    cluster = RabbitMQProcessCluster(nodes=3, workdir=tmp_path_factory.mktemp("rmq3"))
    ep = cluster.start()
    pids: list[int] = []
    try:
        assert ep.nodes == 3 and ep.topology_check is True
        assert ep.info["running_nodes"] == [f"rmq{i}@localhost" for i in (1, 2, 3)]
        assert len(ep.bootstrap.split(",")) == 3
        pids = [*ep.info["pids"], ep.info["epmd_pid"]]
        ep = dataclasses.replace(ep, durability=1)  # what the broker fixture gives a d1 test
        driver = create_driver(ep, None)
        assert driver.config.queue_type == "QUORUM"  # type: ignore[attr-defined]
        wl = Workload(name="it3", topics=1, partitions_per_topic=2, message_size=256,
                      subscriptions_per_topic=1, producers_per_topic=1,
                      consumer_per_subscription=1, producer_rate=200,
                      test_duration_minutes=1, warmup_duration_minutes=0)
        plan = RunPlan(rate=200, period_s=1.0, warmup_max_s=0.0, measure_s=3.0, workers=1,
                       topic_prefix="it-three", probe_timeout_s=60, keep_topics=True,
                       generator_cpus=default_generator_cpus(ep.info.get("cpu_affinity")))
        out = run_workload(driver, wl, plan, payloads=wl.payloads(None, seed=4))
        (sub,) = out.delivery.subscriptions
        assert out.delivery.acknowledged > 300
        assert (sub.lost, sub.duplicates) == (0, 0) and sub.received == sub.acknowledged
        assert out.read_back["durability"]["level"] == 1
        (topic,) = out.read_back["topics"].values()
        assert len(topic["queues"]) == 2
        for name, q in topic["queues"].items():
            assert q["type"] == "quorum"
            assert q["arguments"]["x-quorum-initial-group-size"] == 3
            status = cluster.ctl.json("rabbitmq-queues", "quorum_status", name)
            assert sorted(m["Node Name"] for m in status) == ep.info["running_nodes"]
    finally:
        cluster.stop()
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert alive == []
