"""Helpers for tests of container mode against a real Docker engine (the project's own
integration tests use them; so can a team testing its own images)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.core.errors import ProvisionError
from pytest_brokerperf.testing import PLAIN_SCENARIOS

__all__ = ["engine_mark", "image_or_skip", "leftovers", "tailread_through_pytest"]

REPO = Path(__file__).resolve().parents[2]


def engine_mark() -> pytest.MarkDecorator:
    """``skipif`` no Docker engine answers, with the address and how to start one."""
    engine = containers.engine_status()
    return pytest.mark.skipif(
        not engine.answers,
        reason=f"no Docker engine answers at {engine.address} ({engine.detail}); "
        "bash ci/docker.sh starts one and builds the local images")


def image_or_skip(kind: str, requested: str | None, defaults: tuple[str, ...]) -> str:
    """The image container mode would run for ``kind``, or a skip saying how to get one."""
    client = containers.docker_client()
    try:
        return containers.resolve_image(client, kind, requested, defaults).ref
    except ProvisionError as exc:
        pytest.skip(str(exc))
    finally:
        client.close()


def leftovers(run_id: str) -> list[str]:
    """Names of containers and networks still labelled with ``run_id``."""
    label = f"label={containers.LABEL_RUN_ID}={run_id}"
    names = []
    for what, field in ((["ps", "-a"], "{{.Names}}"), (["network", "ls"], "{{.Name}}")):
        out = subprocess.run(["docker", *what, "--filter", label, "--format", field],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        names += out.split()
    return names


def tailread_through_pytest(pytester: pytest.Pytester, broker: str, *extra: str,
                            duration: int = 6, warmup: int = 5) -> tuple[Any, dict[str, Any]]:
    """The shipped tail-read scenario for ``broker`` in container mode, in a pytest
    subprocess; its result and its one record, after checking the outcome matches the
    record's verdict, nothing was lost and nothing labelled with the run is left."""
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios"), "-m", "tailread", "-k", PLAIN_SCENARIOS, f"--broker={broker}",
        "--brokerperf-provision=container", f"--brokerperf-results={results}",
        f"--brokerperf-duration={duration}", f"--brokerperf-warmup={warmup}",
        "-p", "no:cacheprovider", "--rootdir", str(pytester.path), *extra, timeout=900)
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    run.assert_outcomes(**{"passed" if rec["verdict"]["status"] == "valid" else "failed": 1})
    assert rec["delivery"]["lost"] == 0
    broker_info = rec["manifest"]["broker"]
    assert broker_info["mode"] == "container" and broker_info["kind"] == broker
    assert leftovers(rec["run_id"]) == []
    return run, rec
