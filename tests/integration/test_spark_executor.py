"""The generators on a real Spark standalone cluster whose workers' clocks really differ.

One cluster per module, started with pyspark's own launcher (``spark-class
...deploy.master.Master`` and two ``...deploy.worker.Worker``), each worker under
``unshare --time --monotonic=+3`` / ``-2`` (a Linux time namespace: the worker, the
executor it starts and that executor's Python workers read CLOCK_MONOTONIC 3 s ahead of,
or 2 s behind, pytest's). A tail-read-shaped workload (one topic, one producer, one
consumer) runs through ``SparkGenerators`` (what ``--brokerperf-executor=spark``
injects) against the real one-node Kafka the integration tests share: the producer runs
on one worker, the consumer on the other, so every end-to-end latency is a stamp taken
in one namespace subtracted from one taken in the other.

Assertions that can fail: each task's measured offset equals its namespace's injected
offset within the stated uncertainty; the two tasks' offsets differ by seconds (so the
uncorrected figures would be seconds off) while the corrected e2e p50 is under 250 ms
and above zero; no message lost; no period's clock check fails; the record's executor
block names the master, both hosts and the client; the run's channel refuses a
connection once its tasks are in; nothing of the cluster is left running after it stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.engine.coordinator import run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload

pyspark = pytest.importorskip("pyspark")

#: the workers' injected CLOCK_MONOTONIC offsets, seconds (unshare takes whole seconds)
OFFSETS_S = (3, -2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _can_unshare_time() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare (util-linux) not found"
    r = subprocess.run(["unshare", "--time", "--monotonic=1", "true"], capture_output=True,
                       text=True, check=False)
    return None if r.returncode == 0 else f"unshare --time refused: {r.stderr.strip()}"


@dataclass
class Cluster:
    master: str
    #: each worker's time namespace (``time:[inode]``) -> its injected offset, ns
    offsets: dict[str, int]
    sessions: set[int]
    procs: list[subprocess.Popen[bytes]]
    logs: Path

    def members(self) -> list[psutil.Process]:
        """Every live process of the cluster's sessions (workers, executors, Python)."""
        out = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getsid(p.pid) in self.sessions and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except (ProcessLookupError, psutil.Error, PermissionError):
                continue
        return out

    def stop(self) -> list[str]:
        """SIGTERM every session, wait, SIGKILL what is left; what had to be killed."""
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while self.members() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [f"{p.pid} {' '.join(p.cmdline()[:3])}" for p in self.members()]
        for p in self.members():
            p.kill()
        for p in self.procs:
            p.wait(10)
        return left


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in {log} within {timeout_s} s:\n"
                         + (log.read_text(errors="replace")[-3000:] if log.exists() else ""))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why = _can_unshare_time()
    if why is not None:
        pytest.skip(why)
    home = Path(pyspark.__file__).parent
    base = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(base), "SPARK_NO_DAEMONIZE": "1",
           "SPARK_DAEMON_MEMORY": "256m"}
    port = _free_port()
    master = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    c = Cluster(master=master, offsets={}, sessions=set(), procs=procs, logs=base)

    def start(name: str, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = base / f"{name}.log"
        with log.open("wb") as out:
            p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        procs.append(p)
        c.sessions.add(p.pid)
        return p, log

    try:
        m, mlog = start("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(port),
                                   "--webui-port", str(_free_port())])
        _wait_for(mlog, "I have been elected leader", m, 60)
        for k, off in enumerate(OFFSETS_S):
            w, wlog = start(f"worker-{k}", [
                "unshare", "--time", f"--monotonic={off}", spark_class,
                "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                "--work-dir", str(base / f"work-{k}")])
            _wait_for(wlog, "Successfully registered with master", w, 60)
            c.offsets[os.readlink(f"/proc/{w.pid}/ns/time")] = off * 1_000_000_000
        yield c
    finally:
        left = c.stop()
        assert not left, f"the cluster left processes running after its stop: {left}"


_RUN: dict[str, Any] = {}


@pytest.fixture
def spark_run(cluster: Cluster, kafka_one: BrokerEndpoint) -> dict[str, Any]:
    """One run for the module (the shared Kafka fixture is per test: the run is kept)."""
    if "outcome" not in _RUN:
        _RUN.update(_run_on(cluster, kafka_one))
    return _RUN


def _run_on(cluster: Cluster, kafka_one: BrokerEndpoint) -> dict[str, Any]:
    from pytest_brokerperf.plugin.spark_executor import SparkGenerators
    from pytest_brokerperf.results.record import executor_block

    launcher = SparkGenerators(cluster.master, 2)
    wl = Workload(name="tail-read", topics=1, partitions_per_topic=1, message_size=256,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=200,
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=200, period_s=1.0, warmup_max_s=2.0, measure_s=6.0, workers=2,
                   topic_prefix="it-spark", probe_timeout_s=60, launcher=launcher)
    refused: list[BaseException] = []

    def knock(_: object) -> None:  # once the tasks are in, nobody else may connect
        from multiprocessing.connection import Client

        if refused:
            return
        stage = launcher._stage
        assert stage is not None
        try:
            Client(stage.address, authkey=stage.secret).close()
        except OSError as exc:
            refused.append(exc)
        else:
            refused.append(AssertionError("a connection with the run's secret was "
                                          "accepted after every task was in"))

    try:
        out = run_workload(create_driver(kafka_one, None), wl, plan,
                           payloads=wl.payloads(None, seed=3), on_period=knock)
    finally:
        launcher.shutdown()
    block = executor_block(out)
    for c in block["clocks"]:  # the figures, for -s and for a failure's captured output
        print(f"task {c['task']}: offset {c['offset_us']:+,.1f} µs ± "
              f"{c['first_uncertainty_us']:.1f} µs (rtt {c['first_rtt_us']:.1f} µs), "
              f"bound {c['uncertainty_us']:.1f} µs, drift {c['drift_ppm']}")
    print(f"pair uncertainty {block['pair_uncertainty_us']:.1f} µs; e2e p50 "
          f"{out.cumulative['e2e_latency'].percentile(50)} µs, p99 "
          f"{out.cumulative['e2e_latency'].percentile(99)} µs; acknowledged "
          f"{out.delivery.acknowledged}, lost {sum(s.lost for s in out.delivery.subscriptions)}")
    return {"outcome": out, "block": block, "refused": refused, "cluster": cluster}


def test_offsets_are_recovered_within_their_uncertainty(spark_run: dict[str, Any]) -> None:
    out, cluster = spark_run["outcome"], spark_run["cluster"]
    rep = out.executor
    assert rep is not None and rep.kind == "spark" and rep.master == cluster.master
    by_task = {t.task: t for t in rep.tasks}
    seen = set()
    for clock in rep.clocks:
        ns = by_task[clock.task].identity.time_ns
        assert ns in cluster.offsets, (ns, cluster.offsets)
        seen.add(ns)
        injected = cluster.offsets[ns]
        assert clock.corrected and clock.first is not None
        error = abs(clock.applied_offset_ns - injected)
        assert error <= clock.first.uncertainty_ns, (
            f"task {clock.task}: measured {clock.applied_offset_ns} ns, injected {injected} "
            f"ns, error {error} ns > ±{clock.first.uncertainty_ns} ns")
        assert clock.first.uncertainty_ns < 20_000_000  # a loopback round trip, not seconds
        # the residuals after correction stay within the stated uncertainty
        assert len(clock.residuals) >= 8  # every period and after the window
        assert all(abs(r.offset_ns) <= clock.uncertainty_ns for r in clock.residuals)
    assert seen == set(cluster.offsets), f"each task on its own worker's namespace: {rep.tasks}"


def test_cross_namespace_e2e_is_corrected_and_nothing_is_lost(spark_run: dict[str, Any]) -> None:
    out = spark_run["outcome"]
    rep = out.executor
    d = out.delivery
    assert d.acknowledged > 600
    for sub in d.subscriptions:
        assert sub.received == sub.acknowledged == d.acknowledged
        assert (sub.lost, sub.duplicates) == (0, 0)
    offsets = {c.task: c.applied_offset_ns for c in rep.clocks}
    # the producer and the consumer ran in different namespaces: uncorrected, every
    # e2e latency would be off by their 5 s difference
    assert abs(offsets[0] - offsets[1]) > 4_000_000_000
    p50 = out.cumulative["e2e_latency"].percentile(50)
    p99 = out.cumulative["e2e_latency"].percentile(99)
    assert p50 is not None and p99 is not None
    assert 0 < p50 < 250_000, f"corrected e2e p50 {p50} µs"
    assert p99 < 1_000_000, f"corrected e2e p99 {p99} µs"
    assert out.cumulative["e2e_latency"].min() > 0
    # the producer's task is shifted too: its client's own ack stamps are corrected
    pub = out.cumulative["publish_latency"].percentile(50)
    assert pub is not None and 0 < pub < 250_000, f"corrected publish p50 {pub} µs"
    delay = out.cumulative["publish_delay"]
    assert delay.min() > -1_000_000 and delay.max() < 1_000_000  # not seconds either way
    # every period's clock bracket check passed on the corrected stamps
    assert [p.clock_note for p in out.periods if p.clock_note] == []
    assert 0 < rep.pair_uncertainty_ns < 0.1 * p50 * 1000, (rep.pair_uncertainty_ns, p50)


def test_record_names_executor_hosts_and_clients(spark_run: dict[str, Any]) -> None:
    block = spark_run["block"]
    assert block["kind"] == "spark"
    assert block["master"] == spark_run["cluster"].master
    assert sorted(t["task"] for t in block["tasks"]) == [0, 1]
    for t in block["tasks"]:
        assert t["host"] and t["executor_id"] and t["python"]
        assert t["client"] == "confluent-kafka" and t["client_version"]
    assert {round(c["offset_us"] / 1e6) for c in block["clocks"]} == set(OFFSETS_S)
    assert block["pair_uncertainty_us"] > 0


def test_the_channel_refuses_anyone_once_the_tasks_are_in(spark_run: dict[str, Any]) -> None:
    (refused,) = spark_run["refused"]
    assert isinstance(refused, ConnectionRefusedError), refused
