"""Runs of several phases stopped part-way still leave their record (loopback broker).

Ctrl-C (SIGINT) or SIGTERM during a catch-up's drain, a throughput ladder's second rung
or OMB's rate discovery, and a broker process that dies during a catch-up's backlog
build: the record is
written, well formed, ``interrupted`` or ``failed``, its reason names the phase, the
periods measured until then (completed phases and the stopped one) are in it, and the
ladder keeps its completed rungs. The signal is a real one, sent by the child pytest
process to itself at a chosen period (the test file wraps ``LoadSession.tick``), so
the phase it lands in does not depend on the machine's speed; the phase that is cut
short is made to last (its end condition never holds) so that it has periods to keep.
Mixed and reassign runs take the same path (scenario_library/stopped.py) but need a
broker with a retained log or partitions to move, which the loopback is not.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

#: the child's SIGINT reaches Python even when this process was started with it ignored
CONFTEST = LOOPBACK_CONFTEST + """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
"""

#: ``stop_at(phase, index, action, rung=None)``: run ``action`` once the period
#: ``index`` of ``phase`` is complete (in the ``rung``-th fixed-rate window, or any);
#: a phase in ``ENDLESS``: its end condition never holds (it lasts until stopped or
#: its timeout)
HOOKS = """
import os
import signal
from pytest_brokerperf.engine.coordinator import LoadSession

_tick, _run_until, _run_rung = LoadSession.tick, LoadSession.run_until, LoadSession.run_rung
ENDLESS = set()
STOP = {}
RUNGS = [0]

def tick(self, index, phase, *args, **kwargs):
    ps = _tick(self, index, phase, *args, **kwargs)
    want = STOP.get("at")
    if want is not None and want[:2] == (phase, index) and want[2] in (None, RUNGS[0]):
        STOP.pop("at")
        STOP["action"]()
    return ps

def run_until(self, phase, done, timeout_s, **kwargs):
    if phase in ENDLESS:
        done = lambda totals: False
    return _run_until(self, phase, done, timeout_s, **kwargs)

def run_rung(self, rung, *args, **kwargs):
    RUNGS[0] += 1
    return _run_rung(self, rung, *args, **kwargs)

LoadSession.tick, LoadSession.run_until, LoadSession.run_rung = tick, run_until, run_rung

def stop_at(phase, index, action, rung=None):
    STOP.update(at=(phase, index, rung), action=action)

def signal_self(sig):
    return lambda: os.kill(os.getpid(), sig)
"""

CATCHUP = HOOKS + """
import pytest
from pytest_brokerperf import CatchUp

@pytest.mark.catchup
def test_cu(brokerperf):
    ENDLESS.add("drain")
    stop_at("drain", 1, signal_self(signal.SIGNAME))
    brokerperf.run(CatchUp(message_size=256, partitions=2, rate=1000,
                           backlog_bytes=1500 * 256, drain_timeout_s=60))
"""

LADDER = HOOKS + """
import dataclasses
import pytest
from pytest_brokerperf import Throughput
from pytest_brokerperf.judge.ladder import LadderPolicy
from pytest_brokerperf.scenario_library import throughput_run

_judge = throughput_run.judge

def sustainable(*args, **kwargs):
    # the ladder's climb is under test, not this busy machine: every rung holds
    rr = _judge(*args, **kwargs)
    return dataclasses.replace(rr, status="sustainable", limit="none",
                               verdict={**rr.verdict, "status": "valid"})

throughput_run.judge = sustainable

@pytest.mark.throughput
def test_ladder(brokerperf):
    stop_at("measure", 1, signal_self(signal.SIGINT), rung=2)
    brokerperf.run(Throughput(message_size=256, partitions=2))
