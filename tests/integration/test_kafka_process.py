"""Real Kafka KRaft brokers started from Maven Central jars (slow: JVMs on 2 cores).

Run one at a time; every test starts and stops its own cluster and checks that no
JVM and no data directory of ours is left behind.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import psutil
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka import process as kp
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.provision.ports import free_ports
from pytest_brokerperf.brokers.provision.process import running_processes
from pytest_brokerperf.core.errors import ProvisionError

pytestmark = pytest.mark.integration


def our_processes(workdir: str) -> list[psutil.Process]:
    """Every process on the machine whose command line mentions ``workdir``."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(workdir in arg for arg in (p.info["cmdline"] or [])):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def assert_all_gone(pids: list[int], workdir: str) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid), f"broker pid {pid} still exists"
    assert our_processes(workdir) == []
    assert running_processes() == []


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config)],
        operation_timeout=30,
    )
    futures[name].result(60)


def produce(bootstrap: str, topic: str, n: int, **conf: Any) -> list[str]:
    """Produce ``n`` numbered messages; returns the delivery errors (empty = all acked)."""
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for i in range(n):
        producer.produce(
            topic, key=str(i).encode(), value=f"msg-{i}".encode(), on_delivery=on_delivery
        )
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages not delivered"
    return errors


def consume(bootstrap: str, topic: str, n: int, timeout: float = 60.0) -> list[str]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            value = msg.value()
            assert value is not None
            values.append(value.decode())
    finally:
        consumer.close()
    return values


