"""OMB workload keys through the real plugin (loopback driver, no broker): a
producerRateList schedule is followed period by period, an unknown key is refused,
and --brokerperf-lenient ignores it and says so in the record."""

import json

import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.loopback import LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead())
"""

WORKLOAD = """name: schedule
topics: 1
partitionsPerTopic: 2
messageSize: 128
subscriptionsPerTopic: 1
producersPerTopic: 1
consumerPerSubscription: 1
producerRate: 1000
testDurationMinutes: 1
"""

FAST = ["--brokerperf-duration=3.6", "--brokerperf-warmup=0", "--brokerperf-period=0.6",
        "-p", "no:cacheprovider", "-p", "no:randomly", "--brokerperf-noise-retries=2"]


@pytest.fixture
def suite(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    pytester.makepyfile(test_scn=TEST)
    return pytester


def _run(pytester, workload, *args):
    path = pytester.path / "w.yaml"
    path.write_text(workload)
    return pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                         f"--brokerperf-workload={path}", *args)


def _records(pytester):
    path = pytester.path / "res" / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rate_schedule_sets_each_periods_target(suite):
    # steps at 0, 1.2 s and 2.4 s into the measured window (0.6-s periods)
    result = _run(suite, WORKLOAD + "producerRateList: [[0, 200], [0.02, 600], [0.04, 300]]\n")
    records = _records(suite)
    skip_if_host_noise(records)
    result.assert_outcomes(passed=1)
    (rec,) = records
    timeline = rec["timeline"]
    measured = [r for ph, r in zip(timeline["phase"], timeline["target_rate_msg_s"],
                                   strict=True) if ph == "measure"]
    assert measured == [200, 200, 600, 600, 300, 300]  # the old code: 1000 throughout
    schedule = rec["workload"]["rate_schedule"]
    assert schedule["kind"] == "elapsed"
    assert schedule["points"] == [{"after_s": 0.0, "rate_msg_s": 200.0},
                                  {"after_s": pytest.approx(1.2), "rate_msg_s": 600.0},
                                  {"after_s": pytest.approx(2.4), "rate_msg_s": 300.0}]
    assert rec["workload"]["ignored_keys"] == []
    assert rec["delivery"]["lost"] == 0


def test_unknown_key_is_refused_naming_file_line_and_closest(suite):
    result = _run(suite, WORKLOAD + "messageSzie: 2048\n")
    result.stderr.fnmatch_lines([  # refused before the session starts anything
        "*--brokerperf-workload=*w.yaml:10: messageSzie = 2048: unknown workload key "
        "(did you mean 'messageSize'?)*"
        "Fix: rename it to `messageSize`, or pass --brokerperf-lenient*"])
    assert not (suite.path / "res" / "results.jsonl").exists()
    assert result.ret != 0


def test_lenient_runs_and_records_the_ignored_keys(suite):
    # what is checked is the record's workload block, not the window's verdict: a busy
    # host's INCONCLUSIVE stays a warning here
    result = _run(suite, WORKLOAD + "someNewerOmbKey: 7\n", "--brokerperf-lenient",
                  "--brokerperf-inconclusive=warn",
                  "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning")
    records = _records(suite)
    result.assert_outcomes(passed=1, warnings=result.parseoutcomes().get("warnings", 0))
    result.stdout.fnmatch_lines(["*someNewerOmbKey = 7: unknown workload key*ignored "
                                 "(--brokerperf-lenient)*"])
    # said once (the preflight, which reads the file first, keeps it to itself)
    assert result.stdout.str().count("someNewerOmbKey = 7: unknown workload key") == 1
    (rec,) = records
    assert rec["workload"]["ignored_keys"] == ["someNewerOmbKey"]
    assert rec["workload"]["rate_schedule"] is None
