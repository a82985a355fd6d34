"""Container mode without Docker: the Kafka image's environment contract, listeners, JVM
flags, the image option, the engine probe and the missing-image error."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.kafka.container import (
    IN_NETWORK_PORT,
    KafkaContainerLayout,
    container_properties,
    env_from_properties,
    launcher_env,
    properties_from_env,
)
from pytest_brokerperf.brokers.kafka.node_config import (
    KAFKA_PERFORMANCE_FLAGS,
    NodePorts,
    kafka_jvm_flags,
    node_config,
)
from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError, ProvisionError
from pytest_brokerperf.plugin.broker_session import provision_reason

ENTRYPOINT = Path(__file__).resolve().parents[2] / "ci" / "images" / "kafka" / "entrypoint.sh"
NODE = KafkaContainerLayout(node_id=1, host_port=39092, alias="kafka-1")


def render_in_entrypoint(env: dict[str, str]) -> dict[str, str]:
    """What the image's entrypoint renders from ``env`` (run with bash, no Docker)."""
    out = subprocess.run(["bash", str(ENTRYPOINT)], capture_output=True, text=True,
                         check=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "BROKERPERF_RENDER_ONLY": "1", **env})
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if line)


# -- the image's environment contract ----------------------------------------------------


def test_properties_become_kafka_variables_as_the_official_image_reads_them() -> None:
    env = env_from_properties({"node.id": "1", "log.dirs": "/d", "some_key.x": "a",
                               "dash-key": "b"})
    assert env == {"KAFKA_NODE_ID": "1", "KAFKA_LOG_DIRS": "/d", "KAFKA_SOME__KEY_X": "a",
                   "KAFKA_DASH___KEY": "b"}


def test_the_contract_round_trips_through_python_and_through_the_entrypoint() -> None:
    props = container_properties(NODE, {"num.network.threads": "3"})
    env = env_from_properties(props)
    assert properties_from_env(env) == props
    rendered = render_in_entrypoint({**env, **launcher_env(1, "1g"), "CLUSTER_ID": "x"})
    # launcher variables and CLUSTER_ID are no server properties
    assert rendered == props


def test_the_entrypoint_uses_the_images_single_node_defaults_without_variables() -> None:
    rendered = render_in_entrypoint({"KAFKA_HEAP_OPTS": "-Xmx1g"})
    assert rendered["process.roles"] == "broker,controller"
    assert rendered["listeners"] == "PLAINTEXT://:9092,CONTROLLER://:9093"
    assert rendered["log.dirs"] == "/var/lib/kafka/data"
    assert "heap.opts" not in rendered


def test_a_property_named_like_a_launcher_variable_is_refused() -> None:
    with pytest.raises(ConfigError, match="KAFKA_HEAP_OPTS"):
        env_from_properties({"heap.opts": "x"})


# -- listeners and sameness with process mode ------------------------------------------------


def test_host_clients_get_the_published_port_and_network_clients_the_alias() -> None:
    props = container_properties(NODE)
    assert props["advertised.listeners"] == (
        f"PLAINTEXT://kafka-1:{IN_NETWORK_PORT},HOST://127.0.0.1:39092")
    # the HOST listener binds the port that is published and advertised
    assert "HOST://:39092" in props["listeners"].split(",")
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["controller.quorum.voters"] == "1@kafka-1:9093"
    protocols = dict(p.split(":") for p in props["listener.security.protocol.map"].split(","))
    assert set(protocols) == {"CONTROLLER", "PLAINTEXT", "HOST"}


def test_container_and_process_mode_configure_the_same_broker() -> None:
    ports = NodePorts(node_id=1, port=1, controller_port=2)
    process = node_config(ports, [ports], data_dir=Path("/d"))
    container = container_properties(NODE)
    addresses = {"listeners", "advertised.listeners", "listener.security.protocol.map",
                 "controller.quorum.voters", "log.dirs"}
    assert {k: v for k, v in process.items() if k not in addresses} == {
        k: v for k, v in container.items() if k not in addresses}


