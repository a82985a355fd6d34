"""RabbitMQ and Tansu provisioning pieces that need no running broker."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.rabbitmq.process import (
    SCHEDULER_FLAGS,
    CtlAccess,
    RabbitMQProcessCluster,
    node_conf,
    parse_ctl_json,
    rabbitmq_available,
    render_conf,
)
from pytest_brokerperf.brokers.tansu.process import TansuProcess, tansu_argv
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import (
    BrokerUnavailable,
    ClusterUnreachable,
    ConfigError,
    ProvisionError,
)
from pytest_brokerperf.plugin.broker_session import start_broker


def test_node_conf_binds_loopback_and_states_alarm_thresholds() -> None:
    conf = node_conf(5681, nodes=1)
    assert conf["listeners.tcp.1"] == "127.0.0.1:5681"
    assert conf["vm_memory_high_watermark.relative"] == "0.4"
    assert conf["disk_free_limit.absolute"] == "50MB"
    assert "cluster_partition_handling" not in conf
    three = node_conf(5681, nodes=3, overrides={"disk_free_limit.absolute": "1GB"})
    assert three["cluster_partition_handling"] == "pause_minority"
    assert three["disk_free_limit.absolute"] == "1GB"
    assert render_conf({"a.b": "1"}) == "a.b = 1\n"


def test_erlang_flags_turn_scheduler_busy_wait_off() -> None:
    args = RabbitMQProcessCluster().erl_args()
    assert " ".join(SCHEDULER_FLAGS) == "+sbwt none +sbwtdcpu none +sbwtdio none"
    assert " ".join(SCHEDULER_FLAGS) in " ".join(args)
    assert "-start_epmd false" in " ".join(args)  # our own epmd, never a daemonised one
    assert "inet_dist_use_interface {127,0,0,1}" in " ".join(args)


def test_cookie_is_private_and_regenerated(tmp_path: Path) -> None:
    c = RabbitMQProcessCluster(workdir=tmp_path)
    wd = c._prepare_workdir()
    cookie = wd / "home" / ".erlang.cookie"
    mode = stat.S_IMODE(cookie.stat().st_mode)
    assert mode == 0o400
    first = cookie.read_text()
    assert len(first) == 20 and first.isalpha()
    c._prepare_workdir()
    assert cookie.read_text() != first  # every start gets a fresh cookie
    assert (wd / "rabbitmq-env.conf").is_file()  # /etc/rabbitmq stays out


def test_parse_ctl_json_skips_banner_lines() -> None:
    text = "Timeout: 60.0 seconds ...\nListing queues for vhost / ...\n[\n{\"name\":\"q\"}\n]\n"
    assert parse_ctl_json(text) == [{"name": "q"}]
    with pytest.raises(ValueError):
        parse_ctl_json("nothing here")


def test_missing_package_is_a_skip_reason(tmp_path: Path) -> None:
    reason = rabbitmq_available(tmp_path)
    assert reason is not None and "apt-get install -y rabbitmq-server" in reason
    with pytest.raises(BrokerUnavailable, match="rabbitmq-server"):
        RabbitMQProcessCluster(bin_dir=tmp_path, workdir=tmp_path / "w").start()


def test_bad_node_count() -> None:
    with pytest.raises(ConfigError):
        RabbitMQProcessCluster(nodes=0)


def test_tansu_binds_loopback_with_memory_storage() -> None:
    argv = tansu_argv("/bin/tansu", 9099)
    assert argv[:2] == ["/bin/tansu", "broker"]
    assert argv[argv.index("--listener-url") + 1] == "tcp://127.0.0.1:9099"
    assert argv[argv.index("--advertised-listener-url") + 1] == "tcp://127.0.0.1:9099"
    assert argv[argv.index("--storage-engine") + 1] == "memory://tansu/"


def test_tansu_has_no_cluster_and_no_durability_levels(tmp_path: Path) -> None:
    with pytest.raises(BrokerUnavailable, match="single stateless broker"):
        TansuProcess(nodes=3)
    with pytest.raises(BrokerUnavailable, match="durability levels do not apply"):
        start_broker("tansu", Settings(brokers=("tansu",)), tmp_path, durability=1)


@pytest.mark.parametrize("kind", ["redpanda", "automq"])
def test_redpanda_and_automq_skip_with_a_reason(kind: str, tmp_path: Path) -> None:
    with pytest.raises(BrokerUnavailable, match=f"{kind} cannot be started by .*"
                       "--kafka-bootstrap=HOST:PORT"):
        start_broker(kind, Settings(brokers=(kind,)), tmp_path)


@pytest.mark.parametrize("kind", ["redpanda", "automq"])
def test_redpanda_and_automq_are_reached_remotely_through_the_kafka_driver(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from pytest_brokerperf.brokers import base

    monkeypatch.setattr(base, "CONNECT_TIMEOUT_S", 2.0)  # the error, not the wait, is tested
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings.resolve({"brokerperf_kafka_bootstrap": f"127.0.0.1:{port}"}, {}, {})
    assert settings.provision_effective == "remote"
    with pytest.raises(ClusterUnreachable, match=f"the remote {kind} cluster at "
                       f"127.0.0.1:{port} did not answer"):
        start_broker(kind, settings, tmp_path)


def test_flavours_get_their_own_default_driver_configs() -> None:
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

    automq = KafkaDriverConfig.from_yaml(brokers.get("automq").default_driver_file(3, "tailread"))
    assert automq.replication_factor == 1  # AutoMQ's own file: durability from its WAL
    assert dict(automq.topic_config) == {"min.insync.replicas": "1", "flush.messages": "1"}
    redpanda_files = brokers.get("redpanda").default_driver_file
    redpanda = KafkaDriverConfig.from_yaml(redpanda_files(3, "tailread"))
    assert redpanda.replication_factor == 3 and redpanda.producer_config["acks"] == "all"
    assert KafkaDriverConfig.from_yaml(redpanda_files(1, "tailread")).replication_factor == 1


def test_remote_uris_lose_their_password_before_anything_records_them() -> None:
    from pytest_brokerperf.brokers.rabbitmq.remote import split_credentials

    assert split_credentials("amqp://u%40x:p%3Aw@mq1:5673/vh") == (
        "amqp://mq1:5673/vh", "u@x", "p:w")
    assert split_credentials("amqps://mq1") == ("amqps://mq1", None, None)
    s = Settings.resolve({"brokerperf_rabbitmq_url": "amqp://u:secret@h:5672/%2F"}, {}, {})
    assert s.provision_effective == "remote"
    assert "secret" not in str(s.as_dict())


def test_remote_uri_validation_never_echoes_a_password() -> None:
    with pytest.raises(ConfigError) as exc:
        Settings.resolve({"brokerperf_rabbitmq_url": "http://u:secret@h"}, {}, {})
    assert "secret" not in str(exc.value)
    with pytest.raises(ConfigError, match="needs the cluster's address for rabbitmq"):
        Settings.resolve({"brokerperf_provision": "remote", "brokerperf_broker": "rabbitmq"},
                         {}, {})
    with pytest.raises(ConfigError, match="--rabbitmq-url"):
        Settings.resolve({"brokerperf_provision": "process",
                          "brokerperf_rabbitmq_url": "amqp://h"}, {}, {})


def test_unreachable_remote_broker_is_an_error_naming_the_address(tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.provision.ports import free_port

    port = free_port()
    s = Settings.resolve({"brokerperf_rabbitmq_url": f"amqp://u:secret@127.0.0.1:{port}"},
                         {}, {})
    with pytest.raises(ClusterUnreachable, match=f"RabbitMQ at amqp://127.0.0.1:{port} did "
                       r"not answer: failed after \d+\.\d s") as exc:
        start_broker("rabbitmq", s, tmp_path)
    assert "secret" not in str(exc.value)


def test_the_cli_starts_no_epmd_daemon_and_carries_the_owner_tag(tmp_path: Path) -> None:
    """pytest SIGKILLed while a CLI call runs: the watchdog kills our epmd, and the CLI's
    own ``erl -sname`` (how it makes sure an epmd runs) started a detached ``epmd
    -daemon`` on the session's port that outlived everything. The CLI's environment
    keeps any erl it starts from starting epmd, and carries the owner tag."""
    import shutil
    import subprocess

    import psutil

    from pytest_brokerperf.brokers.provision.ports import free_port
    from pytest_brokerperf.brokers.provision.watchdog import TAG_ENV, owner_token

    erl = shutil.which("erl")
    if erl is None:
        pytest.skip("no Erlang runtime here (it comes with rabbitmq-server)")
    cluster = RabbitMQProcessCluster(nodes=1, workdir=tmp_path)
    cluster._workdir, cluster._home = tmp_path, tmp_path
    cluster._epmd_port = free_port()  # nothing listens there, as after the watchdog
    cluster._ctl_ports = (free_port(), free_port())
    ctl = CtlAccess(str(tmp_path), "rmq1@localhost", cluster._ctl_env())
    tool = tmp_path / "fake-ctl"
    tool.write_text(f"#!/bin/sh\nenv > {tmp_path}/env.txt\n"
                    f"exec {erl} -boot no_dot_erlang -sname probe -noinput -s erlang halt\n")
    tool.chmod(0o755)
    out = ctl.run("fake-ctl", timeout=60)
    env = dict(line.split("=", 1) for line in (tmp_path / "env.txt").read_text().splitlines()
               if "=" in line)
    port = str(cluster._epmd_port)

    def on_our_port(proc: psutil.Process) -> bool:
        try:
            return proc.environ().get("ERL_EPMD_PORT") == port
        except psutil.Error:  # gone, or a zombie
            return False

    daemons = [p for p in psutil.process_iter(["name", "cmdline"])
               if p.info["name"] == "epmd" and on_our_port(p)]
    for p in daemons:  # (the old code's leftover: stop it before failing)
        subprocess.run(["kill", str(p.pid)], check=False)
    assert not daemons, [p.info["cmdline"] for p in daemons]
    assert "register/listen error" in out.stdout + out.stderr  # no epmd, none started
    assert env.get(TAG_ENV) == owner_token()


def test_a_hung_cli_query_is_run_once_more_and_a_wait_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI query that hangs (its own Erlang VM, seen now and then in CI while the node
    answered the next CLI at once) is killed after a third of CTL_TIMEOUT_S and run once
    more; a call with the caller's timeout (a wait the tool bounds itself) is not."""
    from pytest_brokerperf.brokers.rabbitmq import process

    monkeypatch.setattr(process, "CTL_TIMEOUT_S", 3.0)
    tool = tmp_path / "fake-ctl"
    marker = tmp_path / "first-call"
    tool.write_text(f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; sleep 30; "
                    "echo late; exit 0; fi\necho answered\n")
    tool.chmod(0o755)
    ctl = CtlAccess(str(tmp_path), "rmq1@localhost", {})
    assert ctl.check("fake-ctl", "list_policies").strip() == "answered"
    marker.unlink()
    with pytest.raises(ProvisionError, match=r"timed out after 2 s$"):
        ctl.run("fake-ctl", "await_startup", timeout=2.0)
