"""Faults through the real plugin (no broker).

The load runs on the in-process loopback driver; the "nodes" a fault strikes are real
processes of a small cluster the conftest registers for the loopback endpoint, so the
whole path runs: option and marker parsing, test ids, the injector at its time, node
restart, the record's ``fault`` block and ``faults`` events, and the refusals. Faults on
real brokers (loss judged at the durability level) are in
tests/integration/test_kafka_three_nodes.py (and test_faults_rabbitmq.py).
"""

import json
from pathlib import Path

import pytest

CONFTEST = """
import sys
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.node_control import register_control, unregister_control
from pytest_brokerperf.brokers.provision.lifecycle import LocalNode, ProcessCluster


class Sleepers(ProcessCluster):
    kind = "sleepers"

    def _launch(self, workdir, deadline):
        self._nodes = [LocalNode(name=str(i), label=f"sleeper {i}",
                                 log_file=workdir / f"s{i}.log") for i in (1, 2)]
        for node in self._nodes:
            self._spawn(node, [sys.executable, "-c", "import time; time.sleep(600)"],
                        name=f"sleeper-{node.name}")

    def _make_endpoint(self, began):
        return BrokerEndpoint(kind="sleepers", bootstrap="sleepers://", mode="process")


@pytest.fixture(scope="session")
def broker(broker_kind, tmp_path_factory):
    endpoint = BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process",
                              nodes=2)
    cluster = Sleepers(nodes=2, workdir=tmp_path_factory.mktemp("sleepers"), cpus=set(),
                       start_timeout=20, stop_timeout=5)
    cluster.start()
    register_control(endpoint, cluster)  # the loopback's "nodes"
    yield endpoint
    unregister_control(endpoint)
    cluster.stop()
"""

BODY = """
import pytest
from pytest_brokerperf import TailRead, Throughput

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, partitions=2, rate=500))

@pytest.mark.throughput
def test_ladder(brokerperf):
    brokerperf.run(Throughput())
"""

FAST = [
    "--brokerperf-duration=3", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
    "--brokerperf-calibration=off", "-p", "no:cacheprovider", "-p", "no:randomly",
    "--strict-markers",
]
#: A fault run judges the 1 s before its fault, never measured again: a noisy second of
#: this 2-core host may make it inconclusive, which these tests (about the fault's
#: mechanics, not the verdict) let pass with a warning.
HOST_MAY_JUDGE = ["--brokerperf-inconclusive=warn",
                  "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning"]


def _records(root: Path) -> list[dict]:
    lines = next(root.rglob("results.jsonl")).read_text().splitlines()
    return [json.loads(x) for x in lines]


def test_fault_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.fault(*specs): inject these faults*"])


def test_a_fault_runs_in_the_window_and_the_record_tells_what_it_did(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    res = pytester.path / "res"
    result = pytester.runpytest_subprocess(
        *FAST, *HOST_MAY_JUDGE, f"--brokerperf-results={res}", "-m", "tailread", "-s",
        "--brokerperf-fault=kill-broker@1s:0.5s/node-2,pause-broker@1s:0.5s", "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["*fault kill-broker@1s:0.5s/node-2 on node 2 (as asked)*",
                                 "*test_tail?kafka-kill? PASSED*",
                                 "*test_tail?kafka-pause? PASSED*"])
    kill, pause = _records(res)
    assert kill["params"]["fault"] == "kill-broker@1s:0.5s/node-2"
    block = kill["fault"]
    assert block["node"] == 2 and block["verdict"] == "no-loss" and block["error"] is None
    assert [e["action"] for e in block["events"]] == ["kill-broker", "start-broker", "serving"]
    assert kill["faults"] == block["events"]
    assert block["events"][0]["t_s"] >= 1.0 + 0.5  # after the warm-up and 1 s of window
    assert block["node_down_s"] is not None and block["node_down_s"] >= 0.5
    assert kill["verdict"]["details"]["window"].startswith("judged on the measured periods")
    assert kill["delivery"]["lost"] == 0
    assert pause["fault"]["node"] == 1  # the loopback names no leader: node 1, and why
    assert "names no leader" in pause["fault"]["target"]
    assert [e["action"] for e in pause["fault"]["events"]] == ["pause-broker", "resume-broker"]
    # no shipped latency bound is judged in a fault run; the user's SLOs would be
    assert kill["slo"] == []
    # the restarted sleeper was stopped at the session's end like the others
    import psutil

    restarted = block["events"][-1]["pid"]
    assert not psutil.pid_exists(restarted) or psutil.Process(restarted).status() == "zombie"


def test_a_scenario_that_takes_no_faults_refuses_one(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(
        *FAST, f"--brokerperf-results={pytester.path}/res", "-m", "throughput",
        "--brokerperf-fault=kill-broker@1s")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*REFUSED before anything was created: fault kill-broker@1s*"
                                 "scenario 'throughput', which does not inject faults*"])


def test_a_broker_without_node_control_skips_with_the_reason(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="container")
""")
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(
        *FAST, f"--brokerperf-results={pytester.path}/res", "-m", "tailread", "-rs",
        "--brokerperf-fault=pause-broker@1s")
    result.assert_outcomes(skipped=1, deselected=1)
    result.stdout.fnmatch_lines(["*did not start the loopback broker at in-process "
                                 "(container mode), so it has no control over its nodes*"])


@pytest.mark.parametrize(("args", "says"), [
    (["--brokerperf-fault=kill-broker@0.2s"], "before 2 stats periods of 0.5 s"),
    (["--brokerperf-fault=kill-broker@2.8s"], "leaving less than one period"),
])
def test_a_fault_outside_the_window_is_an_error_naming_the_fix(
        pytester: pytest.Pytester, args: list[str], says: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(
        *FAST, f"--brokerperf-results={pytester.path}/res", "-m", "tailread", *args)
    # refused before any broker starts (issue 24): a usage error, not a failed test
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--brokerperf-fault=*{says}*Fix:*"])


def test_a_bad_marker_or_flag_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn="""
import pytest

