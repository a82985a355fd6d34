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
from pytest_brokerperf.brokers.pulsar.container_layout import (
    BOOKIE_PREFIX,
    BROKER_PREFIX,
    META_ALIAS,
    META_READY,
    ZK_PORT,
    NodeLayout,
    bookie_config,
    broker_config,
    image_default_files,
    meta_command,
    node_command,
    node_env,
)
from pytest_brokerperf.brokers.pulsar.process import (
    PULSAR_EXTRA_FLAGS,
    PULSAR_GC_FLAGS,
    PULSAR_STANDALONE_FLAGS,
    PulsarPorts,
    standalone_config,
)
from pytest_brokerperf.core.errors import ConfigError

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


def test_the_three_broker_layout_stops_without_pulsar_s_5_s_quiet_period() -> None:
    from pytest_brokerperf.brokers.pulsar.process import BROKER_SHUTDOWN_TIMEOUT_MS

    cfg = broker_config(NodeLayout(index=1, broker_port=6650, web_port=8080))
    assert cfg["brokerShutdownTimeoutMs"] == str(BROKER_SHUTDOWN_TIMEOUT_MS) == "6000"


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
    standalone = re.search(r'^COMMON_FLAGS="([^"]*)"', script, re.M)
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


def test_three_nodes_are_three_containers_and_a_metadata_container(tmp_path: Path) -> None:
    node = PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r3", nodes=3,
                                  durability=2)
    (meta,) = node.support_plans()
    plans = node.plans()
    assert [p.alias for p in plans] == ["pulsar-1", "pulsar-2", "pulsar-3"]
    assert meta.alias == META_ALIAS and meta.ports == {}  # ZooKeeper stays on the network
    published = [port for p in plans for port in p.ports]
    assert len(set(published)) == 6
    assert all(host == inside for p in plans for inside, host in p.ports.items())
    # the metadata names every broker the plans run, on the network
    script = meta.command[-1] if meta.command else ""
    for p in plans:
        broker_port = int(p.env[BROKER_PREFIX + "brokerServicePort"])
        assert f"pulsar://{p.alias}:{broker_port}" in script
    assert "initialize-cluster-metadata" in script and META_READY in script
    for p in plans:
        assert p.command == node_command()
        assert p.env[BOOKIE_PREFIX + "advertisedAddress"] == p.alias  # bookies: on the network
        assert p.env[BROKER_PREFIX + "advertisedAddress"] == "127.0.0.1"
        assert p.env[BOOKIE_PREFIX + "journalSyncData"] == "false"  # level 2
        quorum = [p.env[BROKER_PREFIX + k] for k in (
            "managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
            "managedLedgerDefaultAckQuorum")]
        assert quorum == ["3", "3", "2"]
        # no bare key names: they would reach both files
        assert not [k for k in p.env if not k.startswith(("BOOKIE_", "BROKER_", "PULSAR_"))]
        assert p.memory_mb == 1024 + 1024 + 512 + 512 + 2 * 1024


def test_the_node_listeners_name_loopback_internally_and_the_alias_on_the_network() -> None:
    node = NodeLayout(index=2, broker_port=41000, web_port=42000)
    cfg = broker_config(node)
    assert cfg["advertisedListeners"] == ("host:pulsar://127.0.0.1:41000,"
                                          "network:pulsar://pulsar-2:41000")
    assert cfg["internalListenerName"] == "host"
    assert cfg["metadataStoreUrl"] == cfg["configurationMetadataStoreUrl"] == (
        f"zk:{META_ALIAS}:{ZK_PORT}")
    # nothing connects broker to broker over the loopback internal listener
    assert cfg["systemTopicEnabled"] == cfg["topicLevelPoliciesEnabled"] == "false"
    assert bookie_config(node)["metadataServiceUri"] == (
        f"metadata-store:zk:{META_ALIAS}:{ZK_PORT}")


def test_each_file_gets_only_its_own_prefix_through_the_images_script(
        tmp_path: Path) -> None:
    node = NodeLayout(index=3, broker_port=41000, web_port=42000)
    env = node_env(node, durability=1, heap="512m", direct_memory="512m",
                   bookie_heap="256m", bookie_direct_memory="256m")
    files = image_default_files()
    for name, prefix, wanted in (("bookkeeper.conf", BOOKIE_PREFIX, bookie_config(node, 1)),
                                 ("broker.conf", BROKER_PREFIX, broker_config(node))):
        path = tmp_path / name
        path.write_text(files[name])
        subprocess.run([sys.executable, str(IMAGE_DIR / "apply-config-from-env-with-prefix.py"),
                        prefix, str(path)], check=True, timeout=30,
                       env={"PATH": os.environ["PATH"], **env})
        applied = dict(line.split("=", 1) for line in path.read_text().splitlines()
                       if line and not line.startswith("#"))
        assert {k: applied.get(k) for k in wanted} == wanted
        assert not [k for k in applied if k.startswith(("BOOKIE_", "BROKER_", "PULSAR_"))]
    assert "-Xmx256m" in env["PULSAR_BOOKIE_MEM"] and "-Xmx512m" in env["PULSAR_BROKER_MEM"]


