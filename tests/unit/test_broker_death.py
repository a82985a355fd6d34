"""A local broker process that dies during a run stops the run at once, named.

The loopback driver stands in for the broker's clients and a watched ``sh`` process
for the broker (as :class:`~pytest_brokerperf.brokers.provision.lifecycle.ProcessCluster`
marks its nodes); it is killed with SIGKILL in the middle of a 60 s measured window.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.process import ManagedProcess, check_watched
from pytest_brokerperf.core.errors import BrokerDied
from tests.support.engine import death_mid_run


def _broker(tmp_path: Path) -> ManagedProcess:
    p = ManagedProcess(["sh", "-c", "echo broker started; echo last words; exec sleep 300"],
                       log_file=tmp_path / "broker.log", name="fake-broker")
    p.watched = True
    return p.start()


def test_a_killed_broker_fails_the_run_naming_it_status_and_log(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    try:
        died = death_mid_run(lambda: os.kill(broker.pid, signal.SIGKILL), "death")
    finally:
        broker.stop()
    msg = str(died)
    assert "fake-broker" in msg and f"pid {broker.pid}" in msg
    assert "killed by signal SIGKILL" in msg
    assert "last words" in msg and str(tmp_path / "broker.log") in msg


def test_a_broker_asked_to_stop_is_not_a_death(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    check_watched()
    broker.stop()
    check_watched()
    unwatched = ManagedProcess(["true"], log_file=tmp_path / "t.log").start()
    unwatched.wait(10)
    check_watched()  # not a broker: its exit is its business
    unwatched.stop()


def test_exit_status_is_named(tmp_path: Path) -> None:
    p = ManagedProcess(["sh", "-c", "echo out of memory; exit 3"], log_file=tmp_path / "b.log",
                       name="crashy")
    p.watched = True
    p.start()
    p.wait(10)
    try:
        with pytest.raises(BrokerDied, match=r"crashy .*exit status 3.*\n.*out of memory"):
            check_watched()
    finally:
        p.stop()
