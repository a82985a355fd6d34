"""A Kafka container killed mid-window (``docker kill``) fails the run at once, naming the
container, its exit code and its log's tail, and leaves a ``failed`` record with the
periods measured until then.

Skips with the reason when no engine answers or the image is not on it. What can fail:
the run must stop long before its 40 s window ends, the failure must name the container
the engine reported dead with ``exit code 137``, the record must say ``failed``, and no
container or network may outlive the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_brokerperf.brokers.kafka.container import default_images
from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from tests.support.containers import engine_mark, image_or_skip, leftovers

pytestmark = engine_mark()
REPO = Path(__file__).resolve().parents[2]
WINDOW_S = 40


def _container_of(pid: int) -> str | None:
    """The Kafka container the pytest process ``pid`` started, if running yet."""
    out = subprocess.run(
        ["docker", "ps", "--filter", f"label={containers.LABEL_PID}={pid}",
         "--filter", f"label={containers.LABEL_KIND}=kafka", "--format", "{{.Names}}"],
        capture_output=True, text=True, timeout=30).stdout.split()
    return out[0] if out else None


def test_a_kafka_container_killed_mid_window_fails_the_run(tmp_path: Path) -> None:
    image_or_skip("kafka", None, default_images(KAFKA_DEFAULT_VERSION))
    results = tmp_path / "res"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(REPO / "scenarios" / "test_tailread.py"),
         "-m", "tailread", "-k", PLAIN_SCENARIOS, "--broker=kafka",
         "--brokerperf-provision=container", f"--brokerperf-results={results}",
         f"--brokerperf-duration={WINDOW_S}", "--brokerperf-warmup=2", "-s", "-q",
         "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})  # each progress line as it is made
    lines: list[str] = []
    killed: str | None = None
    try:
        assert run.stdout is not None
        for line in run.stdout:  # the progress lines say when the window measures
            lines.append(line)
            if killed is None and " measure " in line and "tailread" in line:
                killed = _container_of(run.pid)
                assert killed is not None, "no Kafka container while the run measures"
                subprocess.run(["docker", "kill", killed], check=True, capture_output=True,
                               timeout=30)
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if run.stdout is not None:
            run.stdout.close()
    text = "".join(lines)
    assert killed is not None, text[-3000:]
    assert run.returncode == 1, text[-3000:]
    assert (f"BrokerDied: broker container {killed} (kafka node 1) exited during the run "
            "(exit code 137: killed by SIGKILL, OOMKilled=false)") in text, text[-3000:]
    assert f"(docker logs --tail 30 {killed}):" in text
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    assert rec["run_status"] == "failed", rec["run_status"]
    assert 0 < rec["measured_s"] < WINDOW_S  # the periods up to the death, not the window
    assert killed in rec["failure"] and "exit code 137" in rec["failure"]
    assert rec["manifest"]["broker"]["mode"] == "container"
    assert leftovers(rec["run_id"]) == []
