"""Partition reassignment: a loaded partition moved with its data to another broker.

Run: ``pytest scenarios -m reassign --broker=kafka --brokerperf-nodes=3``. Two
single-replica, single-partition topics take the profile's rate (the second is
background traffic); after the measured window the first topic's partition moves to a
broker that holds no replica of it while producers and consumers go on (AutoMQ's
partition-reassignment study). Reported: the move's duration (request until it is out of
the in-progress reassignments, its replicas equal the target and the new replica is in
sync), publish and end-to-end response p99/p99.9 during versus before as ratios
(``reassign.publish_p99_ratio`` ...), send errors. Needs kafka-python
(``pip install 'pytest-brokerperf[reassign]'``) and at least two brokers; Pulsar,
RabbitMQ and a single broker skip with the reason (the study case is deselected at
collection on Pulsar and RabbitMQ, which declare they cannot run it).
"""

import pytest

from pytest_brokerperf import Reassign, StudyCase


@pytest.mark.reassign
def test_reassign(brokerperf):
    brokerperf.run(Reassign())


@pytest.mark.reassign
@pytest.mark.own_workload
def test_reassign_throttled(brokerperf):
    # 1 MiB/s of replication: the move of a smoke-sized partition takes seconds
    brokerperf.run(Reassign(throttle_bytes_s=1024**2))


# --------------------------------------------------------------------------- the studies
KIB, MIB = 1024, 1024**2

REASSIGN_CASES = [
    # AutoMQ, section 3.3 (partition reassignment): topic A, one partition, one replica,
    # 40 MiB/s read and written; topic B, four partitions, one replica, 10 MiB/s as
    # background traffic; after 10 minutes topic A's partition moves to a broker without
    # a replica, replication throttled to 100 MiB/s (partition-reassign.yaml). The 10
    # minutes are the load *before* the move (delay_s), after the warm-up.
    StudyCase("automq", "section 3.3", "reassign", partitions=1, message_size=4 * KIB,
              rate=40 * MIB // (4 * KIB), delay_s=600.0, background_partitions=4,
              background_rate=10 * MIB // (4 * KIB), throttle_bytes_s=100 * MIB,
              section="partition reassignment", min_nodes=2,
              min_nodes_why="moving a partition needs a broker without a replica of it "
              "(the study ran two)",
              assumptions=("4 KiB messages: the section does not state the size; the "
                           "study's other workloads use 4 KiB",)),
]


@pytest.mark.reassign
@pytest.mark.parametrize("case", REASSIGN_CASES, ids=str)
def test_reassign_study(brokerperf, case):
    brokerperf.run_case(case)
