"""Bad input is refused before any broker starts: usage error (exit 4), nothing started.

The conftest's ``broker`` fixture writes a marker file when it would start a broker; it
must never run when the input is bad.
"""

from __future__ import annotations

import pytest

CONFTEST = """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    open("broker-started", "w").close()
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

TAILREAD = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_scn=TAILREAD)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_an_unwritable_results_directory_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--brokerperf-results=/proc/brokerperf-forbidden")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--brokerperf-results=/proc/brokerperf-forbidden: the "
                                 "results directory cannot be written*Fix:*"])
    assert not (pytester.path / "broker-started").exists()


def test_a_bad_workload_file_is_a_usage_error_with_its_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", bad="name: x\ntopics: 1\npartitionsPerTopic: 1\n"
                                   "messageSize: -5\nproducersPerTopic: 1\n")
    result = _run(pytester, "--brokerperf-workload=bad.yaml",
                  f"--brokerperf-results={pytester.path / 'res'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--brokerperf-workload=*bad.yaml: 2 problems in *bad.yaml:",
         "  *bad.yaml:4: messageSize = -5*",
         "  *bad.yaml: testDurationMinutes = 0 (not in the file: OMB's default)*"])
    assert not (pytester.path / "broker-started").exists()
    assert not (pytester.path / "res").exists()  # refused: nothing created, not even that


def test_a_bad_slo_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", slos="slos:\n  - 'e2e_latency.p99 <<< 5ms'\n")
    result = _run(pytester, "--brokerperf-slo=slos.yaml",
                  f"--brokerperf-results={pytester.path / 'res'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--brokerperf-slo=*slos.yaml: *slos.yaml:2: slos?0? = *Fix:*"])
    assert not (pytester.path / "broker-started").exists()


def test_a_bad_driver_file_is_a_usage_error_naming_the_broker_and_line(
        pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", kafka="name: Kafka\ndriverClass: x\nreplicationFactor: 0\n")
    result = _run(pytester, "--brokerperf-driver=kafka.yaml", "--broker=kafka",
                  f"--brokerperf-results={pytester.path / 'res'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--brokerperf-driver=*kafka.yaml (as the kafka driver "
                                 "file): *kafka.yaml:3: replicationFactor = 0: *Fix:*"])
    assert not (pytester.path / "broker-started").exists()


def test_good_input_runs(pytester: pytest.Pytester) -> None:
    result = _run(pytester, f"--brokerperf-results={pytester.path / 'res'}",
                  "--brokerperf-duration=1", "--brokerperf-warmup=0.5",
                  "--brokerperf-period=0.5", "--brokerperf-max-steal=100",
                  "--brokerperf-inconclusive=warn")
    assert (pytester.path / "broker-started").exists()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def test_a_broker_memory_cap_below_the_heap_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--brokerperf-broker-memory=512MiB", "--broker=kafka",
                  f"--brokerperf-results={pytester.path / 'res'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--brokerperf-broker-memory=512MiB is below the 1,408 MiB "
                                 "one node of kafka needs*give at least 1,408MiB*"
                                 "(from --brokerperf-broker-memory)*"])
    assert not (pytester.path / "broker-started").exists()


def test_a_broker_memory_cap_on_a_remote_cluster_is_a_usage_error(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--brokerperf-broker-memory=2GiB", "--broker=kafka",
                  "--kafka-bootstrap=127.0.0.1:1", f"--brokerperf-results={pytester.path / 'r'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--brokerperf-broker-memory (from --brokerperf-broker-memory) "
                                 "caps the memory of brokers this plugin starts*drop the flag*"])
    assert not (pytester.path / "broker-started").exists()
