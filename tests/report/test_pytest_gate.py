"""The gate and the report inside a pytest session (loopback broker, no broker process).

The baseline is synthetic: three runs of the same cell as the loopback test, every
latency 1 µs, so the real run's e2e_response p99 (hundreds of µs) is a regression that
must fail the test itself; the session-end report says the same.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.records import SyntheticRun, synthetic_record, write_jsonl

pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")

CONFTEST = """
import pytest
from pytest_brokerperf.endpoint import BrokerEndpoint

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


def test_a_regression_fails_the_test_and_the_session_report_says_so(
        pytester: pytest.Pytester) -> None:
    fast = {v: np.ones(2000, dtype=np.int64) for v in ("e2e_response", "publish_response")}
    for i in range(3):
        run = SyntheticRun(run_id=f"2026010{i + 1}-000000-base00", test_id="b", broker="loopback",
                           params=dict(PARAMS), ack_rate=500.0)
        write_jsonl(pytester.path / "baseline" / "results.jsonl", [synthetic_record(run, fast)])
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess(
        "--brokerperf-duration=2", "--brokerperf-warmup=1", "--brokerperf-period=0.5",
        "-p", "no:cacheprovider", "-p", "no:randomly", "--brokerperf-noise-retries=2",
        f"--brokerperf-results={pytester.path}/res", "--brokerperf-report=markdown,csv",
        f"--brokerperf-baseline={pytester.path}/baseline",
        "--brokerperf-fail-on=e2e_response.p99:+15%")
    records = [json.loads(x) for x in
               (pytester.path / "res" / "results.jsonl").read_text().splitlines()]
    skip_if_host_noise(records)
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "regression against the baseline: e2e_response.p99" in out
    assert "budget +15%" in out and "noise floor 0.0% over 3 baseline runs" in out
    [rec] = records
    [gate] = rec["gates"]
    assert gate["status"] == "regression" and gate["baseline"] == 1.0
    [summary] = (pytester.path / "res").glob("*/summary.md")
    text = summary.read_text()
    assert "**Gate: REGRESSION**" in text and "loopback" in text
    assert list((pytester.path / "res").glob("*/cells.csv"))
    assert "report written to" in out


def test_a_saved_run_is_a_named_baseline_and_an_unknown_name_a_usage_error(
        pytester: pytest.Pytester) -> None:
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
