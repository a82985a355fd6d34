"""Tail-read and throughput on a local Pulsar standalone, through pytest as a user runs it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from pytest_brokerperf.errors import BrokerUnavailable
from pytest_brokerperf.omb_result import read_omb_result
from pytest_brokerperf.provision.maven import resolve_pulsar
from pytest_brokerperf.testing import PLAIN_SCENARIOS


@pytest.fixture(scope="module", autouse=True)
def _pulsar_available(_broker_session_lock: None) -> None:
    try:
        resolve_pulsar()
    except BrokerUnavailable as e:
        pytest.skip(str(e))


def test_tailread_and_throughput_end_to_end_through_pytest(
        pytester: pytest.Pytester, check_ladder: Callable[..., None],
        valid_or_noise: Callable[..., tuple[str, str]]) -> None:
    """``pytest scenarios -m "tailread or throughput" --broker=pulsar``, shortened: one
    standalone serves both scenarios; results, JUnit, no orphans."""
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    junit = pytester.path / "junit.xml"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "tailread or throughput", "-k", PLAIN_SCENARIOS,
        "--broker=pulsar",
        f"--brokerperf-results={results}", f"--junitxml={junit}",
        "--brokerperf-duration=6", "--brokerperf-warmup=5", "-p", "no:cacheprovider",
        # a short ladder whose top may be the Python client's limit here: INCONCLUSIVE
        # turns into a warning so the ladder's own record can be checked
        "--brokerperf-ladder=1k,30k", "--brokerperf-inconclusive=warn",
        "--brokerperf-calibration=refresh",  # never a ceiling cached by an earlier run
        "-W", "default::pytest_brokerperf.warnings.BrokerPerfWarning",
        "--rootdir", str(pytester.path), timeout=900,
    )
    run.assert_outcomes(passed=2, warnings=run.parseoutcomes().get("warnings", 0))
    recs = {r["scenario"]: r for r in
            (json.loads(x) for x in (results / "results.jsonl").read_text().splitlines())}
    status, slo = valid_or_noise(recs["tailread"])
    run.stdout.fnmatch_lines(["*brokerperf summary*", f"*pulsar*tailread*{status}*{slo}*"])
    assert set(recs) == {"tailread", "throughput"}
    # 16 partitions at 1k msg/s must hold: with OMB's 16 I/O threads on a one-CPU
    # generator it did not (see docs/reference/pulsar.md)
    check_ladder(recs["throughput"], "pulsar")
    rec = recs["tailread"]
    assert rec["broker"] == "pulsar" and rec["broker_version"] == "4.0.7"
    assert rec["delivery"]["lost"] == 0 and rec["delivery"]["acknowledged"] > 3000
    assert rec["latency"]["e2e_response"]["p50_us"] > 0
    assert rec["manifest"]["broker_warmup"]["acknowledged"] > 0
    art = Path(rec["artefacts"])
    (omb_file,) = [p for p in art.glob("*.json")
                   if p.name not in ("manifest.json", "record.json", "broker-settings.json")]
    omb = read_omb_result(omb_file)
    assert len(omb["publishRate"]) == 6 and omb["driver"] == "Pulsar"
    settings = json.loads((art / "broker-settings.json").read_text())
    assert settings["persistence"]["bookkeeperEnsemble"] == 1  # pulsar-local.yaml
    assert settings["cluster"]["brokers"] == 1 and settings["cluster"]["bookies"] == 1
    verdicts = [p.get("value") for p in ET.parse(junit).iter("property")
                if p.get("name") == "brokerperf.verdict"]
    assert len(verdicts) == 2 and status in verdicts
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if "PulsarStandaloneStarter" in " ".join(p.info["cmdline"] or [])
                 and str(pytester.path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []

