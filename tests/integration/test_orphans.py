"""SIGKILL of a pytest process that started a local broker leaves nothing behind.

A pytest subprocess starts a real broker (Kafka: the JVM; RabbitMQ: epmd, beam.smp,
erl_child_setup, inet_gethost ...) and is then killed with SIGKILL, which runs none of
its exit hooks. Within 15 s no process carrying its owner tag may remain, the broker's
ports must be free and its data directories gone. The process lists before and after
are printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.rabbitmq.process import rabbitmq_available
from pytest_brokerperf.provision import watchdog
from pytest_brokerperf.provision.ports import LOOPBACK, port_open

pytestmark = pytest.mark.integration

CLUSTERS = {
    "kafka": ("pytest_brokerperf.brokers.kafka.process", "KafkaProcessCluster",
              {"nodes": 1, "heap": "512m"}),
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


@pytest.mark.parametrize("kind", ["kafka", "rabbitmq", "kafka3"])
def test_sigkill_of_pytest_orphans_nothing(kind: str, tmp_path: Path) -> None:
    if kind == "rabbitmq" and (reason := rabbitmq_available()) is not None:
        pytest.skip(reason)
    module, cls, kwargs = CLUSTERS[kind]
    ready = tmp_path / "ready.json"
    inner = tmp_path / "test_inner.py"
    inner.write_text(textwrap.dedent(f"""
        import json, os, time
        from {module} import {cls} as Cluster
        from pytest_brokerperf.provision import watchdog

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
        while any(Path(d).exists() for d in info["data_dirs"]) and time.monotonic() - t0 < 15:
            time.sleep(0.2)
        assert [d for d in info["data_dirs"] if Path(d).exists()] == []
        assert not state.exists()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
