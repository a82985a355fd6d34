"""Catch-up read: a backlog built while consumers are paused, then drained.

Run: ``pytest scenarios -m catchup --broker=kafka``. After a tail-read window at the
profile's rate, consumers pause until the backlog reaches its size (the workload's
``consumerBacklogSizeGB`` under ``--brokerperf-profile=omb`` or with
``--brokerperf-workload``, else 10 s / 60 s of publishing for smoke / standard), then
resume and drain it while producers go on. Reported: build and drain times, the
catch-up rate (msg/s, MiB/s), publish response before versus during the drain and the
drained messages' age. Brokers whose driver cannot pause consumers skip with the reason.
"""

import pytest

from pytest_brokerperf import CatchUp


@pytest.mark.catchup
def test_catchup(brokerperf):
    brokerperf.run(CatchUp())


@pytest.mark.catchup
def test_catchup_consumer_only(brokerperf):
    """Producers stop once the backlog is built (Confluent's ``consumerOnly``)."""
    brokerperf.run(CatchUp(producers_during_drain=False))
