"""The reassign scenario through the real plugin (no broker).

Checked here: the ``reassign`` marker is registered and selects the test with
``-m reassign``, and a driver without partitions to move (the in-process loopback)
skips with the reason before any load starts. The move on a real three-node Kafka, read
back from the broker, is in tests/integration/test_reassign_kafka.py.
"""

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

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

FAST = list(FAST_ARGS)


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
    result.stdout.fnmatch_lines(["*reassign on loopback: the in-process loopback broker has "
                                 "no partitions to move*"])
