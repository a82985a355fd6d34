"""The throughput scenario through the real plugin, on the in-process loopback driver.

What is checked here is the plugin's logic — ladder outcomes, verdicts, records,
artefacts, the summary — where the right outcome is known. Real-broker ladders are in
tests/integration/test_throughput_kafka.py.
"""

import csv
import json

import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.loopback import LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

FAST = [
    "--brokerperf-duration=1.5", "--brokerperf-warmup=1", "--brokerperf-period=0.5",
    "--brokerperf-calibration=off", "-p", "no:cacheprovider", "-p", "no:randomly",
]

BODY = """
import pytest
from pytest_brokerperf.judge.ladder import LadderPolicy
from pytest_brokerperf import Throughput

@pytest.mark.throughput
def test_ladder(brokerperf):
    brokerperf.run(Throughput(message_size=256, partitions=2, policy=POLICY))
"""
#: The plugin's logic is under test, not this (shared, busy) machine's scheduling: a
#: 200 ms publish-delay budget keeps a stray stall from failing a 1k msg/s rung.
LENIENT = "LadderPolicy(publish_delay_budget_us=200_000)"


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    return pytester


def _run(pytester, body, *args, policy=LENIENT):
    pytester.makepyfile(test_scn=body.replace("POLICY", policy))
    result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                           *args)
    if (pytester.path / "res" / "results.jsonl").is_file():
        skip_if_host_noise([_record(pytester)])
    return result


def _record(pytester):
    (rec,) = [json.loads(x) for x in (pytester.path / "res" / "results.jsonl").read_text()
              .splitlines()]
    return rec


def test_ladder_that_never_fails_reports_limit_not_reached(suite):
    result = _run(suite, BODY, "--brokerperf-ladder=1k,2k")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*throughput ladder 1k,2k msg/s*",
        "*rung 1/2 1,000 msg/s*-> sustainable",
        "*rung 2/2 2,000 msg/s*-> sustainable",
        "*limit not reached at 2,000 msg/s*",
        "*brokerperf summary*",
        "*throughput (rungs: + sustainable*",
        "*+1k +2k*2,000*not reached at 2k*valid*",
    ])
    rec = _record(suite)
    assert rec["scenario"] == "throughput" and rec["verdict"]["status"] == "valid"
    lad = rec["ladder"]
    assert lad["outcome"] == "limit-not-reached" and lad["limit_reached"] is False
    assert lad["highest_sustainable_rate_msg_s"] == 2000 and lad["limit"] == "none"
    assert [r["status"] for r in lad["rungs"]] == ["sustainable", "sustainable"]
    assert [c["offered_rate_msg_s"] for c in lad["curve"]] == [1000, 2000]
    assert rec["throughput"]["mode"] == "ladder" and rec["rate_discovery"] is None
    assert rec["calibration"]["mode"] == "off"
    assert rec["target_rate_msg_s"] == 2000
    assert rec["delivery"]["lost"] == 0
    assert {s["metric"] for s in rec["slo"]} == {"lost"}
    art = suite.path / "res" / rec["run_id"]
    (d,) = list(art.iterdir())
    rows = list(csv.DictReader((d / "ladder.csv").read_text().splitlines()))
    assert [r["target_rate_msg_s"] for r in rows] == ["1000.0", "2000.0"]
    assert {r["status"] for r in rows} == {"sustainable"}
    assert sorted(p.name for p in (d / "rungs").iterdir()) == ["01-1k", "02-2k"]
    periods = list(csv.DictReader((d / "periods.csv").read_text().splitlines()))
    assert {float(p["target_rate_msg_s"]) for p in periods} == {1000.0, 2000.0}
    assert (d / "calibration.json").is_file()


def test_ladder_stopped_by_the_generator_is_inconclusive_and_stops_climbing(suite):
    # the lenient delay budget keeps a scheduling stall from failing the 2k rung; 3M msg/s
    # saturates the worker's CPU whatever the budget
    result = _run(suite, BODY, "--brokerperf-ladder=2k,3M,5M")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*rung 2/3 3,000,000 msg/s*NOT sustainable, limit generator*",
        "*INCONCLUSIVE: highest sustainable 2,000 msg/s; limit generator at 3,000,000*",
    ])
    assert "rung 3/3" not in result.stdout.str()
    rec = _record(suite)
    assert rec["verdict"]["status"] == "generator-bound"
    assert rec["ladder"]["outcome"] == "harness-limited"
    assert [r["target_rate_msg_s"] for r in rec["ladder"]["rungs"]] == [2000, 3_000_000]
    assert rec["slo"] == []  # a harness limit is never judged as a broker figure


