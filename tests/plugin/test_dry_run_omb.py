"""A dry run under ``--brokerperf-profile=omb`` starts nothing, loads nothing and writes
nothing (issue 23, item 4): no calibration load, no ``calibration.json`` in the cache, no
broker contacted. It printed nothing useful before: it ran a ~42 s calibration load,
wrote the cache and failed on the dry-run endpoint's placeholder address."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[2] / "scenarios"

#: Records every process started and every connection attempted, in this process; the
#: generator's workers are multiprocessing processes, a broker a subprocess.
SPIES = """
import multiprocessing.process
import socket
import subprocess

LOG = open("activity.log", "a", buffering=1)

_start = multiprocessing.process.BaseProcess.start
def start(self):
    LOG.write(f"process {self.name}\\n")
    return _start(self)
multiprocessing.process.BaseProcess.start = start

# the session's read-only facts (git sha, interpreter architecture) are no broker or load
FACTS = ("git", "file")

_popen = subprocess.Popen.__init__
def popen(self, args, *a, **k):
    if not (isinstance(args, (list, tuple)) and args and args[0] in FACTS):
        LOG.write(f"subprocess {args!r}\\n")
    return _popen(self, args, *a, **k)
subprocess.Popen.__init__ = popen

_connect = socket.socket.connect
def connect(self, address):
    LOG.write(f"connect {address!r}\\n")
    return _connect(self, address)
socket.socket.connect = connect
"""


@pytest.mark.parametrize(("module", "test", "nodes"), [
    # the reassignment needs a broker without a replica: refused before start on one node
    ("test_reassign.py", "test_reassign_study", "2"),
    ("test_tailread.py", "test_tailread_study", "1"),
])
def test_omb_dry_run_starts_loads_and_writes_nothing(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      module: str, test: str,
                                                      nodes: str) -> None:
    for name in list(os.environ):
        if name.startswith("BROKERPERF_") and name != "BROKERPERF_AUTO_PROVISION":
            monkeypatch.delenv(name)
    cache = pytester.path / "cache"
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(cache))
    shutil.copy(SUITE / module, pytester.path / module)
    pytester.makeconftest(SPIES)
    result = pytester.runpytest_subprocess(
        f"{module}::{test}", "--broker=kafka", "--brokerperf-provision=process",
        "--brokerperf-profile=omb", "--brokerperf-dry-run", "-k", "not p10000 and not p5000",
        f"--brokerperf-nodes={nodes}", f"--brokerperf-results={pytester.path / 'res'}",
        "-p", "no:cacheprovider", "-rs")
    text = result.stdout.str()
    assert result.ret == 0, text
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 1 and "failed" not in outcomes, text
    assert "DRY RUN" in text
    activity = (pytester.path / "activity.log").read_text() \
        if (pytester.path / "activity.log").exists() else ""
    assert activity == "", activity  # no worker, no broker, no connection
    assert not (cache / "calibration.json").exists()
    assert not cache.exists() or not any(cache.rglob("*"))
    assert not (pytester.path / "res").exists()
