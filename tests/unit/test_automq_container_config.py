"""AutoMQ's container mode without Docker: the launcher command, environment and bucket
URIs it renders, the contract the stand-in honours, and what it refuses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.automq_container import (
    BUCKETS,
    SERVER_PROPERTIES,
    SERVER_START,
    AutoMQContainer,
    automq_env,
    bucket_uri,
    default_images,
    object_store_images,
    start_command,
)
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "ci" / "images" / "automq-standin"

#: AutoMQ's single-node docker-compose (docker/docker-compose.yaml in AutoMQ/automq,
#: release 1.5.0), the contract container mode renders: the launcher and its
#: properties file, the overrides it always passes, the environment, the object store.
OFFICIAL_CONTRACT = {
    "image": "automqinc/automq:1.5.0",
    "launcher": ["/opt/automq/kafka/bin/kafka-server-start.sh",
                 "/opt/automq/kafka/config/kraft/server.properties"],
    "override_keys": {"cluster.id", "node.id", "controller.quorum.voters",
                      "controller.quorum.bootstrap.servers", "advertised.listeners",
                      "s3.data.buckets", "s3.ops.buckets", "s3.wal.path"},
    "env": {"KAFKA_S3_ACCESS_KEY", "KAFKA_S3_SECRET_KEY", "KAFKA_HEAP_OPTS", "CLUSTER_ID"},
    "data_uri": ("0@s3://automq-data?region=us-east-1&endpoint=http://minio:9000"
                 "&pathStyle=true"),
    "ops_uri": "1@s3://automq-ops?region=us-east-1&endpoint=http://minio:9000&pathStyle=true",
    "store_image": "minio/minio:RELEASE.2025-05-24T17-08-30Z",
    "store_command": ["server", "/data"],
    "store_env": {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"},
    "store_port": 9000,
    "buckets": ("automq-data", "automq-ops"),
}


def _overrides(cmd: list[str]) -> dict[str, str]:
    pairs = [cmd[i + 1] for i, word in enumerate(cmd) if word == "--override"]
    assert len(pairs) * 2 + 2 == len(cmd), "only the two launcher words and --override pairs"
    return dict(p.split("=", 1) for p in pairs)


def test_the_command_is_automqs_launcher_with_its_overrides() -> None:
    cmd = start_command(31001, "AAAAAAAAAAAAAAAAAAAAAA")
    assert cmd[:2] == OFFICIAL_CONTRACT["launcher"] == [SERVER_START, SERVER_PROPERTIES]
    props = _overrides(cmd)
    assert OFFICIAL_CONTRACT["override_keys"] <= set(props)
    assert props["cluster.id"] == "AAAAAAAAAAAAAAAAAAAAAA" and props["node.id"] == "0"
    assert props["controller.quorum.voters"] == "0@automq-1:9093"
    assert props["controller.quorum.bootstrap.servers"] == "automq-1:9093"


def test_host_clients_get_the_published_port_and_network_clients_the_alias() -> None:
    props = _overrides(start_command(31001, "c"))
    assert props["listeners"] == "PLAINTEXT://:9092,HOST://:31001,CONTROLLER://:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://automq-1:9092,HOST://127.0.0.1:31001"
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT,CONTROLLER:PLAINTEXT")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"


def test_the_data_ops_and_wal_uris_name_the_session_store_path_style() -> None:
    props = _overrides(start_command(1, "c"))
    assert props["s3.data.buckets"] == OFFICIAL_CONTRACT["data_uri"] == bucket_uri(0, BUCKETS[0])
    assert props["s3.ops.buckets"] == OFFICIAL_CONTRACT["ops_uri"] == bucket_uri(1, BUCKETS[1])
    assert props["s3.wal.path"] == OFFICIAL_CONTRACT["data_uri"]  # the WAL on object storage
    assert OFFICIAL_CONTRACT["buckets"] == BUCKETS


def test_the_environment_carries_credentials_heap_and_cluster_id() -> None:
    env = automq_env("c1", heap="2g")
    assert set(env) == OFFICIAL_CONTRACT["env"]
    assert env["KAFKA_HEAP_OPTS"].split()[:2] == ["-Xms2g", "-Xmx2g"]
    assert "-XX:MaxDirectMemorySize=1G" in env["KAFKA_HEAP_OPTS"]
    assert env["CLUSTER_ID"] == "c1"
    with pytest.raises(ConfigError, match="heap size '2 GB'"):
        automq_env("c1", heap="2 GB")
    with pytest.raises(ConfigError, match="port must be 1-65535, got 0"):
        start_command(0, "c")
    with pytest.raises(ConfigError, match="cluster id"):
        start_command(1, "")


def test_the_plans_pair_the_node_with_its_object_store(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Node first (faults act on node 1), the store with the credentials AutoMQ gets."""
    from pytest_brokerperf.brokers.provision import containers
    from pytest_brokerperf.brokers.provision.containers import ImageInfo

    class _Client:
        def close(self) -> None: ...

    monkeypatch.setattr(containers, "docker_client", _Client)
    monkeypatch.setattr(containers, "resolve_image",
                        lambda client, kind, requested, defaults: ImageInfo(
                            ref=requested or defaults[0], id="sha256:x"))
    node = AutoMQContainer(workdir=tmp_path, run_id="r1", store_image="my/s3:1")
    automq, store = node.plans()
    ((inside, host),) = automq.ports.items()
    assert inside == host and automq.alias == "automq-1" and automq.image is None
    assert automq.command is not None
    assert f"HOST://127.0.0.1:{host}" in _overrides(automq.command)["advertised.listeners"]
    assert automq.memory_mb == 1024 + 1024 + 512  # heap + direct memory + headroom
    assert store.alias == "minio" and store.image == "my/s3:1"
    assert store.command == OFFICIAL_CONTRACT["store_command"]
    assert set(store.env) == OFFICIAL_CONTRACT["store_env"]
    assert store.env["MINIO_ROOT_USER"] == automq.env["KAFKA_S3_ACCESS_KEY"]
    assert store.env["MINIO_ROOT_PASSWORD"] == automq.env["KAFKA_S3_SECRET_KEY"]
    assert list(store.ports) == [OFFICIAL_CONTRACT["store_port"]]
    assert node.store.url == f"http://127.0.0.1:{store.ports[9000]}"
    assert node.name_of(2).startswith("brokerperf-r1-automq-minio-")
    assert default_images() == (OFFICIAL_CONTRACT["image"],)
    assert object_store_images() == (OFFICIAL_CONTRACT["store_image"],)


