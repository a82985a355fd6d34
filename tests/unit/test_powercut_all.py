"""The whole-cluster power cut without FUSE: the ``/all`` grammar and its ids, the
injector cutting every node at once and starting them together, the refusal on a
cluster that cannot, and the judge (level 1 promises no loss, level 2 may lose)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.config.fault_spec import FaultSpec, fault_ids, parse_fault, parse_faults
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.faults.injector import FaultEvent, FaultInjector
from pytest_brokerperf.faults.judge import judge_fault
from pytest_brokerperf.faults.readback import compare
from tests.unit.test_faults import _outcome, _Session
from tests.unit.test_lifecycle import ToyCluster


def test_all_is_a_power_cut_target_with_a_readable_id() -> None:
    spec = parse_fault("power-cut@5s:2s/all", "--brokerperf-fault")
    assert spec == FaultSpec("power-cut", 5.0, 2.0, "all")
    assert spec.whole_cluster and spec.node_index is None
    assert spec.short == "powercut-all" and spec.text() == "power-cut@5s:2s/all"
    assert parse_fault("power-cut@5s/all", "x").duration_s == 10.0
    one = parse_fault("power-cut@5s:2s", "x")
    assert not one.whole_cluster and one.short == "powercut"
    assert fault_ids((one, spec)) == ["powercut", "powercut-all"]
    assert fault_ids(parse_faults("power-cut@5s/all,power-cut@8s/all", "x")) == [
        "powercut-all-5s", "powercut-all-8s"]


@pytest.mark.parametrize("text", ["kill-broker@5s/all", "pause-broker@5s:1s/all",
                                  "restart-broker@5s/all"])
def test_only_a_power_cut_strikes_every_node(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--brokerperf-fault: .*only power-cut strikes "
                                          r"every node.*Fix: /leader or /node-N"):
        parse_fault(text, "--brokerperf-fault")


def test_an_unknown_target_names_all_among_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"'everyone' is not 'leader', 'all' or node-N"):
        parse_fault("power-cut@5s/everyone", "x")


class _CuttableToy(ToyCluster):
    """A toy cluster whose whole-cluster cut kills every node plus canned reports."""

    started_together: list[int]

    def power_cut_all(self) -> dict[str, Any]:
        indices = list(range(1, self.node_count() + 1))
        pids = self.kill_nodes(indices)
        nodes = {i: {"pid": pid, "removed": [f"/t-{i}.log"], "restored": [],
                     "bytes_dropped": 100 * i} for i, pid in zip(indices, pids, strict=True)}
        return {"pids": pids, "nodes": nodes, "bytes_dropped": 600,
                "removed": [f"node-{i}/t-{i}.log" for i in indices], "restored": []}

    def start_all(self, timeout: float) -> list[int]:
        self.started_together = list(range(1, self.node_count() + 1))
        return self.start_nodes(self.started_together, timeout)


def _run(cluster: ToyCluster, text: str) -> FaultInjector:
    inj = FaultInjector(parse_fault(text, "x"), cluster, leader=lambda s: 2)
    session: Any = _Session()
    session.measure_started_ns = time.monotonic_ns()
    inj(session)
    inj.settle(timeout=30)
    return inj


def test_the_injector_cuts_every_node_at_once_then_starts_them_together(
        tmp_path: Path) -> None:
    cluster = _CuttableToy(tmp_path, nodes=3)
    cluster.ready_file.touch()
    with cluster as c:
        before = [c.node_pid(i) for i in (1, 2, 3)]
        inj = _run(c, "power-cut@0s:0.1s/all")
        assert inj.error is None
        assert [(e.action, e.node) for e in inj.events] == [
            ("power-cut", 1), ("power-cut", 2), ("power-cut", 3),
            ("start-broker", 1), ("start-broker", 2), ("start-broker", 3),
            ("serving", 1), ("serving", 2), ("serving", 3)]
        cuts = inj.events[:3]
        assert [e.pid for e in cuts] == before
        assert len({e.t_ns for e in cuts}) == 1  # one instant, not one node after another
        assert "300 unsynced byte(s)" in cuts[2].detail
        assert c.started_together == [1, 2, 3]
        after = [c.node_pid(i) for i in (1, 2, 3)]
        assert None not in after and not set(after) & set(before)
        assert inj.node is None and inj.target_note == "all 3 node(s) at once (as asked)"
        assert inj.cut_report is not None and inj.cut_report["bytes_dropped"] == 600
        assert inj.cut_report["per_node"]["2"] == {"bytes_dropped": 200, "files_removed": 1,
                                                   "files_rolled_back": 0}


def test_a_cluster_that_cannot_cut_every_node_is_an_error_and_nothing_is_killed(
        tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=2)
    cluster.ready_file.touch()
    with cluster as c:
        before = [c.node_pid(1), c.node_pid(2)]
        inj = _run(c, "power-cut@0s/all")
        assert inj.error is not None and "[1, 2] have no power-cut filesystem" in inj.error
        assert [c.node_pid(1), c.node_pid(2)] == before


def _whole_cut(outcome: Any, missing: int) -> FaultInjector:
    inj = FaultInjector(parse_fault("power-cut@3s:2s/all", "x"), control=None)  # type: ignore[arg-type]
    inj.target_note = "all 3 node(s) at once (as asked)"
    inj.cut_report = {"removed": ["node-1/a"], "restored": [], "bytes_dropped": 10,
                      "per_node": {"1": {"bytes_dropped": 10, "files_removed": 1,
                                         "files_rolled_back": 0}}}
    t0 = outcome.periods[0].start_ns
    inj.events = [FaultEvent("power-cut", i, t0 + int(3.2e9), 40 + i) for i in (1, 2, 3)]
    inj.events += [FaultEvent("serving", i, t0 + int(6e9), 50 + i) for i in (1, 2, 3)]
    acked = {0: (1 << 600) - 1}
    inj.read_back = compare(acked, {0: acked[0] >> missing}, read=600 - missing)
    return inj


def test_level_1_promises_a_whole_cluster_cut_loses_nothing() -> None:
    outcome = _outcome(lost=0)
    judged = judge_fault(_whole_cut(outcome, 25), outcome, level=1, nodes=3)
    assert judged.block["verdict"] == "loss-forbidden"
    assert judged.finding is not None
    assert "25 acknowledged message(s) gone from the broker" in judged.finding
    assert "(all 3 node(s) at once)" in judged.finding
    assert "after a power cut of the whole cluster" in judged.finding
    assert "sequences 575-599" in judged.finding
    assert judged.block["node"] is None and judged.block["target"].startswith("all 3")
    assert judged.block["power_cut"]["per_node"]["1"]["files_removed"] == 1
    clean = judge_fault(_whole_cut(outcome, 0), outcome, level=1, nodes=3)
    assert clean.finding is None and clean.block["verdict"] == "no-loss"


@pytest.mark.parametrize("level", [2, 3, 4])
def test_levels_without_fsync_on_every_replica_may_lose_to_a_whole_cluster_cut(
        level: int) -> None:
    outcome = _outcome(lost=0)
    judged = judge_fault(_whole_cut(outcome, 25), outcome, level=level, nodes=3)
    assert judged.finding is None and judged.block["verdict"] == "loss-allowed"
    assert judged.block["lost"] == 25
    assert judged.block["lost_ranges"] == [{"producer": 0, "first": 575, "last": 599}]
    assert judged.block["loss_allowed"].startswith(f"yes: level {level}")


def test_level_2_still_promises_survival_of_a_single_node_cut() -> None:
    outcome = _outcome(lost=0)
    inj = _whole_cut(outcome, 25)
    inj.spec = parse_fault("power-cut@3s:2s", "x")
    inj.node = 2
    judged = judge_fault(inj, outcome, level=2, nodes=3)
    assert judged.block["verdict"] == "loss-forbidden"
    assert judged.finding is not None and "after a single node failure" in judged.finding


def test_a_whole_cluster_of_one_node_is_judged_as_that_node_s_cut() -> None:
    outcome = _outcome(lost=0)
    assert judge_fault(_whole_cut(outcome, 25), outcome, level=3,
                       nodes=1).block["verdict"] == "loss-forbidden"
    assert judge_fault(_whole_cut(outcome, 25), outcome, level=4,
                       nodes=1).block["verdict"] == "loss-allowed"
