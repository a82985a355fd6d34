"""A memory cap makes a local Kafka's catch-up read cold (--brokerperf-broker-memory).

The same 600 MiB backlog is written to, then read back from, a broker without a cap and
one in a 768 MiB memory cgroup. The check is independent of the scenario code: the
broker processes' own storage reads (``/proc/PID/io`` ``read_bytes``) over the read.
Without a cap the host's page cache serves nearly all of it (hot); with the cap most
of it comes from disk (cold). The cgroup holds every broker process, carries the limit,
and is gone once the broker stops.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.provision.cgroups import memory_cap_problem
from pytest_brokerperf.scenario_library.catchup import broker_disk_reads

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
SIZE = 4096
COUNT = 150_000  # 586 MiB: far more than the page cache left under the cap
CAP = 768 * MIB  # heap 256 MiB + the JVM's own ~384 MiB floor + ~128 MiB

_PROBLEM = memory_cap_problem()


def _fill(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(60)
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                            "batch.size": 1_000_000, "compression.type": "none"})
    payload = os.urandom(SIZE)
    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=payload, key=i.to_bytes(4, "big"))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def _drain(bootstrap: str, topic: str) -> int:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "fetch.max.bytes": 50 * MIB})
    consumer.subscribe([topic])
    got = count = 0
    deadline = time.monotonic() + 180
    try:
        while count < COUNT and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    count += 1
                    got += len(msg.value() or b"")
    finally:
        consumer.close()
    assert got == COUNT * SIZE, f"read {got} of {COUNT * SIZE} bytes"
    return got


def _disk_share(endpoint: BrokerEndpoint, topic: str) -> float:
    """The broker's storage reads over the read, as a share of the bytes read (above 1
    with the kernel's readahead)."""
    _fill(endpoint.bootstrap, topic)
    time.sleep(2)  # let the log flush settle
    before = broker_disk_reads(endpoint)
    consumed = _drain(endpoint.bootstrap, topic)
    after = broker_disk_reads(endpoint)
    assert before is not None and after is not None
    return (after - before) / consumed


@pytest.mark.skipif(_PROBLEM is not None, reason=f"no memory cgroup here: {_PROBLEM}")
def test_a_memory_cap_turns_a_hot_catch_up_read_cold(tmp_path: Path) -> None:
    with KafkaProcessCluster(heap="256m", workdir=tmp_path / "hot") as hot:
        hot_disk = _disk_share(hot.endpoint, "hot")
    capped = KafkaProcessCluster(heap="256m", workdir=tmp_path / "cold", memory_limit=CAP)
    with capped:
        endpoint = capped.endpoint
        assert endpoint.processes_record().memory_limit_bytes == CAP
        groups = list(capped._cgroups)
        assert len(groups) == 1
        group = groups[0]
        assert (group.path / group.hierarchy.limit_file).read_text().strip() == str(CAP)
        for pid in endpoint.processes_record().pids:
            assert str(pid) in group.procs_file.read_text().split()
        cold_disk = _disk_share(endpoint, "cold")
        usage = group.usage_bytes()
        assert usage is not None and usage <= CAP
        assert not group.oom_kills()
    print(f"broker storage reads per byte read back: without a cap {hot_disk:.0%}, "
          f"with a {CAP // MIB} MiB cap {cold_disk:.0%}")
    assert hot_disk <= 0.1  # hot: the host's page cache served it
    assert cold_disk >= 0.5  # cold: most of it came from disk
    assert not group.path.exists()
