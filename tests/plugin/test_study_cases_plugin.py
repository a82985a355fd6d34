"""Study cases through the real plugin on the in-process loopback driver: the record's
``study``/``case`` parameters and scaling note, the omb refusal before any broker starts,
and the shipped suite's case ids."""

import json
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "scenarios"

CONFTEST = """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

STARTED = []

@pytest.fixture(scope="session")
def broker(broker_kind):
    STARTED.append(broker_kind)
    print("BROKER STARTED")
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

BODY = """
import pytest
from pytest_brokerperf import StudyCase

CASES = [
    StudyCase("streamnative", "table 2", "tailread", partitions=100, subscriptions=2,
              message_size=256, rate=200_000),
]
HUGE = [StudyCase("streamnative", "catch-up read", "catchup", rate=200_000,
                  backlog_bytes=1024**5)]

@pytest.mark.tailread
@pytest.mark.parametrize("case", CASES, ids=str)
def test_case(brokerperf, case):
    brokerperf.run_case(case)

@pytest.mark.catchup
@pytest.mark.parametrize("case", HUGE, ids=str)
def test_huge(brokerperf, case):
    brokerperf.run_case(case)
"""

# the records and notes are checked, not the verdict: a busy host (run-queue noise) makes
# the run INCONCLUSIVE, which must not fail these tests
FAST = ["--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
        "--brokerperf-calibration=off", "--brokerperf-inconclusive=warn",
        "--brokerperf-max-steal=100", "-p", "no:cacheprovider", "-p", "no:randomly",
        "--strict-markers", "-rs", "-s"]


def _records(pytester):
    path = pytester.path / "res" / "results.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_a_smoke_case_runs_scaled_and_says_so(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=BODY)
    r = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                      "-m", "tailread")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["*test_case?kafka-p100-s2-256B-r200k?*loopback*"])
    (rec,) = _records(pytester)
    assert rec["params"]["study"] == "streamnative"
    assert rec["params"]["case"] == "p100-s2-256B-r200k"
    assert rec["params"]["partitions"] == 16 and rec["params"]["subscriptions"] == 2
    assert rec["params"]["rate"] == 1000
    (note,) = [n for n in rec["notes"] if n.startswith("study case ")]
    assert "table 2" in note and "partitions 100 -> 16" in note and "rate 200k -> 1k" in note


def test_omb_refuses_a_case_the_disk_cannot_hold_before_any_broker_starts(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=BODY)
    r = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                      "--brokerperf-profile=omb", "-m", "catchup")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*REFUSED under --brokerperf-profile=omb before any broker "
                            "started: study case streamnative*backlog1024TiB*1024 TiB*free*"])
    assert "BROKER STARTED" not in r.stdout.str()
    assert _records(pytester) == []


def test_the_shipped_suite_lists_the_studies_cases(pytester):
    r = pytester.runpytest_subprocess(str(SUITE), "--collect-only", "-q",
                                      "--broker=kafka,pulsar", "--brokerperf-durability=2",
                                      "-p", "no:cacheprovider")
    out = r.stdout.str()
    for wanted in (
        "test_catchup_study[kafka-d2-p100-4KiB-r76.8k-backlog1TiB]",
        "test_tailread_study[kafka-d2-p100-s10-1KiB-r200k]",
        "test_throughput_study[pulsar-d2-p2000-1KiB]",
        "test_throughput_study[pulsar-d2-p100-4x4-1KiB-batch1MiB-linger50ms]",
        "test_throughput_batch_sweep[kafka-d2-p100-1KiB-batch1MiB]",
        "test_throughput_fsync_sweep[kafka-d3-p100-1KiB-batch1MiB]",
        "test_pulsar_limit[pulsar-d2-p1-512KiB-none-sync]",
        "test_mixed_study[pulsar-d2-p100-1KiB-r200k-backlog512GiB]",
        "test_reassign_study[kafka-d2-p1-4KiB-r10.24k-throttle100MiB-after600s-bg-p4-r2.56k]",
    ):
        assert wanted in out, wanted
    assert "test_pulsar_limit[kafka" not in out  # a Pulsar study


def test_inapplicable_study_cases_are_deselected_at_collection_with_the_reason(pytester):
    r = pytester.runpytest_subprocess(str(SUITE), "--collect-only", "-q",
                                      "--broker=kafka,pulsar,rabbitmq", "-p",
                                      "no:cacheprovider")
    out = r.stdout.str()
    collected = [ln for ln in out.splitlines() if "::" in ln and not ln.startswith(" ")]
    assert not [ln for ln in collected if "test_reassign_study[pulsar" in ln
                or "test_reassign_study[rabbitmq" in ln or "test_mixed_study[rabbitmq" in ln]
    # RabbitMQ runs its own cases, not the Kafka-sized 200k ones
    assert not [ln for ln in collected if "[rabbitmq" in ln and "r200k" in ln]
    assert any("test_tailread_study[rabbitmq-p24-4x4-1KiB-r30k-mirrored]" in ln
               for ln in collected)
    r.stdout.fnmatch_lines([
        "brokerperf: * test(s) deselected, they do not apply to their broker:",
        "*test_reassign_study?pulsar-*: the reassign scenario does not apply to pulsar: "
        "partition reassignment is a Kafka-protocol operation*",
        "*test_mixed_study?rabbitmq-*: the mixed scenario does not apply to rabbitmq:*",
    ])


RABBITMQ_BODY = """
import pytest
from pytest_brokerperf import StudyCase

