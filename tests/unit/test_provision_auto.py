"""What ``--brokerperf-provision=auto`` becomes: containers when an engine answers with
each broker's image, processes otherwise, and the reason either way (a fake engine on a
unix socket answers the two API calls the decision makes)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from pytest_brokerperf.brokers.provision.containers import image_on_engine
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.plugin.broker_session import decide_auto, provision_reason


@pytest.fixture(autouse=True)
def _unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROKERPERF_AUTO_PROVISION", raising=False)  # the tests' own pin


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """A fake engine at DOCKER_HOST: pings answer 200; an image answers 200 when its
    reference is in the yielded set, else 404."""
    path = str(tmp_path / "docker.sock")
    images: set[str] = set()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                target = conn.recv(1024).decode().split(" ")[1]
                found = target == "/_ping" or (
                    target.startswith("/images/")
                    and unquote(target[len("/images/"):-len("/json")]) in images)
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n{}" if found
                             else b"HTTP/1.1 404 Not Found\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    yield images
    server.close()


def _settings(**values: object) -> Settings:
    return Settings.resolve({"brokerperf_provision": "auto",
                             **{f"brokerperf_{k}": v for k, v in values.items()}}, {}, {})


def test_no_engine_means_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    settings = _settings().with_auto_resolved(decide_auto)
    assert settings.provision_effective == "process"
    assert settings.provision_display == "auto(process)"
    assert settings.auto_reason and "no Docker engine answers" in settings.auto_reason
    assert "absent.sock" in settings.auto_reason


def test_an_engine_with_the_images_means_containers(engine: set[str]) -> None:
    engine.update({"brokerperf/kafka:4.3.1", "rabbitmq:3.10-management"})
    assert image_on_engine("rabbitmq:3.10-management")
    assert not image_on_engine("apachepulsar/pulsar:4.0.7")
    settings = _settings(broker="kafka,rabbitmq",
                         kafka_version="4.3.1").with_auto_resolved(decide_auto)
    assert settings.provision_effective == "container"
    assert settings.provision_display == "auto(container)"
    assert provision_reason(settings) == settings.auto_reason
    assert "kafka, rabbitmq" in str(settings.auto_reason)


def test_an_engine_without_a_brokers_image_means_processes_and_says_which(
        engine: set[str]) -> None:
    engine.add("brokerperf/kafka:4.3.1")
    mode, reason = decide_auto(_settings(broker="kafka,pulsar", kafka_version="4.3.1"))
    assert mode == "process"
    assert "brokerperf/pulsar" in reason and "apachepulsar/pulsar" in reason
    assert "ci/docker.sh" in reason


def test_a_broker_without_container_mode_keeps_the_session_in_processes(
        engine: set[str]) -> None:
    engine.add("brokerperf/kafka:4.3.1")
    mode, reason = decide_auto(_settings(broker="kafka,tansu", kafka_version="4.3.1"))
    assert mode == "process" and "tansu has no container mode" in reason


def test_the_image_flag_is_the_only_candidate(engine: set[str]) -> None:
    engine.add("brokerperf/kafka:4.3.1")
    mode, reason = decide_auto(_settings(kafka_version="4.3.1",
                                         image="kafka=apache/kafka:4.3.1"))
    assert mode == "process" and "apache/kafka:4.3.1" in reason
    engine.add("apache/kafka:4.3.1")
    assert decide_auto(_settings(kafka_version="4.3.1",
                                 image="kafka=apache/kafka:4.3.1"))[0] == "container"


def test_explicit_modes_and_remote_clusters_are_left_alone(engine: set[str]) -> None:
    engine.add("brokerperf/kafka:4.3.1")
    process = Settings.resolve({"brokerperf_provision": "process"}, {}, {})
    assert process.with_auto_resolved(decide_auto) is process
    remote = Settings.resolve({"brokerperf_kafka_bootstrap": "127.0.0.1:9092"}, {}, {})
    assert remote.with_auto_resolved(decide_auto).provision_effective == "remote"


def test_the_environment_pins_auto_to_processes(engine: set[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    engine.add("brokerperf/kafka:4.3.1")
    monkeypatch.setenv("BROKERPERF_AUTO_PROVISION", "process")
    mode, reason = decide_auto(_settings(kafka_version="4.3.1"))
    assert mode == "process" and "BROKERPERF_AUTO_PROVISION=process" in reason
    monkeypatch.setenv("BROKERPERF_AUTO_PROVISION", "container")
    assert decide_auto(_settings(kafka_version="4.3.1"))[0] == "container"
    monkeypatch.setenv("BROKERPERF_AUTO_PROVISION", "docker")
    with pytest.raises(ConfigError, match="BROKERPERF_AUTO_PROVISION='docker'"):
        decide_auto(_settings(kafka_version="4.3.1"))


def test_automq_needs_its_object_stores_image_as_well(engine: set[str]) -> None:
    """AutoMQ's container mode runs an object store beside the node: auto picks
    containers only when the engine has both images."""
    engine.add("brokerperf/automq-standin:latest")
    images = "automq=brokerperf/automq-standin:latest"
    mode, reason = decide_auto(_settings(broker="automq", image=images))
    assert mode == "process" and "minio/minio:RELEASE." in reason
    engine.add("brokerperf/s3-standin:latest")
    assert decide_auto(_settings(
        broker="automq", image=f"{images},minio=brokerperf/s3-standin:latest"))[0] == "container"


def test_an_engine_with_the_images_but_no_containers_extra_means_processes(
        engine: set[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`bash ci/smoke.sh`'s .venv has no testcontainers: on a machine whose engine holds
    the images, auto chose containers and the smoke failed with ModuleNotFoundError."""
    import importlib.util

    engine.update({"brokerperf/kafka:4.3.1", "apache/kafka:4.3.1"})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "testcontainers" else real(name, *a))
    mode, reason = decide_auto(_settings(kafka_version="4.3.1"))
    assert mode == "process"
    assert "pytest-brokerperf[containers]" in reason
