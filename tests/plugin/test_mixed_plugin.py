"""The mixed scenario through the real plugin (no broker).

Checked here: the ``mixed`` marker is registered and selects the test with ``-m mixed``,
and a driver that keeps no retained log (the in-process loopback) skips with the reason
before any load starts. The run on a real broker, with the catch-up group's count
checked against its committed offsets, is in tests/integration/test_mixed_kafka.py.
"""

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

CONFTEST = LOOPBACK_CONFTEST

BODY = """
import pytest
from pytest_brokerperf import Mixed

@pytest.mark.mixed
def test_mx(brokerperf):
    brokerperf.run(Mixed(message_size=256, partitions=2, rate=1000, backlog_bytes=3000 * 256))

@pytest.mark.tailread
def test_other():
    pass
"""

FAST = list(FAST_ARGS)


def test_mixed_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.mixed: mixed workload scenario*"])


def test_m_mixed_selects_it_and_a_log_less_driver_skips_with_the_reason(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={pytester.path}/res",
                                           "-m", "mixed", "-rs")
    result.assert_outcomes(skipped=1, deselected=1)
    result.stdout.fnmatch_lines(["*mixed on loopback: its driver keeps no retained log*"])
