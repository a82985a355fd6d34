"""The Pulsar standalone's power cut without a JVM or FUSE: its one node is every
bookie, so the injector records the cut as the whole cluster's and the judge applies
the whole-cluster rules for the bookies it took; the restart keeps the data (no
``--wipe-data``); the read-back finds the run's partitions among every listed topic."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.provision.lifecycle import LocalNode
from pytest_brokerperf.brokers.provision.process import ManagedProcess
from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone, standalone_args
from pytest_brokerperf.brokers.pulsar.readback import run_partitions
from pytest_brokerperf.config.fault_spec import parse_fault
from pytest_brokerperf.faults.injector import FaultEvent, FaultInjector
from pytest_brokerperf.faults.judge import judge_fault
from pytest_brokerperf.faults.readback import compare
from tests.unit.test_faults import _outcome, _Session
from tests.unit.test_lifecycle import ToyCluster


def test_the_read_back_takes_the_run_s_partitions_and_nothing_else() -> None:
    listed = [
        "persistent://benchmark/ns-1a2b/t-1-partition-1",
        "persistent://benchmark/ns-1a2b/t-1-partition-0",
        "persistent://benchmark/ns-1a2b/t-1-partition-10",
        "persistent://benchmark/ns-1a2b/t-10-partition-0",
        "persistent://public/default/t-2",
        "persistent://public/default/other",
    ]
    assert run_partitions(listed, ["t-1", "t-2"]) == [
        "persistent://benchmark/ns-1a2b/t-1-partition-0",
        "persistent://benchmark/ns-1a2b/t-1-partition-1",
        "persistent://benchmark/ns-1a2b/t-1-partition-10",
        "persistent://public/default/t-2",
    ]
    assert run_partitions(listed, ["nothing"]) == []


def _standalone_with_node(tmp_path: Path, bookies: int) -> PulsarStandalone:
    standalone = PulsarStandalone(nodes=bookies, powercut_fs=True)
    argv = ["java", "org.apache.pulsar.PulsarStandaloneStarter",
            *standalone_args(tmp_path / "standalone.conf", tmp_path / "data", bookies)]
    standalone._nodes = [LocalNode(name="standalone", label="Pulsar standalone",
                                   log_file=tmp_path / "pulsar.log", data_dir=tmp_path / "data",
                                   proc=ManagedProcess(argv, log_file=tmp_path / "pulsar.log"))]
    return standalone


def test_the_standalone_starts_again_on_its_own_data(tmp_path: Path) -> None:
    standalone = _standalone_with_node(tmp_path, 3)
    assert standalone.powercut_fs
    proc = standalone._nodes[0].proc
    assert proc is not None and "--wipe-data" in proc.argv  # a first start: fresh anyway
    standalone._restartable(1)
    again = proc.relaunched()
    assert "--wipe-data" not in again.argv
    assert again.argv[again.argv.index("--num-bookies") + 1] == "3"
    assert str(tmp_path / "data" / "bookkeeper") in again.argv


def test_a_cut_of_the_standalone_says_it_took_every_bookie(tmp_path: Path) -> None:
    report = _standalone_with_node(tmp_path, 3)._whole({"pid": 7, "bytes_dropped": 5})
    assert report["covers"] == 3 and report["pid"] == 7 and report["bytes_dropped"] == 5
    assert "one JVM" in report["scope"] and "all 3 bookie(s)" in report["scope"]


class _OneProcessCluster(ToyCluster):
    """A toy cluster of one process holding ``covers`` nodes, as a Pulsar standalone."""

    covers = 3

    def power_cut_node(self, index: int) -> dict[str, Any]:
        pid = self.kill_node(index)
        return {"pid": pid, "removed": [], "restored": ["/bookkeeper/current/1.txn"],
                "bytes_dropped": 4096, "covers": self.covers,
                "scope": f"one JVM: its power cut is all {self.covers} bookies' at once"}


def test_the_injector_records_the_one_process_cut_as_every_node_s(tmp_path: Path) -> None:
    cluster = _OneProcessCluster(tmp_path, nodes=1)
    cluster.ready_file.touch()
    with cluster as c:
        before = c.node_pid(1)
        inj = FaultInjector(parse_fault("power-cut@0s:0.01s/node-1", "x"), c)
        session: Any = _Session()
        session.measure_started_ns = time.monotonic_ns()
        inj(session)
        inj.settle(timeout=20)
        assert inj.error is None
        assert [e.action for e in inj.events] == ["power-cut", "start-broker", "serving"]
        assert c.node_pid(1) not in (None, before)
    assert inj.cut_covers == 3
    assert inj.target_note == ("node 1 (as asked); one JVM: its power cut is all 3 "
                               "bookies' at once")
    assert inj.cut_report is not None and inj.cut_report["bytes_dropped"] == 4096


def _standalone_cut(outcome: Any, missing: int, covers: int) -> FaultInjector:
    inj = FaultInjector(parse_fault("power-cut@3s:2s", "x"), control=None)  # type: ignore[arg-type]
    inj.node, inj.cut_covers = 1, covers
    inj.target_note = "node 1: this broker names no leader; the standalone is one JVM"
    inj.cut_report = {"removed": [], "restored": ["/bookkeeper/current/1.txn"],
                      "bytes_dropped": 4096}
    t0 = outcome.periods[0].start_ns
    inj.events = [FaultEvent("power-cut", 1, t0 + int(3.2e9), 41),
                  FaultEvent("serving", 1, t0 + int(6e9), 51)]
    acked = {0: (1 << 600) - 1}
    inj.read_back = compare(acked, {0: acked[0] >> missing}, read=600 - missing)
    return inj


@pytest.mark.parametrize(("level", "covers", "verdict"), [
    (3, 1, "loss-forbidden"),  # one bookie fsyncs its journal before acknowledging
    (4, 1, "loss-allowed"),
    (1, 3, "loss-forbidden"),  # an ack quorum of bookies, each fsyncing its journal
    (2, 3, "loss-allowed"),  # replicated, never fsynced: every bookie's page cache gone
    (3, 3, "loss-allowed"),
    (4, 3, "loss-allowed"),
])
def test_the_standalone_s_cut_is_judged_by_the_whole_cluster_rules(
        level: int, covers: int, verdict: str) -> None:
    outcome = _outcome(lost=0)
    judged = judge_fault(_standalone_cut(outcome, 25, covers), outcome, level=level, nodes=1)
    b = judged.block
    assert b["verdict"] == verdict and b["nodes"] == covers
    assert b["lost"] == 25 == b["power_cut"]["read_back"]["missing"]
    assert b["lost_ranges"] == [{"producer": 0, "first": 575, "last": 599}]
    if verdict == "loss-forbidden":
        assert judged.finding is not None
        assert f"(all {covers} node(s) at once)" in judged.finding
    else:
        assert judged.finding is None and b["loss_allowed"].startswith(f"yes: level {level}")
    clean = judge_fault(_standalone_cut(outcome, 0, covers), outcome, level=level, nodes=1)
    assert clean.finding is None and clean.block["verdict"] == "no-loss"


class _FlakyClient:
    """A pulsar-client stand-in whose first ``fails`` Reader opens time out."""

    def __init__(self, fails: int) -> None:
        self.fails, self.opened = fails, 0

    def create_reader(self, name: str, start: Any) -> str:
        import pulsar

        self.opened += 1
        if self.opened <= self.fails:
            raise pulsar.Timeout("Pulsar error: TimeOut")
        return f"reader of {name}"


def test_a_topic_the_restarted_broker_fails_to_load_is_opened_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_brokerperf.brokers.pulsar import readback

    monkeypatch.setattr(readback.time, "sleep", lambda s: None)
    client = _FlakyClient(fails=2)
    assert readback._open(client, "persistent://t/ns/pc", time.monotonic() + 60) == (
        "reader of persistent://t/ns/pc")
    assert client.opened == 3
    with pytest.raises(RuntimeError, match=r"did not serve persistent://t/ns/pc for a "
                                           r"Reader within the read-back's bound"):
        readback._open(_FlakyClient(fails=99), "persistent://t/ns/pc", time.monotonic() + 5)


def test_serving_again_needs_a_topic_the_broker_can_create(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_brokerperf.brokers.pulsar import process
    from pytest_brokerperf.brokers.pulsar.process import PulsarPorts

    standalone = _standalone_with_node(tmp_path, 1)
    standalone._ports = PulsarPorts(broker_port=6650, web_port=8080)
    answers = iter([(500, "Not enough non-faulty bookies available"), (204, "")])
    calls: list[tuple[str, str]] = []

    def http(url: str, timeout: float, method: str = "GET") -> tuple[int, str]:
        calls.append((method, url))
        return next(answers) if method == "PUT" else (204, "")

    monkeypatch.setattr(process, "_http_get", http)
    probe = standalone._writable()
    seen = probe(30.0)
    assert seen is not None and "topic to be created" in seen and "500" in seen
    assert probe(30.0) is None
    puts = [u for m, u in calls if m == "PUT"]
    assert len(puts) == 2 and puts[0] != puts[1]  # a fresh name per attempt
    assert all("/admin/v2/persistent/public/default/brokerperf-restart-" in u for u in puts)
    assert calls[-1] == ("DELETE", f"{puts[1]}?force=true")
