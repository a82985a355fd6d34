"""The ``brokerperf`` console command."""

import json
import subprocess
import sys

import pytest

from pytest_brokerperf.plugin import cli


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("smoke", "run", "fetch", "info"):
        assert command in out


def test_info_prints_machine_clock_and_fsync_facts(capsys):
    assert cli.main(["info"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["clock"]["clock"] == "CLOCK_MONOTONIC" or "monotonic" in json.dumps(
        facts["clock"]).lower()
    assert facts["fsync_probe_tmp"]["p50_us"] > 0
    assert facts["libraries"]["python"].startswith("3.")


def test_fetch_reports_unavailable_maven_clearly(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn, no java
    assert cli.main(["fetch", "kafka"]) == 2
    err = capsys.readouterr().err
    assert "Maven" in err or "mvn" in err


def test_console_script_entry_point_is_installed():
    out = subprocess.run([sys.executable, "-m", "pytest_brokerperf.plugin.cli", "--help"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "brokerperf" in out.stdout


# ------------------------------------------------------------------ smoke and run (issue 23)

def _brokerperf(args, cwd):
    return subprocess.run([sys.executable, "-m", "pytest_brokerperf.plugin.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=120)


def test_help_has_no_restructuredtext_backticks():
    out = _brokerperf(["--help"], cwd=None)
    assert out.returncode == 0
    assert "`" not in out.stdout


def test_smoke_takes_pytest_options_and_is_the_single_tail_read(tmp_path):
    """`brokerperf smoke --brokerperf-provision=process` was refused by argparse (exit 2),
    and the smoke selected every tail-read study and sweep case (15 tests)."""
    out = _brokerperf(["smoke", "--brokerperf-provision=process", "--collect-only", "-q",
                       "-p", "no:cacheprovider"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 test collected" in out.stdout
    assert "test_tailread[kafka]" in out.stdout
    assert "study" not in out.stdout and "sweep" not in out.stdout
    assert "PytestAssertRewriteWarning" not in out.stdout + out.stderr


def test_smoke_drops_a_leading_double_dash(tmp_path):
    out = _brokerperf(["smoke", "--", "--collect-only", "-q", "-p", "no:cacheprovider"],
                      cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 test collected" in out.stdout


def test_run_hands_markers_to_the_installed_suite(tmp_path):
    """In a user's project (no scenarios/ here): the installed suite, pytest's options."""
    out = _brokerperf(["run", "-m", "catchup", "--broker=kafka", "--collect-only", "-q",
                       "-p", "no:cacheprovider"], cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "test_catchup[kafka]" in out.stdout
    assert "tailread" not in out.stdout


def test_smoke_uses_a_checkouts_scenarios(tmp_path, monkeypatch):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "test_tailread.py").write_text("def test_tailread(): pass\n")
    monkeypatch.chdir(tmp_path)
    argv = cli.pytest_argv("smoke", ["--", "-q"])
    assert argv == [str(tmp_path / "scenarios" / "test_tailread.py::test_tailread"),
                    "--broker=kafka", "-q"]
