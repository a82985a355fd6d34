"""RabbitMQ's container mode without Docker: the image's contract, the configuration
both modes share, and the CLI run inside the container."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.rabbitmq.container import (
    AMQP_PORT,
    MANAGEMENT_PORT,
    RabbitMQContainerCluster,
    container_conf,
    default_images,
)
from pytest_brokerperf.brokers.rabbitmq.process import SCHEDULER_FLAGS, CtlAccess, node_conf
from pytest_brokerperf.core.errors import ConfigError

ENTRYPOINT = Path(__file__).resolve().parents[2] / "ci" / "images" / "rabbitmq" / "entrypoint.sh"


def render_in_entrypoint(env: dict[str, str]) -> dict[str, str]:
    """What the image's entrypoint writes to conf.d/10-defaults.conf (bash, no Docker)."""
    out = subprocess.run(["bash", str(ENTRYPOINT)], capture_output=True, text=True,
                         check=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "BROKERPERF_RENDER_ONLY": "1", **env})
    return dict(line.split(" = ", 1) for line in out.stdout.splitlines() if line)


def test_the_entrypoint_honours_the_official_images_default_user_variables() -> None:
    conf = render_in_entrypoint({"RABBITMQ_DEFAULT_USER": "bp", "RABBITMQ_DEFAULT_PASS": "pw",
                                 "RABBITMQ_DEFAULT_VHOST": "perf"})
    assert conf["default_user"] == "bp" and conf["default_pass"] == "pw"
    assert conf["default_vhost"] == "perf"
    # the official image's defaults: guest from other hosts, AMQP 5672, management 15672
    assert conf["loopback_users.guest"] == "false"
    assert conf["listeners.tcp.default"] == str(AMQP_PORT)
    assert conf["management.tcp.port"] == str(MANAGEMENT_PORT)


def test_without_variables_no_default_user_is_written() -> None:
    conf = render_in_entrypoint({})
    assert not {"default_user", "default_pass", "default_vhost"} & conf.keys()


def test_container_and_process_mode_configure_the_same_node() -> None:
    process = node_conf(5672, nodes=1)
    container = container_conf()
    for key in ("vm_memory_high_watermark.relative", "disk_free_limit.absolute"):
        assert container[key] == process[key]
    assert "listeners.tcp.1" not in container  # the image's own listener on every interface
    assert container_conf({"disk_free_limit.absolute": "1GB"})["disk_free_limit.absolute"] == "1GB"


def test_the_plan_mounts_the_conf_and_publishes_amqp_and_management(tmp_path: Path) -> None:
    node = RabbitMQContainerCluster(workdir=tmp_path, run_id="r1",
                                    conf_overrides={"disk_free_limit.absolute": "2GB"})
    (plan,) = node.plans()
    assert plan.alias == plan.hostname == "rabbitmq-1"
    assert set(plan.ports) == {AMQP_PORT, MANAGEMENT_PORT}
    assert len(set(plan.ports.values())) == 2
    ((host_path, (path, mode)),) = plan.volumes.items()
    assert path == "/etc/rabbitmq/conf.d/90-brokerperf.conf" and mode == "ro"
    text = Path(host_path).read_text()
    assert "disk_free_limit.absolute = 2GB\n" in text
    assert Path(host_path).stat().st_mode & 0o044 == 0o044  # the rabbitmq user reads it
    assert plan.env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] == " ".join(SCHEDULER_FLAGS)
    assert plan.memory_mb is None  # as process mode: no limit below the memory alarm


def test_the_cli_runs_inside_the_container_by_exec_prefix() -> None:
    ctl = CtlAccess("", "rabbit@rabbitmq-1", {}, ("echo", "docker", "exec", "c1"))
    out = ctl.check("rabbitmqctl", "status")
    assert out.split() == ["docker", "exec", "c1", "rabbitmqctl", "-n", "rabbit@rabbitmq-1",
                           "status"]


def test_the_driver_reads_the_cli_access_from_the_typed_endpoint_field() -> None:
    import pickle

    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
    from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

    ctl = CtlAccess("", "rabbit@rabbitmq-1", {}, ("docker", "exec", "c1"))
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://guest:guest@127.0.0.1:5672/",
                        mode="container", control=ctl)
    assert RabbitMQDriver(ep, RabbitMQDriverConfig()).ctl() is ctl
    assert ep.redacted()["info"]["ctl"] == ctl.as_info()  # the manifest still records it
    assert pickle.loads(pickle.dumps(ep)).control == ctl  # workers get it whole
    bare = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://x/", mode="remote",
                          info={"ctl": ctl.as_info()})  # a dict in info decides nothing
    assert RabbitMQDriver(bare, RabbitMQDriverConfig()).ctl() is None


def test_the_local_build_comes_before_the_official_image() -> None:
    assert default_images() == ("brokerperf/rabbitmq:3.10", "rabbitmq:3.10-management")


def test_three_nodes_share_one_cookie_and_process_modes_partition_handling(
        tmp_path: Path) -> None:
    plans = RabbitMQContainerCluster(workdir=tmp_path, run_id="r3", nodes=3).plans()
    assert [p.alias for p in plans] == ["rabbitmq-1", "rabbitmq-2", "rabbitmq-3"]
    assert [p.hostname for p in plans] == [p.alias for p in plans]  # rabbit@<alias>
    cookies = [host for p in plans for host, (path, _) in p.volumes.items()
               if path.endswith(".erlang.cookie")]
    assert len(cookies) == 3 and len(set(cookies)) == 1
    assert Path(cookies[0]).stat().st_mode & 0o777 == 0o400
    ports = [port for p in plans for port in p.ports.values()]
    assert len(set(ports)) == 6
    conf = container_conf(nodes=3)
    assert conf["cluster_partition_handling"] == node_conf(5672, nodes=3)[
        "cluster_partition_handling"] == "pause_minority"
    (single,) = RabbitMQContainerCluster(workdir=tmp_path / "one", run_id="r1").plans()
    assert not any(path.endswith(".erlang.cookie") for path, _ in single.volumes.values())


def test_two_nodes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="1 or 3"):
        RabbitMQContainerCluster(workdir=tmp_path, run_id="r", nodes=2)
