"""Durability levels as a matrix dimension (pytester): option, marker, ids, ordering,
skips before any broker starts, and one broker process per (kind, bookie-wide level).

Brokers never start here: ``--collect-only``, levels refused before a start, or a fake
``BrokerType.start`` that only logs.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if (name.startswith(("BROKERPERF_", "PYTEST_XDIST_")) or name == "KAFKA_HOME") and (
                name != "BROKERPERF_AUTO_PROVISION"):
            monkeypatch.delenv(name)


SCENARIO = """
import pytest

def test_a(broker):
    pass

@pytest.mark.durability(3)
def test_b(brokerperf):
    pass

def test_kind_only(broker_kind):
    pass

def test_unit():
    pass
"""


def test_option_parametrizes_broker_tests_with_level_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn=SCENARIO)
    result = pytester.runpytest("--broker=kafka,pulsar", "--brokerperf-durability=2,1",
                                "--collect-only", "-q")
    assert result.ret == 0
    out = [ln for ln in result.stdout.lines if ln.startswith("test_scn.py::")]
    # grouped by broker process: every Kafka level shares one broker; a Pulsar standalone
    # serves one level (bookie journal), so its tests come level by level
    assert out == [
        "test_scn.py::test_a[kafka-d1]",
        "test_scn.py::test_a[kafka-d2]",
        "test_scn.py::test_b[kafka-d3]",
        "test_scn.py::test_kind_only[kafka]",
        "test_scn.py::test_kind_only[pulsar]",  # driver-defined first, then 1-4
        "test_scn.py::test_a[pulsar-d1]",
        "test_scn.py::test_a[pulsar-d2]",
        "test_scn.py::test_b[pulsar-d3]",
        "test_scn.py::test_unit",
    ]


def test_without_levels_ids_and_order_are_unchanged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn=SCENARIO.replace("@pytest.mark.durability(3)\n", ""))
    result = pytester.runpytest("--broker=kafka", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "test_scn.py::test_a[[]kafka[]]",
        "test_scn.py::test_b[[]kafka[]]",
        "test_scn.py::test_kind_only[[]kafka[]]",
        "test_scn.py::test_unit",
    ])
    assert "-d" not in result.stdout.str().replace("--", "")


def test_env_and_ini_give_the_levels_too(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_scn="def test_a(broker):\n    pass\n")
    pytester.makeini("[pytest]\nbrokerperf_durability = 4\n")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_scn.py::test_a[[]kafka-d4[]]"])
    monkeypatch.setenv("BROKERPERF_DURABILITY", "all")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([f"test_scn.py::test_a[[]kafka-d{n}[]]" for n in (1, 2, 3, 4)])
    result = pytester.runpytest("--collect-only")
    result.stdout.fnmatch_lines(["brokerperf: brokers=kafka * nodes=1 durability=1,2,3,4 *"])


def test_bad_option_is_a_usage_error_naming_value_source_and_fix(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_scn="def test_a(broker):\n    pass\n")
    result = pytester.runpytest("--brokerperf-durability=1,5", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*invalid durability levels '1,5' from --brokerperf-durability: '5' is not a "
        "durability level; expected 1, 2, 3 or 4*pass e.g. --brokerperf-durability=1,2.*"])
    monkeypatch.setenv("BROKERPERF_DURABILITY", "strong")
    result = pytester.runpytest("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'strong' from BROKERPERF_DURABILITY environment variable*"
                                 "set e.g. BROKERPERF_DURABILITY=1,2, or unset it.*"])


@pytest.mark.parametrize("args", ["", "'1'", "0", "2, 7", "level=1"])
def test_bad_marker_is_a_usage_error(pytester: pytest.Pytester, args: str) -> None:
    pytester.makepyfile(test_scn=f"""
import pytest

@pytest.mark.durability({args})
def test_a(broker):
    pass
""")
    result = pytester.runpytest("--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*@pytest.mark.durability(*) on test_scn.py::test_a*expected one or more levels 1-4 "
        "as integers*e.g. @pytest.mark.durability(1, 2)*"])


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.durability(*levels): run this test at these "
                                 "durability levels (1: sync replication + fsync*"])


def test_a_level_the_cluster_cannot_offer_skips_before_any_broker_starts(
        pytester: pytest.Pytester) -> None:
    # one node: sync replication (1, 2) is not offered; Tansu keeps no data on disk
    pytester.makepyfile(test_scn="""
import pytest

@pytest.mark.durability(1, 2)
def test_a(broker):
    raise AssertionError("no broker should have been provided")
""")
    result = pytester.runpytest("--broker=kafka,pulsar,rabbitmq,tansu", "-rs",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=8)
    result.stdout.fnmatch_lines_random([
        "SKIPPED*Kafka durability level 1 (sync replication) needs topics with at least 2 "
        "replicas*--brokerperf-nodes=3*",
        "SKIPPED*Pulsar durability level 2*needs entries written to at least 2 bookies*",
        "SKIPPED*RabbitMQ durability level 1 needs replication to a majority of 3 nodes*",
        "SKIPPED*durability level 1 on Tansu: in-memory storage*",
    ])


FAKE_PROVISION = """
import json, os
import pytest
from pytest_brokerperf.brokers.base import BrokerType, ManagedBroker
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

LOG = os.environ["BROKER_LOG"]


def _log(*words):
    with open(LOG, "a") as fh:
        fh.write(" ".join(str(w) for w in words) + "\\n")


