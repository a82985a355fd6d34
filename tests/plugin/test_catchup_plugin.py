"""The catch-up scenario through the real plugin, on the in-process loopback driver.

Checked here: the marker, the record's ``catchup`` block and figures, SLOs on the
catch-up figures, the skip for a driver whose consumers cannot pause, and the tail-read
scenario refusing a backlog workload. The Kafka run with broker-side offsets is in
tests/integration/test_catchup_kafka.py.
"""

import json

import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

FAST = list(FAST_ARGS)

BODY = """
import pytest
from pytest_brokerperf import CatchUp

@pytest.mark.catchup
def test_cu(brokerperf):
    brokerperf.run(CatchUp(message_size=256, partitions=2, rate=1000,
                           backlog_bytes=3000 * 256, ARGS))
"""


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    return pytester


def _run(pytester, *args, scenario_args="drain_ratio=1.0"):
    pytester.makepyfile(test_scn=BODY.replace("ARGS", scenario_args))
    return pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                         *args)


def _record(pytester):
    (rec,) = [json.loads(x) for x in (pytester.path / "res" / "results.jsonl").read_text()
              .splitlines()]
    return rec


def test_catchup_record_and_figures(suite):
    # the record is under test, not this busy machine's schedule: a tail-read window the
    # generator could not keep (INCONCLUSIVE) is a warning here
    suite.makeini("[pytest]\nfilterwarnings =\n    error\n"
                  "    default::pytest_brokerperf.core.warnings.BrokerPerfWarning\n")
    result = _run(suite, "-m", "catchup", "--brokerperf-inconclusive=warn")
    result.assert_outcomes(passed=1, warnings=result.parseoutcomes().get("warnings", 0))
    result.stdout.fnmatch_lines(["*catchup: backlog*built in*draining*",
                                 "*catchup: build*drain*msg/s*MiB/s*",
                                 "*test_cu*p=2 size=256B rate=1k*",
                                 "catch-up (backlog built with consumers paused, then drained):",
                                 "*backlog MiB*build s*drain s*catch-up msg/s*MiB/s*cache",
                                 "*unknown"])
    rec = _record(suite)
    skip_if_host_noise([rec])
    cu = rec["catchup"]
    assert rec["scenario"] == "catchup" and cu["build_complete"] and cu["drain_complete"]
    assert cu["backlog_bytes_target"] == 3000 * 256
    assert cu["backlog_at_drain_start_messages"] >= 3000
    assert cu["drain_threshold_messages"] == 1000
    assert cu["residual_messages"] <= 1000
    # consumed during the drain = backlog at its start + produced during it - residual
    assert cu["consumed_during_drain"] == (cu["backlog_at_drain_start_messages"]
                                           + cu["produced_during_drain"]
                                           - cu["residual_messages"])
    assert cu["catchup_rate_msg_s"] == pytest.approx(
        cu["consumed_during_drain"] / cu["drain_s"])
    # every message read during the drain, give or take a batch still being recorded
    assert cu["age"]["count"] >= cu["consumed_during_drain"] - 500
    # the first message published after the pause waited the whole build
    assert cu["age"]["max_us"] >= 0.99 * cu["build_s"] * 1e6
    assert cu["broker_backlog_at_drain_start"] is None  # the loopback has no broker view
    if rec["verdict"]["status"] == "valid":  # SLOs are judged on a valid window only
        assert {s["metric"]: s["status"] for s in rec["slo"]} == {"lost": "pass",
                                                                   "drained": "pass"}
    assert rec["delivery"]["lost"] == 0
    assert rec["params"]["backlog_bytes"] == 3000 * 256
    art = suite.path / "res" / rec["run_id"]
    (d,) = list(art.iterdir())
    phases = {line.split(",")[0] for line in (d / "periods.csv").read_text().splitlines()[1:]}
    assert {"measure", "build", "drain"} <= phases


def test_slos_bound_catchup_figures(suite):
    suite.makepyfile(test_scn=BODY.replace("ARGS", "slos=('drain_s < 0.001 ms',)"))
    result = suite.runpytest_subprocess(*FAST, f"--brokerperf-results={suite.path}/res")
    status = _record(suite)["verdict"]["status"]
    if status != "valid":
        pytest.skip(f"the tail-read window was {status} on this loaded host: SLOs are "
                    "judged on a valid measurement only")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SLO violated*", "*drain_s = * ms, SLO < 0.001 ms*"])


def test_a_driver_that_cannot_pause_consumers_skips_with_the_reason(suite):
    suite.makeconftest(CONFTEST + """
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
LoopbackDriver.CONSUMER_PAUSE = None
LoopbackDriver.CONSUMER_PAUSE_MISSING = "no pause in this test"
""")
    result = _run(suite, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*catch-up on loopback: its driver cannot pause consumers*"
                                 "no pause in this test*"])


def test_tailread_with_a_backlog_workload_says_to_use_catchup(suite):
    suite.makefile(".yaml", backlog="""
name: b
topics: 1
partitionsPerTopic: 1
messageSize: 256
subscriptionsPerTopic: 1
producersPerTopic: 1
consumerPerSubscription: 1
producerRate: 1000
consumerBacklogSizeGB: 1
backlogDrainRatio: 0.9
testDurationMinutes: 1
""")
    suite.makepyfile(test_tr="""
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tr(brokerperf):
    brokerperf.run(TailRead())
""")
    result = suite.runpytest_subprocess(*FAST, f"--brokerperf-results={suite.path}/res",
                                        f"--brokerperf-workload={suite.path}/backlog.yaml",
                                        "-m", "tailread")
    # refused before any broker starts (it failed inside the test, after the start)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*backlog.yaml:9: consumerBacklogSizeGB = 1*-m catchup*"])
