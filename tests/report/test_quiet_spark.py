"""``brokerperf report`` says what is missing before it starts anything, and Spark's own
log never mixes into its progress lines (errors only, into a log file removed after a
run that went well)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

REPO = Path(__file__).resolve().parents[2]


def _report(args: list[str], tmp: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "pytest_brokerperf.plugin.cli", "report", *args],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=600,
                          check=False)


def _results(tmp: Path) -> Path:
    e2e = np.arange(1, 3001, dtype=np.int64)
    write_jsonl(tmp / "res" / "results.jsonl",
                [synthetic_record(SyntheticRun(), {"e2e_response": e2e})])
    return tmp / "res"


def test_a_missing_pyspark_is_said_first_and_nothing_starts(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "pyspark").mkdir(parents=True)
    (fake / "pyspark" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'pyspark'\")\n")
    run = _report([str(_results(tmp_path)), "--markdown", "-"], tmp_path, [fake])
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["brokerperf report: No module named 'pyspark'; install the report "
                     "extra: pip install 'pytest-brokerperf[report]'"], lines
    assert "starting Spark" not in run.stderr


def test_spark_logs_nothing_into_the_progress_and_leaves_no_log(tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
    run = _report([str(_results(tmp_path)), "--markdown", "-"], tmp_path, [])
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    # only the report's own progress lines, each whole (nothing of Spark's between)
    assert lines and all(line.startswith("brokerperf report: ") for line in lines), lines
    assert any(line.startswith("brokerperf report: starting Spark ... done in")
               for line in lines)
    assert "| kafka | tailread |" in run.stdout
    assert not list(tmp_path.glob("brokerperf-spark-*.log"))  # removed after success