class Handle:
    def __init__(self, name):
        self.name = name

    def stop(self):
        _log("stop", self.name)


def fake_start(kind, settings, workdir, durability=None, server=None):
    _log("start", kind, durability, *(f"{k}={v}" for k, v in (server or {}).items()))
    level = durability if kind == "pulsar" else None
    ep = BrokerEndpoint(kind=kind, bootstrap="x", mode="process", nodes=settings.nodes,
                        durability=level)
    return ManagedBroker(ep, Handle(f"{kind}-{durability}"))


@pytest.fixture(autouse=True, scope="session")
def _fake(request):
    mp = pytest.MonkeyPatch()
    mp.setattr(BrokerType, "start",
               lambda self, mode, settings, workdir, durability=None, server=None:
               fake_start(self.name, settings, workdir, durability, server))
    mp.setattr("pytest_brokerperf.plugin.warmup.warm_broker", lambda ep, s, bt: {"fake": True})
    mp.setattr("pytest_brokerperf.metrics.sysstats.fsync_probe", lambda p: {"fake": True})
    yield
    mp.undo()
"""


def test_a_broker_restarts_only_when_kind_or_a_bookie_wide_level_changes(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = pytester.path / "brokers.log"
    monkeypatch.setenv("BROKER_LOG", str(log))
    pytester.makeconftest(FAKE_PROVISION)
    pytester.makepyfile(test_scn="""
import pytest

def test_a(broker, broker_kind, broker_durability):
    assert broker.kind == broker_kind
    assert broker.durability == broker_durability  # the level this test runs at

@pytest.mark.durability(4)
def test_b(broker, broker_durability):
    assert broker.durability == broker_durability == 4
""")
    result = pytester.runpytest_subprocess("--broker=kafka,pulsar", "--brokerperf-nodes=3",
                                "--brokerperf-durability=1,2", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert log.read_text().splitlines() == [
        "start kafka None",  # one Kafka serves levels 1, 2 and 4 (per topic)
        "stop kafka-None",
        "start pulsar 1",  # the bookie journal is broker-wide: one standalone per level
        "stop pulsar-1",
        "start pulsar 2",
        "stop pulsar-2",
        "start pulsar 4",
        "stop pulsar-4",
    ]


def test_a_level_test_after_an_unlevelled_one_gets_its_level_and_back_again(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unmarked test and ``@pytest.mark.durability`` tests in one session: each sees
    its own level on ``broker`` (the session-scoped broker is not reused across the
    level fixture and its direct parametrization), and Kafka still starts once."""
    log = pytester.path / "brokers.log"
    monkeypatch.setenv("BROKER_LOG", str(log))
    pytester.makeconftest(FAKE_PROVISION)
    pytester.makepyfile(test_scn="""
import pytest

def test_first(broker, broker_durability):
    assert broker_durability is None and broker.durability is None

@pytest.mark.durability(1, 4)
def test_level(broker, broker_durability):
    assert broker.durability == broker_durability

def test_last(broker, broker_durability):
    assert broker_durability is None and broker.durability is None
""")
    result = pytester.runpytest_subprocess("--broker=kafka", "--brokerperf-nodes=3", "-v",
                                           "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_level[[]kafka-d1[]] PASSED*",
                                 "*test_level[[]kafka-d4[]] PASSED*"])
    assert log.read_text().splitlines() == ["start kafka None", "stop kafka-None"]


def test_a_study_case_with_broker_settings_gets_a_broker_of_its_own(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A study case's ``server_settings`` (the Pulsar limit test's bookie tuning) are a
    part of the broker process's key: the tuned case runs on a broker started with them,
    after the untuned tests (grouped, one restart), and a kind that cannot take them
    refuses the case before any broker starts."""
    log = pytester.path / "brokers.log"
    monkeypatch.setenv("BROKER_LOG", str(log))
    pytester.makeconftest(FAKE_PROVISION)
    pytester.makepyfile(test_scn="""
import pytest
from pytest_brokerperf.scenario_library.study_cases import StudyCase

TUNED = StudyCase("mine", "t", "tailread", server_settings=(
    "journalFlushWhenQueueEmpty=true", "journalAlignmentSize=4096"))
PLAIN = StudyCase("mine", "t", "tailread")

@pytest.mark.parametrize("case", [TUNED, PLAIN], ids=["tuned", "plain"])
def test_c(brokerperf, case):
    pass

def test_a(broker):
    pass
""")
    result = pytester.runpytest_subprocess("--broker=pulsar,rabbitmq", "-v", "-rs",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, skipped=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *REFUSED before any broker started: study case "
        "mine * needs broker settings rabbitmq in process mode cannot take: "
        "journalFlushWhenQueueEmpty=true; journalAlignmentSize=4096*--brokerperf-provision="
        "remote)*"])
    lines = log.read_text().splitlines()
    assert lines == [
        "start pulsar None",
        "stop pulsar-None",
        "start pulsar None journalFlushWhenQueueEmpty=true journalAlignmentSize=4096",
        "stop pulsar-None",
        "start rabbitmq None",
        "stop rabbitmq-None",
    ], lines
    # a session of tuned cases only starts the tuned broker, never a plain one first
    log.unlink()
    result = pytester.runpytest_subprocess("--broker=pulsar", "-k", "tuned",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert log.read_text().splitlines() == [
        "start pulsar None journalFlushWhenQueueEmpty=true journalAlignmentSize=4096",
        "stop pulsar-None"]
