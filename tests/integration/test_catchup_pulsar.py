"""Catch-up read on a local Pulsar standalone, through pytest as a user runs it.

Pulsar's consumers pause by closing (the durable subscription keeps its cursor and the
backlog stays on the broker) and resume by subscribing again; the checks: the backlog
was built and drained, nothing was lost across the pause, and the broker's
``msgBacklog`` at the drain's start (consumers closed) saw the backlog the counters saw.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_brokerperf.errors import BrokerUnavailable
from pytest_brokerperf.provision.maven import resolve_pulsar
from pytest_brokerperf.testing import PLAIN_SCENARIOS


@pytest.fixture(scope="module", autouse=True)
def _pulsar_available(_broker_session_lock: None) -> None:
    try:
        resolve_pulsar()
    except BrokerUnavailable as e:
        pytest.skip(str(e))


def test_catchup_on_pulsar_through_pytest(pytester: pytest.Pytester,
                                          check_drained: Callable[..., None]) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "catchup", "-k", f"not consumer_only and {PLAIN_SCENARIOS}",
        "--broker=pulsar", f"--brokerperf-results={results}", "--brokerperf-duration=3",
        "--brokerperf-warmup=5", "--brokerperf-inconclusive=warn", "-p", "no:cacheprovider",
        "-W", "default::pytest_brokerperf.warnings.BrokerPerfWarning", "-s",
        "--rootdir", str(pytester.path), timeout=900,
    )
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    cu = rec["catchup"]
    print(json.dumps({k: v for k, v in cu.items() if k != "age"}, indent=1))
    assert cu["build_complete"] and cu["drain_complete"], run.stdout.str()
    assert "subscribes again" in cu["consumer_pause"]
    assert cu["catchup_rate_msg_s"] > 0 and cu["age"]["count"] > 0
    assert rec["delivery"]["lost"] == 0
    (start,) = cu["broker_backlog_at_drain_start"]
    # msgBacklog counts entries: a producer batch is one, so at most the counters' figure
    assert 0 < start["messages"] <= cu["backlog_at_drain_start_messages"] + 1000
    check_drained(rec)
