"""Saved runs and named baselines (pytest-benchmark's conventions), and the refusal of a
baseline from another environment label."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.report import spark as job
from pytest_brokerperf.report.command import EXIT_OK, EXIT_USAGE, main
from pytest_brokerperf.report.gates import same_environment
from pytest_brokerperf.report.storage import (
    machine_key,
    resolve_baseline,
    save_run,
    stored_runs,
)
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

LAT = {"e2e_response": np.arange(1, 3001, dtype=np.int64)}


def _results(path: Path, run_ids: list[str], env: str = "local") -> Path:
    recs = [synthetic_record(SyntheticRun(run_id=r, test_id=f"t-{r}", env=env), LAT)
            for r in run_ids]
    write_jsonl(path / "results.jsonl", recs)
    return path / "results.jsonl"


def test_runs_are_numbered_per_key_and_hold_only_their_own_records(tmp_path: Path) -> None:
    res = _results(tmp_path / "res", ["20260101-000000-aaaaaa", "20260102-000000-bbbbbb"])
    store = tmp_path / "store"
    first = save_run(store, "ci-m5", res, "20260101-000000-aaaaaa")
    named = save_run(store, "ci-m5", res, "20260102-000000-bbbbbb", name="before-upgrade")
    assert first is not None and named is not None
    assert first.label == "0001_20260101-000000-aaaaaa"
    assert named.label == "0002_before-upgrade"
    lines = (named.path / "results.jsonl").read_text().splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["20260102-000000-bbbbbb"]
    assert save_run(store, "ci-m5", res, "20990101-000000-nonexi") is None
    assert [r.label for r in stored_runs(store, "ci-m5")] == [first.label, named.label]
    assert stored_runs(store, "other") == []


def test_a_baseline_is_a_directory_a_number_a_name_last_or_all(tmp_path: Path) -> None:
    res = _results(tmp_path / "res", ["r1", "r2", "r3"])
    store = tmp_path / "store"
    runs = [save_run(store, "k", res, r, name=n) for r, n in
            (("r1", None), ("r2", "nightly"), ("r3", "nightly"))]
    paths = [r.path for r in runs if r is not None]
    assert resolve_baseline(str(tmp_path / "res"), store, "k", source="x") == [tmp_path / "res"]
    assert resolve_baseline("0001", store, "k", source="x") == paths[:1]
    assert resolve_baseline("nightly", store, "k", source="x") == paths[2:]  # the newest
    assert resolve_baseline("last", store, "k", source="x") == paths[2:]
    assert resolve_baseline("all", store, "k", source="x") == paths
    with pytest.raises(ConfigError) as err:
        resolve_baseline("weekly", store, "k", source="--brokerperf-baseline")
    text = str(err.value)
    assert "--brokerperf-baseline=weekly" in text and str(store / "k") in text
    assert "0003_nightly" in text and "Fix:" in text
    assert "other environments" not in text  # only key k is stored


def test_no_match_names_the_runs_stored_under_other_keys(tmp_path: Path) -> None:
    res = _results(tmp_path / "res", ["r1", "r2"])
    store = tmp_path / "store"
    save_run(store, "ci-m5", res, "r1", name="nightly")
    save_run(store, "laptop", res, "r2")
    with pytest.raises(ConfigError) as err:
        resolve_baseline("nightly", store, "local-Linux-x86_64-2cpu", source="--baseline")
    text = str(err.value)
    assert "(stored: none; other environments' keys there: ci-m5 (0001_nightly); " \
        "laptop (0001_r2) — run with that --brokerperf-env label" in text, text


def test_the_default_label_is_keyed_by_the_machine_class() -> None:
    assert machine_key("ci-m5") == "ci-m5"
    assert machine_key("local") == (f"local-{platform.system()}-{platform.machine()}-"
                                    f"{os.cpu_count()}cpu")


def test_a_baseline_of_another_environment_is_refused_unless_asked_for(
        spark: Any, tmp_path: Path) -> None:
    _results(tmp_path / "base", ["b1", "b2", "b3"], env="laptop")
    cells = job.run_job(spark, [tmp_path / "base"]).cells
    with pytest.raises(ConfigError) as err:
        same_environment(cells, "ci-m5", across=False, source="--baseline", fix="--across-env")
    assert "environment laptop" in str(err.value) and "'ci-m5'" in str(err.value)
    assert "--across-env" in str(err.value)
    across = same_environment(cells, "ci-m5", across=True, source="--baseline",
                              fix="--across-env")
    assert {k.env for k in across} == {"ci-m5"} and len(across) == len(cells)
    assert all(c.key == k for k, c in across.items())
    assert same_environment(cells, "laptop", across=False, source="x", fix="y") == cells


def test_the_report_command_names_stored_baselines_and_refuses_other_envs(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the report runs in the worker's session (a caller's session, used as is)
    store = tmp_path / "store"
    for i in range(3):
        res = _results(tmp_path / f"hist{i}", [f"h{i}"], env="ci-m5")
        save_run(store, "ci-m5", res, f"h{i}")
    _results(tmp_path / "now", ["n1"], env="ci-m5")
    _results(tmp_path / "laptop", ["l1"], env="laptop")
    md = tmp_path / "summary.md"
    code = main([str(tmp_path / "now"), "--baseline", "all", "--storage", str(store),
                 "--env", "ci-m5", "--fail-on", "e2e_response.p99:+15%",
                 "--markdown", str(md)])
    assert code == EXIT_OK, capsys.readouterr().err
    assert "pass" in md.read_text()
    assert main([str(tmp_path / "now"), "--baseline", "weekly", "--storage", str(store),
                 "--env", "ci-m5"]) == EXIT_USAGE
    assert "neither a results directory nor a run stored" in capsys.readouterr().err
    code = main([str(tmp_path / "laptop"), "--baseline", str(tmp_path / "now"),
                 "--fail-on", "e2e_response.p99:+15%"])
    assert code == EXIT_USAGE
    assert "holds runs of environment ci-m5; this run is 'laptop'" in capsys.readouterr().err


def test_the_report_command_refuses_another_machine_under_the_default_label(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the report runs in the worker's session (a caller's session, used as is)
    for name, cpu in (("base", "CPU B"), ("now", "CPU A")):
        recs = [synthetic_record(SyntheticRun(run_id=f"{name}{i}", test_id="t", cpu_model=cpu),
                                 LAT) for i in range(3 if name == "base" else 1)]
        write_jsonl(tmp_path / name / "results.jsonl", recs)
    args = [str(tmp_path / "now"), "--baseline", str(tmp_path / "base"),
            "--fail-on", "e2e_response.p99:+15%"]
    assert main(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--baseline: the baseline's runs come from another machine (CPU B × 2 cpus); " \
        "this run is on CPU A × 2 cpus" in err and "--across-env" in err
    assert main([*args, "--across-env"]) == EXIT_OK  # the same figures: the gate passes
