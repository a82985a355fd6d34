"""The mixed scenario on a real local Kafka, checked against the broker's own offsets.

The whole scenario runs through the plugin (a small backlog, a short window); the
checks then read the catch-up group's committed offsets and the topic's end offsets
with a plain confluent-kafka client of their own — not the scenario's counters — and
require:

* the catch-up group started at the earliest position and read each message once: its
  committed offsets (summed over partitions, from offset 0) equal the messages its
  reader counted;
* it read the whole retained backlog: at least what was acknowledged before it started,
  less the caught-up lag, and no more than the topic's end offsets;
* the tailing group lost nothing, and the record holds the catch-up time and rate and,
  for a judgeable run, the four ratios.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint


@pytest.fixture
def kafka(kafka_one: BrokerEndpoint) -> BrokerEndpoint:
    """The one-node Kafka these tests share with others (tests/integration/conftest.py)."""
    return kafka_one


def _offsets(endpoint: BrokerEndpoint, topic: str, group: str) -> tuple[int, int, int]:
    """(sum of start offsets, sum of end offsets, sum of the group's committed offsets),
    read independently of the plugin."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": endpoint.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        md = c.list_topics(topic, timeout=10)
        parts = [TopicPartition(topic, p) for p in md.topics[topic].partitions]
        marks = [c.get_watermark_offsets(tp, timeout=10) for tp in parts]
        committed = sum(max(tp.offset, 0) for tp in c.committed(parts, timeout=10))
        return sum(lo for lo, _ in marks), sum(hi for _, hi in marks), committed
    finally:
        c.close()


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def broker(broker_kind):
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
    yield BrokerEndpoint(kind="kafka", bootstrap="{bootstrap}", mode="process",
                         local=LocalProcesses(pids=tuple({pids})))
"""


def test_mixed_scenario_against_broker_offsets(kafka: BrokerEndpoint, pytester: Any) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(bootstrap=kafka.bootstrap,
                                          pids=list(kafka.processes_record().pids)))
    pytester.makepyfile(test_mx="""
import pytest
from pytest_brokerperf import Mixed

@pytest.mark.mixed
def test_mx(brokerperf):
    brokerperf.run(Mixed(rate=2000, partitions=4, backlog_bytes=48 * 1024**2))
""")
    res = Path(pytester.path) / "res"
    result = pytester.runpytest_subprocess(
        "-m", "mixed", "--broker=kafka", "--brokerperf-duration=3", "--brokerperf-warmup=8",
        "--brokerperf-calibration=off", "--brokerperf-keep-topics",
        f"--brokerperf-results={res}", "-p", "no:cacheprovider", "-s", timeout=600)
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    mx = rec["mixed"]
    print(json.dumps(mx, indent=1))
    print(json.dumps(rec["verdict"], indent=1))
    assert rec["scenario"] == "mixed"
    assert mx["build_complete"] and mx["catchup_complete"], result.stdout.str()
    assert "earliest" in mx["catchup_start"]
    group = mx["catchup_subscription"]
    topic = group.removesuffix("-catchup") + "-000"
    start, end, committed = _offsets(kafka, topic, group)
    assert start == 0  # nothing deleted by retention: the earliest position is offset 0
    # from the earliest position, each message once: committed offsets = messages read
    assert committed == mx["catchup_consumed"]
    assert committed <= end
    assert committed >= mx["retained_at_catchup_start_messages"] - mx["caught_up_lag"]
    assert mx["retained_at_catchup_start_messages"] * 1024 >= 48 * 1024**2
    # the driver's own reading of the group, recorded, agrees with ours
    (row,) = mx["broker_catchup_position"]
    assert row["position"] == committed
    assert mx["catchup_s"] > 0 and mx["catchup_rate_msg_s"] > 0 and mx["catchup_mib_s"] > 0
    assert rec["delivery"]["lost"] == 0
    ratios = [mx[k] for k in ("publish_p99_ratio", "publish_p999_ratio", "e2e_p99_ratio",
                              "e2e_p999_ratio")]
    if rec["verdict"]["status"] in ("valid", "broker-backpressure"):
        # p99 needs 1,000 responses during the catch-up: a hot-cache catch-up of a few
        # MiB can be shorter than that; the verdict then says so
        if mx["publish_samples_during"] >= 1000 and mx["e2e_samples_during"] >= 1000:
            assert all(r is not None and r > 0 for r in ratios[::2]), mx
        else:
            assert "undersampled" in rec["verdict"]["flags"], rec["verdict"]
            assert "mixed_undersampled" in rec["verdict"]["details"]
        assert {s["metric"]: s["status"] for s in rec["slo"]} == {"lost": "pass",
                                                                   "mixed.caught_up": "pass"}
    else:  # a window this host spoiled: never a ratio
        assert ratios == [None] * 4, rec["verdict"]