CASES = [StudyCase("confluent", "figure 13", "tailread", partitions=24, rate=30_000,
                   brokers=("rabbitmq",), min_nodes=2,
                   min_nodes_why="classic queues mirrored to every node need a second node")]

@pytest.mark.tailread
@pytest.mark.parametrize("case", CASES, ids=str)
def test_case(brokerperf, case):
    brokerperf.run_case(case)
"""


def test_a_case_this_setup_cannot_run_is_refused_before_any_broker_starts(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=RABBITMQ_BODY)
    r = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                      "--broker=kafka,rabbitmq")
    r.assert_outcomes(skipped=1, deselected=1)
    r.stdout.fnmatch_lines([
        "*test_case?kafka-p24-1KiB-r30k?: study case confluent p24-1KiB-r30k is the "
        "study's rabbitmq case, not kafka's",
        "*REFUSED before any broker started: study case confluent p24-1KiB-r30k needs "
        "--brokerperf-nodes >= 2: classic queues mirrored to every node need a second node*",
    ])
    assert "BROKER STARTED" not in r.stdout.str()
    assert _records(pytester) == []


NOTED_BODY = """
import pytest
from pytest_brokerperf import StudyCase

CASES = [StudyCase("streamnative", "table 2", "tailread", partitions=4, rate=200_000,
                   section="StreamNative framework", drop_page_cache=True,
                   deviations=("bookkeeperNumberOfChannelsPerBookie=64 is not set",),
                   assumptions=("200k msg/s is not stated",))]

@pytest.mark.tailread
@pytest.mark.parametrize("case", CASES, ids=str)
def test_case(brokerperf, case):
    brokerperf.run_case(case)
"""


def test_the_record_cites_the_study_and_every_deviation(pytester):
    # the page cache "dropped" into a file of the test's (never the host's)
    pytester.makeconftest(CONFTEST + """
