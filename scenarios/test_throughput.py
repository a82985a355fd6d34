"""Maximum sustainable throughput: a ladder of fixed rates that brackets the limit.

Run: ``pytest scenarios -m throughput --broker=kafka``. Rates come from
``--brokerperf-ladder`` or the profile (smoke: 2k, 10k, 20k, 40k, 100k, 200k msg/s; standard
and omb: Confluent's 10k … 1M); the workload from ``--brokerperf-workload`` or OMB's
``max-rate-1-topic-16-partitions-1kb``. Each rung settles, is measured and judged; the
ladder stops at the first rung that is not sustainable and names what limited it
(generator, client-library or broker-backpressure). A ladder stopped by the harness is
INCONCLUSIVE (it is not a broker figure). ``--brokerperf-rate-discovery`` runs OMB's
``producerRate: 0`` controller instead (results labelled ``omb-rate-discovery``).
"""

import pytest

from pytest_brokerperf import Throughput


@pytest.mark.throughput
def test_throughput(brokerperf):
    brokerperf.run(Throughput())
