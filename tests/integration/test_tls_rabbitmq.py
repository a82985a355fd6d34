"""RabbitMQ over TLS (issue 29 item 3): a local node with an ``amqps`` listener from a
per-run CA, its key encrypted; the project's pika clients (driver, admin, read-back)
connect over it, checked on the broker (``rabbitmqctl list_connections ssl``)."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator

import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.rabbitmq.connection import _params
from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster, rabbitmq_available
from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload

pytestmark = pytest.mark.integration
pytest.importorskip("trustme")


@pytest.fixture(scope="module")
def tls_rmq(_broker_session_lock: None) -> Iterator[RabbitMQProcessCluster]:
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)
    cluster = RabbitMQProcessCluster(nodes=1, tls=True)
    with cluster:
        yield cluster
    assert cluster.workdir is None or not (cluster.workdir / "tls").exists()


def _connections(rmq: RabbitMQProcessCluster) -> dict[str, dict[str, object]]:
    rows = rmq.ctl.json("rabbitmqctl", "list_connections", "-q", "name", "ssl",
                        "ssl_protocol", "port", "client_properties")
    out = {}
    for row in rows:
        props = row.get("client_properties") or []
        name = next((p[2] for p in props if isinstance(p, list) and p[:1] == ["connection_name"]),
                    row["name"])
        out[str(name)] = row
    return out


def test_clients_connect_over_amqps_with_the_runs_ca(tls_rmq: RabbitMQProcessCluster) -> None:
    import pika

    ep = tls_rmq.endpoint
    assert ep.tls is not None and ep.tls.protocol == "amqps"
    (node,) = ep.info["node_ports"]
    assert ep.bootstrap == f"amqps://127.0.0.1:{node['amqps_port']}"
    assert ep.tls.plaintext == f"amqp://127.0.0.1:{node['amqp_port']}"
    assert ep.tls_record() == {"on": True, "protocol": "amqps", "local_ca": True}
    # the key password is in the node's rabbitmq.conf only, never in what is recorded
    conf = (tls_rmq.workdir / "rmq1" / "rabbitmq.conf").read_text()  # type: ignore[operator]
    password = next(line.split(" = ", 1)[1] for line in conf.splitlines()
                    if line.startswith("ssl_options.password"))
    assert len(password) >= 24
    assert password not in json.dumps(ep.redacted()) and password not in repr(ep)
    conn = pika.BlockingConnection(_params(ep.bootstrap, ep.client_config, "tls-probe", ep.tls))
    try:
        row = _connections(tls_rmq)["tls-probe"]
        assert row["ssl"] is True and str(row["ssl_protocol"]).startswith("tlsv1.")
        assert row["port"] == node["amqps_port"]
    finally:
        conn.close()
    # pika's own amqps default (the system's trust store) refuses the run's CA
    with pytest.raises((pika.exceptions.AMQPConnectionError, ssl.SSLError)):
        params = pika.URLParameters(ep.bootstrap)
        params.connection_attempts, params.socket_timeout = 1, 5
        pika.BlockingConnection(params)


def test_an_engine_run_over_amqps_loses_nothing_and_reads_its_streams_back(
        tls_rmq: RabbitMQProcessCluster) -> None:
    from pytest_brokerperf.brokers.rabbitmq.readback import _read_stream
    from pytest_brokerperf.brokers.readback import SeqBitmaps

    ep = tls_rmq.endpoint
    wl = Workload(name="it", topics=1, partitions_per_topic=1, message_size=128,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=200,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=200, period_s=1.0, warmup_max_s=1.0, measure_s=2.0, workers=1,
                   topic_prefix="it-tls", probe_timeout_s=60, keep_topics=True,
                   generator_cpus=default_generator_cpus(ep.info.get("cpu_affinity")))
    out = run_workload(create_driver(ep, shipped_driver("rabbitmq-stream")), wl, plan,
                       payloads=wl.payloads(None, seed=3))
    d = out.delivery
    assert d.acknowledged > 200 and not out.worker_errors
    (sub,) = d.subscriptions
    assert sub.received == sub.acknowledged == d.acknowledged and sub.lost == 0
    # the power-cut read-back reads the kept stream over amqps (it used pika's defaults)
    (topic,) = out.read_back["topics"]
    (stream,) = out.read_back["topics"][topic]["queues"]
    seen = SeqBitmaps()
    assert _read_stream(ep, stream, seen, time.monotonic() + 30)
    assert seen.read >= d.acknowledged
    tls_rmq.ctl.check("rabbitmqctl", "delete_queue", stream)
