"""The mixed scenario on a local Pulsar standalone, through pytest as a user runs it.

A subscription created after the data was published and acknowledged by the tailing
subscription can read it only if the namespace retains it: the check is that the
catch-up subscription, starting at ``Earliest``, read at least everything acknowledged
before it started (less the caught-up lag), and nothing was lost for the tailing group.
"""

from __future__ import annotations

import json
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


def test_mixed_on_pulsar_through_pytest(pytester: pytest.Pytester) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "mixed", "-k", PLAIN_SCENARIOS, "--broker=pulsar",
        f"--brokerperf-results={results}", "--brokerperf-duration=3",
        "--brokerperf-warmup=5", "--brokerperf-inconclusive=warn", "-p", "no:cacheprovider",
        "-W", "default::pytest_brokerperf.warnings.BrokerPerfWarning", "-s",
        "--rootdir", str(pytester.path), timeout=900,
    )
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    mx = rec["mixed"]
    print(json.dumps(mx, indent=1))
    print(json.dumps(rec["verdict"]["status"]), rec["verdict"]["reasons"])
    assert rec["scenario"] == "mixed"
    assert mx["build_complete"] and mx["catchup_complete"], run.stdout.str()
    assert "Earliest" in mx["catchup_start"]
    # retention kept what the tailing subscription had acknowledged: the late
    # subscription read it all
    assert mx["retained_at_catchup_start_messages"] > mx["caught_up_lag"]
    assert mx["catchup_consumed"] >= (mx["retained_at_catchup_start_messages"]
                                      - mx["caught_up_lag"])
    assert mx["catchup_rate_msg_s"] > 0
    assert rec["delivery"]["lost"] == 0
    assert {s["metric"]: s["status"] for s in rec["slo"]}.get("mixed.caught_up",
                                                               "pass") == "pass"
