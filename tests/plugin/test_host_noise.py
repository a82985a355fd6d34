"""Hypervisor steal time through the real plugin: host-noise, measured again, never a figure.

A hypervisor cannot be told to steal on cue, so the conftest below replaces the
``/proc/stat`` reader with one whose steal column grows by a set share (env
``FAKE_STEAL``) of every reading's CPU time. Everything else is real: the in-process
loopback driver, the engine, the verdict and the plugin's reporting.
"""

from __future__ import annotations

import json

import pytest

from tests.support.fake_steal import FAKE_STEAL_CONFTEST

CONFTEST = FAKE_STEAL_CONFTEST + """
import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

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

LADDER = """
import pytest
from pytest_brokerperf.judge.ladder import LadderPolicy
from pytest_brokerperf import Throughput

@pytest.mark.throughput
def test_ladder(brokerperf):
    # every signal but steal switched off: this machine's real scheduling is not under test
    policy = LadderPolicy(publish_delay_budget_us=1e12, rate_tolerance=1.0,
                          growth_tolerance=1e9, cpu_share=9.0, runq_share=9.0)
    brokerperf.run(Throughput(message_size=256, partitions=2, policy=policy))
"""

FAST = [
    "--brokerperf-duration=1.5", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
    "--brokerperf-calibration=off", "-p", "no:cacheprovider", "-p", "no:randomly",
]


def _run(pytester: pytest.Pytester, steal: float, body: str,
         *args: str) -> tuple[pytest.RunResult, dict]:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_scn=body)
    res = pytester.path / "res"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_STEAL", str(steal))
        result = pytester.runpytest_subprocess(*FAST, f"--brokerperf-results={res}", *args)
    (rec,) = [json.loads(x) for x in (res / "results.jsonl").read_text().splitlines()]
    return result, rec


def test_a_robbed_window_is_measured_again_then_inconclusive(pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 0.20, TAILREAD)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*measured window 1 is host-noise (hypervisor steal 20.0%): measuring again (1/1*",
        "*INCONCLUSIVE:*the hypervisor took 20.0% of the machine's CPU time*",
        "*tailread*host-noise*inconclusive*",
    ])
    v = rec["verdict"]
    assert v["status"] == "host-noise" and "host-noise" in v["flags"]
    assert v["details"]["host_steal_share"] == pytest.approx(0.20, abs=0.001)
    assert rec["slo"] == []  # a robbed window is never judged
    (first,) = rec["noise_retries"]
    assert first["attempt"] == 1 and first["status"] == "host-noise"
    assert first["host_steal_share"] == pytest.approx(0.20, abs=0.001)
    assert any("1 measured window(s) discarded and measured again: 1 as host-noise" in n
               for n in rec["notes"])
    assert rec["delivery"]["lost"] == 0


def test_no_retries_reports_the_first_window(pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 0.20, TAILREAD, "--brokerperf-noise-retries=0")
    result.assert_outcomes(failed=1)
    assert "measuring again" not in result.stdout.str()
    assert rec["verdict"]["status"] == "host-noise" and rec["noise_retries"] == []


def test_steal_below_the_limit_is_a_figure(pytester: pytest.Pytester) -> None:
    # 20 % steal under a 25 % limit: the window counts (the user accepted this host)
    result, rec = _run(pytester, 0.20, TAILREAD, "--brokerperf-max-steal=25",
                       "--brokerperf-inconclusive=warn")
    assert result.ret == 0  # whatever this machine's own scheduling made of it: no failure
    assert rec["noise_retries"] == []
    assert rec["verdict"]["status"] != "host-noise"
    assert rec["verdict"]["details"]["host_steal_share"] == pytest.approx(0.20, abs=0.001)
    assert rec["verdict"]["details"]["thresholds"]["steal_share"] == 0.25


def test_a_bad_steal_limit_names_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--brokerperf-max-steal=0", "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*invalid steal-time limit '0' from --brokerperf-max-steal*"
                                 "0 < PERCENT <= 100*"])


def test_each_robbed_rung_is_measured_again_and_the_ladder_says_host_noise(
        pytester: pytest.Pytester) -> None:
    result, rec = _run(pytester, 0.10, LADDER, "--brokerperf-ladder=1k,2k",
                       "--brokerperf-noise-retries=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*rung 1/2 1,000 msg/s is host-noise: measuring it again*",
        "*rung 2/2 2,000 msg/s is host-noise: measuring it again*",
        "*INCONCLUSIVE:*the hypervisor took 10.0%*",
    ])
    lad = rec["ladder"]
    # each rung was measured twice; the second (kept) measurement is the rung
    assert [r["target_rate_msg_s"] for r in lad["rungs"]] == [1000, 2000]
    assert [r["index"] for r in lad["rungs"]] == [0, 1]
    assert [d["target_rate_msg_s"] for d in lad["noise_retries"]] == [1000, 2000]
    assert all(r["host_steal_share"] == pytest.approx(0.10, abs=0.001) for r in lad["rungs"])
    assert rec["verdict"]["status"] == "host-noise"
    assert any("2 measured window(s) discarded and measured again: 2 as host-noise" in n
               for n in rec["notes"])
