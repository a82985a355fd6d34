"""``ci/perf-gate.sh`` — the CI gate's steps — run here as CI runs them (report and gate
on results already written, ``SKIP_RUN=1``): no baseline yet, a steady run, a regression."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_brokerperf.testing.records import SyntheticRun, synthetic_record, write_jsonl

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")


def _write(path: Path, run_id: str, scale: int) -> None:
    lat = {v: np.arange(1, 3001, dtype=np.int64) * scale
           for v in ("e2e_response", "publish_response")}
    run = SyntheticRun(run_id=run_id, test_id="test_tailread[kafka]", env="ci-m5")
    write_jsonl(path / "results.jsonl", [synthetic_record(run, lat)])


def _gate(tmp: Path, results: Path) -> tuple[int, str, str]:
    summary = tmp / "step-summary.md"
    env = {**os.environ, "SKIP_RUN": "1", "RESULTS": str(results),
           "BASELINE": str(tmp / "baseline"), "ENV_LABEL": "ci-m5",
           "REPORT_DIR": str(tmp / "report"), "GITHUB_STEP_SUMMARY": str(summary),
           "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(REPO / "ci" / "perf-gate.sh")], env=env, cwd=tmp,
                         capture_output=True, text=True, timeout=600, check=False)
    return run.returncode, run.stderr, summary.read_text() if summary.exists() else ""


def test_the_ci_gate_reports_passes_a_steady_run_and_fails_a_regression(
        tmp_path: Path) -> None:
    _write(tmp_path / "now", "20260301-000000-nownow", 1)
    code, err, summary = _gate(tmp_path, tmp_path / "now")
    assert code == 0, err
    assert "no baseline in" in err and "brokerperf report" in summary
    assert (tmp_path / "report" / "report.html").exists()
    for i in range(3):
        _write(tmp_path / "baseline", f"2026020{i + 1}-000000-base0{i}", 1)
    code, err, summary = _gate(tmp_path, tmp_path / "now")
    assert code == 0, err
    _write(tmp_path / "slow", "20260302-000000-slowsl", 2)  # every latency doubled
    code, err, summary = _gate(tmp_path, tmp_path / "slow")
    assert code == 1, err
    assert "regression" in err and "e2e_response.p99" in err
    assert "REGRESSION" in summary