from pathlib import Path
from pytest_brokerperf.scenario_library import study_cases
study_cases.DROP_CACHES = Path(__file__).parent / "drop_caches"
""")
    pytester.makepyfile(test_cases=NOTED_BODY)
    r = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res")
    r.assert_outcomes(passed=1)
    (rec,) = _records(pytester)
    assert rec["params"]["study_source"] == "table 2"
    notes = rec["notes"]
    (cite,) = [n for n in notes if n.startswith("study case ")]
    assert ('StreamNative, "Benchmarking Pulsar and Kafka – A More Accurate Perspective on '
            "Pulsar's Performance\", table 2, StreamNative framework") in cite
    assert "study deviation: bookkeeperNumberOfChannelsPerBookie=64 is not set" in notes
    assert "study assumption: 200k msg/s is not stated" in notes
    assert "the host's page cache was dropped before the run (as the study)" in notes
    assert (pytester.path / "drop_caches").read_text() == "3\n"


def test_the_reassignment_case_dry_runs_under_omb_with_its_delay_before_the_move(pytester):
    """A dry run creates nothing: no calibration load, no broker asked how many brokers
    it has. The plan's measured window is the 600 s before the move, the move's bound
    (300 s) and the window after it (60 s)."""
    import pytest

    pytest.importorskip("kafka")  # kafka-python: the reassignment API
    r = pytester.runpytest_subprocess(
        str(SUITE / "test_reassign.py"), "-k", "study", "--broker=kafka",
        "--brokerperf-profile=omb", "--brokerperf-dry-run", "--brokerperf-nodes=3",
        "-p", "no:cacheprovider", "-rs", "-W", "ignore::DeprecationWarning")
    r.assert_outcomes(skipped=1, deselected=2)
    r.stdout.fnmatch_lines([
        "*test_reassign_study?kafka-p1-4KiB-r10.24k-throttle100MiB-after600s-bg-p4-r2.56k?*"
        "DRY RUN, nothing is created*",
        "*1-4 partitions, replication factor 1*",
        "*12,800 msg/s x 4,096 B = 50.00 MiB/s peak; warm-up <= 60 s + measured 960 s*",
        "*phases      600 s measured before the move, then the move (at most 300 s), then "
        "60 s after it*",
        "*DRY RUN: plan printed, nothing created*",
    ])


def _collected(r):
    return [ln for ln in r.stdout.str().splitlines() if "::" in ln and not ln.startswith(" ")]


def test_one_command_per_study_selects_its_cases_without_starting_a_broker(pytester):
    """``-m "study(name=...)"`` (marker keyword arguments, pytest >= 8.3) collects one
    study's cases (``--collect-only`` runs no fixture: no broker starts)."""
    r = pytester.runpytest_subprocess(str(SUITE), "--collect-only", "-q",
                                      "-m", "study(name='automq')", "--broker=kafka",
                                      "-p", "no:cacheprovider")
    assert r.ret == 0, r.stdout.str()
    ids = _collected(r)
    assert sorted(i.split("::")[1] for i in ids) == [
        "test_catchup_study[kafka-p100-4KiB-r76.8k-backlog1TiB]",
        "test_reassign_study[kafka-p1-4KiB-r10.24k-throttle100MiB-after600s-bg-p4-r2.56k]",
        "test_tailread_study[kafka-p100-4KiB-r230.4k-batch200KiB]",
        "test_tailread_study[kafka-p100-4KiB-r25.6k-batch200KiB]",
        "test_tailread_study[kafka-p100-4KiB-r51.2k-batch200KiB]",
    ]
    # one table; and the sweeps at a study's shape are not the study's published cases
    r = pytester.runpytest_subprocess(str(SUITE), "--collect-only", "-q", "-m",
                                      "study(name='confluent', table='figure 2')",
                                      "--broker=kafka", "-p", "no:cacheprovider")
    ids = _collected(r)
    assert len(ids) == 12 and all("batch_sweep" in i or "fsync_sweep" in i for i in ids)
    r = pytester.runpytest_subprocess(str(SUITE), "--collect-only", "-q", "-m", "study",
                                      "--broker=kafka", "-p", "no:cacheprovider")
    ids = _collected(r)
    assert len(ids) > 20
    # the linger and compression sweeps and the consumer-only drain publish no table
    assert not [i for i in ids if "test_tailread_sweep" in i or "consumer-only" in i]
