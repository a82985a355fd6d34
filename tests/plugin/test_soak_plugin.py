"""The soak scenario through the real plugin, on the in-process loopback broker.

Checked here: the ``soak`` marker is registered and selects the test; a short soak's
record carries each period's worker RSS, open files and threads (``timeline``,
``periods.csv``) and a judged ``soak`` block; a leak (a growing series injected where
the scenario reads them) fails the test with the process, resource and slope, and flags
the verdict ``resource-growth``. Broker processes' figures come from /proc of a real
broker: tests/integration/test_soak_kafka.py.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pytest_brokerperf.testing import skip_if_host_noise
from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

# eight half-second measured periods: enough for the growth rule (six at least)
ARGS = [*FAST_ARGS, "--brokerperf-duration=4", "--brokerperf-noise-retries=2"]

BODY = """
import pytest
from pytest_brokerperf import Soak

@pytest.mark.soak
def test_soak(brokerperf):
    brokerperf.run(Soak(message_size=128, partitions=2))

@pytest.mark.tailread
def test_other():
    pass
"""

#: a broker process whose open files rise by 40 a period: a descriptor leak
LEAK = """
from pytest_brokerperf.scenario_library import soak

_real = soak.process_series

def _leaking(periods):
    out = _real(periods)
    out[("broker node 9 (pid 1)", "open_fds")] = [(i + 1.0, 100.0 + 40 * i)
                                                 for i in range(len(periods))]
    return out

soak.process_series = _leaking
"""


def _records(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "res" / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(pytester: pytest.Pytester, conftest: str) -> pytest.RunResult:
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess(*ARGS, f"--brokerperf-results={pytester.path}/res",
                                           "-m", "soak")
    if (pytester.path / "res" / "results.jsonl").is_file():
        skip_if_host_noise(_records(pytester))
    return result


def test_soak_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.soak: soak scenario*"])


def test_short_soak_records_resources_per_period_and_judges_them(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, LOOPBACK_CONFTEST)
    result.assert_outcomes(passed=1, deselected=1)
    (rec,) = _records(pytester)
    assert rec["scenario"] == "soak"
    assert "resource-growth" not in rec["verdict"]["flags"]
    timeline = rec["timeline"]
    n = timeline["periods"]
    for column in ("worker_rss_mib", "worker_open_fds", "worker_threads"):
        values = timeline[column]
        assert len(values) == n and all(v is not None and v > 0 for v in values), column
    # the loopback broker lives in the workers: no broker process to read
    assert timeline["broker_rss_mib"] == [None] * n
    soak = rec["soak"]
    assert soak["growing"] == 0 and soak["measured_periods"] >= 6
    judged = {(t["process"], t["resource"]) for t in soak["trends"]}
    assert {r for _, r in judged} == {"rss_bytes", "open_fds", "threads"}
    assert all(p.startswith("worker ") for p, _ in judged)
    with open(Path(rec["artefacts"]) / "periods.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == n and all(float(r["worker_threads"]) >= 1 for r in rows)


def test_a_leak_fails_the_soak_with_process_resource_and_slope(
        pytester: pytest.Pytester) -> None:
    result = _run(pytester, LOOPBACK_CONFTEST + LEAK)
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines([
        "*resource-growth: broker node 9 (pid 1) open_fds 100 → *fds/min*"])
    (rec,) = _records(pytester)
    assert "resource-growth" in rec["verdict"]["flags"]
    assert rec["soak"]["growing"] == 1
    (grown,) = [t for t in rec["soak"]["trends"] if t["grows"]]
    assert (grown["process"], grown["resource"], grown["start"]) == (
        "broker node 9 (pid 1)", "open_fds", 100.0)
