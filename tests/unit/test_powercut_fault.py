"""The power-cut fault without FUSE: its grammar, the injector's steps on a cluster that
can cut a node's power, the refusal on one that cannot, the record's ``power_cut`` block
and the lost sequence numbers the delivery reconciliation names."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_brokerperf.config.fault_spec import FaultSpec, fault_ids, parse_fault
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.engine.delivery import reconcile, seq_ranges
from pytest_brokerperf.faults.injector import FaultEvent, FaultInjector
from pytest_brokerperf.faults.judge import judge_fault
from pytest_brokerperf.faults.readback import compare
from tests.unit.test_faults import _outcome, _Session
from tests.unit.test_lifecycle import ToyCluster


def test_power_cut_parses_like_kill_with_its_own_id() -> None:
    spec = parse_fault("power-cut@5s:2s/node-1", "--brokerperf-fault")
    assert spec == FaultSpec("power-cut", 5.0, 2.0, "node-1")
    assert spec.short == "powercut" and spec.text() == "power-cut@5s:2s/node-1"
    assert parse_fault("power-cut@5s", "x").duration_s == 10.0
    assert fault_ids((spec, parse_fault("kill-broker@5s", "x"))) == ["powercut", "kill"]


def test_a_power_cut_fault_turns_the_filesystem_on_by_itself() -> None:
    assert not Settings.resolve({}, {}, {}).powercut_effective
    assert Settings.resolve({"brokerperf_powercut_fs": True}, {}, {}).powercut_effective
    assert Settings.resolve({"brokerperf_fault": "power-cut@5s"}, {}, {}).powercut_effective
    assert not Settings.resolve({"brokerperf_fault": "kill-broker@5s"}, {},
                                {}).powercut_effective


class _CuttableCluster(ToyCluster):
    """A toy cluster whose power cut is a kill plus a canned report."""

    def power_cut_node(self, index: int) -> dict[str, Any]:
        pid = self.kill_node(index)
        return {"pid": pid, "removed": ["/t-0/0.log"], "restored": ["/t-0/0.index"],
                "bytes_dropped": 1234}


def _run(cluster: ToyCluster, text: str) -> FaultInjector:
    inj = FaultInjector(parse_fault(text, "x"), cluster)
    session: Any = _Session()
    session.measure_started_ns = time.monotonic_ns()
    inj(session)
    inj.settle(timeout=20)
    return inj


def test_the_injector_cuts_the_power_then_starts_the_node_again(tmp_path: Path) -> None:
    cluster = _CuttableCluster(tmp_path, nodes=1)
    cluster.ready_file.touch()
    with cluster as c:
        before = c.node_pid(1)
        inj = _run(c, "power-cut@0s:0.1s")
        assert inj.error is None
        assert [e.action for e in inj.events] == ["power-cut", "start-broker", "serving"]
        assert inj.events[0].pid == before and "1234 unsynced byte(s)" in inj.events[0].detail
        assert inj.cut_report == {"removed": ["/t-0/0.log"], "restored": ["/t-0/0.index"],
                                  "bytes_dropped": 1234}
        assert c.node_pid(1) not in (None, before)


def test_a_cluster_that_cannot_cut_power_is_an_error_and_nothing_is_killed(
        tmp_path: Path) -> None:
    cluster = ToyCluster(tmp_path, nodes=1)
    cluster.ready_file.touch()
    with cluster as c:
        before = c.node_pid(1)
        inj = _run(c, "power-cut@0s")
        assert inj.error is not None and "have no power-cut filesystem" in inj.error
        assert c.node_pid(1) == before


def test_the_record_says_what_the_cut_dropped_and_which_messages_were_lost() -> None:
    outcome = _outcome(lost=3)
    outcome.delivery.subscriptions[0].lost_ranges = [{"producer": 0, "first": 7, "last": 9}]
    inj = FaultInjector(parse_fault("power-cut@3s:2s", "x"), control=None)  # type: ignore[arg-type]
    inj.node = 1
    inj.cut_report = {"removed": ["/a"], "restored": ["/b", "/c"], "bytes_dropped": 99}
    t0 = outcome.periods[0].start_ns
    inj.events = [FaultEvent("power-cut", 1, t0 + int(3.2e9), 42),
                  FaultEvent("serving", 1, t0 + int(6e9), 43)]
    block = judge_fault(inj, outcome, level=4, nodes=1).block
    assert block["power_cut"]["bytes_dropped"] == 99
    assert block["power_cut"]["files_removed"] == 1
    assert block["power_cut"]["files_rolled_back"] == 2
    assert block["lost_ranges"] == [{"producer": 0, "first": 7, "last": 9}]
    assert block["verdict"] == "loss-allowed"


def test_seq_ranges_are_the_runs_of_set_bits() -> None:
    assert seq_ranges(0) == []
    assert seq_ranges(0b1110011010) == [(1, 1), (3, 4), (7, 9)]
    assert seq_ranges((1 << 400) - 1) == [(0, 399)]
    assert seq_ranges(0b10101, limit=2) == [(0, 0), (2, 2)]


def test_reconcile_names_the_lost_sequence_numbers() -> None:
    acked = {0: ((1 << 10) - 1).to_bytes(2, "little")}
    got = (0b1100011111).to_bytes(2, "little")  # 5, 6, 7 never arrived
    report = reconcile([acked], [{"bitmaps": {("s", 0): got}, "duplicates": {},
                                  "reordered": {}}], {0: ["s"]})
    sub = report.subscriptions[0]
    assert sub.lost == 3
    assert sub.lost_ranges == [{"producer": 0, "first": 5, "last": 7}]
    unsettled = reconcile([acked], [{"bitmaps": {("s", 0): got}, "duplicates": {},
                                     "reordered": {}}], {0: ["s"]}, settled=False)
    assert unsettled.subscriptions[0].lost_ranges == []  # unconfirmed, not lost


def test_the_read_back_names_what_was_acknowledged_and_is_gone() -> None:
    acked = {0: 0b1111111111, 1: 0b11}
    present = {0: 0b1110000011, 1: 0b11}  # producer 0 lost 2..6
    rb = compare(acked, present, read=7)
    assert (rb.acknowledged, rb.missing, rb.read) == (12, 5, 7)
    assert rb.missing_ranges == [{"producer": 0, "first": 2, "last": 6}]
    assert compare(acked, acked, read=12).missing == 0


def _cut_injector(outcome: Any, missing: int) -> FaultInjector:
    inj = FaultInjector(parse_fault("power-cut@3s:2s", "x"), control=None)  # type: ignore[arg-type]
    inj.node = 1
    inj.cut_report = {"removed": [], "restored": [], "bytes_dropped": 10}
    t0 = outcome.periods[0].start_ns
    inj.events = [FaultEvent("power-cut", 1, t0 + int(3.2e9), 42),
                  FaultEvent("serving", 1, t0 + int(6e9), 43)]
    acked = {0: (1 << 600) - 1}
    inj.read_back = compare(acked, {0: acked[0] >> missing}, read=600 - missing)
    return inj


def test_a_power_cut_loss_is_what_the_read_back_misses_not_what_consumers_missed() -> None:
    outcome = _outcome(lost=0)  # the consumers had everything before the cut
    judged = judge_fault(_cut_injector(outcome, 40), outcome, level=4, nodes=1)
    assert judged.block["lost"] == 40 and judged.block["verdict"] == "loss-allowed"
    assert judged.block["lost_ranges"] == [{"producer": 0, "first": 560, "last": 599}]
    assert judged.block["power_cut"]["read_back"]["missing"] == 40
    assert judged.finding is None


def test_level_3_on_one_node_promises_a_power_cut_loses_nothing() -> None:
    outcome = _outcome(lost=0)
    judged = judge_fault(_cut_injector(outcome, 40), outcome, level=3, nodes=1)
    assert judged.finding is not None and "gone from the broker" in judged.finding
    assert "sequences 560-599" in judged.finding
    assert judged.block["verdict"] == "loss-forbidden"
    clean = judge_fault(_cut_injector(outcome, 0), outcome, level=3, nodes=1)
    assert clean.finding is None and clean.block["verdict"] == "no-loss"
    # on three nodes level 3 replicates asynchronously: a cut leader may take messages
    assert judge_fault(_cut_injector(outcome, 40), outcome, level=3, nodes=3).finding is None


def test_the_watchdog_finds_fuse_mounts_below_a_path_deepest_first() -> None:
    from pytest_brokerperf.brokers.provision.watchdog import fuse_mounts_under

    mounts = ("/dev/sda1 / ext4 rw 0 0\n"
              "powercut /tmp/w/data/node-1 fuse rw 0 0\n"
              "sshfs /tmp/w/data/node-1/sub fuse.sshfs rw 0 0\n"
              "powercut /tmp/wx fuse rw 0 0\n"
              "tmpfs /tmp/w/tmp tmpfs rw 0 0\n")
    assert fuse_mounts_under("/tmp/w", mounts) == ["/tmp/w/data/node-1/sub",
                                                   "/tmp/w/data/node-1"]
    assert fuse_mounts_under("/elsewhere", mounts) == []
