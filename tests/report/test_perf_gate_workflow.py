"""``ci/github/perf-gate.yml`` driven locally, step by step, over five pushes to main.

The workflow's own ``run:`` steps run in order with its environment
(``ci/github/drive_workflow.py``; the cache, artefact and comment actions emulated on
disk). Each push's measurement is a record already written (``SKIP_RUN=1``: no broker,
no pytest run; the records carry real histograms), so what is under test is the CI
example itself: the history grows by one run per push to main, is pruned to ``KEEP``
runs, is saved whatever the gate said, and the gate goes 0 (no baseline yet) → 3 → 3
(fewer than 3 baseline runs) → 0 (a pull request: its summary is its comment, the
history is neither added to nor saved) → 1 (a fabricated +100 % regression on main,
saved all the same). Five jobs, one ``brokerperf report`` (a Spark start) each.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pytest_brokerperf.report.history import history_runs
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "ci" / "github" / "perf-gate.yml"
pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")


def _driver() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drive_workflow",
                                                  REPO / "ci" / "github" / "drive_workflow.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["drive_workflow"] = mod
    spec.loader.exec_module(mod)
    return mod


def _measure(workspace: Path, run_id: str, seed: int, slow: float = 1.0) -> None:
    """What the smoke step would have written for this push."""
    rng = np.random.default_rng(seed)
    e2e = (rng.lognormal(np.log(3000), 0.4, 20_000) * slow).astype(np.int64)
    rec = synthetic_record(SyntheticRun(run_id=run_id, test_id="test_tailread[kafka]",
                                        env="gha-ubuntu-24.04-4core"),
                           {"e2e_response": e2e, "publish_response": e2e // 2})
    write_jsonl(workspace / "brokerperf-results" / "results.jsonl", [rec])


def test_the_workflow_builds_a_history_and_gates_3_then_0_then_1(
        tmp_path: Path, report_jvm: dict[str, str]) -> None:
    """Each job's ``brokerperf report`` runs in this worker's shared driver JVM
    (tests/support/spark_jvm.py): the workflow is under test, not Spark's start."""
    drive = _driver().drive
    store = tmp_path / "store"
    history_sizes, codes = [], []
    for push in range(1, 6):
        ws = tmp_path / f"push{push}"  # a fresh checkout per job, as on GitHub
        ws.mkdir()
        (ws / "ci").symlink_to(REPO / "ci")
        run_id = f"2026030{push}-000000-00000{push}"
        regression = push == 5
        pull_request = push == 4
        _measure(ws, run_id, seed=push, slow=2.0 if regression else 1.0)
        event = "pull_request" if pull_request else "push"
        ref = "refs/pull/7/merge" if pull_request else "refs/heads/main"
        log = io.StringIO()
        res = drive(WORKFLOW, ws, store, ref=ref, event=event, run_id=str(push), log=log,
                    skip=["Install", "Fetch"],
                    extra_env={"SKIP_RUN": "1", "RUN_ID": run_id, "KEEP": "3",
                               "PYTHON": sys.executable, **report_jvm})
        gate = res.step("Run the smoke and gate it")
        codes.append(int(gate.outputs["code"]))
        assert gate.outputs.get("measured") == "true", log.getvalue()
        saved = res.step("Save the baseline history")
        if not pull_request:  # saved whatever the gate said (push 5: a regression)
            assert saved.ran and "saved as" in saved.note, log.getvalue()
            history_sizes.append(len(history_runs(ws / "brokerperf-baseline")))
        else:  # a pull request neither adds to nor saves the history
            assert not saved.ran and not res.step("Add this run").ran
            # it got the summary as its comment: the gate passed against pushes 1-3
            comment = (store / "pr-comment-brokerperf-perf-gate.md").read_text()
            assert "Regression gate: ok" in comment
        # the job fails on a regression only: 3 (too few baseline runs) is not a failure
        assert res.success == (codes[-1] != 1), log.getvalue()
        if regression:
            summary = (ws / "brokerperf-report" / "summary.md").read_text()
            assert "**Regression gate: REGRESSION**" in summary
            assert "regression" in summary and "SLO" not in summary
    # each push to main appended its run; KEEP=3 pruned the oldest on push 5 (the pull
    # request's run never entered the history)
    assert history_sizes == [1, 2, 3, 3]
    assert codes == [0, 3, 3, 0, 1]
