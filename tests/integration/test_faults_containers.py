"""Container mode against a real Docker engine, one Kafka container for one session: a
plain tail read (the container smoke), then the broker paused (the cgroup freezer) and
restarted (``docker stop`` + ``docker start``) mid-window.

Skips with the reason when no engine answers or the image is not on it. What can fail:
the plain run must say which image ran (its reference and id), the broker's version
and the container's log copied, and be valid (or honestly host-noise); each fault must
run its steps at its time, the restarted container must serve again from its own data
with a new process, nothing acknowledged may be lost, and no container or network
outlives the session.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pytest_brokerperf.brokers.kafka.container import default_images
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION
from tests.support.containers import engine_mark, image_or_skip, leftovers

pytestmark = engine_mark()


#: one session, one container: the smoke first, then the faults (pytest keeps file order)
TESTS = """
import pytest
from pytest_brokerperf import TailRead


@pytest.mark.tailread
def test_smoke(brokerperf):
    brokerperf.run(TailRead())


@pytest.mark.tailread
@pytest.mark.fault("pause-broker@3s:2s")
def test_pause(brokerperf):
    brokerperf.run(TailRead())


@pytest.mark.tailread
@pytest.mark.fault("restart-broker@3s")
def test_restart(brokerperf):
    brokerperf.run(TailRead())
"""


def test_a_kafka_container_serves_a_tail_read_then_is_paused_and_restarted_mid_window(
        pytester: pytest.Pytester, valid_or_noise: Callable[..., tuple[str, str]]) -> None:
    image_ref = image_or_skip("kafka", None, default_images(KAFKA_DEFAULT_VERSION))
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    tests = pytester.makepyfile(test_container_kafka=TESTS)
    run = pytester.runpytest_subprocess(
        str(tests), "-m", "tailread", "--broker=kafka",
        "--brokerperf-provision=container", f"--brokerperf-results={results}",
        "--brokerperf-duration=10", "--brokerperf-warmup=15", "-p", "no:cacheprovider",
        "--brokerperf-inconclusive=warn",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "-p", "no:randomly", "--rootdir", str(pytester.path), "-v", timeout=900)
    recs = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    run.assert_outcomes(passed=3, warnings=run.parseoutcomes().get("warnings", 0))
    run.stdout.fnmatch_lines(["*brokerperf: *provision=container*",
                              "*brokerperf: provision container: a Docker engine answers*"])
    by_test = {r["test_id"].split("::")[-1].split("[")[0]: r for r in recs}
    smoke, pause, restart = (by_test[f"test_{t}"] for t in ("smoke", "pause", "restart"))
    assert not smoke.get("fault") and smoke["delivery"]["lost"] == 0
    assert smoke["delivery"]["acknowledged"] > 3000
    image = smoke["manifest"]["broker"]["info"]["image"]
    assert image["ref"] == image_ref and image["id"].startswith("sha256:")
    assert smoke["broker_version"] == KAFKA_DEFAULT_VERSION
    assert "kafka-1.log" in smoke["manifest"]["logs"]  # the container's log, copied
    valid_or_noise(smoke)
    for rec in (smoke, pause, restart):
        assert rec["manifest"]["broker"]["mode"] == "container"
    for rec in (pause, restart):
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