"""


def _records(root: Path) -> list[dict]:
    return [json.loads(x) for x in (root / "res" / "results.jsonl").read_text().splitlines()]


def _run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=body)
    return pytester.runpytest_subprocess(*FAST_ARGS, f"--brokerperf-results={pytester.path}/res",
                                         *args)


def _well_formed(rec: dict, directory_phases: list[str]) -> None:
    """What every stopped record holds: nothing judged, delivery never reconciled, the
    artefact directory's periods.csv and record.json the record's own."""
    assert rec["slo"] == []
    assert rec["delivery"]["reconciled"] is False
    assert rec["delivery"]["acknowledged_until_then"] > 0
    assert rec["timeline"]["phase"] == directory_phases
    assert json.loads(Path(rec["artefacts"], "record.json").read_text()) == rec


def _csv_phases(rec: dict) -> list[str]:
    import csv

    with open(Path(rec["artefacts"], "periods.csv"), newline="", encoding="utf-8") as fh:
        return [row["phase"] for row in csv.DictReader(fh)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_catchup_interrupted_in_its_drain_keeps_every_phase_until_then(
        pytester: pytest.Pytester, sig: signal.Signals) -> None:
    result = _run(pytester, CATCHUP.replace("SIGNAME", sig.name), "-m", "catchup")
    if sig == signal.SIGINT:
        assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
        result.stdout.fnmatch_lines(["*RunInterrupted: run interrupted by SIGINT*"])
    else:  # the session ended as for Ctrl-C, then the process died of its SIGTERM
        assert result.ret == -signal.SIGTERM, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["scenario"] == "catchup"
    assert rec["run_status"] == "interrupted"
    assert rec["verdict"]["status"] == "interrupted"
    [reason] = rec["verdict"]["reasons"]
    assert reason.startswith(f"interrupted by {sig.name} during the drain after ")
    assert rec["failure"] == reason
    phases = rec["timeline"]["phase"]
    # the tail-read window, the whole build, and the drain's first period (its second
    # was cut short by the signal)
    assert "measure" in phases and "build" in phases
    assert phases.count("drain") == 1 and phases[-1] == "drain"
    measured = sum(p != "warmup" for p in phases)
    assert f"after {measured} measured period(s)" in reason
    assert "catchup" not in rec  # no drain figures for a drain that never ended
    assert rec["ack_rate_msg_s"] > 0  # the headline: the tail-read window before it
    _well_formed(rec, _csv_phases(rec))


def test_a_ladder_interrupted_in_a_rung_keeps_the_rungs_completed_before(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, LADDER, "-m", "throughput", "--brokerperf-ladder=200,400,800",
                  "--brokerperf-duration=1.5")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["run_status"] == "interrupted"
    [reason] = rec["verdict"]["reasons"]
    assert reason.startswith("interrupted by SIGINT during rung 2/3 at 400 msg/s after ")
    ladder = rec["ladder"]
    assert [r["target_rate_msg_s"] for r in ladder["rungs"]] == [200.0]  # the one completed
    assert ladder["rungs"][0]["sustainable"] is True
    assert ladder["highest_sustainable_rate_msg_s"] == 200.0
    assert ladder["outcome"] == "stopped" and ladder["stopped_during"] == "rung 2/3 at 400 msg/s"
    assert rec["throughput"]["outcome"] == "stopped"
    assert "after 1 completed rung(s)" in rec["throughput"]["summary"]
    assert rec["target_rate_msg_s"] == 200.0  # the headline: the highest rung that held
    # rung 1 whole, then rung 2's warm-up and its first measured period
    phases = rec["timeline"]["phase"]
    assert phases[-1] == "measure" and phases[-2] != "measure"
    assert sorted(p.name for p in Path(rec["artefacts"], "rungs").iterdir()) == ["01-200"]
    assert Path(rec["artefacts"], "ladder.csv").is_file()
    _well_formed(rec, _csv_phases(rec))


DISCOVERY = HOOKS + """
import pytest
from pytest_brokerperf import Throughput

@pytest.mark.throughput
def test_discovery(brokerperf):
    stop_at("measure", 1, signal_self(signal.SIGTERM))
    brokerperf.run(Throughput(message_size=256, partitions=2))
"""


def test_rate_discovery_stopped_by_sigterm_keeps_its_controller_steps(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, DISCOVERY, "-m", "throughput", "--brokerperf-rate-discovery",
                  "--brokerperf-duration=30", "--brokerperf-warmup=0")
    assert result.ret == -signal.SIGTERM, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["run_status"] == "interrupted"
    [reason] = rec["verdict"]["reasons"]
    assert reason.startswith("interrupted by SIGTERM during the rate-discovery window after ")
    assert rec["throughput"]["outcome"] == "stopped"
    assert rec["rate_discovery"]["label"] == "omb-rate-discovery"
    assert rec["timeline"]["phase"] == ["measure"]  # the period completed before the signal
    assert Path(rec["artefacts"], "rate-discovery.csv").is_file()
    _well_formed(rec, _csv_phases(rec))


DEATH_CONFTEST = """
import sys
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.node_control import register_control, unregister_control
from pytest_brokerperf.brokers.provision.lifecycle import LocalNode, ProcessCluster


class Sleepers(ProcessCluster):
    kind = "sleepers"

    def _launch(self, workdir, deadline):
        self._nodes = [LocalNode(name="1", label="sleeper 1", log_file=workdir / "s1.log")]
        self._spawn(self._nodes[0], [sys.executable, "-c", "import time; time.sleep(600)"],
                    name="sleeper-1")

    def _make_endpoint(self, began):
        return BrokerEndpoint(kind="sleepers", bootstrap="sleepers://", mode="process")


@pytest.fixture(scope="session")
def broker(broker_kind, tmp_path_factory):
    endpoint = BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
    cluster = Sleepers(nodes=1, workdir=tmp_path_factory.mktemp("sleepers"), cpus=set(),
                       start_timeout=20, stop_timeout=5)
    cluster.start()
    register_control(endpoint, cluster)  # the loopback's "broker process", watched
    yield endpoint
    unregister_control(endpoint)
    cluster.stop()
