"""The example CI workflows in ci/github stay in step with the repository."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_the_official_images_workflow_runs_every_container_test_file() -> None:
    flow = yaml.safe_load((REPO / "ci" / "github" / "containers.yml").read_text())
    steps = flow["jobs"]["official-images"]["steps"]
    (run,) = [s["run"] for s in steps if s.get("name") == "Container-mode tests"]
    listed = {w for w in run.split() if w.startswith("tests/")}
    on_disk = {str(p.relative_to(REPO)) for pattern in (
        "tests/integration/test_containers*.py", "tests/unit/test_*container_config.py")
        for p in REPO.glob(pattern)}
    assert listed == on_disk
    env = flow["jobs"]["official-images"]["env"]
    # the tags the workflow pulls are the second defaults container mode resolves
    from pytest_brokerperf.brokers.automq_container import default_images as automq_images
    from pytest_brokerperf.brokers.automq_container import object_store_images
    from pytest_brokerperf.brokers.kafka.container import default_images as kafka_images
    from pytest_brokerperf.brokers.provision.maven import PULSAR_DEFAULT_VERSION
    from pytest_brokerperf.brokers.pulsar.container import default_images as pulsar_images
    from pytest_brokerperf.brokers.rabbitmq.container import default_images as rmq_images
    from pytest_brokerperf.brokers.redpanda_container import default_images as rp_images
    from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION

    assert env["KAFKA_IMAGE"] == kafka_images(KAFKA_DEFAULT_VERSION)[1]
    assert env["RABBITMQ_IMAGE"] == rmq_images()[1]
    assert env["PULSAR_IMAGE"] == pulsar_images(PULSAR_DEFAULT_VERSION)[1]
    assert env["REDPANDA_IMAGE"] == rp_images()[0]  # the only image: no local build
    assert env["AUTOMQ_IMAGE"] == automq_images()[0]  # likewise, and its object store's
    assert env["MINIO_IMAGE"] == object_store_images()[0]
    (pull,) = [s["run"] for s in steps if str(s.get("name", "")).startswith("Pull")]
    assert all(f"${name}" in pull for name in env)