def test_slo_on_the_highest_sustainable_rate(suite):
    body = BODY.replace("@pytest.mark.throughput",
                        '@pytest.mark.throughput\n@pytest.mark.slo("max_sustainable_rate '
                        '>= 1000000 msg/s")')
    result = _run(suite, body, "--brokerperf-ladder=1k,2k")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SLO violated*", "*max_sustainable_rate = 2000 msg/s*"])


def test_omb_rate_discovery_is_labelled(suite):
    # OMB's controller climbs until something limits it; on the loopback driver that is
    # the generator itself, so the verdict may honestly be generator-bound: this test
    # checks the labelling, with INCONCLUSIVE turned into a warning.
    result = _run(suite, BODY, "--brokerperf-rate-discovery", "--brokerperf-duration=4",
                  "--brokerperf-warmup=0", "--brokerperf-inconclusive=warn",
                  "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning")
    result.assert_outcomes(passed=1, warnings=result.parseoutcomes().get("warnings", 0))
    result.stdout.fnmatch_lines(["*throughput omb-rate-discovery: start 10,000 msg/s*",
                                 "*throughput[[]omb-rate-discovery[]]*"])
    rec = _record(suite)
    assert rec["throughput"]["label"] == "omb-rate-discovery"
    assert rec["ladder"] is None
    rd = rec["rate_discovery"]
    assert rd["label"] == "omb-rate-discovery" and rd["control_period_s"] == 3.0
    assert rd["limits"]["receive_backlog_limit"] == 1000
    assert rd["steps"] and rd["steps"][0]["rate_msg_s"] == 10_000
    d = next((suite.path / "res" / rec["run_id"]).iterdir())
    assert (d / "rate-discovery.csv").is_file()


def test_bad_ladder_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest_subprocess("--brokerperf-ladder=5k,lots",
                                           "-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*invalid throughput ladder '5k,lots'*'lots' is not a rate*"])


SIZED = """
import pytest
from pytest_brokerperf.judge.ladder import LadderPolicy
from pytest_brokerperf import Throughput
from pytest_brokerperf.workload.model import Workload

WL = Workload(name="sized", topics=2, partitions_per_topic=1, message_size=256,
              subscriptions_per_topic=1, producers_per_topic=1, consumer_per_subscription=1,
              producer_rate=1000, test_duration_minutes=1, warmup_duration_minutes=0)

@pytest.mark.throughput
def test_ladder(brokerperf):
    brokerperf.run(Throughput(workload=WL, policy=POLICY))
"""


def test_workers_are_sized_from_the_calibrated_ceiling_and_the_cpus(suite, monkeypatch):
    """A cached harness ceiling of 1,500 msg/s per process and a 3k top rung need two
    processes; the loopback keeps a topic in one worker, and there are two topics. The
    record says what the rule saw: CPUs, per-process ceiling, processes needed, workers."""
    import os

    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.judge.calibration import Ceiling, calibration_key, store

    key = calibration_key(LoopbackDriver(partitions=1), broker_version="in-process",
                          message_size=256, partitions=1, generator_cpus=None)
    store(Ceiling(target="harness", driver="loopback", broker="loopback", rate_msg_s=1500.0,
                  bound="client", failed_rate_msg_s=3000.0, limit_reasons=[], steps=[],
                  message_size=256, partitions=1, measured_at="2026-11-26T00:00:00",
                  duration_s=1.0, key=key), suite.path / "cache" / "calibration.json")
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(suite.path / "cache"))
    # the sizing is decided before the first rung: a noisy host cannot change it (no
    # host-noise skip here; the rungs' verdicts are not checked)
    suite.makepyfile(test_scn=SIZED.replace("POLICY", LENIENT))
    result = suite.runpytest_subprocess(*FAST, f"--brokerperf-results={suite.path}/res",
                                        "--brokerperf-ladder=1k,3k",
                                        "--brokerperf-calibration=auto")
    cpus = len(os.sched_getaffinity(0))
    workers = min(2, cpus)
    result.stdout.fnmatch_lines([
        f"*brokerperf: {workers} worker process(es) (*; {cpus} generator CPU(s), 1,500 msg/s "
        "per process from calibration (harness loopback, bound client))*"])
    rec = _record(suite)
    sizing = rec["calibration"]["sizing"]
    assert sizing == {"workers": workers, "generator_cpus": cpus, "per_process_msg_s": 1500.0,
                      "per_process_source": "calibration (harness loopback, bound client)",
                      "top_rate_msg_s": 3000.0,
                      "needed": 2, "topic_limit": 2,
                      "rule": "rate" if cpus >= 2 else "generator-cpus"}
    assert rec["calibration"]["harness"]["cached"] is True
    assert rec["ladder"]["workers"] == rec["calibration"]["workers"] == workers
    assert rec["calibration"]["producing_workers"] == workers
    assert rec["delivery"]["lost"] == 0
