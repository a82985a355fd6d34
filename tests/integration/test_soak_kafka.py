"""A short soak on a real local Kafka: the broker JVM's RSS, open files and threads per
period, read from /proc of its pid, reach the record and are judged.

The whole scenario runs through the plugin (15 one-second periods at 500 msg/s). Checked
are functional truths, not figures: every measured period carries the broker process's
resources (a JVM holds well over 64 MiB, dozens of threads and open files), the trends
name the cluster's real pid and its heap (``-Xmx`` from its command line), the worker's
are there too, and the test's outcome agrees with the verdict: a growing trend fails it
with ``resource-growth``, none passes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.testing import skip_if_host_noise


@pytest.fixture
def kafka(kafka_one: BrokerEndpoint) -> BrokerEndpoint:
    """The one-node Kafka these tests share with others (tests/integration/conftest.py)."""
    return kafka_one


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def broker(broker_kind):
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
    yield BrokerEndpoint(kind="kafka", bootstrap="{bootstrap}", mode="process",
                         local=LocalProcesses(pids=tuple({pids})))
"""


def test_soak_records_and_judges_the_broker_process(kafka: BrokerEndpoint,
                                                     pytester: Any) -> None:
    (pid,) = kafka.processes_record().pids
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(bootstrap=kafka.bootstrap, pids=[pid]))
    pytester.makepyfile(test_sk="""
import pytest
from pytest_brokerperf import Soak

@pytest.mark.soak
def test_sk(brokerperf):
    brokerperf.run(Soak(rate=500, partitions=4, duration_s=15))
""")
    res = Path(pytester.path) / "res"
    result = pytester.runpytest_subprocess(
        "-m", "soak", "--broker=kafka", "--brokerperf-profile=smoke",
        "--brokerperf-warmup=8", "--brokerperf-calibration=off",
        f"--brokerperf-results={res}", "-p", "no:cacheprovider", "-s", timeout=300)
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    skip_if_host_noise([rec])
    soak = rec["soak"]
    print(json.dumps({k: v for k, v in soak.items() if k != "trends"}, indent=1))
    for t in soak["trends"]:
        print(f"{t['process']:<28} {t['resource']:<10} {t['start']:>14,.0f} → "
              f"{t['end']:>14,.0f}  {t['slope_per_min']:+,.1f}/min  grows={t['grows']}")
    assert rec["scenario"] == "soak" and soak["measured_periods"] >= 12
    tl = rec["timeline"]
    measured = [i for i, ph in enumerate(tl["phase"]) if ph == "measure"]
    assert all(tl["broker_rss_mib"][i] > 64 for i in measured), tl["broker_rss_mib"]
    assert all(tl["broker_threads"][i] >= 20 for i in measured), tl["broker_threads"]
    assert all(tl["broker_open_fds"][i] >= 20 for i in measured), tl["broker_open_fds"]
    assert all(tl["worker_threads"][i] >= 2 for i in measured), tl["worker_threads"]
    broker = f"broker node 1 (pid {pid})"
    judged = {(t["process"], t["resource"]) for t in soak["trends"]}
    assert {(broker, r) for r in ("rss_bytes", "open_fds", "threads")} <= judged
    assert any(p.startswith("worker ") for p, _ in judged)
    # the JVM's heap, read from its command line: -Xmx1g, not pre-touched
    assert soak["jvm_heap_first_touch_bytes"] == {broker: 1024**3}
    metrics = rec["broker_metrics"]["measured"]
    assert metrics["broker_threads"]["max"] >= 20  # broker-metrics.csv has them too
    growing = [t for t in soak["trends"] if t["grows"]]
    assert soak["growing"] == len(growing)
    if growing:
        assert "resource-growth" in rec["verdict"]["flags"]
        result.stdout.fnmatch_lines(["*resource-growth: *"])
        assert result.ret != 0
    elif rec["verdict"]["status"] in ("valid", "broker-backpressure"):
        assert "resource-growth" not in rec["verdict"]["flags"]
        assert result.ret == 0, result.stdout.str()[-3000:]
