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

from pytest_brokerperf import CatchUp, StudyCase
from pytest_brokerperf.scenario_library.study_cases import STREAMNATIVE_SERVER, STREAMNATIVE_TUNING


@pytest.mark.catchup
def test_catchup(brokerperf):
    brokerperf.run(CatchUp())


@pytest.mark.catchup
@pytest.mark.own_workload
def test_catchup_consumer_only(brokerperf):
    """Producers stop once the backlog is built (Confluent's ``consumerOnly``)."""
    brokerperf.run(CatchUp(producers_during_drain=False))


# --------------------------------------------------------------------------- the studies
KIB, MIB, GIB = 1024, 1024**2, 1024**3


@pytest.mark.catchup
@pytest.mark.broker("kafka", "pulsar")
@pytest.mark.own_workload
def test_catchup_cold_read(brokerperf):
    """A 1 GiB backlog of 4 KiB messages: more than the page cache one broker node has
    under ``--brokerperf-broker-memory=1536MiB`` (or in a container, whose default limit
    is its heap plus 1 GiB), so the drain reads from disk (``catchup.cache.state: cold``);
    as a process on a host with free memory the same drain is hot (flag ``hot-cache``).
    Run it both ways to see the pair: docs/how-to/cold-catchup.md."""
    brokerperf.run(CatchUp(partitions=16, message_size=4 * KIB, rate=20_000,
                           backlog_bytes=GIB, build_timeout_s=180, drain_timeout_s=300))


CATCHUP_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka – A More Accurate Perspective on
    # Pulsar's Performance", table 1 (publish and catch-up read): 200k msg/s of 1 KiB on
    # 100 partitions; consumers start after 512 GB
    StudyCase("streamnative", "table 1", "catchup", partitions=100, rate=200_000,
              backlog_bytes=512 * GIB, brokers=("kafka", "pulsar"),
              section="catch-up read test", drop_page_cache=True,
              deviations=STREAMNATIVE_TUNING,
              server_settings=STREAMNATIVE_SERVER),
    # AutoMQ, section 3.2: 300 MiB/s of 4 KiB messages on 100 partitions, 1 TiB backlog,
    # read from the earliest offset while producers go on (catch-up-read.yaml)
    StudyCase("automq", "section 3.2", "catchup", partitions=100, message_size=4 * KIB,
              rate=300 * MIB // (4 * KIB), backlog_bytes=1024 * GIB, brokers=("kafka",),
              section="catch-up read"),
    # A consumer-only drain of a backlog (producers stop). Confluent's study says it
    # added consumer-only tests and backlog build/drain to OMB but publishes no such
    # case: the numbers are StreamNative's catch-up read's
    StudyCase("confluent", "OMB changes", "catchup", partitions=100, rate=200_000,
              backlog_bytes=512 * GIB, producers_during_drain=False,
              brokers=("kafka", "pulsar"),
              section="OMB framework changes: consumer-only tests, backlog build and drain",
              assumptions=("200k msg/s and a 512 GB backlog are borrowed from StreamNative's "
                           "catch-up read: Confluent publishes no numbers for a drain",)),
]


@pytest.mark.catchup
@pytest.mark.parametrize("case", CATCHUP_CASES, ids=str)
def test_catchup_study(brokerperf, case):
    brokerperf.run_case(case)