@pytest.mark.fault("kill-broker@5s:2s/node-0")
@pytest.mark.tailread
def test_tail(brokerperf):
    pass
""")
    result = pytester.runpytest_subprocess(*FAST, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*@pytest.mark.fault*target 'node-0' is not 'leader', 'all' or node-N*"])
    flag = pytester.runpytest_subprocess(*FAST, "--brokerperf-fault=kill@5s")
    assert flag.ret == pytest.ExitCode.USAGE_ERROR
    flag.stderr.fnmatch_lines(["*invalid faults 'kill@5s'*unknown fault action 'kill'*"])


DEATH_BODY = """
import os, signal, threading
from pytest_brokerperf import TailRead
from pytest_brokerperf.brokers.node_control import control_for

def test_tail(brokerperf, broker):
    pid = control_for(broker).node_pid(2)
    threading.Timer(2.0, os.kill, (pid, signal.SIGKILL)).start()  # not a fault: a death
    brokerperf.run(TailRead(message_size=128, partitions=2, rate=500))
"""


def test_a_broker_that_dies_mid_run_still_leaves_a_failed_record(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=DEATH_BODY)
    res = pytester.path / "res"
    result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={res}",
                                           "--brokerperf-duration=6")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*BrokerDied: broker process sleeper-2 (pid *) exited "
                                 "during the run (killed by signal SIGKILL)*"])
    (rec,) = _records(res)
    assert rec["run_status"] == "failed" and "sleeper-2" in rec["failure"]
    assert rec["verdict"]["status"] == "broker-died"
    assert rec["verdict"]["reasons"][0].startswith("broker process sleeper-2")
    assert rec["delivery"]["reconciled"] is False
    assert rec["delivery"]["acknowledged_until_then"] > 0
    phases = rec["timeline"]["phase"]
    assert phases and len(phases) < 2 + 12  # the periods up to the death, not the window
    assert Path(rec["artefacts"], "periods.csv").exists()
    assert rec["slo"] == []  # nothing judged


#: the sleepers, able to cut every node's power at once (a kill plus a canned report)
CUTTABLE_CONFTEST = CONFTEST.replace('''    def _make_endpoint(self, began):''', '''\
    def power_cut_all(self):
        pids = self.kill_nodes([1, 2])
        nodes = {i: {"pid": pid, "removed": ["/t-0/0.log"], "restored": [],
                     "bytes_dropped": 10} for i, pid in zip((1, 2), pids)}
        return {"pids": pids, "nodes": nodes, "bytes_dropped": 20,
                "removed": ["node-1/t-0/0.log", "node-2/t-0/0.log"], "restored": []}

    def start_all(self, timeout):
        return self.start_nodes([1, 2], timeout)

    def _make_endpoint(self, began):''')


def test_a_whole_cluster_power_cut_strikes_every_node_and_gets_its_own_id(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CUTTABLE_CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    res = pytester.path / "res"
    result = pytester.runpytest_subprocess(
        *FAST, *HOST_MAY_JUDGE, f"--brokerperf-results={res}", "-m", "tailread", "-s", "-v",
        "--brokerperf-fault=power-cut@1s:0.3s/all")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*fault power-cut@1s:0.3s/all on all 2 node(s) at once*",
                                 "*test_tail?kafka-powercut-all? PASSED*"])
    (record,) = _records(res)
    block = record["fault"]
    assert block["node"] is None and block["error"] is None and block["verdict"] == "no-loss"
    assert [(e["action"], e["target"]) for e in block["events"]] == [
        ("power-cut", "node 1"), ("power-cut", "node 2"), ("start-broker", "node 1"),
        ("start-broker", "node 2"), ("serving", "node 1"), ("serving", "node 2")]
    assert block["power_cut"]["bytes_dropped"] == 20
    assert block["power_cut"]["per_node"]["2"]["files_removed"] == 1
    assert any("loses its power at the same instant" in n for n in record["notes"])


def test_a_fault_runs_own_questions_do_not_wait_for_a_valid_latency_window(
        pytester: pytest.Pytester) -> None:
    """Issue 24 item 9: a rate the generator cannot sustain makes the latency figures
    invalid, but loss, duplicates and unavailability need no steady rate: the test is
    judged on them (no --brokerperf-inconclusive=warn here) and the record says which
    question was judged on what."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn="""
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, partitions=2, rate=3_000_000))
""")
    res = pytester.path / "res"
    result = pytester.runpytest_subprocess(
        *FAST, f"--brokerperf-results={res}", "--brokerperf-fault=pause-broker@1s:0.5s",
        "-v")
    result.assert_outcomes(passed=1)
    [rec] = _records(res)
    assert rec["verdict"]["status"] != "valid"  # the latency figures keep their verdict
    assert rec["verdict"]["details"]["applies_to"].startswith("the latency figures only")
    answers = rec["fault"]["questions"]
    assert answers["loss"] == "no-loss" and answers["unavailability"] == "measured"
    assert answers["latency"].startswith(rec["verdict"]["status"])
    assert answers["duplicates"].startswith("0 ")
