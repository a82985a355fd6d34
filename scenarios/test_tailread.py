"""Tail-read latency: fixed-rate publishing with consumers reading at the tail.

Run: ``pytest scenarios -m tailread --broker=kafka``. The workload comes from
``--brokerperf-workload`` or the shipped ``tail-read-smoke.yaml``; durations, rate and
stats period from ``--brokerperf-profile``. Shipped SLOs are sanity bounds (zero loss,
p99 response times within seconds); real targets come from ``--brokerperf-slo``.
"""

import pytest

from pytest_brokerperf import ProducerTweak, StudyCase, TailRead
from pytest_brokerperf.scenario_library.study_cases import STREAMNATIVE_SERVER, STREAMNATIVE_TUNING


@pytest.mark.tailread
def test_tailread(brokerperf):
    brokerperf.run(TailRead())


# --------------------------------------------------------------------------- the studies
# Each case at the study's numbers; --brokerperf-profile=smoke/standard shrink them
# (docs/reference/study-cases.md), omb runs them as published or refuses them up front.
KIB, MIB = 1024, 1024**2
#: the studies' Kafka and Pulsar cases (Kafka-protocol brokers included); RabbitMQ has
#: its own cases at its own rates
KAFKA_PULSAR = ("kafka", "pulsar")

RABBITMQ = ("RabbitMQ: 24 queues (one per vCPU, 8 x 3 brokers) on a direct exchange with "
            "routing keys, messages not persisted, consumers auto-ack")
RABBITMQ_BATCH = ("RabbitMQ has no producer batching setting: the study's 1 MB / 10 ms "
                  "batches do not apply to it")
#: the study's RabbitMQ: queues mirrored to every node (needs a second node)
RABBITMQ_MIRRORED = dict(
    drivers=(("rabbitmq", "rabbitmq-confluent-mirrored"),), variant="mirrored",
    min_nodes=2, min_nodes_why="classic queues mirrored to every node need a second node "
    "(the study ran 3 brokers); --brokerperf-nodes=3", section=RABBITMQ,
    deviations=(RABBITMQ_BATCH,))
#: figure 14's other series: the same without replication
RABBITMQ_CLASSIC = dict(
    drivers=(("rabbitmq", "rabbitmq-confluent-unmirrored"),), variant="classic",
    section=RABBITMQ, deviations=(RABBITMQ_BATCH,))

SN_RATE = ("200k msg/s: the study does not state its latency tests' rate; 200k msg/s "
           "is the rate it states for its catch-up and mixed workloads")
#: StreamNative's journal bypass (BookKeeper PR 2401): levels 2 and 4 with the bookie
#: journal skipped, not only left unsynced. Bookie-wide: a standalone of its own.
BYPASS = ("pulsar:journalWriteData=false", "pulsar:journalSyncData=false")


def streamnative(source, **kw):
    """A StreamNative latency case: its tuning, page cache dropped, the rate assumed."""
    kw.setdefault("brokers", KAFKA_PULSAR)
    kw.setdefault("server_settings", STREAMNATIVE_SERVER)
    return StudyCase("streamnative", source, "tailread", rate=200_000,
                     section="StreamNative framework: broker, bookie and producer tuning",
                     drop_page_cache=True, deviations=STREAMNATIVE_TUNING,
                     assumptions=(SN_RATE,), **kw)


CONFLUENT_LATENCY = ("latency test: batches of at most 1 ms (linger.ms=1, "
                     "batchingMaxPublishDelayMs=1), up to 1 MB")

