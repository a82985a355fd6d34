"""AutoMQ's container mode against stand-in images (a real Docker engine).

No AutoMQ or MinIO image can be obtained on this project's machines, so
``brokerperf/s3-standin`` (an S3 subset behind ``minio server /data`` that enforces the
root credentials) and ``brokerperf/automq-standin`` (Kafka behind AutoMQ's
``kafka-server-start.sh --override ...``, which checks its buckets at the store with its
credentials and writes an object to the ops bucket first) stand in; ``ci/docker.sh``
builds both. What this checks is container mode's wiring for AutoMQ: the store's alias
and credentials, the buckets created before the node starts, the listeners, readiness,
the record and cleanup. It says nothing about AutoMQ's performance.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.automq_container import AutoMQContainer
from pytest_brokerperf.brokers.provision import containers
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
    tailread_through_pytest,
)

STANDIN = "brokerperf/automq-standin:latest"
STORE_STANDIN = "brokerperf/s3-standin:latest"
pytestmark = engine_mark()


@pytest.fixture(scope="module", autouse=True)
def _standins() -> None:
    image_or_skip("automq", STANDIN, ())
    image_or_skip("minio", STORE_STANDIN, ())


def test_one_node_and_its_store_serve_host_and_network_clients(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    node = AutoMQContainer(workdir=tmp_path, run_id="it-automq", image=STANDIN,
                           store_image=STORE_STANDIN)
    try:
        ep = node.start()
        info = ep.info
        assert info["stand_in"] and ep.version.startswith("stand-in")
        assert info["object_store"]["part_of_deployment"]
        assert info["object_store"]["image"]["ref"] == STORE_STANDIN
        assert info["image"]["ref"] == STANDIN
        assert len(info["container_names"]) == 2 and node.node_count() == 1
        # the node wrote to the ops bucket, at the alias, with the credentials it was given
        assert node.store.list_keys("automq-ops") == ["brokerperf-standin/started-node-0"]
        # the Kafka metadata from the host names the node at its published address
        admin = AdminClient({"bootstrap.servers": ep.bootstrap})
        md = admin.list_topics(timeout=10)
        assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [ep.bootstrap]
        topic = f"it-automq-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        producer = Producer({"bootstrap.servers": ep.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce(topic, f"m{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": ep.bootstrap, "group.id": topic,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes | None] = []
        for _ in range(30):  # bounded: 30 one-second batches at most
            got += [m.value() for m in consumer.consume(100, timeout=1.0) if m.error() is None]
            if len(got) >= 100:
                break
        consumer.close()
        assert got == [f"m{i}".encode() for i in range(100)]
        # clients on the session's network reach the node and the store by alias
        host, port = info["in_network_bootstrap"].split(":")
        probe = subprocess.run(
            ["docker", "run", "--rm", "--network", info["network"], "--entrypoint", "bash",
             STANDIN, "-c", f"exec 3<>/dev/tcp/{host}/{port} && echo reached && "
             "curl -s -o /dev/null -w '%{http_code}' http://minio:9000/minio/health/live"],
            capture_output=True, text=True, timeout=120, check=False)
        assert probe.stdout.split() == ["reached", "200"], probe.stderr
    finally:
        node.stop()
    assert leftovers("it-automq") == []


def test_a_store_without_the_nodes_credentials_fails_start_up_with_both_logs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in checks its buckets with the credentials AutoMQ is given: a store that
    does not accept them stops start-up, and the error carries both containers' logs."""
    from pytest_brokerperf.brokers import automq_container
    from pytest_brokerperf.core.errors import ProvisionError

    real_env = automq_container.automq_env

    def wrong_secret(cluster_id: str, heap: str = "1g") -> dict[str, str]:
        return {**real_env(cluster_id, heap), "KAFKA_S3_SECRET_KEY": "not-the-secret"}

    monkeypatch.setattr(automq_container, "automq_env", wrong_secret)
    node = AutoMQContainer(workdir=tmp_path, run_id="it-automq-badkey", image=STANDIN,
                           store_image=STORE_STANDIN, start_timeout=60)
    with pytest.raises(ProvisionError) as err:
        node.start()
    text = str(err.value)
    assert "exited with code 1" in text
    assert "answered HTTP 403" in text  # the stand-in's own words, from the node's log
    assert "SignatureDoesNotMatch" in text
    assert "automq-minio" in text and "s3-standin: S3 API on" in text  # the store's log
    assert leftovers("it-automq-badkey") == []


def test_tailread_through_pytest_records_both_images(pytester: pytest.Pytester) -> None:
    """The plugin's path: --brokerperf-image names both stand-ins; the record says the
    store is part of the deployment and that stand-ins ran."""
    _, rec = tailread_through_pytest(
        pytester, "automq", f"--brokerperf-image=automq={STANDIN},minio={STORE_STANDIN}",
        duration=3, warmup=2)
    info = rec["manifest"]["broker"]["info"]
    assert info["image"]["ref"] == STANDIN and info["stand_in"] is True
    assert info["object_store"]["image"]["ref"] == STORE_STANDIN
    assert info["object_store"]["part_of_deployment"] is True
    assert rec["delivery"]["acknowledged"] > 0


def test_the_official_images_where_they_are_on_the_engine(tmp_path: Path) -> None:
    """The real ``automqinc/automq`` and ``minio/minio`` images where a registry was
    reachable to pull them (ci/github/containers.yml); skipped here."""
    from pytest_brokerperf.brokers.automq_container import default_images, object_store_images

    wanted = [*default_images(), *object_store_images()]
    missing = [ref for ref in wanted if not containers.image_on_engine(ref)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not on the engine (no registry is reachable "
                    "here; ci/github/containers.yml pulls them)")
    node = AutoMQContainer(workdir=tmp_path, run_id="it-automq-official")
    try:
        ep = node.start()
        assert ep.info["image"]["ref"] == wanted[0] and not ep.info["stand_in"]
    finally:
        node.stop()
    assert leftovers("it-automq-official") == []
