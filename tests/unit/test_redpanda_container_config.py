"""Redpanda's container mode without Docker: the ``redpanda start`` flags it renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.brokers.redpanda_container import (
    RedpandaContainer,
    default_images,
    start_command,
)
from pytest_brokerperf.core.errors import ConfigError


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_host_clients_get_the_published_port_and_network_clients_the_alias() -> None:
    cmd = start_command(31001)
    assert cmd[:2] == ["redpanda", "start"]
    assert _flag(cmd, "--kafka-addr") == "internal://0.0.0.0:9092,external://0.0.0.0:31001"
    assert _flag(cmd, "--advertise-kafka-addr") == (
        "internal://redpanda-1:9092,external://127.0.0.1:31001")


def test_one_shard_that_shares_the_machine_and_keeps_durability_defaults() -> None:
    cmd = start_command(1, memory_mb=2048)
    assert _flag(cmd, "--smp") == "1" and _flag(cmd, "--memory") == "2048M"
    assert "--overprovisioned" in cmd  # no pinning or busy polling of every core
    assert "dev-container" not in " ".join(cmd)  # that mode relaxes durability settings
    with pytest.raises(ConfigError, match="--memory >= 512M"):
        start_command(1, memory_mb=256)


def test_the_plan_publishes_the_external_port_on_the_same_number(tmp_path: Path) -> None:
    node = RedpandaContainer(workdir=tmp_path, run_id="r1")
    (plan,) = node.plans()
    ((inside, host),) = plan.ports.items()
    assert inside == host and plan.command is not None
    assert f"external://127.0.0.1:{host}" in _flag(plan.command, "--advertise-kafka-addr")
    assert node.image_candidates() == default_images()
    assert default_images()[0].startswith("redpandadata/redpanda:v")