TAILREAD_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka – A More Accurate Perspective on
    # Pulsar's Performance", table 2: end-to-end p99 with 1 and 10 subscriptions on 100
    # partitions (run with --brokerperf-durability=1,2,3,4)
    *(streamnative("table 2", partitions=100, subscriptions=s) for s in (1, 10)),
    # table 3: 100, 5000 and 10000 partitions
    *(streamnative("table 3", partitions=p) for p in (5000, 10000)),
    # the journal-bypass variant of levels 2 and 4 (table 8's second rows): the bookie
    # skips its journal (a standalone of its own, bookie-wide), Pulsar only
    *(streamnative(src, partitions=100, subscriptions=s, brokers=("pulsar",),
                   variant="journal-bypass", server_settings=(*STREAMNATIVE_SERVER, *BYPASS))
      for src, s in (("table 2", 1), ("table 2", 10))),
    # Confluent, "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the
    # Fastest?", figure 12/13: 200k msg/s (200 MB/s) of 1 KiB, 100 partitions, 4
    # producers and 4 consumers, batches of at most 1 ms; Kafka and Pulsar
    StudyCase("confluent", "figure 13", "tailread", partitions=100, producers=4,
              consumers=4, rate=200_000, brokers=KAFKA_PULSAR,
              tweak=ProducerTweak(batch_bytes=1024 * KIB, linger_ms=1),
              section=CONFLUENT_LATENCY),
    # ... and RabbitMQ at 30k msg/s, the most it sustained without its latency rising:
    # 24 queues (routing keys) on a direct exchange, mirrored to every node, messages
    # not persisted, automatic acks
    StudyCase("confluent", "figure 13", "tailread", partitions=24, producers=4,
              consumers=4, rate=30_000, brokers=("rabbitmq",), **RABBITMQ_MIRRORED),
    # AutoMQ's OpenMessaging Benchmark evaluation against Apache Kafka 3.4, section 3.1
    # (tail read): 4 KiB messages, 100 partitions, 100 and 200 MiB/s, batch 200 KiB
    # (tail-read-100mb.yaml, tail-read-200mb.yaml) ...
    *(StudyCase("automq", "section 3.1", "tailread", partitions=100, message_size=4 * KIB,
                rate=mib_s * MIB // (4 * KIB), tweak=ProducerTweak(batch_bytes=200 * KIB),
                brokers=("kafka",), section="tail read")
      for mib_s in (100, 200)),
    # ... and the extreme-throughput case (tail-read-900mb.yaml)
    StudyCase("automq", "section 3.1", "tailread", partitions=100, message_size=4 * KIB,
              rate=900 * MIB // (4 * KIB), tweak=ProducerTweak(batch_bytes=200 * KIB),
              brokers=("kafka",), section="tail read, extreme throughput (tail-read-900mb.yaml)",
              assumptions=("900 MiB/s: the workload file is named tail-read-900mb; read "
                           "as MiB/s like the 100 and 200 MiB/s cases",)),
    # Confluent's figure 14: RabbitMQ mirrored versus classic (unreplicated) queues at
    # 10k, 20k, 30k and 40k msg/s
    *(StudyCase("confluent", "figure 14", "tailread", partitions=24, producers=4,
                consumers=4, rate=r, brokers=("rabbitmq",),
                **(RABBITMQ_MIRRORED if mirrored else RABBITMQ_CLASSIC))
      for mirrored in (True, False) for r in (10_000, 20_000, 30_000, 40_000)
      if not (mirrored and r == 30_000)),  # that point is figure 13's case above
]


@pytest.mark.tailread
@pytest.mark.parametrize("case", TAILREAD_CASES, ids=str)
def test_tailread_study(brokerperf, case):
    brokerperf.run_case(case)


# Sweeps are parametrizations too: the producer's linger and compression at the
# Confluent latency test's shape (per-message fsync: --brokerperf-durability=1,2 on
# three nodes or 3,4 on one, which sets flush.messages / journalSyncData per level).
SWEEP = ("not a case of the study: a sweep at the shape of its latency test, which "
         "ran linger 1 ms and no compression only")
SWEEP_CASES = [
    *(StudyCase("confluent", "linger sweep", "tailread", partitions=100, rate=200_000,
                tweak=ProducerTweak(linger_ms=ms), brokers=KAFKA_PULSAR,
                section=CONFLUENT_LATENCY, deviations=(SWEEP,))
      for ms in (0, 1, 5, 20)),
    *(StudyCase("confluent", "compression sweep", "tailread", partitions=100,
                rate=200_000, tweak=ProducerTweak(compression=c), brokers=KAFKA_PULSAR,
                section=CONFLUENT_LATENCY, deviations=(SWEEP,))
      for c in ("none", "lz4", "zstd")),
]


@pytest.mark.tailread
@pytest.mark.parametrize("case", SWEEP_CASES, ids=str)
def test_tailread_sweep(brokerperf, case):
    brokerperf.run_case(case)
