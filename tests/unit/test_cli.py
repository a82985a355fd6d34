"""The ``brokerperf`` console command."""

import json
import subprocess
import sys

import pytest

from pytest_brokerperf import cli


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
    out = subprocess.run([sys.executable, "-m", "pytest_brokerperf.cli", "--help"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "brokerperf" in out.stdout
