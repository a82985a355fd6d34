"""Redpanda's container mode against a stand-in image (a real Docker engine).

No Redpanda image or binary can be obtained on this project's machines, so
``brokerperf/redpanda-standin`` (``ci/docker.sh``: Kafka behind a ``redpanda start`` that
maps the same listener flags and prints Redpanda's readiness line) stands in. What this
checks is container mode's own logic for Redpanda, through pytest: the flags it renders
give host clients the published loopback address and network clients the alias, the
readiness wait, the record, and cleanup. It says nothing about Redpanda's performance.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.brokers.redpanda_container import RedpandaContainer
from tests.support.containers import (
    engine_mark,
    image_or_skip,
    leftovers,
    tailread_through_pytest,
)

STANDIN = "brokerperf/redpanda-standin:latest"
pytestmark = engine_mark()


@pytest.fixture(scope="module", autouse=True)
def _standin() -> str:
    return image_or_skip("redpanda", STANDIN, ())


def test_the_node_is_reachable_from_the_host_and_the_network(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    node = RedpandaContainer(workdir=tmp_path, run_id="it-redpanda", image=STANDIN)
    try:
        ep = node.start()
        md = AdminClient({"bootstrap.servers": ep.bootstrap}).list_topics(timeout=10)
        assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [ep.bootstrap]
        host, port = ep.info["in_network_bootstrap"].split(":")
        probe = subprocess.run(
            ["docker", "run", "--rm", "--network", ep.info["network"], "--entrypoint", "bash",
             STANDIN, "-c", f"exec 3<>/dev/tcp/{host}/{port} && echo reached"],
            capture_output=True, text=True, timeout=120, check=False)
        assert probe.stdout.strip() == "reached", probe.stderr
    finally:
        node.stop()
    assert leftovers("it-redpanda") == []


def test_tailread_through_pytest_with_the_stand_in(pytester: pytest.Pytester) -> None:
    _, rec = tailread_through_pytest(pytester, "redpanda",
                                     f"--brokerperf-image=redpanda={STANDIN}",
                                     duration=5, warmup=3)
    assert rec["manifest"]["broker"]["info"]["image"]["ref"] == STANDIN
    assert rec["delivery"]["acknowledged"] > 2000


def test_the_official_image_where_it_is_on_the_engine(tmp_path: Path) -> None:
    """The real ``redpandadata/redpanda`` image where a registry was reachable to pull it
    (ci/github/containers.yml); skipped here, where it cannot be obtained."""
    from pytest_brokerperf.brokers.redpanda_container import default_images

    (official,) = default_images()
    if not containers.image_on_engine(official):
        pytest.skip(f"{official} is not on the engine (no registry is reachable here; "
                    "ci/github/containers.yml pulls it)")
    node = RedpandaContainer(workdir=tmp_path, run_id="it-redpanda-official")
    try:
        ep = node.start()
        assert ep.info["image"]["ref"] == official
    finally:
        node.stop()
    assert leftovers("it-redpanda-official") == []
