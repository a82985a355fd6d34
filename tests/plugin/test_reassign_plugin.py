"""The reassign scenario through the real plugin (no broker).

Checked here: the ``reassign`` marker is registered and selects the test with
``-m reassign``, and a driver without partitions to move (the in-process loopback)
skips with the reason before any load starts. The move on a real three-node Kafka, read
back from the broker, is in tests/integration/test_reassign_kafka.py.
"""

import pytest

CONFTEST = """
import pytest
from pytest_brokerperf.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

BODY = """
import pytest
from pytest_brokerperf import Reassign

@pytest.mark.reassign
def test_ra(brokerperf):
    brokerperf.run(Reassign(message_size=256, rate=500))

@pytest.mark.tailread
def test_other():
    pass
"""

FAST = [
    "--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
    "--brokerperf-calibration=off", "-p", "no:cacheprovider", "-p", "no:randomly",
    "--strict-markers",
]


def test_reassign_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.reassign: partition reassignment scenario*"])


def test_m_reassign_selects_it_and_the_loopback_skips_with_the_reason(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                           "-m", "reassign", "-rs")
    result.assert_outcomes(skipped=1, deselected=1)
    result.stdout.fnmatch_lines(["*reassign on loopback: partition reassignment is a "
                                 "Kafka-protocol operation*"])
