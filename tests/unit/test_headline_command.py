"""The design card's command works as written: from a checkout's root, and through the
installed suite in a user's project (issue 23, item 3)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest(args, cwd):
    return subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=cwd, capture_output=True,
                          text=True, check=False, timeout=120)


def test_catchup_from_the_checkout_root_collects_the_catchup_scenarios():
    out = _pytest(["-m", "catchup", "--broker=kafka"], cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "scenarios/test_catchup.py::test_catchup[kafka]" in out.stdout
    assert "tests/" not in out.stdout  # the project's own tests are `pytest tests`


def test_pytest_tests_never_collects_the_scenarios():
    out = _pytest(["tests/unit/test_headline_command.py"], cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "scenarios/" not in out.stdout


def test_installed_suite_runs_in_a_users_project(tmp_path):
    out = _pytest(["--pyargs", "pytest_brokerperf.suite", "-m", "catchup", "--broker=kafka"],
                  cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "test_catchup[kafka]" in out.stdout