def test_container_mode_sets_process_modes_jvm_flags_and_heap(tmp_path: Path) -> None:
    env = launcher_env(1, "1g")
    process = kafka_jvm_flags("1g", tmp_path / "gc.log", tmp_path)
    assert env["KAFKA_HEAP_OPTS"].split() == process[:2]
    assert env["KAFKA_JVM_PERFORMANCE_OPTS"].split() == list(KAFKA_PERFORMANCE_FLAGS)
    assert env["KAFKA_GC_LOG_OPTS"].startswith("-Xlog:gc*:file=/var/log/kafka/gc-1.log:")
    with pytest.raises(ConfigError, match="heap"):
        launcher_env(1, "lots")


# -- the image option --------------------------------------------------------------------


def test_image_option_per_broker_kind() -> None:
    s = Settings.resolve({"brokerperf_image": "kafka=apache/kafka:4.3.1, "
                          "pulsar=apachepulsar/pulsar@sha256:ab12"}, {}, {})
    assert s.image_for("kafka") == "apache/kafka:4.3.1"
    assert s.image_for("rabbitmq") is None
    assert s.as_dict()["images"]["pulsar"] == "apachepulsar/pulsar@sha256:ab12"


@pytest.mark.parametrize(("raw", "message"), [
    ("apache/kafka:4.3.1", "is not KIND=IMAGE"),
    ("kafak=apache/kafka", "did you mean 'kafka'"),
    ("kafka=Apache/Kafka", "is not an image reference"),
    ("kafka=a,kafka=b", "two images for 'kafka'"),
])
def test_bad_image_options_name_the_value_and_the_fix(raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        Settings.resolve({"brokerperf_image": raw}, {}, {})
    assert "--brokerperf-image" in str(err.value)


# -- the engine probe ----------------------------------------------------------------------


@pytest.fixture
def fake_engine(tmp_path: Path) -> Iterator[tuple[str, list[bytes]]]:
    """A unix socket answering pings with the next queued status line."""
    path = str(tmp_path / "docker.sock")
    answers: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                conn.sendall(answers.pop(0) if answers else b"HTTP/1.1 200 OK\r\n\r\nOK")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"unix://{path}", answers
    server.close()


def test_an_engine_that_answers_its_ping_is_found(fake_engine: tuple[str, list[bytes]]) -> None:
    address, answers = fake_engine
    assert containers.engine_status(address=address).answers
    answers.append(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    status = containers.engine_status(address=address)
    assert not status.answers and "500" in status.detail


def test_no_engine_is_a_reason_naming_the_socket(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"unix://{tmp_path}/absent.sock"
    status = containers.engine_status(address=address)
    assert not status.answers and "absent.sock" in status.address
    monkeypatch.setenv("DOCKER_HOST", address)
    with pytest.raises(BrokerUnavailable, match=r"no(ne)? .*answers at unix://.*absent\.sock.*"
                       r"ci/docker\.sh.*--brokerperf-provision=process"):
        containers.require_engine()


def test_the_header_says_which_mode_and_why(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    monkeypatch.delenv("BROKERPERF_AUTO_PROVISION", raising=False)  # the tests' own pin
    auto = provision_reason(Settings.resolve({}, {}, {}))
    assert auto is not None and auto.startswith("provision auto -> process")
    assert "no Docker engine answers" in auto
    container = provision_reason(Settings.resolve({"brokerperf_provision": "container"}, {}, {}))
    assert container is not None and "container-mode tests skip" in container
    assert provision_reason(Settings.resolve({"brokerperf_provision": "process"}, {}, {})) is None


# -- images are never pulled -----------------------------------------------------------------


class _Images:
    def __init__(self, present: dict[str, Any]) -> None:
        self.present = present

    def get(self, ref: str) -> Any:
        from docker.errors import ImageNotFound

        if ref not in self.present:
            raise ImageNotFound(ref)
        return self.present[ref]


class _Client:
    def __init__(self, present: dict[str, Any]) -> None:
        self.images = _Images(present)


class _Image:
    def __init__(self) -> None:
        self.id = "sha256:abc"
        self.attrs = {"RepoDigests": [],
                      "Config": {"Labels": {"org.brokerperf.content-hash": "h1"}}}


def test_the_first_default_image_on_the_engine_is_used() -> None:
    client: Any = _Client({"apache/kafka:4.3.1": _Image()})
    info = containers.resolve_image(client, "kafka", None,
                                    ("brokerperf/kafka:4.3.1", "apache/kafka:4.3.1"))
    assert (info.ref, info.id, info.as_dict()["content_hash"]) == (
        "apache/kafka:4.3.1", "sha256:abc", "h1")


def test_a_missing_image_is_an_error_naming_it_and_how_to_provide_one() -> None:
    client: Any = _Client({"brokerperf/kafka:4.3.1": _Image()})
    with pytest.raises(ProvisionError) as err:  # asked for: no fallback to a default
        containers.resolve_image(client, "kafka", "apache/kafka:9.9.9",
                                 ("brokerperf/kafka:4.3.1",))
    text = str(err.value)
    assert not isinstance(err.value, BrokerUnavailable)  # an error, not a skip
    for part in ("apache/kafka:9.9.9", "never pulled", "ci/docker.sh", "docker load",
                 "--brokerperf-image=kafka=REF"):
        assert part in text


def test_three_container_nodes_form_one_quorum_as_process_modes_three_do() -> None:
    layout = [KafkaContainerLayout(node_id=i, host_port=30000 + i, alias=f"kafka-{i}")
              for i in (1, 2, 3)]
    ports = [NodePorts(node_id=i, port=i * 10, controller_port=i * 10 + 1) for i in (1, 2, 3)]
    addresses = {"listeners", "advertised.listeners", "listener.security.protocol.map",
                 "controller.quorum.voters", "log.dirs"}
    for node, process_node in zip(layout, ports, strict=True):
        container = container_properties(node, cluster=layout)
        process = node_config(process_node, ports, data_dir=Path("/d"))
        assert {k: v for k, v in process.items() if k not in addresses} == {
            k: v for k, v in container.items() if k not in addresses}
        assert container["controller.quorum.voters"] == (
            "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093")
        assert container["advertised.listeners"] == (
            f"PLAINTEXT://kafka-{node.node_id}:9092,HOST://127.0.0.1:{node.host_port}")
    first = container_properties(layout[0], cluster=layout)
    assert first["offsets.topic.replication.factor"] == "3"


def test_two_container_nodes_are_refused(tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.kafka.container import KafkaContainerCluster

    with pytest.raises(ConfigError, match="1 or 3"):
        KafkaContainerCluster(version="4.3.1", workdir=tmp_path, run_id="r", nodes=2)


def test_a_containers_typed_record_keeps_its_logs_pids_and_cpus() -> None:
    """Logs are copied into the artefacts and pids sampled from the typed record alone
    (the endpoint's info decides nothing): nothing of the container's may be lost."""
    from pytest_brokerperf.brokers.provision.container_node import ContainerNode

    rec = ContainerNode.local_record({
        "pids": [41, 42], "log_files": ["/w/logs/kafka-1.log"], "gc_logs": ["/w/gc-1.log"],
        "cpu_affinity": {"broker_cpus": [1], "generator_cpus": [0], "nodes": {"1": [1]}},
        "started_at": 1.5, "ready_at": 2.5, "startup_s": 1.0, "workdir": "/w"})
    assert rec.pids == (41, 42) and rec.log_files == ("/w/logs/kafka-1.log",)
    assert rec.gc_logs == ("/w/gc-1.log",) and rec.workdir == "/w"
    assert rec.cpu_affinity is not None and rec.cpu_affinity.broker_cpus == (1,)
