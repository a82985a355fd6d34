"""A remote cluster that goes away mid-run stops the run within seconds (issue 13).

The project's own single-node Kafka plays the remote cluster, reached only through a
TCP proxy this test controls (a listener advertised on the proxy's port, so every client
connection, bootstrap and data, goes through it). Once the run has measured a few
periods the proxy is stopped: connections reset, new ones refused. The run must end with
``ClusterLost`` naming the address and leave a ``failed`` record with the periods
measured until then, instead of measuring 0 msg/s to the end of its 60 s window.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_brokerperf.engine.liveness import REMOTE_LOSS_S
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from pytest_brokerperf.testing.delayproxy import DelayProxy

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"
MEASURE_S = 60  # far longer than the test may take: only the watch can end it early
CUT_AFTER_PERIODS = 3


@dataclass
class ProxiedKafka:
    proxy: DelayProxy

    @property
    def bootstrap(self) -> str:
        return self.proxy.address


@pytest.fixture(scope="module")
def proxied_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedKafka]:
    from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
    from pytest_brokerperf.brokers.provision.ports import free_port

    # tests/integration/conftest.py holds the one-broker-session lock and skips where
    # Kafka cannot be provided.
    proxy_port = free_port()  # advertised by the broker, so it must be known first
    cluster = KafkaProcessCluster(nodes=1, workdir=tmp_path_factory.mktemp("loss-kafka"),
                                  extra_listeners={"PROXIED": proxy_port})
    endpoint = cluster.start()
    try:
        bind_port = int(endpoint.info["listeners"]["PROXIED"]["bind_port"])
        with DelayProxy(proxy_port, (LOOPBACK, bind_port)) as proxy:
            yield ProxiedKafka(proxy)
    finally:
        cluster.stop()


def _measured_periods(results: Path) -> int:
    """Measured periods the run has appended to its live ``periods.csv`` so far."""
    for path in results.rglob("periods.csv"):
        try:
            with open(path, newline="") as fh:
                return sum(1 for row in csv.DictReader(fh) if row.get("phase") == "measure")
        except OSError:
            return 0
    return 0


def test_a_cluster_cut_mid_run_stops_it_with_a_failed_record(
        proxied_kafka: ProxiedKafka, pytester: pytest.Pytester) -> None:
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    cut_at: list[float] = []
    stop = threading.Event()

    def cut_when_measuring() -> None:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            if _measured_periods(results) >= CUT_AFTER_PERIODS:
                cut_at.append(time.monotonic())
                proxied_kafka.proxy.stop()
                return
            stop.wait(0.2)

    cutter = threading.Thread(target=cut_when_measuring, daemon=True)
    cutter.start()
    try:
        run = pytester.runpytest_subprocess(
            str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread",
            "-k", PLAIN_SCENARIOS, "--broker=kafka",
            f"--kafka-bootstrap={proxied_kafka.bootstrap}", f"--brokerperf-results={results}",
            "--brokerperf-owner=ci-loss", "--brokerperf-rate=500",
            f"--brokerperf-duration={MEASURE_S}", "--brokerperf-warmup=2",
            "--brokerperf-period=1", "--brokerperf-inconclusive=warn",
            "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(pytester.path),
            timeout=240)
        ended = time.monotonic()
    finally:
        stop.set()
        cutter.join(5)
    assert cut_at, f"the run never measured {CUT_AFTER_PERIODS} periods:\n{run.stdout.str()}"
    print(f"the run ended {ended - cut_at[0]:.1f} s after the cut")
    out = run.stdout.str()
    assert "ClusterLost" in out, out
    assert f"remote kafka cluster at {proxied_kafka.bootstrap} stopped answering" in out
    assert f"{proxied_kafka.bootstrap}: ConnectionRefusedError" in out
    run.assert_outcomes(failed=1)
    # The run stopped soon after the cut, not at the end of its 60 s window (the bound,
    # plus the probes' interval and the clients' and session's shut-down).
    assert ended - cut_at[0] < MEASURE_S - 10, f"{ended - cut_at[0]:.1f} s after the cut"
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    assert rec["run_status"] == "failed"
    assert rec["verdict"]["status"] == "broker-died"
    assert f"at {proxied_kafka.bootstrap} stopped answering" in rec["verdict"]["reasons"][0]
    assert f"{REMOTE_LOSS_S:g} s" in rec["verdict"]["reasons"][0]
    assert f"{proxied_kafka.bootstrap}: ConnectionRefusedError" in rec["failure"]
    phases = rec["timeline"]["phase"]
    assert phases.count("measure") >= CUT_AFTER_PERIODS
    assert len(phases) < 2 + MEASURE_S  # the periods up to the loss, not the window
    assert rec["delivery"]["reconciled"] is False
    assert rec["delivery"]["acknowledged_until_then"] > 0
