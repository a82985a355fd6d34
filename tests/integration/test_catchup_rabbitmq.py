"""Catch-up read on a local RabbitMQ (quorum queues, the shipped driver), through pytest.

AMQP 0-9-1 has no pause: consumers cancel (delivered messages requeued) and consume
again. The checks: the backlog was built and drained, nothing was lost or handed out
twice across the pause, and the queues' ready messages at the drain's start (consumers
cancelled) are the backlog the counters saw, give or take what was published between
the two readings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.rabbitmq.process import rabbitmq_available
from pytest_brokerperf.testing import PLAIN_SCENARIOS


@pytest.fixture(scope="module", autouse=True)
def _rabbitmq_available(_broker_session_lock: None) -> None:
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)


def test_catchup_on_rabbitmq_through_pytest(pytester: pytest.Pytester,
                                            check_drained: Callable[..., None]) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "catchup", "-k", f"not consumer_only and {PLAIN_SCENARIOS}",
        "--broker=rabbitmq", f"--brokerperf-results={results}", "--brokerperf-duration=3",
        "--brokerperf-warmup=5", "--brokerperf-inconclusive=warn", "-p", "no:cacheprovider",
        "-W", "default::pytest_brokerperf.warnings.BrokerPerfWarning", "-s",
        "--rootdir", str(pytester.path), timeout=900,
    )
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    cu = rec["catchup"]
    print(json.dumps({k: v for k, v in cu.items() if k != "age"}, indent=1))
    assert cu["build_complete"] and cu["drain_complete"], run.stdout.str()
    assert "basic.cancel" in cu["consumer_pause"]
    assert cu["catchup_rate_msg_s"] > 0 and cu["age"]["count"] > 0
    d = rec["delivery"]
    assert d["lost"] == 0 and d["duplicates"] == 0
    (start,) = cu["broker_backlog_at_drain_start"]
    assert abs(start["messages"] - cu["backlog_at_drain_start_messages"]) <= 1000
    check_drained(rec)
