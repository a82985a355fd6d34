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

from pytest_brokerperf import ProducerTweak, StudyCase, Throughput


@pytest.mark.throughput
def test_throughput(brokerperf):
    brokerperf.run(Throughput())


# --------------------------------------------------------------------------- the studies
KIB = 1024

THROUGHPUT_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka", table 1: maximum throughput with 1,
    # 100 and 2000 partitions (levels 1 and 2: --brokerperf-durability=1,2)
    *(StudyCase("streamnative", "table 1", "throughput", partitions=p) for p in (1, 100, 2000)),
    # Confluent: 1 KiB messages, 100 partitions, 4 producers and 4 consumers
    StudyCase("confluent", "throughput test", "throughput", partitions=100, producers=4,
              consumers=4),
]


@pytest.mark.throughput
@pytest.mark.parametrize("case", THROUGHPUT_CASES, ids=str)
def test_throughput_study(brokerperf, case):
    brokerperf.run_case(case)


# Confluent's figure 2: producer batch size 1 KiB ... 1 MiB, with the durability level
# the session gives (--brokerperf-durability) ...
BATCH_SWEEP = [
    StudyCase("confluent", "figure 2", "throughput", partitions=100,
              tweak=ProducerTweak(batch_bytes=b)) for b in (KIB, 10 * KIB, 100 * KIB, 1024 * KIB)
]


@pytest.mark.throughput
@pytest.mark.parametrize("case", BATCH_SWEEP, ids=str)
def test_throughput_batch_sweep(brokerperf, case):
    brokerperf.run_case(case)


# The same sweep with and without an fsync of every message: durability level 3
# (fsync per message) against 4 (page cache), both with asynchronous replication, so it
# runs on one node as on three (ids ...-d3-..., ...-d4-...).
@pytest.mark.throughput
@pytest.mark.durability(3, 4)
@pytest.mark.parametrize("case", BATCH_SWEEP, ids=str)
def test_throughput_fsync_sweep(brokerperf, case):
    brokerperf.run_case(case)


# The "Apache Pulsar performance limit" test (pulsar-perf): one partition, one producer,
# 128 B ... 512 KiB messages, a synchronous producer (one message outstanding, batching
# off) against the asynchronous one. Synchronous sends are a Pulsar driver mode.
PULSAR_LIMIT = [
    StudyCase("pulsar-limit", "sync vs async", "throughput", partitions=1, message_size=size,
              tweak=ProducerTweak(send_mode=mode))
    for mode in ("sync", "async") for size in (128, KIB, 16 * KIB, 512 * KIB)
]


@pytest.mark.throughput
@pytest.mark.broker("pulsar")
@pytest.mark.parametrize("case", PULSAR_LIMIT, ids=str)
def test_pulsar_limit(brokerperf, case):
    brokerperf.run_case(case)