def test_the_node_entrypoint_runs_both_jvms_and_ends_with_either() -> None:
    (shell, flag, script) = node_command()
    assert (shell, flag) == ("bash", "-c")
    assert "bin/pulsar bookie &" in script and "bin/pulsar broker &" in script
    assert "wait -n" in script
    # each JVM gets its own heap from its own variable
    assert "PULSAR_MEM=$PULSAR_BOOKIE_MEM" in script
    assert "PULSAR_MEM=$PULSAR_BROKER_MEM" in script


def test_the_local_image_runs_every_command_the_layout_uses() -> None:
    script = (IMAGE_DIR / "pulsar").read_text()
    for command in ("standalone", "zookeeper", "bookie", "broker",
                    "initialize-cluster-metadata"):
        assert re.search(rf"^\s*{re.escape(command)}\)", script, re.M), command
    meta = meta_command([NodeLayout(index=1, broker_port=1, web_port=2)])[-1]
    assert "--metadata-store zk:pulsar-meta:2181" in meta


def test_only_one_or_three_nodes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="1 or 3"):
        PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r", nodes=2)
    assert PulsarContainerCluster(version="4.0.7", workdir=tmp_path, run_id="r",
                                  nodes=1).support_plans() == []


def test_each_node_relays_its_peers_loopback_ports_to_their_aliases() -> None:
    """Brokers reach each other at the loopback URLs they advertise: node N listens on
    every other node's two port numbers and relays them to ``pulsar-k``."""
    from pytest_brokerperf.brokers.pulsar.container_layout import peers

    nodes = [NodeLayout(index=i, broker_port=20000 + i, web_port=21000 + i)
             for i in (1, 2, 3)]
    assert peers(nodes[1], nodes) == ("20001=pulsar-1:20001,21001=pulsar-1:21001,"
                                      "20003=pulsar-3:20003,21003=pulsar-3:21003")
    env = node_env(nodes[1], durability=2, heap="256m", direct_memory="256m",
                   bookie_heap="256m", bookie_direct_memory="256m", nodes=nodes)
    assert env["PULSAR_BROKERPERF_PEERS"] == peers(nodes[1], nodes)
    assert '"$PULSAR_BROKERPERF_FORWARDER" &' in node_command()[2]


def test_the_forwarder_relays_both_ways(tmp_path: Path) -> None:
    """The node's forwarder, run as the container runs it (``python3 -c``), relays a
    connection to a local port on to its peer, both directions, and closes after it."""
    import socket
    import threading

    from pytest_brokerperf.brokers.provision.ports import free_port
    from pytest_brokerperf.brokers.pulsar.container_layout import FORWARDER_PY

    peer = socket.create_server(("127.0.0.1", 0))
    peer_port = peer.getsockname()[1]

    def echo_upper() -> None:
        conn, _ = peer.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())

    threading.Thread(target=echo_upper, daemon=True).start()
    local = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", FORWARDER_PY], stdout=subprocess.PIPE, text=True,
        env={"PATH": os.environ["PATH"],
             "PULSAR_BROKERPERF_PEERS": f"{local}=127.0.0.1:{peer_port}"})
    try:
        assert proc.stdout is not None
        assert "peer forwarder on 1 port(s)" in proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", local), timeout=10) as c:
            payload = b"admin delete partitions " * 5000  # several reads
            c.sendall(payload)
            got = b""
            while len(got) < len(payload):
                chunk = c.recv(65536)
                assert chunk, "the relay closed early"
                got += chunk
            assert got == payload.upper()
    finally:
        proc.kill()
        proc.communicate(timeout=10)
        peer.close()


def test_a_container_started_again_keeps_its_data(tmp_path: Path) -> None:
    """The command wipes the data on the container's first start only: a start after a
    kill (same command, same writable layer) must come back on the bookies' data."""
    from pytest_brokerperf.brokers.pulsar.container import standalone_command

    (tmp_path / "bin").mkdir()
    for name, body in (("apply-config-from-env.py", "exit 0"),
                       ("pulsar", 'echo "$@" >> started.txt')):
        tool = tmp_path / "bin" / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    shell, flag, script = standalone_command("127.0.0.1")
    for _ in range(3):  # first start, then two starts after faults
        subprocess.run([shell, flag, script], cwd=tmp_path, check=True)
    first, *again = (tmp_path / "started.txt").read_text().splitlines()
    assert first.endswith("--wipe-data") and first.startswith("standalone")
    assert len(again) == 2 and all("--wipe-data" not in a for a in again)
