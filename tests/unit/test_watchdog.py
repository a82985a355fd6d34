"""No locally started process outlives its owner, even when the owner dies of SIGKILL.

The watchdog kills what a SIGKILLed interpreter left (no broker needed: ``sleep``
stands in for one), and ``brokerperf cleanup --local`` finds leftovers of a crashed run
by process id and verified tag, never touching a live run's processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.plugin.cli import main

# `cleanup --local --all` (tested here) reaps every tagged process whose owner is gone,
# on the whole machine: these tests run on one xdist worker (ci/test.sh: --dist
# loadgroup), so one test's reaping never meets another's dead-owner fixtures.
pytestmark = pytest.mark.xdist_group("local-reaper")


def pid_gone(pid: int) -> bool:
    """No such process, or only its zombie (dead; waiting for a parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if not pid_gone(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if not pid_gone(p)]


def test_sigkill_of_owner_kills_tagged_processes_and_removes_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(cache))
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from pytest_brokerperf.brokers.provision.process import (
            ManagedProcess, register_cleanup_path)
        from pytest_brokerperf.brokers.provision import watchdog
        d = Path({str(tmp_path / "data")!r}); d.mkdir()
        register_cleanup_path(d)
        # a child of the managed process, as erl_child_setup is of beam.smp
        p = ManagedProcess(["sh", "-c", "sleep 300 & echo $! > {tmp_path}/grandchild; wait"],
                           log_file=Path({str(tmp_path / "s.log")!r})).start()
        print(p.pid, watchdog.owner_token(), flush=True)
        time.sleep(300)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    pid_s, token = owner.stdout.readline().split()
    deadline = time.monotonic() + 10
    while not (tmp_path / "grandchild").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int((tmp_path / "grandchild").read_text())
    state = cache / "local-runs" / f"{token}.json"
    assert json.loads(state.read_text())["data_dirs"] == [str((tmp_path / "data").resolve())]
    while watchdog.proc_tag(grandchild) != token and time.monotonic() < deadline:
        time.sleep(0.05)  # environ reads empty while the forked shell execs sleep
    assert watchdog.proc_tag(grandchild) == token
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    owner.stdout.close()
    assert _wait_gone([int(pid_s), grandchild]) == []
    deadline = time.monotonic() + 10
    while (state.exists() or (tmp_path / "data").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (tmp_path / "data").exists()
    assert not state.exists()


def _dead_owner_token() -> str:
    """A token whose owner existed and is gone: the pid of a finished process."""
    p = subprocess.Popen(["true"])
    p.wait()
    return f"{p.pid}.1.deadbeef"


def _tagged_sleep(token: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != watchdog.TAG_ENV}
    if token is not None:
        env[watchdog.TAG_ENV] = token
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


def _state(directory: Path, token: str, data: Path, pids: list[int]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    f = directory / f"{token}.json"
    f.write_text(json.dumps({
        "token": token, "owner_pid": int(token.split(".")[0]), "groups": [],
        "pids": [{"pid": p, "start": watchdog.proc_start_time(p)} for p in pids],
        "data_dirs": [str(data)], "ports": {"kafka": [9092]}}))
    return f


def test_cleanup_local_stops_leftovers_of_a_dead_owner(tmp_path: Path) -> None:
    token = _dead_owner_token()
    leftover = _tagged_sleep(token)
    untagged = _tagged_sleep(None)  # same name, no tag: never touched
    data = tmp_path / "data"
    (data / "node-0").mkdir(parents=True)
    state = _state(tmp_path / "runs", token, data, [])
    try:
        report = watchdog.cleanup_local(directory=tmp_path / "runs", grace=1.0)
        assert leftover.wait(10) is not None
        assert leftover.pid in report.stopped
        assert untagged.poll() is None
        assert not data.exists()
        assert not state.exists()
        assert any(token in line and "9092" in line for line in report.lines)
    finally:
        for p in (leftover, untagged):
            p.kill()
            p.wait()


def test_cleanup_local_dry_run_changes_nothing(tmp_path: Path) -> None:
    token = _dead_owner_token()
    leftover = _tagged_sleep(token)
    data = tmp_path / "data"
    data.mkdir()
    state = _state(tmp_path / "runs", token, data, [])
    try:
        report = watchdog.cleanup_local(directory=tmp_path / "runs", dry_run=True)
        assert any(str(leftover.pid) in line for line in report.lines)
        assert leftover.poll() is None and data.exists() and state.exists()
    finally:
        leftover.kill()
        leftover.wait()


def test_cleanup_local_leaves_a_live_run_alone(tmp_path: Path) -> None:
    me = os.getpid()
    token = f"{me}.{watchdog.proc_start_time(me)}.cafe0001"
    live = _tagged_sleep(token)
    data = tmp_path / "data"
    data.mkdir()
    state = _state(tmp_path / "runs", token, data, [live.pid])
    try:
        report = watchdog.cleanup_local(directory=tmp_path / "runs", grace=0.5)
        assert token in report.live
        assert live.poll() is None and data.exists() and state.exists()
    finally:
        live.kill()
        live.wait()


def test_cleanup_local_skips_a_listed_pid_whose_start_time_differs(tmp_path: Path) -> None:
    """A pid in the state file that now belongs to another process (reused) survives."""
    token = _dead_owner_token()
    other = _tagged_sleep(None)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / f"{token}.json").write_text(json.dumps({
        "token": token, "groups": [], "data_dirs": [],
        "pids": [{"pid": other.pid, "start": (watchdog.proc_start_time(other.pid) or 0) + 7}]}))
    try:
        watchdog.cleanup_local(directory=runs, grace=0.5)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_cli_cleanup_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    token = _dead_owner_token()
    leftover = _tagged_sleep(token)
    data = tmp_path / "data"
    data.mkdir()
    _state(tmp_path / "local-runs", token, data, [])
    try:
        assert main(["cleanup", "--local"]) == 0
        assert leftover.wait(10) is not None
        out = capsys.readouterr().out
        assert token in out and str(data) in out
        assert not data.exists()
    finally:
        leftover.kill()
        leftover.wait()


def test_state_dir_is_under_the_cache_dir(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_brokerperf.brokers.provision.maven import cache_root

    monkeypatch.delenv("BROKERPERF_CACHE_DIR", raising=False)
    assert watchdog.state_dir() == cache_root() / "local-runs"
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    assert watchdog.state_dir() == cache_root() / "local-runs" == tmp_path / "local-runs"


def test_cli_cleanup_without_local_still_needs_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup", "--older-than", "1d", "--bootstrap", "127.0.0.1:1"]) == 2
    assert "--prefix" in capsys.readouterr().err


def test_a_registered_worker_without_the_tag_dies_with_its_owner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine workers share pytest's group and carry no tag: registered by pid instead."""
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path / "cache"))
    code = textwrap.dedent(
        """
        import subprocess, time
        from pytest_brokerperf.brokers.provision import watchdog
        worker = subprocess.Popen(["sleep", "300"])
        watchdog.track_pid(worker.pid)
        print(worker.pid, flush=True)
        time.sleep(300)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    worker = int(owner.stdout.readline())
    assert watchdog.proc_tag(worker) is None
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    owner.stdout.close()
    assert _wait_gone([worker]) == []


def _tagged_sleep_in(token: str, cache_dir: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != watchdog.TAG_ENV}
    env.update({watchdog.TAG_ENV: token, "BROKERPERF_CACHE_DIR": str(cache_dir)})
    return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)


def test_cleanup_local_reaps_only_this_cache_dirs_runs_unless_all(tmp_path: Path) -> None:
    """Issue 24 item 10: a crashed run of another cache dir (another CI job, another user)
    is named with its owner and left alone; --all reaps it."""
    mine, other = tmp_path / "mine", tmp_path / "other"
    ours_token, theirs_token = _dead_owner_token(), _dead_owner_token() + "2"
    ours = _tagged_sleep_in(ours_token, mine)  # no state file: a crash while writing it
    theirs = _tagged_sleep_in(theirs_token, other)
    (mine / "local-runs").mkdir(parents=True)
    try:
        report = watchdog.cleanup_local(directory=mine / "local-runs", grace=0.5)
        assert ours.wait(10) is not None and ours.pid in report.stopped
        assert theirs.poll() is None and theirs_token in report.foreign
        [line] = [x for x in report.lines if theirs_token in x]
        assert f"its state dir is {other / 'local-runs'}" in line and "--all" in line
        assert f"owner pid {theirs_token.split('.')[0]}" in line and "user " in line
        report = watchdog.cleanup_local(directory=mine / "local-runs", grace=0.5,
                                        all_runs=True)
        assert theirs.wait(10) is not None and theirs.pid in report.stopped
    finally:
        for p in (ours, theirs):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_cleanup_local_says_whose_run_it_was(tmp_path: Path) -> None:
    token = _dead_owner_token()
    leftover = _tagged_sleep(token)
    data = tmp_path / "data"
    data.mkdir()
    state = _state(tmp_path / "runs", token, data, [])
    doc = json.loads(state.read_text())
    state.write_text(json.dumps({**doc, "argv": ["pytest", "-m", "tailread"]}))
    try:
        report = watchdog.cleanup_local(directory=tmp_path / "runs", dry_run=True)
        [line] = [x for x in report.lines if token in x]
        assert f"owner pid {token.split('.')[0]} (`pytest -m tailread`, user " in line
    finally:
        leftover.kill()
        leftover.wait()
