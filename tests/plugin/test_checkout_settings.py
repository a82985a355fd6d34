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
