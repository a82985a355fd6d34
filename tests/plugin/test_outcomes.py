"""Scenario outcomes through the real plugin: pass, SLO failure, INCONCLUSIVE, skip.

The broker here is the in-process loopback driver (no broker process): these tests
check the plugin's judging and reporting logic, where the right outcome is known.
Broker figures are tested against real local brokers in tests/integration.
"""

import json

import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.loopback import LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

FAST = [
    "--brokerperf-duration=2", "--brokerperf-warmup=1", "--brokerperf-period=0.5",
    "-p", "no:cacheprovider", "-p", "no:randomly",
    # a window the hypervisor stole from is measured again, twice; still robbed: skipped
    "--brokerperf-noise-retries=2",
]


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    return pytester


def _run(pytester, body, *args):
    pytester.makepyfile(test_scn=body)
    result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                           *args)
    if (pytester.path / "res" / "results.jsonl").is_file():
        skip_if_host_noise(_records(pytester))
    return result


def _records(pytester):
    path = pytester.path / "res" / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_valid_run_passes_and_writes_results(suite):
    result = _run(suite, """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_ok(brokerperf):
    r = brokerperf.run(TailRead(message_size=128, rate=500))
    assert r.verdict.status == "valid"
""", "--brokerperf-rate=500")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*brokerperf summary*", "*tailread*valid*pass*"])
    (rec,) = _records(suite)
    assert rec["schema"] == "brokerperf.result/1"
    assert rec["delivery"]["lost"] == 0 and rec["delivery"]["acknowledged"] > 0
    assert {s["status"] for s in rec["slo"]} == {"pass"}
    art = suite.path / "res" / rec["run_id"]
    files = {p.name for p in next(art.iterdir()).iterdir()}
    assert {"workload.yaml", "driver.yaml", "periods.csv", "manifest.json",
            "record.json", "broker-settings.json", "histograms"} <= files
    assert any(f.endswith(".json") and f.startswith("tail-read") for f in files)


def test_violated_slo_fails_with_observed_threshold_and_unit(suite):
    result = _run(suite, """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
@pytest.mark.slo("e2e_response.p50 < 1 us")
def test_too_strict(brokerperf):
    brokerperf.run(TailRead(message_size=128))
""", "--brokerperf-rate=500")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SLO violated*", "*e2e_response.p50 = * < 1 *us*"])
    (rec,) = _records(suite)
    assert [s["status"] for s in rec["slo"] if s["metric"] == "e2e_response.p50"] == ["fail"]


def test_slo_file_applies_by_selector(suite):
    suite.makefile(".yaml", slo="""
slos:
  - expr: "ack_rate > 1000000 msg/s"
    when: {broker: kafka}
  - expr: "lost == 0"
""")
    result = _run(suite, """
import pytest
from pytest_brokerperf import TailRead

def test_selected(brokerperf):
    brokerperf.run(TailRead(message_size=128))
""", "--brokerperf-rate=500", f"--brokerperf-slo={suite.path}/slo.yaml")
    # the impossible ack_rate SLO is for kafka only; this broker is the loopback
    result.assert_outcomes(passed=1)


def test_generator_bound_run_is_inconclusive_not_a_figure(suite):
    result = _run(suite, """
import pytest
from pytest_brokerperf import TailRead

def test_overdriven(brokerperf):
    brokerperf.run(TailRead(message_size=128))
""", "--brokerperf-rate=400000", "--brokerperf-max-steal=100")  # the generator, not the host
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE:*"])
    (rec,) = _records(suite)
    assert rec["verdict"]["status"] == "generator-bound"
    assert rec["slo"] == []  # invalid figures are never judged


def test_inconclusive_can_be_a_warning(suite):
    result = _run(suite, """
from pytest_brokerperf import TailRead

def test_overdriven(brokerperf):
    brokerperf.run(TailRead(message_size=128))
""", "--brokerperf-rate=400000", "--brokerperf-max-steal=100", "--brokerperf-inconclusive=warn",
                  "-W",
                  "default::pytest_brokerperf.core.warnings.BrokerPerfWarning")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*BrokerPerfWarning: INCONCLUSIVE:*"])


def test_unavailable_broker_skips_with_reason(pytester):
    # Redpanda cannot be started here (no artifact in any reachable registry)
    pytester.makepyfile(test_scn="""
def test_needs_redpanda(brokerperf):
    pass
""")
    result = pytester.runpytest_subprocess("--broker=redpanda", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*redpanda*"])


def test_bad_slo_expression_fails_before_any_load(suite):
    result = _run(suite, """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.slo("e2e_respnse.p99 < 5 ms")
def test_typo(brokerperf):
    brokerperf.run(TailRead(message_size=128))
""")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*e2e_respnse*"])
    assert not (suite.path / "res" / "results.jsonl").exists()



def test_a_negative_broker_warm_up_is_a_usage_error_naming_the_flag(suite):
    result = _run(suite, "def test_x():\n    pass\n", "--brokerperf-broker-warmup=-3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'-3' from --brokerperf-broker-warmup*>= 0*"])
