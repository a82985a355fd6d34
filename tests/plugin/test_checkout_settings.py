"""The checkout's own test settings stay with the project's tests.

``pytest scenarios ...`` from a checkout (as the README shows) must behave as the
installed suite does: a warning stays a warning there, while under ``tests/`` every
warning is an error. Checked with the repository's real ``pyproject.toml`` and
``tests/conftest.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_brokerperf.testing.loopback import LOOPBACK_CONFTEST

REPO = Path(__file__).resolve().parents[2]
WARNS = """
import warnings

def test_warns():
    warnings.warn(UserWarning("a typo'd workload key, say"))
"""


def test_warnings_are_errors_in_tests_only(pytester: pytest.Pytester) -> None:
    shutil.copy(REPO / "pyproject.toml", pytester.path / "pyproject.toml")
    (pytester.path / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", pytester.path / "tests" / "conftest.py")
    (pytester.path / "tests" / "test_own.py").write_text(WARNS)
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "test_suite.py").write_text(WARNS)
    suite = pytester.runpytest_subprocess("scenarios", "-p", "no:cacheprovider")
    suite.assert_outcomes(passed=1, warnings=1)
    own = pytester.runpytest_subprocess("tests", "-p", "no:cacheprovider")
    own.assert_outcomes(failed=1)
    own.stdout.fnmatch_lines(["*UserWarning: a typo'd workload key, say*"])


LOOPBACK_CONFTEST = LOOPBACK_CONFTEST

OVERDRIVEN = """
from pytest_brokerperf import TailRead

def test_overdriven(brokerperf):
    brokerperf.run(TailRead(message_size=128))
"""


def test_inconclusive_warn_stays_a_warning_in_the_checkouts_scenarios(
        pytester: pytest.Pytester) -> None:
    """``--brokerperf-inconclusive=warn`` from a checkout: a warning, not a failure."""
    from pytest_brokerperf.testing import skip_if_host_noise

    shutil.copy(REPO / "pyproject.toml", pytester.path / "pyproject.toml")
    (pytester.path / "tests").mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", pytester.path / "tests" / "conftest.py")
    scenarios = pytester.path / "scenarios"
    scenarios.mkdir()
    (scenarios / "conftest.py").write_text(LOOPBACK_CONFTEST)
    (scenarios / "test_overdriven.py").write_text(OVERDRIVEN)
    res = pytester.path / "res"
    result = pytester.runpytest_subprocess(
        "scenarios", "-p", "no:cacheprovider", "-p", "no:randomly",
        "--brokerperf-duration=2", "--brokerperf-warmup=1", "--brokerperf-period=0.5",
        "--brokerperf-noise-retries=2", f"--brokerperf-results={res}",
        "--brokerperf-rate=400000", "--brokerperf-max-steal=100",
        "--brokerperf-inconclusive=warn")
    records = res / "results.jsonl"
    if records.is_file():
        import json

        skip_if_host_noise([json.loads(line) for line in records.read_text().splitlines()])
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*BrokerPerfWarning: INCONCLUSIVE:*"])