"""

DEATH = HOOKS + """
import pytest
from pytest_brokerperf import CatchUp
from pytest_brokerperf.brokers.node_control import control_for

@pytest.mark.catchup
def test_cu(brokerperf, broker):
    pid = control_for(broker).node_pid(1)
    ENDLESS.add("build")
    stop_at("build", 0, lambda: os.kill(pid, signal.SIGKILL))  # not a fault: a death
    brokerperf.run(CatchUp(message_size=256, partitions=2, rate=1000,
                           backlog_bytes=1500 * 256, build_timeout_s=60))
"""


def test_a_broker_dying_in_a_catchup_build_leaves_a_failed_record_naming_the_phase(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(DEATH_CONFTEST)
    pytester.makepyfile(test_scn=DEATH)
    result = pytester.runpytest_subprocess(
        *FAST_ARGS, f"--brokerperf-results={pytester.path}/res", "-m", "catchup")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*BrokerDied: broker process sleeper-1 (pid *) exited "
                                 "during the run (killed by signal SIGKILL)*"])
    [rec] = _records(pytester.path)
    assert rec["run_status"] == "failed" and "sleeper-1" in rec["failure"]
    assert rec["verdict"]["status"] == "broker-died"
    [reason] = rec["verdict"]["reasons"]
    assert reason.startswith("broker process sleeper-1")
    assert "; the run stopped during the backlog build after " in reason
    phases = rec["timeline"]["phase"]
    assert "measure" in phases and phases[-1] == "build"  # the window, the build's start
    _well_formed(rec, _csv_phases(rec))


CALIBRATION = HOOKS + """
import pytest
from pytest_brokerperf import Throughput
from pytest_brokerperf.scenario_library import throughput_run

_calibrate = throughput_run._calibrate

def calibrate(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the ceilings are measured
    return _calibrate(*args, **kwargs)

throughput_run._calibrate = calibrate

@pytest.mark.throughput
def test_ladder(brokerperf):
    brokerperf.run(Throughput(message_size=256, partitions=2))
"""


def test_a_ladder_interrupted_in_its_calibration_leaves_a_record_with_nothing_measured(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, CALIBRATION, "-m", "throughput", "--brokerperf-ladder=200,400")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["run_status"] == "interrupted"
    assert rec["verdict"]["reasons"] == [
        "interrupted by SIGINT during the calibration (before the first rung) after 0 "
        "measured period(s) (0 warm-up)"]
    assert rec["timeline"]["periods"] == 0 and rec["ack_rate_msg_s"] == 0
    assert rec["slo"] == [] and rec["delivery"]["reconciled"] is False
    assert json.loads(Path(rec["artefacts"], "record.json").read_text()) == rec


#: a small tail-read, the test every body below ends with
TAILREAD = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tr(brokerperf):
    brokerperf.run(TailRead(message_size=256, partitions=2, rate=500))
"""

SET_UP = HOOKS + """
_open = LoadSession.open

def open_then_sigterm(self):
    _open(self)  # topics and clients exist, the readiness probe answered
    os.kill(os.getpid(), signal.SIGTERM)

LoadSession.open = open_then_sigterm
""" + TAILREAD


def test_a_run_stopped_in_its_set_up_leaves_a_record_with_nothing_measured(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, SET_UP, "-m", "tailread")
    assert result.ret == -signal.SIGTERM, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["scenario"] == "tailread"
    assert rec["run_status"] == "interrupted"
    assert rec["verdict"]["reasons"] == [
        "interrupted by SIGTERM after 0 measured period(s) (0 warm-up)"]
    assert rec["timeline"]["periods"] == 0
    assert rec["delivery"]["reconciled"] is False


#: Ctrl-C in a terminal: SIGINT to the whole process group, workers included
GROUP_CTRL_C = HOOKS + """
stop_at("measure", 0, lambda: os.killpg(os.getpgrp(), signal.SIGINT))
""" + TAILREAD


def test_ctrl_c_to_the_process_group_prints_no_worker_traceback(
        pytester: pytest.Pytester) -> None:
    # the child pytest leads a process group of its own (its workers join it), so the
    # group's SIGINT reaches neither this pytest nor anything else
    pytester.makeconftest(CONFTEST + "\nimport os\nos.setpgrp()\n")
    pytester.makepyfile(test_scn=GROUP_CTRL_C)
    result = pytester.runpytest_subprocess(  # -s: a worker's stderr is the terminal's
        *FAST_ARGS, f"--brokerperf-results={pytester.path}/res", "-m", "tailread",
        "--brokerperf-duration=3", "-s")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    [rec] = _records(pytester.path)
    assert rec["run_status"] == "interrupted"
    assert "Traceback" not in result.stderr.str(), result.stderr.str()
    assert "Process brokerperf-worker" not in result.stdout.str() + result.stderr.str()
