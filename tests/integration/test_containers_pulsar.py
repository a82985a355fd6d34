"""Container mode against a real Docker engine: Pulsar standalone in a locally built image.

Skips with the reason when no engine answers or no Pulsar image is on it (``bash
ci/docker.sh`` builds ``brokerperf/pulsar:<version>`` from the cached jars; images are
never pulled). Assertions that can fail: the tail-read smoke scenario delivers everything
in container mode; the configuration reached the standalone through the image's
environment contract (the durability level's journal setting, read inside the
container); the broker hands out loopback addresses to host clients and the alias to
clients on the container network; the JVM is pinned like a process-mode broker; nothing
outlives the session.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.maven import PULSAR_DEFAULT_VERSION
from pytest_brokerperf.brokers.pulsar.container import PulsarContainerCluster, default_images
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
    tailread_through_pytest,
)

pytestmark = engine_mark()


@pytest.fixture(scope="module", autouse=True)
def _pulsar_image() -> str:
    return image_or_skip("pulsar", None, default_images(PULSAR_DEFAULT_VERSION))


def test_tailread_smoke_in_container_mode_through_pytest(
        pytester: pytest.Pytester, valid_or_noise: Callable[[dict[str, Any]], tuple[str, str]],
        _pulsar_image: str) -> None:
    _, rec = tailread_through_pytest(pytester, "pulsar")
    assert rec["delivery"]["acknowledged"] > 3000
    assert rec["manifest"]["broker"]["info"]["image"]["ref"] == _pulsar_image
    assert rec["broker_version"] == PULSAR_DEFAULT_VERSION
    valid_or_noise(rec)


@pytest.fixture(scope="module")
def pulsar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerEndpoint]:
    node = PulsarContainerCluster(version=PULSAR_DEFAULT_VERSION,
                                  workdir=tmp_path_factory.mktemp("pulsar-container"),
                                  run_id="it-pulsar", durability=2)
    try:
        yield node.start()
    finally:
        node.stop()
    assert leftovers("it-pulsar") == []


def test_the_durability_level_reached_the_standalone_through_the_image_contract(
        pulsar: BrokerEndpoint) -> None:
    (name,) = pulsar.info["container_names"]
    conf = subprocess.run(["docker", "exec", name, "cat", "/pulsar/conf/standalone.conf"],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    keys = dict(line.split("=", 1) for line in conf.splitlines()
                if "=" in line and not line.startswith("#"))
    assert keys["journalSyncData"] == "false"  # level 2: the journal in the page cache
    assert keys["brokerServicePort"] == str(pulsar.info["ports"]["broker"])


def test_lookups_name_loopback_for_the_host_and_the_alias_for_the_network(
        pulsar: BrokerEndpoint) -> None:
    def lookup(namespace: str, listener: str | None) -> str:
        url = f"{pulsar.admin_url}/lookup/v2/topic/persistent/public/{namespace}/it-lookup"
        if listener:
            url += f"?listenerName={listener}"
        with urllib.request.urlopen(url, timeout=30) as resp:
            return str(json.loads(resp.read())["brokerUrl"])

    port = pulsar.info["ports"]["broker"]
    assert lookup("default", None) == pulsar.bootstrap == f"pulsar://127.0.0.1:{port}"
    # A lookup of a bundle while another lookup of the same bundle is in flight, or
    # has completed but is not yet forgotten, gets that lookup's answer, whatever its
    # listener name (docs/reference/containers.md, "Lookups and listener names"): the
    # network listener is looked up in a namespace of its own, so its bundle's lookup
    # is its own.
    urllib.request.urlopen(urllib.request.Request(
        f"{pulsar.admin_url}/admin/v2/namespaces/public/it-network", method="PUT"),
        timeout=30).close()
    assert lookup("it-network", "network") == f"pulsar://pulsar-1:{port}"


def test_clients_on_the_container_network_reach_the_alias(
        pulsar: BrokerEndpoint, _pulsar_image: str) -> None:
    port = pulsar.info["ports"]["broker"]
    probe = subprocess.run(
        ["docker", "run", "--rm", "--network", pulsar.info["network"], "--entrypoint", "bash",
         _pulsar_image, "-c", f"exec 3<>/dev/tcp/pulsar-1/{port} && echo reached"],
        capture_output=True, text=True, timeout=120, check=False)
    assert probe.stdout.strip() == "reached", probe.stderr


def test_the_jvm_is_pinned_and_sampled_like_a_process_mode_broker(
        pulsar: BrokerEndpoint) -> None:
    import psutil

    (pid,) = pulsar.info["pids"]
    cmdline = psutil.Process(pid).cmdline()
    assert "org.apache.pulsar.PulsarStandaloneStarter" in cmdline
    assert "-XX:MaxGCPauseMillis=10" in cmdline and "-Xmx1g" in cmdline
    affinity = pulsar.info["cpu_affinity"]
    if affinity["broker_cpus"]:
        assert sorted(psutil.Process(pid).cpu_affinity()) == affinity["broker_cpus"]
