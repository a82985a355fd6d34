"""Mixed workload: a tailing subscription, then a second one catching up from the start.

Run: ``pytest scenarios -m mixed --broker=kafka``. Producers publish at the profile's
rate and a subscription tails them; once the topic retains the backlog (the workload's
``consumerBacklogSizeGB`` under ``--brokerperf-profile=omb`` or with
``--brokerperf-workload``, else 8 s / 60 s of publishing for smoke / standard), a second
subscription starts from the earliest position and reads up to the head while the rest
goes on (StreamNative's mixed workload). Reported: its catch-up time and rate, and
publish and tailing end-to-end response p99/p99.9 during versus before as ratios
(``mixed.publish_p99_ratio`` ...). RabbitMQ's classic queues cannot replay: skipped there
with the reason.
"""

import pytest

from pytest_brokerperf import Mixed, StudyCase
from pytest_brokerperf.scenario_library.study_cases import STREAMNATIVE_SERVER, STREAMNATIVE_TUNING


@pytest.mark.mixed
def test_mixed(brokerperf):
    brokerperf.run(Mixed())


# --------------------------------------------------------------------------- the studies
GIB = 1024**3

MIXED_CASES = [
    # StreamNative, "Benchmarking Pulsar and Kafka – A More Accurate Perspective on
    # Pulsar's Performance", table 4: 200k msg/s of 1 KiB with a tailing subscription;
    # after 512 GB a second subscription reads from the start
    StudyCase("streamnative", "table 4", "mixed", partitions=100, rate=200_000,
              backlog_bytes=512 * GIB, brokers=("kafka", "pulsar"),
              section="mixed workload test", drop_page_cache=True,
              deviations=STREAMNATIVE_TUNING,
              server_settings=STREAMNATIVE_SERVER),
]


@pytest.mark.mixed
@pytest.mark.parametrize("case", MIXED_CASES, ids=str)
def test_mixed_study(brokerperf, case):
    brokerperf.run_case(case)
