"""SIGKILL of a pytest process that started a local broker leaves nothing behind.

A pytest subprocess starts a real broker (Kafka: the JVM; RabbitMQ: epmd, beam.smp,
erl_child_setup, inet_gethost ...) and is then killed with SIGKILL, which runs none of
its exit hooks. Within 15 s no process carrying its owner tag may remain, the broker's
ports must be free and its data directories gone. The process lists before and after
are printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, port_open
from pytest_brokerperf.brokers.rabbitmq.process import rabbitmq_available
from pytest_brokerperf.testing import PLAIN_SCENARIOS

pytestmark = pytest.mark.integration

#: Kafka with three nodes covers one node's case too (a JVM per node, each with its ports
#: and data directory, all in the owner's tag): a one-node run would add a broker start
#: and nothing to check (the watchdog's own sweep is unit-tested in
#: tests/unit/test_watchdog.py).
CLUSTERS = {
    "kafka3": ("pytest_brokerperf.brokers.kafka.process", "KafkaProcessCluster",
               {"nodes": 3, "heap": "384m"}),
    "rabbitmq": ("pytest_brokerperf.brokers.rabbitmq.process", "RabbitMQProcessCluster",
                 {"nodes": 1}),
}


def _ps(token: str) -> str:
    """``ps`` lines of every process carrying ``token`` (verified in /proc/PID/environ)."""
    pids = watchdog.tagged_pids(token)
    if not pids:
        return "(none)"
    out = subprocess.run(["ps", "-o", "pid,ppid,pgid,stat,comm", "-p", ",".join(map(str, pids))],
                         capture_output=True, text=True, check=False)
    return out.stdout.rstrip()


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.append(pid)
        except OSError:
            pass
    return left


@pytest.mark.parametrize("kind", ["rabbitmq", "kafka3"])
def test_sigkill_of_pytest_orphans_nothing(kind: str, tmp_path: Path) -> None:
    if kind == "rabbitmq" and (reason := rabbitmq_available()) is not None:
        pytest.skip(reason)
    module, cls, kwargs = CLUSTERS[kind]
    ready = tmp_path / "ready.json"
    inner = tmp_path / "test_inner.py"
    inner.write_text(textwrap.dedent(f"""
        import json, os, time
        from {module} import {cls} as Cluster
        from pytest_brokerperf.brokers.provision import watchdog

        def test_start_and_hang():
            cluster = Cluster(**{kwargs!r})
            ep = cluster.start()
            info = {{"token": watchdog.owner_token(), "pids": [p.pid for p in cluster.processes],
                     "data_dirs": list(ep.local.data_dirs) if ep.local else [],
                     "bootstrap": ep.bootstrap}}
            tmp = {str(ready)!r} + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(info, fh)
            os.replace(tmp, {str(ready)!r})
            time.sleep(600)
    """))
    env = dict(os.environ)
    owner = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(inner), "-q", "-p", "no:cacheprovider",
         "-p", "no:randomly", "--rootdir", str(tmp_path)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            if owner.poll() is not None:
                assert owner.stdout is not None
                pytest.fail(f"inner pytest ended ({owner.returncode}) before the broker was up:"
                            f"\n{owner.stdout.read().decode(errors='replace')[-3000:]}")
            assert time.monotonic() < deadline, "broker not up within 240 s"
            time.sleep(0.2)
        info = json.loads(ready.read_text())
        token = info["token"]
        ports = [int(p.rsplit(":", 1)[1]) for p in info["bootstrap"].split(",")
                 if ":" in p and p.rsplit(":", 1)[1].isdigit()]
        state = watchdog.state_dir() / f"{token}.json"
        state_ports = json.loads(state.read_text())["ports"]
        ports = sorted(set(ports) | {p for v in state_ports.values() for p in v})
        tagged_before = watchdog.tagged_pids(token)
        before = _ps(token)
        print(f"\n[{kind}] before SIGKILL of pytest {owner.pid} (ports {ports}):\n{before}")
        assert set(info["pids"]) <= set(tagged_before)
        if kind == "rabbitmq":
            names = set(before.split())
            assert {"epmd", "beam.smp"} <= names, before
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15 and (
                _alive(tagged_before) or watchdog.tagged_pids(token)
                or any(port_open(LOOPBACK, p, timeout=0.2) for p in ports)):
            time.sleep(0.2)
        after = _ps(token)
        print(f"[{kind}] {time.monotonic() - t0:.1f} s after SIGKILL:\n{after}")
        assert _alive(tagged_before) == [], after
        assert watchdog.tagged_pids(token) == [], after
        assert [p for p in ports if port_open(LOOPBACK, p, timeout=0.2)] == []
        # The watchdog removes the data directories, then its state file: wait for both
        # (checking the state file the moment the directories are gone raced its unlink).
        while (any(Path(d).exists() for d in info["data_dirs"]) or state.exists()) \
                and time.monotonic() - t0 < 15:
            time.sleep(0.2)
        assert [d for d in info["data_dirs"] if Path(d).exists()] == []
        assert not state.exists()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def test_kill_9_of_the_kafka_jvm_stops_the_run_naming_it(tmp_path: Path) -> None:
    """The broker dies mid-run: the run stops at once with the process, signal and log."""
    repo = Path(__file__).resolve().parents[2]
    known = {p.name for p in watchdog.state_dir().glob("*.json")}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(repo / "scenarios"), "-m", "tailread",
         "-k", PLAIN_SCENARIOS,
         "--broker=kafka", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--brokerperf-results={tmp_path / 'res'}"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        jvm = None
        deadline = time.monotonic() + 240
        while jvm is None and time.monotonic() < deadline and run.poll() is None:
            for f in watchdog.state_dir().glob("*.json"):
                if f.name in known:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    state = json.loads(f.read_text())
                    if state["ports"] and state["groups"]:
                        jvm = int(state["groups"][-1]["pgid"])
            time.sleep(0.2)
        assert jvm is not None, "no local Kafka came up"
        time.sleep(8)  # into the warm-up or the measured window
        os.kill(jvm, signal.SIGKILL)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    text = out.decode(errors="replace")
    assert run.returncode == 1, text[-3000:]
    assert f"BrokerDied: broker process kafka-1 (pid {jvm}) exited during the run " \
           "(killed by signal SIGKILL)" in text, text[-3000:]
    assert "last lines of" in text and "kafka-1.log" in text
