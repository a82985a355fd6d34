"""A tail-read window still catching up a stall (``unsteady``) is measured again once.

The conftest makes the verdict report the first N windows as unsteady (a stall cannot be
ordered on cue); the loopback driver, the engine and the plugin's reporting are real.
"""

from __future__ import annotations

import json

import pytest

CONFTEST = """
import itertools, os
import pytest
from pytest_brokerperf.judge import verdict
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

_real = verdict.assess
_calls = itertools.count(1)
_UNSTEADY = int(os.environ["FAKE_UNSTEADY"])
_STATUS = os.environ.get("FAKE_STATUS", verdict.UNSTEADY)

def _assess(outcome, thresholds=None, client_ceiling=None):
    v = _real(outcome, thresholds, client_ceiling)
    if next(_calls) <= _UNSTEADY:
        return verdict.Verdict(status=_STATUS, reasons=["caught up a stall"],
                               flags=[_STATUS], details=v.details)
    return v

verdict.assess = _assess

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

TAILREAD = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=500))
"""

FAST = [
    "--brokerperf-duration=1.5", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
    "--brokerperf-max-steal=100", "-p", "no:cacheprovider", "-p", "no:randomly",
]


def _run(pytester: pytest.Pytester, unsteady: int,
         status: str = "unsteady") -> tuple[pytest.RunResult, dict]:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_scn=TAILREAD)
    res = pytester.path / "res"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_UNSTEADY", str(unsteady))
        mp.setenv("FAKE_STATUS", status)
        result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={res}")
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    return result, rec


def test_an_unsteady_window_is_measured_again_and_the_second_counts(
        pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 1)
    result.stdout.fnmatch_lines([
        "*measured window 1 is unsteady (catching up a stall from before its window): "
        "measuring again*"])
    assert rec["verdict"]["status"] != "unsteady"
    # (a loaded host may add host-noise windows after it; unsteady is measured once)
    first = rec["noise_retries"][0]
    assert first["attempt"] == 1 and first["status"] == "unsteady"
    assert [d["status"] for d in rec["noise_retries"]].count("unsteady") == 1
    assert any("1 as unsteady" in n for n in rec["notes"])
    assert rec["delivery"]["lost"] == 0


def test_a_window_unsteady_twice_is_reported_inconclusive(pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 5)
    result.assert_outcomes(failed=1)
    if rec["verdict"]["status"] != "host-noise":
        result.stdout.fnmatch_lines(["*INCONCLUSIVE: caught up a stall*"])
        assert rec["verdict"]["status"] == "unsteady"
    # once, not more (a loaded host may add host-noise windows)
    assert [d["status"] for d in rec["noise_retries"]].count("unsteady") == 1


def test_a_shortfall_after_an_unsettled_warm_up_is_measured_again_once(
        pytester: pytest.Pytester) -> None:
    # a 0.5 s warm-up of 0.5 s periods cannot reach three steady periods: it is capped
    result, rec = _run(pytester, 1, status="rate-not-sustained")
    result.stdout.fnmatch_lines([
        "*measured window 1 is rate-not-sustained after a warm-up that never settled*"])
    assert rec["noise_retries"][0]["status"] == "rate-not-sustained"
    assert rec["verdict"]["status"] != "rate-not-sustained"


def test_a_second_shortfall_stands_as_the_finding(pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 5, status="consumer-bound")
    result.assert_outcomes(failed=1)
    assert [d["status"] for d in rec["noise_retries"]].count("consumer-bound") == 1
    if rec["verdict"]["status"] != "host-noise":
        assert rec["verdict"]["status"] == "consumer-bound"