def broker_ports(bootstrap: str) -> dict[int, int]:
    """node id -> port, as advertised in the metadata a client gets via ``bootstrap``."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {b.id: b.port for b in md.brokers.values()}


@pytest.fixture
def cluster_factory() -> Iterator[list[KafkaProcessCluster]]:
    """Collects clusters a test starts, so a failing assertion never leaks a JVM."""
    clusters: list[KafkaProcessCluster] = []
    yield clusters
    for c in clusters:
        c.stop()


def test_single_node_produce_consume(
    cluster_factory: list[KafkaProcessCluster], tmp_path: Path
) -> None:
    cluster = KafkaProcessCluster(nodes=1)
    cluster_factory.append(cluster)
    t0 = time.monotonic()
    ep = cluster.start()
    startup = time.monotonic() - t0
    assert isinstance(ep, BrokerEndpoint)
    assert (ep.kind, ep.mode, ep.nodes, ep.version) == ("kafka", "process", 1, "4.3.1")
    assert not ep.topology_check
    info = ep.info
    assert all(psutil.pid_exists(p) for p in info["pids"])
    assert info["java_version"].startswith("17") or int(info["java_version"].split(".")[0]) >= 17
    assert "-XX:+UseG1GC" in info["jvm_flags"] and "-Xmx1g" in info["jvm_flags"]
    assert Path(info["kafka_home_or_cache"]).is_dir()
    assert info["started_at"] <= time.time()
    if len(os.sched_getaffinity(0)) > 1:
        cpu = max(os.sched_getaffinity(0))
        assert info["cpu_affinity"]["broker_cpus"] == [cpu]
        assert info["cpu_affinity"]["nodes"] == {"1": [cpu]}
        assert cpu not in info["cpu_affinity"]["generator_cpus"]
        pid = info["pids"][0]
        for tid in os.listdir(f"/proc/{pid}/task"):  # every JVM thread is pinned
            assert os.sched_getaffinity(int(tid)) == {cpu}
    assert 0 < cluster.uptime_s() < startup + 5
    log_text = Path(info["log_files"][0]).read_text()
    assert "Kafka Server started" in log_text
    assert "INVALID_REPLICATION_FACTOR" not in log_text

    create_topic(ep.bootstrap, "t1", partitions=1, rf=1)
    assert produce(ep.bootstrap, "t1", 100, acks="all") == []
    got = consume(ep.bootstrap, "t1", 100)
    assert got == [f"msg-{i}" for i in range(100)]

    gc_log = Path(info["gc_logs"][0])
    assert gc_log.is_file() and "Using G1" in gc_log.read_text()
    pids = list(info["pids"])
    data_dir = Path(info["data_dirs"][0])
    assert data_dir.is_dir()
    cluster.stop()
    assert not cluster.running
    assert_all_gone(pids, info["workdir"])
    assert not data_dir.exists()
    # the working directory it made itself goes too, logs and configuration included
    # (they used to stay in $TMPDIR, one directory per start)
    assert not Path(info["workdir"]).exists()


def test_the_second_start_maps_the_class_archive_the_first_wrote(
        cluster_factory: list[KafkaProcessCluster], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Class-data sharing (brokers/provision/cds.py): with no archive yet, node 1 writes
    one as it stops; the next start of the same Kafka maps it and serves as before; a
    damaged archive is ignored by Java without a word in the broker's log."""
    from pytest_brokerperf.brokers.provision.cds import CDS_ENV

    monkeypatch.delenv(CDS_ENV, raising=False)
    for old in _cds_dir().glob("kafka-*.jsa"):  # the machine's own: written again below
        old.unlink()

    def serve(agent: bool = False) -> tuple[list[str], str]:
        # a working directory of the test's: the log is read after the stop
        cluster = KafkaProcessCluster(nodes=1, workdir=tmp_path / f"k{len(cluster_factory)}",
                                      metrics_agent=agent)
        cluster_factory.append(cluster)
        ep = cluster.start()
        create_topic(ep.bootstrap, "t1", partitions=1, rf=1)
        assert produce(ep.bootstrap, "t1", 10, acks="all") == []
        flags, log = list(ep.info["jvm_flags"]), Path(ep.info["log_files"][0])
        cluster.stop()
        return flags, log.read_text(errors="replace")

    writing, _ = serve()
    (archive,) = _cds_dir().glob("kafka-*.jsa")
    assert archive.stat().st_size > 1_000_000 and not list(_cds_dir().glob("kafka-*.tmp"))
    assert any(f.startswith("-XX:ArchiveClassesAtExit=") for f in writing), writing
    reading, _ = serve()
    assert f"-XX:SharedArchiveFile={archive}" in reading, reading
    archive.chmod(0o644)
    archive.write_bytes(b"not an archive" * 1000)
    try:
        damaged, log = serve()
        assert f"-XX:SharedArchiveFile={archive}" in damaged
        assert not re.search(r"\[(warning|error)\]\[cds|shared archive", log, re.I), log[-2000:]
    finally:
        archive.unlink()  # the next start writes a good one
    # with the metrics exporter's javaagent and no archive yet, the node starts without
    # writing one: Java refuses to dump classes with an agent attached (a fresh machine's
    # first plugin run, whose brokers carry the agent, failed to start)
    with_agent, _ = serve(agent=True)
    assert any(f.startswith("-javaagent:") for f in with_agent), with_agent
    assert not any("ArchiveClasses" in f or "SharedArchiveFile" in f for f in with_agent)
    assert not list(_cds_dir().glob("kafka-*"))
    serve()  # the machine keeps an archive, as before the test
    assert len(list(_cds_dir().glob("kafka-*.jsa"))) == 1


def _cds_dir() -> Path:
    from pytest_brokerperf.brokers.provision.cds import cds_dir

    return cds_dir()


def test_broken_override_fails_with_log_text(tmp_path: Path) -> None:
    workdir = tmp_path / "kafka"
    cluster = KafkaProcessCluster(
        nodes=1, workdir=workdir, broker_overrides={"num.network.threads": "not-a-number"}
    )
    with pytest.raises(ProvisionError) as info:
        cluster.start()
    msg = str(info.value)
    assert "Invalid value not-a-number for configuration num.network.threads" in msg
    assert not cluster.running
    assert_all_gone([], str(workdir))
    assert not (workdir / "data").exists()


