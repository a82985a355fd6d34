"""RabbitMQ from Debian's package as local processes, driven by the pika driver.

One single-node broker for the module. Assertions that can fail: the node runs pinned
with scheduler busy-wait off and a private epmd; both studies' topologies and all three
queue types are created as specified, checked on the broker itself (rabbitmqctl);
engine runs at a low rate lose and duplicate nothing; a mirroring policy lands on the
run's queues; nothing is left on the broker after a run; stopping leaves no process
(epmd included) and no data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver
from pytest_brokerperf.brokers.rabbitmq.process import (
    RabbitMQProcessCluster,
    rabbitmq_available,
)
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload


@pytest.fixture(scope="module", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    """These tests need RabbitMQ, not Kafka: hold the broker lock, skip without the package."""
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)


def _queues(rmq: RabbitMQProcessCluster) -> list[dict[str, object]]:
    rows = rmq.ctl.json("rabbitmqctl", "list_queues", "-q", "name", "type", "arguments")
    assert isinstance(rows, list)
    return rows


def test_node_is_pinned_private_and_reports_its_version(rmq: RabbitMQProcessCluster) -> None:
    ep = rmq.endpoint
    assert ep.kind == "rabbitmq" and ep.version.startswith("3.")
    assert ep.bootstrap.startswith("amqp://127.0.0.1:")
    info = ep.info
    assert info["alarms_at_start"]["memory"] is False
    assert info["alarms_at_start"]["disk"] is False
    (beam,) = [psutil.Process(pid) for pid in info["pids"]]
    cmdline = " ".join(c for p in [beam, *beam.children(recursive=True)]
                       for c in p.cmdline())
    assert "-sbwt none -sbwtdcpu none -sbwtdio none" in cmdline  # busy-wait off
    assert f"-epmd_port {info['epmd_port']}" in cmdline or str(info["epmd_port"]) in cmdline
    broker_cpus = info["cpu_affinity"]["broker_cpus"]
    if broker_cpus:
        assert info["cpu_affinity"]["nodes"]["rmq1@localhost"] == broker_cpus
        assert info["schedulers_online"] == str(len(broker_cpus))
    assert info["startup_s"] < 60


@pytest.mark.parametrize(("driver_file", "partitions", "exchange", "queue_type"), [
    ("rabbitmq-omb", 1, "fanout", "quorum"),  # OMB main
    ("rabbitmq-confluent", 2, "direct", "classic"),  # Confluent's routing keys
    ("rabbitmq-stream", 2, "direct", "stream"),
])
def test_engine_run_loses_nothing_and_topology_is_as_specified(
        rmq: RabbitMQProcessCluster, driver_file: str, partitions: int, exchange: str,
        queue_type: str, measure_quietly: Callable[..., Any],
        expect_valid: Callable[..., Any]) -> None:
    ep = rmq.endpoint
    wl = Workload(name="it", topics=1, partitions_per_topic=partitions, message_size=256,
                  subscriptions_per_topic=2, producers_per_topic=2,
                  consumer_per_subscription=2, producer_rate=300,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    prefix = f"it-{queue_type}"
    plan = RunPlan(rate=300, period_s=1.0, warmup_max_s=2.0, measure_s=3.0, workers=2,
                   topic_prefix=prefix, probe_timeout_s=60,
                   generator_cpus=default_generator_cpus(ep.info.get("cpu_affinity")))
    out = measure_quietly(lambda k: run_workload(
        create_driver(ep, shipped_driver(driver_file)), wl,
        replace(plan, topic_prefix=f"{prefix}-{k}"), payloads=wl.payloads(None, seed=3)))
    d = out.delivery
    assert d.acknowledged > 600
    for sub in d.subscriptions:
        assert sub.received == sub.acknowledged == d.acknowledged
        assert (sub.lost, sub.duplicates, sub.reordered, sub.unacked_received) == (0, 0, 0, 0)
    assert out.cumulative["publish_latency"].percentile(50) > 0
    assert out.cumulative["e2e_latency"].min() > 0
    expect_valid(out)
    assert not out.worker_errors

    (topic,) = out.read_back["topics"]
    t = out.read_back["topics"][topic]
    assert t["exchange_read_back"] == {"name": topic, "type": exchange, "durable": True}
    queues = t["queues"]
    if queue_type == "stream":  # one stream per partition, shared by both subscriptions
        assert sorted(queues) == [f"{topic}-stream-part-{j}" for j in range(partitions)]
    else:
        subs = out.subscriptions
        want = ([f"{topic}-{s}" for s in subs] if exchange == "fanout" else
                [f"{topic}-{s}-part-{j}" for s in subs for j in range(partitions)])
        assert sorted(queues) == sorted(want)
    for q in queues.values():
        assert q["type"] == queue_type and q["durable"] is True
        if queue_type != "classic":
            assert q["arguments"] == {"x-queue-type": queue_type}
    assert out.read_back["broker"]["alarms"]["memory"] is False
    assert out.read_back["durability"]["queue_type"] == queue_type.upper()
    # nothing of the run is left on the broker
    assert not [q for q in _queues(rmq) if str(q["name"]).startswith(prefix)]
    exchanges = rmq.ctl.json("rabbitmqctl", "list_exchanges", "-q", "name")
    assert not [x for x in exchanges if str(x["name"]).startswith(prefix)]


def test_fanout_topology_refuses_partitions_before_creating_anything(
        rmq: RabbitMQProcessCluster) -> None:
    driver = create_driver(rmq.endpoint, shipped_driver("rabbitmq-omb"))
    admin = driver.admin()
    try:
        with pytest.raises(BrokerUnavailable, match="fanout topology has no partitions"):
            admin.create_topics(["it-fanout-000"], [4])
    finally:
        admin.close()
    exchanges = rmq.ctl.json("rabbitmqctl", "list_exchanges", "-q", "name")
    assert "it-fanout-000" not in {x["name"] for x in exchanges}


def test_classic_mirroring_policy_lands_on_the_runs_queues(rmq: RabbitMQProcessCluster) -> None:
    cfg = RabbitMQDriverConfig.from_yaml(shipped_driver("rabbitmq-classic-mirrored"))
    driver = RabbitMQDriver(rmq.endpoint, cfg)
    admin = driver.admin()
    try:
        admin.create_topics(["it-ha-000"], [2])
        consumer = driver.consumer("it-ha-000", "it-ha-000-sub000", "it-ha-c0")
        consumer.close()
        back = admin.read_back(["it-ha-000"])
        queues = back["topics"]["it-ha-000"]["queues"]
        assert sorted(queues) == [f"it-ha-000-it-ha-000-sub000-part-{j}" for j in range(2)]
        assert {q["policy"] for q in queues.values()} == {"it-ha-000-ha"}
        (policy,) = [p for p in back["broker"]["policies"] if p["name"] == "it-ha-000-ha"]
        assert '"ha-mode":"exactly"' in policy["definition"]
    finally:
        admin.delete_topics(["it-ha-000"])
        admin.delete_groups(["it-ha-000-sub000"])
        admin.close()
    assert not [q for q in _queues(rmq) if str(q["name"]).startswith("it-ha")]
    assert "it-ha-000-ha" not in rmq.ctl.check("rabbitmqctl", "list_policies", "-q")


def test_remote_endpoint_from_uris_drives_the_same_broker(rmq: RabbitMQProcessCluster) -> None:
    """--rabbitmq-url against this node as if it were remote: no CLI, password kept out."""
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.plugin.broker_session import start_broker

    port = rmq.endpoint.info["node_ports"][0]["amqp_port"]
    settings = Settings.resolve(
        {"brokerperf_rabbitmq_url": f"amqp://guest:guest@127.0.0.1:{port}/%2F",
         "brokerperf_broker": "rabbitmq"}, {}, {})
    ep = start_broker("rabbitmq", settings, Path("/nonexistent")).endpoint
    assert ep.mode == "remote" and ep.version == rmq.endpoint.version
    assert "guest:guest" not in ep.bootstrap and ep.redacted()["client_config"]["password"] == "***"
    wl = Workload(name="remote", topics=1, partitions_per_topic=2, message_size=128,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=200,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=200, period_s=1.0, warmup_max_s=0.0, measure_s=2.0, workers=1,
                   topic_prefix="it-remote", probe_timeout_s=60)
    out = run_workload(create_driver(ep, None), wl, plan, payloads=wl.payloads(None, seed=5))
    (sub,) = out.delivery.subscriptions
    assert out.delivery.acknowledged > 200 and (sub.lost, sub.duplicates) == (0, 0)
    assert "no CLI access" in out.read_back["note"]
    assert not [q for q in _queues(rmq) if str(q["name"]).startswith("it-remote")]
    mirrored = create_driver(ep, shipped_driver("rabbitmq-classic-mirrored"))
    admin = mirrored.admin()
    try:
        with pytest.raises(BrokerUnavailable, match="needs rabbitmqctl"):
            admin.create_topics(["it-remote-ha"], [1])
    finally:
        admin.close()


def test_stop_leaves_no_process_and_no_data(rmq: RabbitMQProcessCluster) -> None:
    """Last in the module: stop the node; beam, its helpers and our epmd are all gone."""
    info = rmq.endpoint.info
    beam = psutil.Process(info["pids"][0])
    helpers = [p.pid for p in beam.children(recursive=True)]
    pids = [*info["pids"], *helpers, info["epmd_pid"]]
    data_dirs = [Path(d) for d in info["data_dirs"]]
    workdir = info["workdir"]
    assert all(d.is_dir() for d in data_dirs)
    rmq.stop()
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert alive == []
    assert not any(d.exists() for d in data_dirs)
    leftovers = [p for p in psutil.process_iter(["cmdline", "environ"])
                 if workdir in " ".join(p.info["cmdline"] or [])
                 or workdir in str((p.info["environ"] or {}).get("HOME", ""))]
    assert leftovers == []
    assert Path(info["log_files"][0]).is_file()  # logs are kept for the results
