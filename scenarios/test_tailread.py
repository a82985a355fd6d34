"""Tail-read latency: fixed-rate publishing with consumers reading at the tail.

Run: ``pytest scenarios -m tailread --broker=kafka``. The workload comes from
``--brokerperf-workload`` or the shipped ``tail-read-smoke.yaml``; durations, rate and
stats period from ``--brokerperf-profile``. Shipped SLOs are sanity bounds (zero loss,
p99 response times within seconds); real targets come from ``--brokerperf-slo``.
"""

import pytest

from pytest_brokerperf import ProducerTweak, StudyCase, TailRead


@pytest.mark.tailread
def test_tailread(brokerperf):
    brokerperf.run(TailRead())


# --------------------------------------------------------------------------- the studies
# Each case at the study's numbers; --brokerperf-profile=smoke/standard shrink them
# (docs/reference/study-cases.md), omb runs them as published or refuses them up front.
KIB, MIB = 1024, 1024**2

TAILREAD_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka", table 2: end-to-end p99 with 1 and
    # 10 subscriptions on 100 partitions (run with --brokerperf-durability=1,2,3,4)
    *(StudyCase("streamnative", "table 2", "tailread", partitions=100, subscriptions=s,
                rate=200_000) for s in (1, 10)),
    # StreamNative table 3: 100, 5000 and 10000 partitions
    *(StudyCase("streamnative", "table 3", "tailread", partitions=p, rate=200_000)
      for p in (5000, 10000)),
    # Confluent, "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ": latency at
    # 200 MB/s, 1 KiB messages, 100 partitions, 4 producers and 4 consumers
    StudyCase("confluent", "latency test", "tailread", partitions=100, producers=4,
              consumers=4, rate=200_000),
    # AutoMQ's evaluation against Apache Kafka 3.4, tail read: 4 KiB messages, 100
    # partitions, 100 and 200 MiB/s, producer batch 200 KiB
    *(StudyCase("automq", "tail read", "tailread", partitions=100, message_size=4 * KIB,
                rate=mib_s * MIB // (4 * KIB), tweak=ProducerTweak(batch_bytes=200 * KIB))
      for mib_s in (100, 200)),
]


@pytest.mark.tailread
@pytest.mark.parametrize("case", TAILREAD_CASES, ids=str)
def test_tailread_study(brokerperf, case):
    brokerperf.run_case(case)


# Sweeps are parametrizations too: the producer's linger and compression at the
# Confluent latency test's shape (per-message fsync: --brokerperf-durability=1,2 on
# three nodes or 3,4 on one, which sets flush.messages / journalSyncData per level).
SWEEP_CASES = [
    *(StudyCase("confluent", "linger sweep", "tailread", partitions=100, rate=200_000,
                tweak=ProducerTweak(linger_ms=ms)) for ms in (0, 1, 5, 20)),
    *(StudyCase("confluent", "compression sweep", "tailread", partitions=100,
                rate=200_000, tweak=ProducerTweak(compression=c))
      for c in ("none", "lz4", "zstd")),
]


@pytest.mark.tailread
@pytest.mark.parametrize("case", SWEEP_CASES, ids=str)
def test_tailread_sweep(brokerperf, case):
    brokerperf.run_case(case)