def test_broker_that_never_gets_ready_times_out_and_is_killed(tmp_path: Path) -> None:
    """The broker runs but cannot reach its controller: bounded wait, log tail, no orphan."""
    workdir = tmp_path / "kafka"
    cluster = KafkaProcessCluster(
        nodes=1,
        workdir=workdir,
        broker_overrides={"controller.quorum.voters": "1@127.0.0.1:1"},
        start_timeout=12,
    )
    t0 = time.monotonic()
    with pytest.raises(ProvisionError, match="not ready within 12 s") as info:
        cluster.start()
    assert time.monotonic() - t0 < 12 + 25  # bounded: timeout + stop
    msg = str(info.value)
    assert "--- node 1 (pid " in msg and "kafka-1.log ---" in msg
    assert re.search(r"\] (INFO|WARN|ERROR) .*\(kafka\.|org\.apache\.kafka\.", msg), msg
    assert_all_gone([], str(workdir))
    assert not (workdir / "data").exists()
    assert (workdir / "logs" / "kafka-1.log").is_file()


def test_node_dying_half_way_stops_the_others(tmp_path: Path) -> None:
    """Node 2 of 3 dies during start-up: ProvisionError naming it, nodes 1 and 3 stopped."""
    workdir = tmp_path / "kafka"
    cluster = KafkaProcessCluster(nodes=3, heap="512m", workdir=workdir)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            cluster.start()
        except BaseException as e:
            errors.append(e)

    starter = threading.Thread(target=run)
    starter.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline and starter.is_alive():
        procs = cluster.processes
        if len(procs) == 3:
            victim = procs[1]
        time.sleep(0.05)
    assert victim is not None, "node 2 was never started"
    all_pids = [p.pid for p in cluster.processes]
    victim.kill()
    starter.join(120)
    assert not starter.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ProvisionError), errors
    assert "Kafka node 2 exited" in str(errors[0])
    assert not cluster.running
    assert_all_gone(all_pids, str(workdir))
    assert not (workdir / "data").exists()


def test_port_collision_is_retried(
    cluster_factory: list[KafkaProcessCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process grabs a picked port before Kafka binds it: start retries with new ports."""
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        taken = squatter.getsockname()[1]
        calls: list[list[int]] = []

        def ports_with_collision(n: int, **kw: Any) -> list[int]:
            ports = free_ports(n, **kw)
            if not calls:
                ports[1] = taken  # node 1's controller port
            calls.append(ports)
            return ports

        monkeypatch.setattr(kp, "free_ports", ports_with_collision)
        cluster = KafkaProcessCluster(nodes=1)
        cluster_factory.append(cluster)
        ep = cluster.start()
    assert len(calls) == 2
    assert ep.info["node_ports"][0]["controller_port"] != taken
    assert len(broker_ports(ep.bootstrap)) == 1


def test_three_nodes_rf3_acks_all(kafka_three: BrokerEndpoint) -> None:
    """Last in this file: the shared three-node cluster then serves the next file's tests
    (tests/integration/conftest.py) too. Its stop is checked when it is released (no
    process, no data directory), as a single node's is in
    test_single_node_produce_consume."""
    ep = kafka_three
    assert ep.nodes == 3 and ep.topology_check
    assert len(ep.bootstrap.split(",")) == 3
    assert len(set(ep.info["pids"])) == 3
    assert len(broker_ports(ep.bootstrap)) == 3

    create_topic(ep.bootstrap, "rf3", partitions=3, rf=3, **{"min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": ep.bootstrap})
    md = admin.list_topics("rf3", timeout=20)
    for part in md.topics["rf3"].partitions.values():
        assert sorted(part.replicas) == [1, 2, 3]
    assert produce(ep.bootstrap, "rf3", 100, acks="all", **{"enable.idempotence": True}) == []
    md = admin.list_topics("rf3", timeout=20)
    for part in md.topics["rf3"].partitions.values():
        assert len(part.isrs) == 3
    assert sorted(consume(ep.bootstrap, "rf3", 100)) == sorted(f"msg-{i}" for i in range(100))
    admin.delete_topics(["rf3"])["rf3"].result(30)  # the cluster is shared
