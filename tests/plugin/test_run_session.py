"""The shared run session (scenario_library/session.py) under a scenario of its own.

Every shipped scenario runs through :class:`RunSession`; these tests write a new one the
way a user or contributor would (``TOY``: a fixed-rate window and a phase after it, in
a dozen lines) and run it on the in-process loopback broker, so that what the session
promises every scenario holds without a line of the scenario's own: the record and its
phases, a window the host spoiled measured again once per re-measure, and the record a
stop in a phase still writes.

Host steal is faked as in test_host_noise.py (the ``/proc/stat`` reader's steal column);
the stop is a real SIGINT sent at a chosen period, as in test_stopped_runs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST
from tests.support.fake_steal import FAKE_STEAL_CONFTEST

CONFTEST = LOOPBACK_CONFTEST + """
import signal

# the child's SIGINT reaches Python even when this process was started with it ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
""" + FAKE_STEAL_CONFTEST

#: a new scenario on the session: TailRead's prepare(), a phase script, its figures;
#: ``RUNGS`` counts the fixed-rate windows the engine ran, ``STOP_IN`` the phase whose
#: first period a SIGINT ends
TOY = """
import os
import signal
from dataclasses import dataclass

import pytest

from pytest_brokerperf import TailRead
from pytest_brokerperf.engine.coordinator import LoadSession
from pytest_brokerperf.scenario_library.session import RunSession

RUNGS = []
_run_rung, _tick = LoadSession.run_rung, LoadSession.tick

def run_rung(self, rung, *args, **kwargs):
    RUNGS.append(rung.rate)
    return _run_rung(self, rung, *args, **kwargs)

def tick(self, index, phase, *args, **kwargs):
    ps = _tick(self, index, phase, *args, **kwargs)
    if phase == os.environ.get("STOP_IN") and index == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return ps

LoadSession.run_rung, LoadSession.tick = run_rung, tick


@dataclass
class Toy(TailRead):
    name: str = "toy"

    def execute(self, ctx, extra_slos):
        run = RunSession(ctx, self, extra_slos)
        run.guard(producing_s=run.prepared.measure_s + 1.0)
        run.summary_params = "toy params"
        with run.load() as s:
            before = run.window(s, "the toy window", remeasure="toy: the window")
            after = run.phase(s, "after", lambda totals: False, 1.0,
                              enter="the toy's after phase")
            end = run.end(s)
        end.apply(before, end_time=False)
        return run.finish(before, run.assess(before),
                          session=run.joined(before, end, after),
                          extra_figures={"toy.after_periods": float(len(after.periods))},
                          record_extra={"toy": {"after_periods": len(after.periods)}})


def test_toy(brokerperf):
    try:
        brokerperf.run(Toy(message_size=128, rate=400), check=False)
    finally:
        with open("rungs.json", "w") as fh:
            fh.write(repr(len(RUNGS)))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_toy=TOY)
    return pytester.runpytest_subprocess(*FAST_ARGS, f"--brokerperf-results={pytester.path}/res",
                                         *args)


def _record(pytester: pytest.Pytester) -> dict:
    [line] = (pytester.path / "res" / "results.jsonl").read_text().splitlines()
    return json.loads(line)


def _rungs(pytester: pytest.Pytester) -> int:
    return int((pytester.path / "rungs.json").read_text())


def test_a_new_scenario_on_the_session_records_every_phase(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--brokerperf-noise-retries=0")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    rec = _record(pytester)
    assert rec["scenario"] == "toy" and rec["run_status"] == "completed"
    phases = rec["timeline"]["phase"]
    assert "measure" in phases and phases[-1] == "after"  # the window, then the phase
    assert rec["toy"]["after_periods"] == phases.count("after") >= 1
    # the session's end drained and counted: every acknowledged message received
    assert rec["delivery"]["acknowledged"] == rec["delivery"]["received"] > 0
    assert rec["delivery"]["lost"] == 0
    # this shared machine may spoil or unsettle a window: each one discarded is one
    # window more, and the record keeps it
    assert _rungs(pytester) == 1 + len(rec["noise_retries"])
    assert Path(rec["artefacts"], "record.json").is_file()
    result.stdout.fnmatch_lines(["*toy*toy params*"])  # the summary row the session fills


@pytest.mark.parametrize("retries", [1, 2])
def test_a_window_the_host_spoiled_is_measured_once_more_per_retry(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, retries: int) -> None:
    monkeypatch.setenv("FAKE_STEAL", "0.5")
    result = _run(pytester, f"--brokerperf-noise-retries={retries}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert _rungs(pytester) == 1 + retries  # one window, then one more per retry
    rec = _record(pytester)
    assert [n["attempt"] for n in rec["noise_retries"]] == list(range(1, retries + 1))
    assert rec["verdict"]["status"] == "host-noise"  # the last window stands as measured
    assert sum("measured again" in n for n in rec["notes"]) == 1
    out = result.stdout.str()
    assert out.count("loopback toy: the window is host-noise") == retries


def test_a_stop_in_a_phase_writes_the_record_through_the_session(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOP_IN", "after")
    result = _run(pytester, "--brokerperf-noise-retries=0")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    rec = _record(pytester)
    assert rec["scenario"] == "toy" and rec["run_status"] == "interrupted"
    [reason] = rec["verdict"]["reasons"]
    assert reason.startswith("interrupted by SIGINT during the toy's after phase after ")
    phases = rec["timeline"]["phase"]
    assert "measure" in phases and phases[-1] == "after"  # the window whole, then the cut
    assert "toy" not in rec  # the phase script never reached its figures
    assert rec["delivery"]["reconciled"] is False
    assert json.loads(Path(rec["artefacts"], "record.json").read_text()) == rec
