"""JUnit XML shows a session that stopped early as a failure (issue 24 item 8).

CI systems read the XML, not the exit code: a usage error (exit 4), a remote cluster that
does not answer (exit 4) and Ctrl-C each leave a named, failed test case.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import pytest_brokerperf
from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200))
"""


def _suite(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    return root if root.tag == "testsuite" else root[0]


def _failed_cases(path: Path) -> list[tuple[str, str, str]]:
    return [(c.get("classname", ""), c.get("name", ""), c[0].get("message", ""))
            for c in _suite(path).iter("testcase") if len(c) and c[0].tag == "failure"]


def test_a_usage_error_while_configuring_writes_a_failed_case(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess("--junitxml=out/junit.xml",
                                           "--brokerperf-broker-memory=-5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    suite = _suite(pytester.path / "out" / "junit.xml")
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    [(cls, name, message)] = _failed_cases(pytester.path / "out" / "junit.xml")
    assert (cls, name) == ("pytest-brokerperf", "session")
    assert "--brokerperf-broker-memory" in message


def test_an_unreachable_remote_fails_the_test_that_needed_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess(*FAST_ARGS, "--junitxml=junit.xml",
                                           "--broker=kafka", "--kafka-bootstrap=127.0.0.1:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    suite = _suite(pytester.path / "junit.xml")
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    [(cls, name, message)] = _failed_cases(pytester.path / "junit.xml")
    assert (cls, name) == ("test_scn", "test_tail[kafka]")
    assert "127.0.0.1:1 did not answer" in message


def test_a_pre_start_refusal_is_a_failed_case(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LOOPBACK_CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    (pytester.path / "w.yaml").write_text("messageSize: -1\n")
    result = pytester.runpytest_subprocess(*FAST_ARGS, "--junitxml=junit.xml",
                                           "--brokerperf-workload=w.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    [(_, name, message)] = _failed_cases(pytester.path / "junit.xml")
    assert name == "session" and "w.yaml" in message
    # the message attribute is the report's head (shortened after a long path); the
    # element's text is the whole report, every problem with its fix
    [failure] = [c[0] for c in _suite(pytester.path / "junit.xml").iter("testcase")
                 if len(c) and c[0].tag == "failure"]
    assert (failure.text or "").count("Fix:") == 6


def test_sigint_names_the_interrupted_test(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        LOOPBACK_CONFTEST + "\nimport signal\nsignal.signal(signal.SIGINT, "
        "signal.default_int_handler)\n")
    (tmp_path / "test_scn.py").write_text(TEST)
    root = Path(pytest_brokerperf.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:xdist", f"--brokerperf-results={tmp_path}/res", "--brokerperf-period=0.5",
         "--brokerperf-duration=300", "--brokerperf-warmup=0.5", "--junitxml=junit.xml"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "res").glob("*/*/periods.csv")):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    cases = list(_suite(tmp_path / "junit.xml").iter("testcase"))
    assert all(c.get("name") for c in cases), [c.attrib for c in cases]
    [(cls, name, message)] = _failed_cases(tmp_path / "junit.xml")
    assert (cls, name) == ("test_scn", "test_tail[kafka]")
    assert "interrupted" in message
