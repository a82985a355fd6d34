"""Results are written as they come (loopback broker, a real pytest child process).

* the test's artefact directory exists before its broker fixture starts anything;
* ``periods.csv`` and the HdrHistogram interval logs grow while the run measures;
* Ctrl-C (SIGINT) or SIGTERM in the measured window leaves a well-formed record marked
  ``interrupted`` with the periods completed until then, and pytest still stops.

The child sets its own SIGINT disposition: a shell that starts jobs in the background
leaves SIGINT ignored in them, and then Ctrl-C would never reach the run.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pytest_brokerperf

CONFTEST = """
import json
import signal
from pathlib import Path

import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

signal.signal(signal.SIGINT, signal.default_int_handler)

@pytest.fixture(scope="session")
def broker(broker_kind, brokerperf_settings):
    # what exists of the run's results when the broker "starts"
    run_dir = Path(brokerperf_settings.results_dir) / brokerperf_settings.run_id
    seen = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    (Path(brokerperf_settings.results_dir).parent / "at-broker-start.json").write_text(
        json.dumps(seen))
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=300))

@pytest.mark.tailread
def test_skipped(brokerperf):
    pytest.skip("nothing to run")
"""

ROOT = Path(pytest_brokerperf.__file__).resolve().parent.parent


def _start(path: Path, *args: str) -> subprocess.Popen[str]:
    (path / "conftest.py").write_text(CONFTEST)
    (path / "test_scn.py").write_text(TEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:xdist", f"--brokerperf-results={path}/res", "--brokerperf-period=0.5",
         *args],
        cwd=path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in (path / "res" / "results.jsonl").read_text().splitlines()]


def _test_dir(path: Path) -> Path:
    [run_dir] = [d for d in (path / "res").iterdir() if d.is_dir()]
    dirs = [d for d in run_dir.iterdir() if "test_tail" in d.name]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _wait_for_measured_periods(proc: subprocess.Popen[str], path: Path, n: int
                               ) -> tuple[Path, list[dict], int]:
    """Poll the running child's periods.csv until it holds ``n`` measured periods; the
    test directory, those rows and the lines of e2e_response.hlog read at that moment."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        run_dirs = list((path / "res").glob("*/*test_tail*/periods.csv"))
        if run_dirs:
            with open(run_dirs[0], newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            measured = [r for r in rows if r["phase"] == "measure"]
            if len(measured) >= n:
                hlog = run_dirs[0].parent / "histograms" / "e2e_response.hlog"
                intervals = [x for x in hlog.read_text().splitlines()
                             if x and not x.startswith(('#', '"'))]
                return run_dirs[0].parent, measured, len(intervals)
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no measured periods appeared: " + proc.communicate()[0])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_periods_are_appended_during_the_run_and_an_interrupt_leaves_its_record(
        tmp_path: Path, sig: signal.Signals) -> None:
    proc = _start(tmp_path, "--brokerperf-duration=300", "--brokerperf-warmup=1",
                  "-k", "test_tail")
    try:
        directory, seen_rows, seen_intervals = _wait_for_measured_periods(proc, tmp_path, 3)
        assert seen_intervals >= len(seen_rows)  # warm-up intervals are tagged, kept
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if sig == signal.SIGINT:
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        assert "RunInterrupted: run interrupted by SIGINT" in out
    else:  # the session ended as for Ctrl-C, then the process died of the SIGTERM
        assert proc.returncode == -signal.SIGTERM, out
    [rec] = _records(tmp_path)
    assert rec["run_status"] == "interrupted"
    assert rec["verdict"]["status"] == "interrupted"
    assert f"interrupted by {sig.name}" in rec["failure"]
    assert rec["delivery"]["reconciled"] is False
    assert rec["slo"] == []  # nothing judged
    # the figures of the periods completed until then: at least those seen in the file
    measured = [p for p in rec["timeline"]["phase"] if p == "measure"]
    assert len(measured) >= len(seen_rows)
    assert rec["measured_s"] > 0 and rec["ack_rate_msg_s"] > 0
    assert rec["latency"]["e2e_response"]["count"] > 0
    # written where the periods were appended, and the final files are the record's
    assert Path(rec["artefacts"]) == directory
    with open(directory / "periods.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["phase"] for r in rows] == rec["timeline"]["phase"]
    assert json.loads((directory / "record.json").read_text())["run_status"] == "interrupted"


def test_the_artefact_directory_exists_before_the_broker_starts(tmp_path: Path) -> None:
    proc = _start(tmp_path, "--brokerperf-duration=1", "--brokerperf-warmup=0.5",
                  "-k", "test_tail")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode in (0, 1), out  # 1: a window the host spoiled (INCONCLUSIVE)
    [rec] = _records(tmp_path)
    seen = json.loads((tmp_path / "at-broker-start.json").read_text())
    directory = Path(rec["artefacts"])
    assert directory == _test_dir(tmp_path)
    assert seen == [directory.name]  # made before the session's broker fixture ran
    assert rec["attempt"] == 1 and rec["run_status"] == "completed"


def test_a_skipped_test_leaves_no_artefact_directory(tmp_path: Path) -> None:
    proc = _start(tmp_path, "-k", "test_skipped")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    seen = json.loads((tmp_path / "at-broker-start.json").read_text())
    assert len(seen) == 1 and "test_skipped" in seen[0]  # reserved before the broker
    assert list((tmp_path / "res").iterdir()) == []  # removed again: no run used it
