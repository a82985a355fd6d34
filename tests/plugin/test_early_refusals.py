"""Refusals that can happen before a broker starts do (issue 24 item 6).

A fault timed past the measured window was refused only after the broker had started
and warmed up (exit 1, 26 s), and the dry run did not flag it.
"""

from __future__ import annotations

import time

import pytest

from tests.support.refusals import CONFTEST, TEST


@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize(("fault", "needle"), [
    ("kill-broker@100s", "strikes 100 s into a measured window of 15 s"),
    ("pause-broker@0.5s:1s", "before 2 stats periods of 1 s"),
])
def test_a_fault_outside_the_window_is_refused_before_start(
        pytester: pytest.Pytester, dry: bool, fault: str, needle: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--brokerperf-duration=15", "--brokerperf-period=1",
        f"--brokerperf-fault={fault}", f"--brokerperf-results={pytester.path}/res",
        *(["--brokerperf-dry-run"] if dry else []))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*--brokerperf-fault=*{needle}*Fix:*"])
    assert not (pytester.path / "broker-started").exists()
    assert not (pytester.path / "res").exists()  # nothing left behind
    assert time.monotonic() - started < 60
