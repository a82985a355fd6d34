"""The once-per-session broker warm-up's length: the profile's unless
``--brokerperf-broker-warmup`` (flag, ``BROKERPERF_BROKER_WARMUP`` or ini) says otherwise;
0 skips it and the manifest says so."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.plugin import warmup


class _NoDriver:
    """A broker type whose driver must not be asked for: a skipped warm-up sends nothing."""

    def create_driver(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a skipped warm-up created a driver")


def test_zero_skips_the_warm_up_and_names_where_it_was_asked() -> None:
    settings = Settings.resolve({}, {}, {"brokerperf_broker_warmup": "0"})
    got = warmup.warm_broker(object(), settings, _NoDriver())  # type: ignore[arg-type]
    assert got["seconds"] == 0.0
    assert got["skipped"].startswith(
        "broker warm-up 0 s (from brokerperf_broker_warmup in pytest.ini/pyproject.toml)")
    assert "cold broker" in got["skipped"]


@pytest.mark.parametrize(("env", "profile", "expected"), [
    ({}, "smoke", (15.0, "the smoke profile")),
    ({}, "standard", (60.0, "the standard profile")),
    ({"BROKERPERF_BROKER_WARMUP": "3"}, "standard",
     (3.0, "BROKERPERF_BROKER_WARMUP environment variable")),
    ({"BROKERPERF_BROKER_WARMUP": "2m"}, "smoke",
     (120.0, "BROKERPERF_BROKER_WARMUP environment variable")),
])
def test_the_length_is_the_profiles_unless_asked(
        env: dict[str, str], profile: str, expected: tuple[float, str]) -> None:
    settings = Settings.resolve({}, env, {"brokerperf_profile": profile})
    assert warmup.broker_warmup_s(settings) == expected
