"""Faults in container mode against a real Docker engine: a Kafka container paused (the
cgroup freezer) and restarted (``docker stop`` + ``docker start``) mid-window.

Skips with the reason when no engine answers or the image is not on it. What can fail:
each fault must run its steps at its time, the restarted container must serve again
from its own data with a new process, nothing acknowledged may be lost, and no container
or network outlives the session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.kafka.container import default_images
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from tests.support.containers import engine_mark, image_or_skip, leftovers

pytestmark = engine_mark()
REPO = Path(__file__).resolve().parents[2]


def test_pause_and_restart_a_kafka_container_mid_window(pytester: pytest.Pytester) -> None:
    image_or_skip("kafka", None, default_images(KAFKA_DEFAULT_VERSION))
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=kafka",
        "--brokerperf-provision=container", f"--brokerperf-results={results}",
        "--brokerperf-fault=pause-broker@3s:2s,restart-broker@3s",
        "--brokerperf-duration=10", "--brokerperf-warmup=15", "-p", "no:cacheprovider",
        "--brokerperf-inconclusive=warn",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "-p", "no:randomly", "--rootdir", str(pytester.path), "-v", timeout=900)
    run.assert_outcomes(passed=2, warnings=run.parseoutcomes().get("warnings", 0))
    pause, restart = [json.loads(x) for x in (results / "results.jsonl").read_text()
                      .splitlines()]
    for rec in (pause, restart):
        assert rec["manifest"]["broker"]["mode"] == "container"
        assert rec["fault"]["error"] is None, rec["fault"]
        assert rec["delivery"]["lost"] == 0 and rec["delivery"]["unconfirmed"] == 0
        assert rec["fault"]["node"] == 1 and "leader of" in rec["fault"]["target"]
    assert [e["action"] for e in pause["fault"]["events"]] == ["pause-broker",
                                                               "resume-broker"]
    # a frozen broker answers nobody: the producer waited at least the pause
    assert pause["fault"]["longest_publish_wait_s"] >= 1.5
    steps = [e["action"] for e in restart["fault"]["events"]]
    assert steps == ["stop-broker", "stopped", "start-broker", "serving"], steps
    before, after = restart["fault"]["events"][0]["pid"], restart["fault"]["events"][-1]["pid"]
    assert before and after and before != after  # a new process in the same container
    assert restart["fault"]["node_down_s"] > 0
    assert leftovers(restart["run_id"]) == []
