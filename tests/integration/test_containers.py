"""Container mode against a real Docker engine: Kafka in a locally built image.

Skips with the reason when no engine answers or the image is not on it (``bash
ci/docker.sh`` starts dockerd and builds ``brokerperf/kafka``; images are never pulled).
Assertions that can fail (the tail-read smoke through pytest in container mode is in
test_faults_containers.py, in the session of the container faults): the advertised
listeners are reachable from the host and from the container network, the broker is
pinned like a process-mode broker, a start-up failure carries the container's log, and
no container or network outlives its session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.kafka.container import KafkaContainerCluster, default_images
from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION
from pytest_brokerperf.core.errors import ProvisionError
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
)

pytestmark = engine_mark()


@pytest.fixture(scope="module", autouse=True)
def _kafka_image() -> str:
    """The image the default resolution picks, or a skip saying how to build one."""
    return image_or_skip("kafka", None, default_images(KAFKA_DEFAULT_VERSION))


def test_a_failed_start_carries_the_containers_log_and_leaves_nothing(
        tmp_path: Path) -> None:
    cluster = KafkaContainerCluster(version=KAFKA_DEFAULT_VERSION, workdir=tmp_path,
                                    run_id="it-containers-bad", start_timeout=90,
                                    broker_overrides={"num.network.threads": "zero"})
    with pytest.raises(ProvisionError) as err:
        cluster.start()
    text = str(err.value)
    assert "did not become ready" in text and "exited with code" in text
    assert "lines of the container's log" in text and "num.network.threads" in text
    assert leftovers("it-containers-bad") == []


KILLED_SESSION = """
import time
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from pytest_brokerperf.brokers.provision import containers
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
    tailread_through_pytest,
)
testcontainers_config.ryuk_disabled = True
labels = containers.run_labels("kafka", "it-containers-killed")
network = Network(docker_network_kw={"labels": labels})
network.name = "brokerperf-it-containers-killed"
network.create()
(DockerContainer("brokerperf/debian:bookworm").with_command("sleep 600")
 .with_name("brokerperf-it-containers-killed").with_network(network)
 .with_kwargs(labels=labels).start())
print("up", flush=True)
time.sleep(600)
"""


def test_a_sigkilled_sessions_containers_are_removed_by_the_next() -> None:
    """A session labels its container and network as KafkaContainerCluster does
    (``run_labels``), then dies by SIGKILL; the next session's orphan sweep removes both.
    A sleeping container stands in for the broker: the sweep only reads labels."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SESSION], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "up", f"the session did not start its container: {line!r}"
    finally:
        proc.kill()  # SIGKILL: no atexit, no cleanup of its own
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    before = leftovers("it-containers-killed")
    assert len(before) == 2, before  # the container and the network outlived it
    client = containers.docker_client()
    try:
        removed = containers.remove_orphans(client)
    finally:
        client.close()
    assert leftovers("it-containers-killed") == []
    assert sorted(n for n in removed if "it-containers-killed" in n) == sorted(before)


def _settled_partition(admin: Any, topic: str, *, within_s: float = 60.0
                       ) -> tuple[list[int], list[int]]:
    """Replicas and in-sync replicas of partition 0 once the metadata names them.

    A topic's creation returns when the controller has accepted it; the broker that
    answers the next metadata request may not have the partition yet (KRaft propagates
    metadata asynchronously), so a first answer with no partitions is not a failure."""
    deadline = time.monotonic() + within_s
    replicas: list[int] = []
    isrs: list[int] = []
    while time.monotonic() < deadline:
        topic_md = admin.list_topics(topic, timeout=10).topics.get(topic)
        partition = topic_md.partitions.get(0) if topic_md is not None else None
        if partition is not None:
            replicas, isrs = sorted(partition.replicas), sorted(partition.isrs)
            if len(replicas) == 3 and isrs == replicas:
                break
        time.sleep(0.5)
    return replicas, isrs


def test_three_nodes_form_one_cluster_reachable_from_host_and_network(
        tmp_path: Path, _kafka_image: str) -> None:
    """Three KRaft nodes on the session's network: the host sees each at its published
    loopback address (the advertised listener), a replicated topic gets all three in
    sync, containers on the network reach every node by its alias (the in-network
    listener), and each broker JVM is pinned and sampled like a process-mode broker.
    (One node's container is started by the plugin in the tail-read test above.)"""
    import psutil
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = KafkaContainerCluster(version=KAFKA_DEFAULT_VERSION, workdir=tmp_path,
                                    run_id="it-containers-three", nodes=3)
    try:
        ep = cluster.start()
        assert ep.nodes == 3 and ep.topology_check
        admin = AdminClient({"bootstrap.servers": ep.bootstrap})
        md = admin.list_topics(timeout=10)
        assert sorted(f"{b.host}:{b.port}" for b in md.brokers.values()) == sorted(
            ep.bootstrap.split(","))
        assert all(a.startswith("127.0.0.1:") for a in ep.bootstrap.split(","))
        admin.create_topics([NewTopic("it-three", 1, 3)])["it-three"].result(timeout=60)
        replicas, isrs = _settled_partition(admin, "it-three")
        assert replicas == [1, 2, 3]
        assert isrs == [1, 2, 3]
        probes = " && ".join(
            f"exec 3<>/dev/tcp/{host}/{port} && exec 3>&-"
            for host, port in (a.split(":") for a in ep.info["in_network_bootstrap"].split(",")))
        probe = subprocess.run(
            ["docker", "run", "--rm", "--network", ep.info["network"], "--entrypoint", "bash",
             _kafka_image, "-c", f"{probes} && echo reached"],
            capture_output=True, text=True, timeout=120, check=False)
        assert probe.stdout.strip() == "reached", probe.stderr
        assert len(ep.info["container_names"]) == 3 and len(ep.info["pids"]) == 3
        affinity = ep.info["cpu_affinity"]
        for pid in ep.info["pids"]:  # each JVM as the host sees it: /proc sampling works
            cmdline = psutil.Process(pid).cmdline()
            assert "java" in " ".join(cmdline) and "-XX:MaxGCPauseMillis=20" in cmdline
            if affinity["broker_cpus"]:
                assert affinity["cpuset_cpus"] == ",".join(map(str, affinity["broker_cpus"]))
                assert sorted(psutil.Process(pid).cpu_affinity()) == affinity["broker_cpus"]
    finally:
        cluster.stop()
    assert leftovers("it-containers-three") == []
