"""--brokerperf-tls through pytest: flag, environment and ini, and its refusals before any
broker starts (Tansu, containers, a remote cluster)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from tests.support.refusals import CONFTEST, TEST

SHOW_SETTINGS = """
import json, os

def test_show(brokerperf_settings):
    with open(os.environ["SETTINGS_OUT"], "w") as f:
        json.dump(brokerperf_settings.as_dict(), f)
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if (name.startswith(("BROKERPERF_", "PYTEST_XDIST_"))
                and name != "BROKERPERF_AUTO_PROVISION"):
            monkeypatch.delenv(name)


def _settings(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
              *args: str) -> dict[str, Any]:
    out = pytester.path / "settings.json"
    monkeypatch.setenv("SETTINGS_OUT", str(out))
    pytester.makepyfile(test_show=SHOW_SETTINGS)
    pytester.runpytest(*args, "test_show.py").assert_outcomes(passed=1)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_the_flag_the_environment_and_the_ini_key_turn_tls_on(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _settings(pytester, monkeypatch)["tls"] is False
    s = _settings(pytester, monkeypatch, "--brokerperf-tls")
    assert (s["tls"], s["sources"]["tls"]) == (True, "--brokerperf-tls")
    monkeypatch.setenv("BROKERPERF_TLS", "yes")
    s = _settings(pytester, monkeypatch)
    assert (s["tls"], s["sources"]["tls"]) == (True, "BROKERPERF_TLS environment variable")
    assert _settings(pytester, monkeypatch, "--no-brokerperf-tls")["tls"] is False
    monkeypatch.delenv("BROKERPERF_TLS")
    pytester.makeini("[pytest]\nbrokerperf_tls = true\n")
    s = _settings(pytester, monkeypatch)
    assert (s["tls"], s["sources"]["tls"]) == (True, "brokerperf_tls in tox.ini")


def test_auto_provisioning_with_tls_picks_processes(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROKERPERF_AUTO_PROVISION", raising=False)  # auto, as users get it
    s = _settings(pytester, monkeypatch, "--brokerperf-tls")
    assert s["provision_effective"] == "process"
    assert "--brokerperf-tls" in s["auto_reason"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--broker=tansu"], "--brokerperf-tls (from --brokerperf-tls): tansu in process mode "
                         "has no TLS listener in this version (in no mode yet); drop the flag "
                         "for tansu"),
    (["--broker=pulsar", "--brokerperf-provision=container"],
     "--brokerperf-tls (from --brokerperf-tls): pulsar in container mode has no TLS listener "
     "in this version (it can in: process)*"),
    (["--broker=kafka", "--brokerperf-provision=container"],
     "--brokerperf-tls (from --brokerperf-tls): kafka in container mode has no TLS listener*"
     "or use --brokerperf-provision=process"),
    (["--broker=kafka", "--kafka-bootstrap=127.0.0.1:9"],
     "*a remote cluster's TLS is the client's setting: drop the flag and put "
     "security.protocol=SSL (or SASL_SSL) and ssl.ca.location in --kafka-config*"),
], ids=["tansu", "pulsar-container", "container", "remote"])
def test_tls_where_no_listener_serves_it_is_refused_before_any_broker_starts(
        pytester: pytest.Pytester, args: list[str], needle: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--brokerperf-tls", f"--brokerperf-results={pytester.path}/res",
        *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*{needle}*"])
    assert not (pytester.path / "broker-started").exists()
    assert not (pytester.path / "res").exists()
    assert time.monotonic() - started < 60
