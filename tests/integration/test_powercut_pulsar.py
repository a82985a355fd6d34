"""A power cut of a real Pulsar standalone (one bookie) whose data directory, the
RocksDB metadata store and the bookie's journal, entry log and ledger index, forgets
unsynced writes: the fault injector's own path (SIGKILL, roll back, start again on what
is left), the plugin's read-back with a pulsar-client Reader, and the judge.

The finding: at level 3 (``journalSyncData=true``: the bookie fsyncs its journal before
it acknowledges) no acknowledged message is lost, and the standalone starts again on
the files rolled back to their last fsync (the journal replays into the entry log the
cut removed). Level 4 (``journalSyncData=false``, the journal flushed every second) is
judged allowed to lose; whether it does depends on where the last flush fell, so that is
reported, not asserted. A standalone is one JVM, so its one node is every bookie
(docs/reference/faults.md). One standalone per level: the journal setting is bookie-wide.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pulsar
import pytest

from pytest_brokerperf.brokers.pulsar.readback import read_back_pulsar
from pytest_brokerperf.config.fault_spec import parse_fault
from pytest_brokerperf.core.header import HEADER_SIZE, unpack
from pytest_brokerperf.faults.injector import FaultInjector
from pytest_brokerperf.faults.judge import judge_fault
from pytest_brokerperf.faults.readback import compare
from tests.support.powercut import powercut_pulsar, send_harness_pulsar
from tests.unit.test_faults import _outcome, _Session

pytestmark = pytest.mark.integration

N = 300
PRODUCER = 3
TOPIC = "pc"


def _consumed(service_url: str, topic: str) -> int:
    """The sequence bitmap a subscription from the earliest message finds (read until
    3 s pass with nothing new): a second reading beside the plugin's Reader."""
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    found = 0
    try:
        consumer = client.subscribe(
            topic, "check", initial_position=pulsar.InitialPosition.Earliest)
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            try:
                msg = consumer.receive(3000)
            except pulsar.Timeout:
                break
            data = msg.data()
            if len(data) >= HEADER_SIZE:
                _m, _v, _k, pid, seq, _i, _s = unpack(data)
                if pid == PRODUCER:
                    found |= 1 << seq
            consumer.acknowledge(msg)
        consumer.close()
    finally:
        client.close()
    return found


def _cut(tmp_path: Path, level: int) -> dict[str, Any]:
    """Send N, cut the standalone's power through the fault injector, read back, judge."""
    with powercut_pulsar(tmp_path / f"pulsar-d{level}", durability=level) as standalone:
        url = standalone.endpoint.bootstrap
        acked = send_harness_pulsar(url, f"persistent://public/default/{TOPIC}", N, PRODUCER)
        assert acked.bit_count() == N, f"only {acked.bit_count()} of {N} acknowledged"

        inj = FaultInjector(parse_fault("power-cut@0s:1s/node-1", "test"), standalone)
        session: Any = _Session()
        session.measure_started_ns = time.monotonic_ns()
        inj(session)  # the injector's thread: cut, 1 s down, start again, serving
        inj.settle(timeout=240)
        assert inj.error is None, inj.error
        assert [e.action for e in inj.events] == ["power-cut", "start-broker", "serving"]
        # the killed standalone's bookie registration was removed before the restart
        # (left in place, its lazy removal could livelock the new bookie's lock: the
        # broker then saw no writable bookie for minutes)
        serving = inj.events[-1].detail
        assert "ephemeral node(s)" in serving and "/ledgers/available/" in serving, serving

        present, read, complete = read_back_pulsar(standalone.endpoint, [TOPIC])
        inj.read_back = compare({PRODUCER: acked}, present, read, complete)
        consumed = _consumed(url, f"persistent://public/default/{TOPIC}")
        judged = judge_fault(inj, _outcome(lost=0), level, standalone.node_count())
    return {"acked": acked, "present": present.get(PRODUCER, 0), "consumed": consumed,
            "read_back": inj.read_back, "block": judged.block, "finding": judged.finding,
            "covers": inj.cut_covers, "target": inj.target_note}


def _check_the_record_is_what_was_found(got: dict[str, Any]) -> None:
    rb, block = got["read_back"], got["block"]
    assert rb.complete and rb.error is None and rb.acknowledged == N
    # the plugin's Reader and a subscription from the earliest message agree
    assert got["present"] == got["consumed"]
    gone = got["acked"] & ~got["present"]
    assert rb.missing == gone.bit_count() == block["lost"]
    assert block["lost_ranges"] == rb.missing_ranges
    assert block["power_cut"]["read_back"]["missing"] == rb.missing
    assert block["nodes"] == 1 and got["covers"] == 1
    assert "one JVM" in got["target"] and "every bookie" in got["target"]


def test_level_3_loses_nothing_acknowledged_to_the_standalone_s_power_cut(
        tmp_path: Path) -> None:
    got = _cut(tmp_path, 3)
    _check_the_record_is_what_was_found(got)
    block = got["block"]
    print(f"level 3: {N} acknowledged, {got['read_back'].read} read back, "
          f"{block['lost']} lost; cut: {block['power_cut']}")
    assert got["read_back"].missing == 0, (
        f"the bookie fsyncs its journal before acknowledging, yet "
        f"{got['read_back'].missing} acknowledged message(s) are gone: "
        f"{got['read_back'].missing_ranges}")
    assert block["verdict"] == "no-loss" and got["finding"] is None
    assert block["loss_allowed"].startswith("no: level 3")


def test_level_4_may_lose_and_reports_exactly_what_the_read_back_found(
        tmp_path: Path) -> None:
    got = _cut(tmp_path, 4)
    _check_the_record_is_what_was_found(got)
    block = got["block"]
    print(f"level 4: {N} acknowledged, {got['read_back'].read} read back, "
          f"{block['lost']} lost {block['lost_ranges']}; cut: {block['power_cut']}")
    assert got["finding"] is None
    assert block["verdict"] == ("loss-allowed" if block["lost"] else "no-loss")
    assert block["loss_allowed"].startswith("yes: level 4")
