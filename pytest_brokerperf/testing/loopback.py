"""Plugin tests without a broker: a conftest that gives every test the in-process
loopback driver as its broker, and the flags that keep such a run to seconds.

    def test_marker(pytester):
        pytester.makeconftest(LOOPBACK_CONFTEST)
        pytester.makepyfile(test_x=...)
        pytester.runpytest_subprocess(*FAST_ARGS, "-m", "tailread")
"""

from __future__ import annotations

from typing import Final

__all__ = ["FAST_ARGS", "LOOPBACK_CONFTEST"]

LOOPBACK_CONFTEST: Final = """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

#: one-second windows, no calibration, no cache or random order, strict markers
FAST_ARGS: Final = (
    "--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
    "--brokerperf-calibration=off", "-p", "no:cacheprovider", "-p", "no:randomly",
    "--strict-markers",
)
