"""The local-broker lifecycle base, driven by real short-lived Python processes (no broker).

A toy cluster stands in for a broker: each node is ``python -c`` that starts a child
of its own (the way a JVM or an Erlang VM spawns helpers), writes both pids and prints
log lines; readiness is a file the test controls.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.lifecycle import LocalNode, ProcessCluster, ports_open
from pytest_brokerperf.brokers.provision.ports import free_port
from pytest_brokerperf.brokers.provision.process import running_processes
from pytest_brokerperf.core.errors import ProvisionError
from pytest_brokerperf.metrics.cpus import CpuAffinity, broker_cpus

NODE = textwrap.dedent(
    """\
    import os, signal, subprocess, sys, time
    pid_file, behaviour = sys.argv[1], sys.argv[2]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(pid_file, "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    for i in range(50):
        print(f"toy log line {i}", flush=True)
    if behaviour == "crash":
        print("fatal: Address already in use" if sys.argv[3] == "collide" else "fatal: bad",
              flush=True)
        sys.exit(3)
    if behaviour == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
    """
)


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def wait_gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(gone(p) for p in pids)


class ToyCluster(ProcessCluster[LocalNode]):
    """``nodes`` Python processes; ready when ``ready_file`` exists."""

    kind: ClassVar[str] = "toy"

    def __init__(self, tmp: Path, nodes: int = 2, behaviour: str = "sleep",
                 start_timeout: float = 10.0, stop_timeout: float = 5.0,
                 cpus: set[int] | None = None, own_workdir: bool = False,
                 keep_logs: bool | None = None) -> None:
        super().__init__(nodes=nodes, workdir=None if own_workdir else tmp / "work", cpus=cpus,
                         start_timeout=start_timeout, stop_timeout=stop_timeout,
                         **({} if keep_logs is None else {"keep_logs": keep_logs}))
        self.tmp = tmp
        self.behaviour = behaviour
        self.ready_file = tmp / "ready"
        self.collisions = 0  # how many attempts crash saying "Address already in use"
        self.attempts = 0
        self.pid_files: list[Path] = []

    def _init_workdir(self, workdir: Path) -> None:
        (workdir / "logs").mkdir(exist_ok=True)

    def _launch(self, workdir: Path, deadline: float) -> None:
        self.attempts += 1
        data = self.fresh_dir(workdir / "data")
        self._nodes = [
            LocalNode(name=str(i), label=f"toy {i}", log_file=workdir / "logs" / f"toy-{i}.log",
                      data_dir=data / f"node-{i}")
            for i in range(1, self.nodes + 1)
        ]
        for node in self._nodes:
            pid_file = self.tmp / f"pids-{self.attempts}-{node.name}"
            self.pid_files.append(pid_file)
            collide = "collide" if self.attempts <= self.collisions else "other"
            self._spawn(node, [sys.executable, "-c", NODE, str(pid_file), self.behaviour,
                               collide], name=f"toy-{node.name}")
        self.wait_until(lambda left: None if self.ready_file.exists() else "no ready file",
                        deadline, interval=0.05)

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        local = self._local_record(began)
        return BrokerEndpoint(kind="toy", bootstrap="toy://", mode="process",
                              nodes=self.nodes, info=local.as_info(), local=local)

    def all_pids(self) -> list[int]:
        """Every node's pid and its child's, from the pid files written so far."""
        deadline = time.monotonic() + 10
        pids: list[int] = []
        for f in self.pid_files:
            while not f.exists() or not f.read_text().strip():
                assert time.monotonic() < deadline, f"{f} never written"
                time.sleep(0.02)
            pids += [int(x) for x in f.read_text().split()]
        return pids


def test_context_manager_starts_records_and_stops_every_process_group(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, cpus=set())
    cluster.ready_file.touch()
    with cluster as c:
        ep = c.endpoint
        assert c.running and c.alive() and c.uptime_s() > 0
        assert ep.local is not None
        assert list(ep.local.pids) == ep.info["pids"] == [p.pid for p in c.processes]
        assert len(ep.local.log_files) == 2 and ep.info["log_files"] == list(ep.local.log_files)
        assert ep.info["cpu_affinity"]["broker_cpus"] is None  # cpus=set(): not pinned
        assert set(ep.info["cpu_affinity"]["nodes"]) == {"1", "2"}
        pids = c.all_pids()
        assert len(pids) == 4 and not any(gone(p) for p in pids)
        data = tmp_path / "work" / "data"
        assert data.is_dir()
    assert wait_gone(pids), "a node or the child it started outlived stop()"
    assert not cluster.running and not cluster.alive() and cluster.uptime_s() == 0.0
    assert not data.exists()  # scratch data removed
    assert (tmp_path / "work" / "logs" / "toy-1.log").is_file()  # logs kept
    assert not running_processes()
    with pytest.raises(RuntimeError, match="not running"):
        _ = cluster.endpoint
    cluster.stop()  # again: a no-op


def test_a_working_directory_it_made_itself_goes_at_stop_unless_asked_or_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``workdir`` a cluster makes its own in $TMPDIR: a clean stop removes it,
    logs and configuration too (one directory per start used to stay behind); a failed
    start keeps it (the error names its logs), and so does ``keep_logs=True``."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    clean = ToyCluster(tmp_path, cpus=set(), own_workdir=True)
    clean.ready_file.touch()
    with clean:
        made = Path(clean.endpoint.info["log_files"][0]).parent.parent
        assert made.parent == tmpdir and made.name.startswith("brokerperf-toy-")
    assert list(tmpdir.iterdir()) == []

    kept = ToyCluster(tmp_path, cpus=set(), own_workdir=True, keep_logs=True)
    with kept:
        log = Path(kept.endpoint.info["log_files"][0])
    assert log.is_file()
    shutil.rmtree(log.parent.parent)

    clean.ready_file.unlink()
    failed = ToyCluster(tmp_path, cpus=set(), own_workdir=True, start_timeout=0.5)
    with pytest.raises(ProvisionError, match=r"toy-1\.log"):
        failed.start()
    failed.stop()
    (left,) = tmpdir.iterdir()
    assert (left / "logs" / "toy-1.log").is_file()


def test_readiness_timeout_shows_log_tails_and_leaves_nothing_behind(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, start_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(ProvisionError) as info:
        cluster.start()
    assert time.monotonic() - t0 < 1.0 + 5.0 + 5.0  # deadline + stop timeout, bounded
    msg = str(info.value)
    assert "toy (2 node(s)) not ready within 1 s: no ready file" in msg
    for i in (1, 2):
        assert f"--- toy {i} (pid " in msg and f"toy-{i}.log ---" in msg
    assert "toy log line 49" in msg and "toy log line 5\n" not in msg  # the tail only
    assert wait_gone(cluster.all_pids())
    assert not (tmp_path / "work" / "data").exists()
    assert not cluster.running and not running_processes()


def test_node_dying_during_start_is_reported_at_once_and_the_rest_stopped(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=1, behaviour="crash", start_timeout=30.0)
    t0 = time.monotonic()
    with pytest.raises(ProvisionError, match="toy 1 exited with code 3 during start-up") as info:
        cluster.start()
    assert time.monotonic() - t0 < 20  # not the 30 s deadline
    assert "fatal: bad" in str(info.value)
    assert cluster.attempts == 1  # no port collision in the log: no retry
    assert wait_gone(cluster.all_pids())
    assert not (tmp_path / "work" / "data").exists()


def test_port_collision_in_the_log_is_retried(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=1, behaviour="crash", start_timeout=30.0)
    cluster.collisions = 2
    with pytest.raises(ProvisionError, match="fatal: bad"):
        cluster.start()  # attempts 1-2 collide, attempt 3 fails for another reason
    assert cluster.attempts == 3
    assert wait_gone(cluster.all_pids())


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=1, behaviour="stubborn", stop_timeout=0.5)
    cluster.ready_file.touch()
    cluster.start()
    pids = cluster.all_pids()
    (proc,) = cluster.processes
    t0 = time.monotonic()
    cluster.stop()
    assert time.monotonic() - t0 < 10
    assert proc.returncode == -signal.SIGKILL
    assert wait_gone(pids)


def test_ports_open_probe(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as srv:
        open_port = srv.getsockname()[1]
        closed = free_port()
        probe = ports_open([open_port, closed], "ports")
        assert probe(1.0) == f"ports [{closed}] not accepting connections"
        assert ports_open([open_port])(1.0) is None


def test_cpu_split_record() -> None:
    mine = set(os.sched_getaffinity(0))
    assert broker_cpus(set()) is None
    assert broker_cpus({min(mine)}) == {min(mine)}
    split = CpuAffinity.of({max(mine)}, {"1": {max(mine)}, "2": None})
    assert split.broker_cpus == (max(mine),)
    assert max(mine) not in split.generator_cpus
    assert split.as_info()["nodes"] == {"1": [max(mine)], "2": None}
    assert CpuAffinity.of(None, {}).generator_cpus == tuple(sorted(mine))


def test_endpoint_reads_the_typed_record_and_never_info(tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=1, cpus={max(os.sched_getaffinity(0))})
    cluster.ready_file.touch()
    with cluster as c:
        ep = c.endpoint
        assert ep.processes_record() is ep.local
        assert ep.broker_cpus() == [max(os.sched_getaffinity(0))]
    untyped = BrokerEndpoint(kind="x", bootstrap="x", mode="process", info={
        "pids": [12], "log_files": ["a.log"], "gc_logs": ["gc.log"], "data_dirs": ["/d"],
        "cpu_affinity": {"broker_cpus": [1], "generator_cpus": [0], "nodes": {}}})
    # info is what the manifest records: nothing is sampled or pinned from it
    assert untyped.processes_record().pids == () and untyped.broker_cpus() is None
    remote = BrokerEndpoint(kind="x", bootstrap="x", mode="remote")
    assert remote.processes_record().pids == () and remote.broker_cpus() is None
