"""A user's workload file (``--brokerperf-workload``) runs once per scenario kind: study,
sweep and ``own_workload`` tests are deselected with the reason, no record names the file
unless it ran it, and a file a selected scenario cannot run is refused before any broker
starts (issue 23, items 4 and 11)."""

import json
import re
import shutil
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[2] / "scenarios"

CONFTEST = """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    open("broker-started", "w").close()
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

USER_FILE = ("name: mine\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 128\n"
             "subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\n"
             "producerRate: 200\ntestDurationMinutes: 1\n")

FAST = ["--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
        "--brokerperf-calibration=off", "--brokerperf-inconclusive=warn",
        "--brokerperf-max-steal=100", "-p", "no:cacheprovider", "-p", "no:randomly", "-s"]


def _suite(pytester: pytest.Pytester) -> None:
    for name in ("test_tailread.py", "test_catchup.py", "test_throughput.py"):
        shutil.copy(SUITE / name, pytester.path / name)


def test_a_workload_file_deselects_study_sweep_and_variant_cases(pytester):
    _suite(pytester)
    pytester.makefile(".yaml", mine=USER_FILE)
    result = pytester.runpytest_subprocess(
        "-m", "tailread or catchup", "--broker=kafka", "--brokerperf-workload=mine.yaml",
        "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == ["test_catchup.py::test_catchup[kafka]",
                   "test_tailread.py::test_tailread[kafka]"]
    result.stdout.fnmatch_lines(["*brokerperf: * study, sweep and variant test(s) "
                                 "deselected: they run their own parameters, not "
                                 "--brokerperf-workload=*mine.yaml*"])
    said = re.search(r"brokerperf: (\d+) study, sweep", result.stdout.str())
    assert said is not None
    # every case the same selection runs without the file (bar the two plain tests) is one
    # the file deselects and counts (cases of other broker kinds may be counted too)
    without = pytester.runpytest_subprocess(
        "-m", "tailread or catchup", "--broker=kafka", "--collect-only", "-q",
        "-p", "no:cacheprovider")
    cases = [line for line in without.stdout.lines if "::" in line]
    assert len(cases) > 2
    assert int(said.group(1)) >= len(cases) - 2


def test_without_a_workload_file_nothing_is_deselected(pytester):
    _suite(pytester)
    result = pytester.runpytest_subprocess(
        "-m", "catchup", "--broker=kafka", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0
    ids = [line for line in result.stdout.lines if "::" in line]
    assert len(ids) == 6, ids  # every catch-up test of the module, study cases included
    assert sum("study" in i for i in ids) == 3
    assert "study, sweep and variant test(s) deselected" not in result.stdout.str()


def test_a_study_case_never_names_the_users_file(pytester):
    """A case run by ``brokerperf.run_case`` in a test without a StudyCase parameter (so
    nothing deselects it) runs its study's numbers on the shipped workload: its record
    names that file, not the user's; the plain test's record names the user's file."""
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", mine=USER_FILE)
    pytester.makepyfile(test_case="""
import pytest
from pytest_brokerperf import StudyCase

def test_direct(brokerperf):
    brokerperf.run_case(StudyCase("s", "t", "tailread", partitions=2, message_size=256,
                                  rate=200))

@pytest.mark.tailread
def test_plain(brokerperf):
    from pytest_brokerperf import TailRead
    brokerperf.run(TailRead())
""")
    result = pytester.runpytest_subprocess("--broker=kafka", "--brokerperf-workload=mine.yaml",
                                           f"--brokerperf-results={pytester.path / 'res'}",
                                           *FAST)
    assert result.ret == 0, result.stdout.str()
    records = {json.loads(x)["test_id"].rsplit("::", 1)[-1]: json.loads(x)
               for x in (pytester.path / "res" / "results.jsonl").read_text().splitlines()}
    assert records["test_plain[kafka]"]["workload"]["file"].endswith("mine.yaml")
    assert not str(records["test_direct[kafka]"]["workload"]["file"]).endswith("mine.yaml")


@pytest.mark.parametrize("marker", ["tailread", "throughput"])
def test_a_backlog_workload_outside_catchup_is_refused_before_any_broker(pytester, marker):
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", backlog=USER_FILE + "consumerBacklogSizeGB: 1\n")
    pytester.makepyfile(test_scn=f"""
import pytest
from pytest_brokerperf import TailRead, Throughput

@pytest.mark.{marker}
def test_it(brokerperf):
    brokerperf.run({'TailRead' if marker == 'tailread' else 'Throughput'}())
""")
    result = pytester.runpytest_subprocess("--broker=kafka", "--brokerperf-workload=backlog.yaml",
                                           f"--brokerperf-results={pytester.path / 'res'}",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*--brokerperf-workload=*backlog.yaml (selected {marker} "
                                 "tests): *backlog.yaml:10: consumerBacklogSizeGB = 1: *"
                                 "Fix: run it as a catch-up read (`-m catchup`*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "broker-started").exists()
    assert not (pytester.path / "res").exists()


def test_a_backlog_workload_runs_under_catchup(pytester):
    """The same file is accepted where it means something (refused only per kind)."""
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", backlog=USER_FILE + "consumerBacklogSizeGB: 1\n")
    pytester.makepyfile(test_scn="""
import pytest

@pytest.mark.catchup
def test_it(brokerperf):
    pass
""")
    result = pytester.runpytest_subprocess("--broker=kafka", "--brokerperf-workload=backlog.yaml",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()


def test_a_lenient_warning_points_at_the_users_file_and_line(pytester):
    """It pointed at the plugin's scenario_library/base.py:150 (issue 23, item 8)."""
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".yaml", mine=USER_FILE + "futureKey: 7\n")
    pytester.makepyfile(test_scn="""
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_it(brokerperf):
    brokerperf.run(TailRead(), check=False)
""")
    result = pytester.runpytest_subprocess("--broker=kafka", "--brokerperf-workload=mine.yaml",
                                           "--brokerperf-lenient",
                                           f"--brokerperf-results={pytester.path / 'res'}",
                                           *FAST)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*mine.yaml:10: BrokerPerfWarning: *mine.yaml:10: futureKey = 7:"
                                 "*ignored (--brokerperf-lenient).*"])
    assert "base.py" not in result.stdout.str()
