"""Pulsar's container mode without Docker: the image's configuration contract (its
apply-config-from-env script run with Python here), the listeners, and the JVM flags
both modes share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.pulsar.container import (
    ALIAS,
    PREFIX,
    PulsarContainerCluster,
    container_config,
    default_images,
    env_from_config,
    image_default_config,
    jvm_env,
)
from pytest_brokerperf.brokers.pulsar.process import (
    PULSAR_EXTRA_FLAGS,
    PULSAR_GC_FLAGS,
    PULSAR_STANDALONE_FLAGS,
    PulsarPorts,
    standalone_config,
)
from pytest_brokerperf.errors import ConfigError

IMAGE_DIR = Path(__file__).resolve().parents[2] / "ci" / "images" / "pulsar"


def apply_in_image_script(conf: str, env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """What the image's apply-config-from-env.py makes of ``conf`` under ``env``."""
    path = tmp_path / "standalone.conf"
    path.write_text(conf)
    out = subprocess.run([sys.executable, str(IMAGE_DIR / "apply-config-from-env.py"),
                          "--print", str(path)], capture_output=True, text=True, check=True,
                         timeout=30, env={"PATH": os.environ["PATH"], **env})
    return dict(line.split("=", 1) for line in out.stdout.splitlines()
                if line and not line.startswith("#"))


def test_the_containers_configuration_reaches_the_file_through_the_images_script(
        tmp_path: Path) -> None:
    ports = PulsarPorts(broker_port=31000, web_port=32000)
    wanted = container_config(ports, durability=2)
    applied = apply_in_image_script(image_default_config(), env_from_config(wanted), tmp_path)
    assert {k: applied.get(k) for k in wanted} == wanted


def test_a_variable_named_like_a_key_replaces_it_and_a_prefixed_one_adds_it(
        tmp_path: Path) -> None:
    applied = apply_in_image_script("# c\nclusterName=a\nbrokerServicePort=6650\n",
                                    {"clusterName": "b", PREFIX + "newKey": "v",
                                     "unrelated": "x"}, tmp_path)
    assert applied == {"clusterName": "b", "brokerServicePort": "6650", "newKey": "v"}


def test_process_and_container_mode_configure_the_same_standalone() -> None:
    ports = PulsarPorts(broker_port=31000, web_port=32000)
    process = standalone_config(ports, durability=1)
    container = container_config(ports, durability=1)
    differs = {k for k in process.keys() | container.keys() if process.get(k) != container.get(k)}
    assert differs == {"bindAddress", "advertisedListeners", "internalListenerName"}
    assert container["journalSyncData"] == "true"
    assert container_config(ports, durability=2)["journalSyncData"] == "false"


def test_host_clients_get_loopback_and_network_clients_the_alias() -> None:
    cfg = container_config(PulsarPorts(broker_port=31000, web_port=32000))
    listeners = dict(x.split(":", 1) for x in cfg["advertisedListeners"].split(","))
    assert listeners == {"host": "pulsar://127.0.0.1:31000", "network": f"pulsar://{ALIAS}:31000"}
    assert cfg["internalListenerName"] == "host"  # clients without a listener name: host
    assert cfg["brokerServicePort"] == "31000" and cfg["webServicePort"] == "32000"


def test_container_mode_sets_process_modes_jvm_flags() -> None:
    env = jvm_env("2g", "1g")
    assert env["PULSAR_MEM"].split() == ["-Xms2g", "-Xmx2g", "-XX:MaxDirectMemorySize=1g"]
    assert env["PULSAR_GC"].split() == list(PULSAR_GC_FLAGS)
    assert env["PULSAR_EXTRA_OPTS"].split() == list(PULSAR_EXTRA_FLAGS)
    with pytest.raises(ConfigError):
        jvm_env("lots", "1g")


def test_the_images_launcher_defaults_are_process_modes_flags() -> None:
    script = (IMAGE_DIR / "pulsar").read_text()

    def default(name: str) -> list[str]:
        match = re.search(rf'^{name}=\$\{{{name}:-"([^"]*)"\}}', script, re.M)
        assert match, name
        return match.group(1).split()

    assert default("PULSAR_GC") == list(PULSAR_GC_FLAGS)
    assert default("PULSAR_EXTRA_OPTS") == list(PULSAR_EXTRA_FLAGS)
    standalone = re.search(r'^STANDALONE_FLAGS="([^"]*)"', script, re.M)
    assert standalone and standalone.group(1).split() == list(PULSAR_STANDALONE_FLAGS)


def test_the_plan_publishes_both_ports_on_the_same_numbers(tmp_path: Path) -> None:
    node = PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r1",
                                  durability=3)
    plan = node.plan()
    assert all(host == inside for inside, host in plan.ports.items()) and len(plan.ports) == 2
    assert plan.hostname == plan.alias == ALIAS
    assert plan.env["journalSyncData"] == plan.env[PREFIX + "journalSyncData"] == "true"
    assert plan.command is not None and "bin/pulsar standalone" in plan.command[-1]
    assert plan.memory_mb == 1024 + 1024 + 1024


def test_a_bad_level_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="durability level 7"):
        PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r1", durability=7)


def test_the_local_build_comes_before_the_official_image() -> None:
    assert default_images("4.0.7") == ("brokerperf/pulsar:4.0.7", "apachepulsar/pulsar:4.0.7")


def test_three_bookies_run_in_the_one_container_as_in_process_mode(tmp_path: Path) -> None:
    node = PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r3", nodes=3)
    (plan,) = node.plans()
    assert plan.command is not None and plan.command[-1].endswith("--num-bookies 3")
    ports = PulsarPorts(broker_port=1, web_port=2)
    cfg = container_config(ports, bookies=3)
    process = standalone_config(ports, bookies=3)
    quorum = ("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
              "managedLedgerDefaultAckQuorum")
    assert [cfg[k] for k in quorum] == [process[k] for k in quorum] == ["3", "3", "2"]
    with pytest.raises(ConfigError, match="1 or 3"):
        PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r", nodes=2)
