"""The gate and the report inside a pytest session (loopback broker, no broker process).

The baseline is synthetic: three runs of the same cell as the loopback test, every
latency 1 µs, so the real run's e2e_response p99 (hundreds of µs) is a regression that
must fail the test itself; the session-end report says the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pytest_brokerperf.metrics.sysstats import _cpu_model
from pytest_brokerperf.report.model import machine_label
from pytest_brokerperf.report.storage import machine_key
from pytest_brokerperf.testing import skip_if_host_noise
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")

CONFTEST = """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=500))
"""

PARAMS = {"topics": 1, "partitions": 4, "message_size": 128, "producers": 1,
          "subscriptions": 1, "consumers": 1, "rate": 500.0}


RUN = ("--brokerperf-duration=2", "--brokerperf-warmup=1", "--brokerperf-period=0.5",
       "-p", "no:cacheprovider", "-p", "no:randomly", "--brokerperf-noise-retries=2")


def _baseline(path: Path, cpu_model: str | None = None, runs: int = 3,
              name: str = "results.jsonl") -> None:
    """Synthetic runs of the loopback test's cell (every latency 1 µs), on this machine
    unless ``cpu_model`` says otherwise; ``name``: one directory per run when it has {i}."""
    fast = {v: np.ones(2000, dtype=np.int64) for v in ("e2e_response", "publish_response")}
    for i in range(runs):
        run = SyntheticRun(run_id=f"2026010{i + 1}-000000-base00", test_id="b", broker="loopback",
                           params=dict(PARAMS), ack_rate=500.0)
        rec = synthetic_record(run, fast)
        # the loopback session's set-up (cells compare like with like)
        rec.update(broker_version="unknown", period_s=0.5, profile="smoke")
        rec["manifest"]["machine"] = {"cpu_model": cpu_model or _cpu_model(),
                                      "logical_cpus": os.cpu_count()}
        write_jsonl(path / name.format(i=i + 1), [rec])


def _shared_jvm(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """The inner sessions' gates run their reports in this worker's shared driver JVM
    (tests/support/spark_jvm.py): each session's own JVM start is tested elsewhere."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)


def test_a_regression_fails_the_test_the_report_says_so_and_the_run_is_saved_after_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        report_jvm: dict[str, str]) -> None:
    """Three stored runs are the baseline (``all``); the loopback run regresses against
    them, the session-end report says so, and the run is stored only after its report,
    so ``all`` never holds the run itself."""
    _shared_jvm(monkeypatch, report_jvm)
    store = pytester.path / "store"
    _baseline(store / machine_key("local"), name="000{i}_b/results.jsonl")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess(
        *RUN, f"--brokerperf-results={pytester.path}/res", f"--brokerperf-storage={store}",
        "--brokerperf-baseline=all", "--brokerperf-fail-on=e2e_response.p99:+15%",
        "--brokerperf-report=markdown,csv", "--brokerperf-save=new")
    out = result.stdout.str()
    [summary] = (pytester.path / "res").glob("*/summary.md")
    text = summary.read_text()
    # the session-end report's baseline is the three stored runs, not this run as well
    assert "Baseline: 3 records from 3 files" in text, out
    assert sorted(p.name for p in (store / machine_key("local")).iterdir()) == [
        "0001_b", "0002_b", "0003_b", "0004_new"]
    assert list((pytester.path / "res").glob("*/cells.csv"))
    assert "report written to" in out
    records = [json.loads(x) for x in
               (pytester.path / "res" / "results.jsonl").read_text().splitlines()]
    skip_if_host_noise(records)
    assert result.ret == 1, out
    # a regression, never called an SLO failure: the failure line, the column, the count
    assert "REGRESSION against the baseline:" in out and "e2e_response.p99 = " in out
    assert "SLO violated" not in out and "SLO failed in 0" in out
    assert "REGRESSION: e2e_response.p99" in out  # the summary's "vs baseline" column
    assert "regression against the baseline in 1" in out
    assert "budget +15%" in out and "noise floor 0.0% over 3 baseline runs" in out
    [rec] = records
    [gate] = rec["gates"]
    assert gate["status"] == "regression" and gate["baseline"] == 1.0
    assert "**Regression gate: REGRESSION**" in text and "loopback" in text


def test_a_saved_run_is_a_named_baseline_and_an_unknown_name_a_usage_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        report_jvm: dict[str, str]) -> None:
    _shared_jvm(monkeypatch, report_jvm)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    store = pytester.path / "store"
    common = ("--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
              "-p", "no:cacheprovider", "-p", "no:randomly", "--brokerperf-env=ci-m5",
              f"--brokerperf-storage={store}", "--brokerperf-inconclusive=warn",
              f"--brokerperf-results={pytester.path}/res")
    saved = pytester.runpytest_subprocess(*common, "--brokerperf-save=before-upgrade")
    saved.stdout.fnmatch_lines(["*saved this run as 0001_before-upgrade in *ci-m5*"])
    (entry,) = (store / "ci-m5").iterdir()
    (rec,) = [json.loads(x) for x in (entry / "results.jsonl").read_text().splitlines()]
    assert rec["env"] == "ci-m5" and rec["test_id"] == "test_scn.py::test_tail[kafka]"
    auto = pytester.runpytest_subprocess(*common, "--brokerperf-autosave")
    auto.stdout.fnmatch_lines(["*saved this run as 0002_2*"])
    unknown = pytester.runpytest_subprocess(*common, "--brokerperf-baseline=weekly",
                                            "--brokerperf-fail-on=e2e_response.p99:+15%")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*--brokerperf-baseline=weekly: neither a results "
                                  "directory nor a run stored under*0001_before-upgrade, "
                                  "0002_2*Fix:*"])


def test_a_baseline_of_another_machine_under_the_default_label_is_a_usage_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        report_jvm: dict[str, str]) -> None:
    _shared_jvm(monkeypatch, report_jvm)
    _baseline(pytester.path / "baseline", cpu_model="Other CPU 9000")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    args = (*RUN, f"--brokerperf-results={pytester.path}/res",
            f"--brokerperf-baseline={pytester.path}/baseline",
            "--brokerperf-fail-on=e2e_response.p99:+15%")
    refused = pytester.runpytest_subprocess(*args)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
    err = refused.stderr.str()
    assert "the baseline's runs come from another machine (Other CPU 9000 × " in err
    assert f"this run is on {machine_label(_cpu_model(), os.cpu_count())}" in err
    assert "default --brokerperf-env label 'local'" in err
    assert "--brokerperf-compare-across-env" in err
    assert not (pytester.path / "res").exists()  # refused before any test ran
    across = pytester.runpytest_subprocess(*args, "--brokerperf-compare-across-env")
    out = across.stdout.str()
    recs = [json.loads(x) for x in
            (pytester.path / "res" / "results.jsonl").read_text().splitlines()]
    if all(r["verdict"]["status"] == "valid" for r in recs):  # a busy machine: not judged
        # judged: the 1 µs baseline makes it a regression
        assert across.ret == 1 and "REGRESSION against the baseline" in out, out
