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
from pytest_brokerperf.scenario_library.study_cases import STREAMNATIVE_SERVER, STREAMNATIVE_TUNING


@pytest.mark.throughput
def test_throughput(brokerperf):
    brokerperf.run(Throughput())


# --------------------------------------------------------------------------- the studies
KIB = 1024
KAFKA_PULSAR = ("kafka", "pulsar")  # Kafka-protocol brokers included
#: Confluent's ladder: "10K, 50K, 100K, 200K, 500K and 1M" msg/s (section "Test setup")
CONFLUENT_LADDER = (10_000.0, 50_000.0, 100_000.0, 200_000.0, 500_000.0, 1_000_000.0)
CONFLUENT_SETUP = ("test setup: batches up to 1 MB and 10 ms (Kafka batch.size=1MB, "
                   "linger.ms=10); Pulsar batchingMaxBytes=1MB, batchingMaxPublishDelayMs=50")

THROUGHPUT_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka – A More Accurate Perspective on
    # Pulsar's Performance", table 1: maximum throughput with 1, 100 and 2000 partitions
    # (levels 1 and 2: --brokerperf-durability=1,2)
    *(StudyCase("streamnative", "table 1", "throughput", partitions=p, brokers=KAFKA_PULSAR,
                section="maximum throughput test", drop_page_cache=True,
                deviations=STREAMNATIVE_TUNING,
                server_settings=STREAMNATIVE_SERVER)
      for p in (1, 100, 2000)),
    # Confluent, "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the
    # Fastest?", figure 5: 1 KiB messages, 100 partitions, 4 producers and 4 consumers,
    # its own ladder; Kafka with 1 MB / 10 ms batches ...
    StudyCase("confluent", "figure 5", "throughput", partitions=100, producers=4,
              consumers=4, rates=CONFLUENT_LADDER, brokers=("kafka",),
              tweak=ProducerTweak(batch_bytes=1024 * KIB, linger_ms=10),
              section=CONFLUENT_SETUP),
    # ... Pulsar with 1 MB batches and batchingMaxPublishDelayMs=50 ...
    StudyCase("confluent", "figure 5", "throughput", partitions=100, producers=4,
              consumers=4, rates=CONFLUENT_LADDER, brokers=("pulsar",),
              tweak=ProducerTweak(batch_bytes=1024 * KIB, linger_ms=50),
              section=CONFLUENT_SETUP),
    # ... and RabbitMQ: 24 queues on a direct exchange, mirrored to every node, not
    # persisted, auto-ack (it peaked at 38k msg/s; the ladder stops where it does)
    StudyCase("confluent", "figure 5", "throughput", partitions=24, producers=4,
              consumers=4, rates=CONFLUENT_LADDER, brokers=("rabbitmq",),
              drivers=(("rabbitmq", "rabbitmq-confluent-mirrored"),), variant="mirrored",
              min_nodes=2, min_nodes_why="classic queues mirrored to every node need a "
              "second node (the study ran 3 brokers); --brokerperf-nodes=3",
              section="RabbitMQ: 24 queues on a direct exchange, mirrored, not persisted, "
              "auto-ack",
              deviations=("RabbitMQ has no producer batching setting: the study's 1 MB / "
                          "10 ms batches do not apply to it",)),
]


@pytest.mark.throughput
@pytest.mark.parametrize("case", THROUGHPUT_CASES, ids=str)
def test_throughput_study(brokerperf, case):
    brokerperf.run_case(case)


# Confluent's figure 2: producer batch size 1 KiB ... 1 MiB (Kafka), with the durability
# level the session gives (--brokerperf-durability) ...
BATCH_SWEEP = [
    StudyCase("confluent", "figure 2", "throughput", partitions=100, brokers=("kafka",),
              tweak=ProducerTweak(batch_bytes=b), section="the effect of fsync")
    for b in (KIB, 10 * KIB, 100 * KIB, 1024 * KIB)
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


# The "Apache Pulsar performance limit test" (pulsar-perf): one partition, one producer,
# namespace persistence 2/2/2 (pulsar-limit.yaml); a synchronous producer (batching off,
# one message outstanding) at 128 B, 1 KiB, 16 KiB and 512 KiB, and the asynchronous one
# (LZ4, batches of up to 10,000 messages, a 2 GB memory limit) at 128 B, 1 KiB and 16 KiB
# (the table has no asynchronous 512 KiB row). The bookies' journal tuning is a bookie
# setting a local Pulsar cannot take: refused there, a note on a remote cluster.
LIMIT_BOOKIE = ("journalFlushWhenQueueEmpty=true", "journalAlignmentSize=4096",
                "readBufferSizeBytes=4096")
LIMIT = dict(partitions=1, brokers=("pulsar",), drivers=(("pulsar", "pulsar-limit"),),
             min_nodes=2, min_nodes_why="namespace persistence 2/2/2 needs two bookies "
             "(--brokerperf-nodes=3 runs three)", server_settings=LIMIT_BOOKIE)
PULSAR_LIMIT = [
    *(StudyCase("pulsar-limit", "results table", "throughput", message_size=size,
                tweak=ProducerTweak(send_mode="sync", compression="none"),
                section="pulsar-perf produce --disable-batching --max-outstanding 1 "
                "--rate 500000", **LIMIT)
      for size in (128, KIB, 16 * KIB, 512 * KIB)),
    *(StudyCase("pulsar-limit", "results table", "throughput", message_size=size,
                tweak=ProducerTweak(send_mode="async", compression="lz4"),
                section="pulsar-perf produce --batch-max-messages 10000 --memory-limit 2G "
                "--rate 2000000 --compression LZ4", **LIMIT)
      for size in (128, KIB, 16 * KIB)),
]


@pytest.mark.throughput
@pytest.mark.broker("pulsar")
@pytest.mark.parametrize("case", PULSAR_LIMIT, ids=str)
def test_pulsar_limit(brokerperf, case):
    brokerperf.run_case(case)
