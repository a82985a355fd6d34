"""Container mode against a real Docker engine: RabbitMQ in a locally built image.

Skips with the reason when no engine answers or no RabbitMQ image is on it (``bash
ci/docker.sh`` starts dockerd and builds ``brokerperf/rabbitmq:3.10``; images are never
pulled). Assertions that can fail: the tail-read smoke scenario delivers everything in
container mode with the queue type read back through ``rabbitmqctl`` inside the
container; the node is reachable from the host and from the container network; the
Erlang VM is pinned like a process-mode node and sampled through /proc; a start-up
failure carries the container's log; nothing outlives the session.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.rabbitmq.container import RabbitMQContainerCluster, default_images
from pytest_brokerperf.core.errors import ProvisionError
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
    tailread_through_pytest,
)

pytestmark = engine_mark()


@pytest.fixture(scope="module", autouse=True)
def _rabbitmq_image() -> str:
    return image_or_skip("rabbitmq", None, default_images())


def test_a_failed_start_carries_the_containers_log_and_leaves_nothing(tmp_path: Path) -> None:
    node = RabbitMQContainerCluster(workdir=tmp_path, run_id="it-rmq-bad", start_timeout=90,
                                    conf_overrides={"vm_memory_high_watermark.relative": "lots"})
    with pytest.raises(ProvisionError) as err:
        node.start()
    text = str(err.value)
    assert "did not become ready" in text and "lines of the container's log" in text
    assert "exited with code" in text
    assert "configuration" in text  # RabbitMQ's own complaint, from the container's log
    assert leftovers("it-rmq-bad") == []


def test_tailread_smoke_in_container_mode_through_pytest(
        pytester: pytest.Pytester, valid_or_noise: Callable[[dict[str, Any]], tuple[str, str]],
        _rabbitmq_image: str) -> None:
    _, rec = tailread_through_pytest(pytester, "rabbitmq")
    assert rec["delivery"]["acknowledged"] > 3000
    assert rec["manifest"]["broker"]["info"]["image"]["ref"] == _rabbitmq_image
    assert rec["broker_version"].startswith("3.")
    # the queues' type was read back with rabbitmqctl inside the container
    queues = rec["durability"]["read_back"]["queues"]
    assert queues and {q["type"] for q in queues.values()} == {"quorum"}
    valid_or_noise(rec)


# -- one container for the rest of the module -----------------------------------------


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerEndpoint]:
    node = RabbitMQContainerCluster(workdir=tmp_path_factory.mktemp("rabbitmq-container"),
                                    run_id="it-rmq")
    try:
        yield node.start()
    finally:
        node.stop()
    assert leftovers("it-rmq") == []


def test_host_clients_connect_on_the_published_loopback_port(rabbitmq: BrokerEndpoint) -> None:
    import pika

    assert rabbitmq.bootstrap.startswith("amqp://127.0.0.1:")
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq.bootstrap + "/%2F"))
    try:
        assert conn.is_open
    finally:
        conn.close()


def test_clients_on_the_container_network_reach_the_node_by_its_alias(
        rabbitmq: BrokerEndpoint, _rabbitmq_image: str) -> None:
    url = rabbitmq.info["in_network_url"]  # amqp://rabbitmq-1:5672
    host, port = url.removeprefix("amqp://").split(":")
    probe = subprocess.run(
        ["docker", "run", "--rm", "--network", rabbitmq.info["network"], "--entrypoint", "bash",
         _rabbitmq_image, "-c", f"exec 3<>/dev/tcp/{host}/{port} && echo reached"],
        capture_output=True, text=True, timeout=120, check=False)
    assert probe.stdout.strip() == "reached", probe.stderr


def test_the_node_is_pinned_and_sampled_like_a_process_mode_node(
        rabbitmq: BrokerEndpoint) -> None:
    import psutil

    (pid,) = rabbitmq.info["pids"]  # the Erlang VM as the host sees it
    assert psutil.Process(pid).name() == "beam.smp"
    # process mode's scheduler flags (erl passes +flag to the VM as -flag)
    cmdline = " ".join(psutil.Process(pid).cmdline())
    assert "-sbwt none -sbwtdcpu none -sbwtdio none" in cmdline
    affinity = rabbitmq.info["cpu_affinity"]
    if affinity["broker_cpus"]:
        assert sorted(psutil.Process(pid).cpu_affinity()) == affinity["broker_cpus"]
    assert rabbitmq.info["alarms_at_start"]["memory"] is False


def test_three_nodes_form_one_cluster_with_a_replicated_quorum_queue(tmp_path: Path) -> None:
    """Three nodes joined as process mode joins them: every node reports all three
    running, and a quorum queue declared through node 1 has a member on each node."""
    import pika

    node = RabbitMQContainerCluster(workdir=tmp_path, run_id="it-rmq-three", nodes=3)
    try:
        ep = node.start()
        assert ep.nodes == 3 and ep.topology_check
        assert ep.info["running_nodes"] == ["rabbit@rabbitmq-1", "rabbit@rabbitmq-2",
                                            "rabbit@rabbitmq-3"]
        first = ep.bootstrap.split(",")[0]
        conn = pika.BlockingConnection(pika.URLParameters(first + "/%2F"))
        try:
            conn.channel().queue_declare("it-three", durable=True,
                                         arguments={"x-queue-type": "quorum"})
        finally:
            conn.close()
        members = node.ctl.check("rabbitmq-queues", "quorum_status", "it-three")
        for n in (1, 2, 3):
            assert f"rabbit@rabbitmq-{n}" in members
        for url in ep.bootstrap.split(","):  # each node's published port answers
            pika.BlockingConnection(pika.URLParameters(url + "/%2F")).close()
    finally:
        node.stop()
    assert leftovers("it-rmq-three") == []


KILLED_CONTAINER_SESSION = """
import sys, tempfile, time
from pathlib import Path
from pytest_brokerperf.brokers.rabbitmq.container import RabbitMQContainerCluster
node = RabbitMQContainerCluster(workdir=Path(tempfile.mkdtemp()), run_id=sys.argv[1])
node.start()
print("up", flush=True)
time.sleep(600)
"""


def _sigkill_a_session_with_a_container(run_id: str) -> None:
    import os
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONTAINER_SESSION, run_id],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "up"
        assert len(leftovers(run_id)) == 2  # the container and its network
    finally:
        proc.kill()  # SIGKILL: no atexit hook runs
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_sigkilled_sessions_container_is_removed_by_its_watchdog() -> None:
    import time

    run_id = "it-rmq-killed"
    _sigkill_a_session_with_a_container(run_id)
    deadline = time.monotonic() + 30
    while leftovers(run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftovers(run_id) == []


def test_cleanup_local_removes_what_a_killed_session_and_its_watchdog_left(
        tmp_path: Path) -> None:
    """Should the watchdog die too, ``brokerperf cleanup --local`` finds the containers by
    label (the pytest pid is gone) and removes them; ``--dry-run`` only names them."""
    import sys
    import time

    from pytest_brokerperf.brokers.provision.watchdog import state_dir

    run_id = "it-rmq-killed-twice"
    before = set(state_dir().glob("*.json")) if state_dir().is_dir() else set()
    repo = Path(__file__).resolve().parents[2]
    code = KILLED_CONTAINER_SESSION.replace(
        'print("up", flush=True)',
        "from pytest_brokerperf.brokers.provision import watchdog\n"
        "import os, signal\n"
        "os.kill(watchdog._owner.watchdog.pid, signal.SIGKILL)\n"
        "watchdog._owner.watchdog.wait()\n"
        'print("up", flush=True)')
    proc = subprocess.Popen([sys.executable, "-c", code, run_id], stdout=subprocess.PIPE,
                            text=True, env={**__import__("os").environ,
                                            "PYTHONPATH": str(repo)})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "up"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    time.sleep(1)
    assert len(leftovers(run_id)) == 2  # nobody removed them
    cli = [sys.executable, "-m", "pytest_brokerperf.plugin.cli", "cleanup", "--local"]
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert f"would remove brokerperf-{run_id}" in dry and len(leftovers(run_id)) == 2
    done = subprocess.run(cli, capture_output=True, text=True, timeout=120, check=True).stdout
    assert f"removed brokerperf-{run_id}" in done
    assert leftovers(run_id) == []
    for leftover in set(state_dir().glob("*.json")) - before:  # the dead session's state
        leftover.unlink(missing_ok=True)
