"""Tail-read latency: fixed-rate publishing with consumers reading at the tail.

Run: ``pytest scenarios -m tailread --broker=kafka``. The workload comes from
``--brokerperf-workload`` or the shipped ``tail-read-smoke.yaml``; durations, rate and
stats period from ``--brokerperf-profile``. Shipped SLOs are sanity bounds (zero loss,
p99 response times within seconds); real targets come from ``--brokerperf-slo``.
"""

import pytest

from pytest_brokerperf import TailRead


@pytest.mark.tailread
def test_tailread(brokerperf):
    brokerperf.run(TailRead())
