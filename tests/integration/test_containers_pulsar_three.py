"""Container mode, three Pulsar nodes: ``pulsar-1..3`` (a broker and a bookie each) and
``pulsar-meta`` (ZooKeeper) on the session's container network.

Skips with the reason when no engine answers or no Pulsar image is on it (``bash
ci/docker.sh``). One cluster serves every test of the module (start-up is the cost).
Assertions that can fail: every broker and bookie is up and recorded; messages produced
and consumed through the host listener land in a ledger whose ensemble is the three
bookies (3/3/2, read from the broker's admin API); lookups name loopback for the host
and the node's alias for the ``network`` listener; nothing labelled with the run is
left after stop.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.maven import PULSAR_DEFAULT_VERSION
from pytest_brokerperf.brokers.pulsar.container import PulsarContainerCluster, default_images
from tests.support.containers import engine_mark, image_or_skip, leftovers

pytestmark = engine_mark()
RUN_ID = "it-pulsar-three"


@pytest.fixture(scope="module", autouse=True)
def _pulsar_image() -> str:
    return image_or_skip("pulsar", None, default_images(PULSAR_DEFAULT_VERSION))


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarContainerCluster]:
    node = PulsarContainerCluster(version=PULSAR_DEFAULT_VERSION,
                                  workdir=tmp_path_factory.mktemp("pulsar-three"),
                                  run_id=RUN_ID, nodes=3, durability=2, heap="512m",
                                  direct_memory="512m", start_timeout=240)
    try:
        node.start()
        yield node
    finally:
        node.stop()


@pytest.fixture
def cluster(nodes: PulsarContainerCluster) -> BrokerEndpoint:
    return nodes.endpoint


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def test_three_brokers_and_three_bookies_are_up_and_recorded(cluster: BrokerEndpoint) -> None:
    info = cluster.info
    assert cluster.nodes == 3 and cluster.topology_check and cluster.mode == "container"
    assert len(info["container_names"]) == 3 and info["aliases"] == [
        "pulsar-1", "pulsar-2", "pulsar-3"]
    assert len(info["support_containers"]) == 1
    assert info["bookie_ids"] == ["pulsar-1:3181", "pulsar-2:3181", "pulsar-3:3181"]
    assert info["default_persistence"] == {"ensemble": 3, "write_quorum": 3,
                                           "ack_quorum": 2}
    assert len(info["pids"]) == 6  # a broker and a bookie JVM per node
    brokers = _get(f"{cluster.admin_url}/admin/v2/brokers/{info['cluster_name']}")
    assert len(brokers) == 3
    for url in info["admin_urls"]:
        with urllib.request.urlopen(f"{url}/admin/v2/brokers/health", timeout=30) as resp:
            assert resp.read().decode() == "ok"


def test_messages_through_the_host_listener_land_on_all_three_bookies(
        cluster: BrokerEndpoint) -> None:
    import pulsar

    topic = f"persistent://public/default/it-three-{uuid.uuid4().hex[:8]}"
    client = pulsar.Client(cluster.bootstrap, operation_timeout_seconds=30,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        consumer = client.subscribe(topic, "it")
        producer = client.create_producer(topic)
        sent = [f"m{i}".encode() for i in range(200)]
        for payload in sent:
            producer.send(payload)
        got = []
        for _ in sent:
            msg = consumer.receive(timeout_millis=30000)
            got.append(msg.data())
            consumer.acknowledge(msg)
        assert got == sent
    finally:
        client.close()
    path = topic.replace("persistent://", "")
    stats = _get(f"{cluster.admin_url}/admin/v2/persistent/{path}/internalStats"
                 "?metadata=true")
    (ledger,) = [x for x in stats["ledgers"] if x.get("entries", 0) > 0] or stats["ledgers"][-1:]
    meta = ledger["metadata"]
    assert re.search(r"ensembleSize=3\b", meta) and re.search(r"ackQuorumSize=2\b", meta), meta
    for bookie in cluster.info["bookie_ids"]:
        assert bookie in meta, meta


def test_lookups_name_loopback_for_the_host_and_the_alias_for_the_network(
        cluster: BrokerEndpoint) -> None:
    topic = f"it-lookup-{uuid.uuid4().hex[:8]}"
    base = f"{cluster.admin_url}/lookup/v2/topic/persistent/public/default/{topic}"
    host = _get(base)["brokerUrl"]
    assert host in cluster.info["listeners"]["host"].split(","), host
    # another namespace: its own bundle, so no lookup of the host's is shared (see
    # docs/reference/containers.md, "Lookups and listener names")
    urllib.request.urlopen(urllib.request.Request(
        f"{cluster.admin_url}/admin/v2/namespaces/public/it-network", method="PUT"),
        timeout=30).close()
    network = _get(f"{cluster.admin_url}/lookup/v2/topic/persistent/public/it-network/"
                   f"{topic}?listenerName=network")["brokerUrl"]
    port = network.rsplit(":", 1)[1]
    alias = {str(p["broker"]): a for a, p in cluster.info["ports"].items()}[port]
    assert network == f"pulsar://{alias}:{port}"


def test_nothing_is_left_after_stop(nodes: PulsarContainerCluster) -> None:
    assert len(leftovers(RUN_ID)) == 5  # four containers and the network, while running
    nodes.stop()  # what the session does at the end (the fixture's second call is a no-op)
    assert leftovers(RUN_ID) == []
