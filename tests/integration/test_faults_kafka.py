"""A broker node killed in the middle of a tail read on a three-node local Kafka cluster.

What can fail: the fault must strike the leader of the run's topic at its time, the node
must come back on its own data (a new process, serving), every acknowledged message
must arrive (durability level 1: RF 3, ``min.insync.replicas=2``, ``acks=all``, fsync per
message promises no loss after a single node failure), the record must say what the
fault did, and nothing the session started may survive it.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from pytest_brokerperf.testing import PLAIN_SCENARIOS

REPO = Path(__file__).resolve().parents[2]


def test_kill_the_leader_of_a_three_node_cluster_at_level_1_loses_nothing(
        pytester: pytest.Pytester) -> None:
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=kafka",
        "--brokerperf-nodes=3", "--brokerperf-durability=1",
        "--brokerperf-fault=kill-broker@4s:3s", f"--brokerperf-results={results}",
        "--brokerperf-duration=14", "--brokerperf-warmup=30", "-p", "no:cacheprovider",
        # three JVMs on one of two shared cores: the window before the fault may be the
        # machine's (an honest INCONCLUSIVE); delivery is what is under test
        "--brokerperf-inconclusive=warn",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "-p", "no:randomly", "--rootdir", str(pytester.path), "-v", timeout=900,
    )
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    assert run.parseoutcomes().get("passed") == 1, (run.stdout.str()[-3000:], rec["verdict"],
                                                    rec["delivery"], rec["fault"])
    run.stdout.fnmatch_lines(["*test_tailread?kafka-d1-kill? PASSED*"])
    fault = rec["fault"]
    assert rec["params"]["fault"] == "kill-broker@4s:3s/leader"
    assert fault["error"] is None, fault
    assert fault["node"] in (1, 2, 3) and "leader of" in fault["target"], fault
    actions = [e["action"] for e in fault["events"]]
    assert actions == ["kill-broker", "start-broker", "serving"], fault
    killed, restarted = fault["events"][0]["pid"], fault["events"][-1]["pid"]
    assert killed != restarted
    assert fault["node_down_s"] >= 3.0
    measure_start = next(t for t, ph in zip(rec["timeline"]["t_s"], rec["timeline"]["phase"],
                                            strict=True) if ph == "measure")
    assert fault["struck_at_s"] >= 4.0 and fault["struck_at_s"] < measure_start + 14
    # level 1 promises no loss after a single node failure: the harness's ledgers agree
    assert rec["durability"]["level"] == 1
    assert rec["delivery"]["lost"] == 0 and rec["delivery"]["unconfirmed"] == 0
    assert rec["delivery"]["acknowledged"] > 1000
    assert fault["lost"] == 0 and fault["verdict"] == "no-loss"
    assert fault["unavailable_s"] is not None
    # acks=all waits for the dead follower until Kafka fences it (its controller session,
    # broker.session.timeout.ms = 9 s): a stall the window may or may not outlast
    if fault["recovered"]:
        assert fault["longest_publish_wait_s"] is not None
    else:
        assert fault["longest_publish_wait_s"] is None and "lower bound" in fault[
            "recovery_note"]
    assert rec["faults"] == fault["events"]
    # nothing of the session survives it, the restarted node included
    for pid in (killed, restarted):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