def test_the_stand_in_reads_the_same_overrides() -> None:
    """The stand-in's launcher, in its render-only mode: the buckets it checks are the
    ones the URIs name, and Kafka gets the listeners and ids (never the s3.* keys)."""
    cmd = start_command(31001, "CCCCCCCCCCCCCCCCCCCCCC")
    run = subprocess.run(
        ["bash", str(STANDIN / "kafka-server-start.sh"), str(STANDIN / "server.properties"),
         *cmd[2:]], capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, "BROKERPERF_RENDER_ONLY": "1", "KAFKA_S3_ACCESS_KEY": "a",
             "KAFKA_S3_SECRET_KEY": "b"})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [x for x in lines if x.startswith("check ")] == [
        "check s3.data.buckets automq-data us-east-1 http://minio:9000",
        "check s3.ops.buckets automq-ops us-east-1 http://minio:9000",
        "check s3.wal.path automq-data us-east-1 http://minio:9000"]
    props = dict(x.split("=", 1) for x in lines if not x.startswith("check "))
    assert props["advertised.listeners"] == "PLAINTEXT://automq-1:9092,HOST://127.0.0.1:31001"
    assert props["node.id"] == "0" and props["cluster.id"] == "CCCCCCCCCCCCCCCCCCCCCC"
    assert not [k for k in props if k.startswith("s3.")]


def test_the_stand_in_refuses_without_credentials_or_buckets() -> None:
    base = ["bash", str(STANDIN / "kafka-server-start.sh"), str(STANDIN / "server.properties")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_S3_")}
    no_creds = subprocess.run([*base, *start_command(1, "c")[2:]], env=env,
                              capture_output=True, text=True, timeout=30, check=False)
    assert no_creds.returncode == 1 and "KAFKA_S3_ACCESS_KEY" in no_creds.stderr
    no_ops = subprocess.run([*base, "--override", "s3.data.buckets=" + bucket_uri(0, "d"),
                             "--override", "s3.wal.path=" + bucket_uri(0, "d")],
                            env={**env, "KAFKA_S3_ACCESS_KEY": "a", "KAFKA_S3_SECRET_KEY": "b"},
                            capture_output=True, text=True, timeout=30, check=False)
    assert no_ops.returncode == 1 and "s3.ops.buckets is not set" in no_ops.stderr


def test_three_nodes_are_refused_with_the_remote_way_out(tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.automq import AutoMQBroker
    from pytest_brokerperf.config.settings import Settings

    settings = Settings.resolve({"brokerperf_nodes": 3, "brokerperf_broker": "automq"}, {}, {})
    with pytest.raises(BrokerUnavailable, match="one AutoMQ node in this version, not 3"):
        AutoMQBroker().start_container(settings, tmp_path, None)
    assert AutoMQBroker.container_nodes == (1,)


def test_durability_levels_are_refused_in_container_mode_as_in_remote_mode() -> None:
    from pytest_brokerperf.brokers.automq import AutoMQBroker
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver

    broker = AutoMQBroker()
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("automq"))
    with pytest.raises(Exception, match="durability levels are not mapped for automq"):
        broker.apply_level(cfg, 2)


def test_the_image_flag_names_the_object_store_as_minio() -> None:
    from pytest_brokerperf.config.settings import Settings

    settings = Settings.resolve({"brokerperf_image": "automq=a/b:1,minio=my/store:2"}, {}, {})
    assert settings.image_for("automq") == "a/b:1"
    assert settings.image_for("minio") == "my/store:2"
    with pytest.raises(ConfigError, match=r"unknown broker 'mini'.*minio for AutoMQ's"):
        Settings.resolve({"brokerperf_image": "mini=my/store:2"}, {}, {})
