"""OMB's rate discovery (``producerRate: 0``), reproduced: the controller's arithmetic."""

from __future__ import annotations

import pytest

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.engine.rate_controller import (
    CONTROL_PERIOD_S,
    INITIAL_RATE,
    LABEL,
    DiscoveryLoop,
    RateController,
    RateControllerLimits,
)

SECOND = 1_000_000_000


def test_omb_unit_test_sequence():
    """OMB's RateControllerTest: 10k → (no backlog) 20k, factor 1 → (received 15k of
    20k) 5k, factor 0.5."""
    c = RateController()
    assert c.ramping_factor == 1.0
    rate = c.next_rate(10_000, SECOND, 10_000, 10_000)
    assert rate == 20_000
    assert c.ramping_factor == 1.0
    rate = c.next_rate(rate, SECOND, 20_000, 15_000)
    assert rate == 5_000
    assert c.ramping_factor == 0.5


def test_omb_constants():
    assert INITIAL_RATE == 10_000 and CONTROL_PERIOD_S == 3.0
    assert LABEL == "omb-rate-discovery"
    lim = RateControllerLimits()
    assert (lim.publish_backlog_limit, lim.receive_backlog_limit) == (1000, 1000)
    assert (lim.min_ramping_factor, lim.max_ramping_factor) == (0.01, 1.0)


def test_publish_backlog_ramps_down_to_what_was_published():
    c = RateController()
    # 3 s at 10k: 30k expected, 20k published (and received): publish backlog 10k
    rate = c.next_rate(10_000, 3 * SECOND, 20_000, 20_000)
    assert rate == pytest.approx(min(20_000 / 3, (30_000 - 10_000) / 3))
    assert c.ramping_factor == 0.5
    assert c.last_reason == "publish backlog 10000"


def test_backlogs_at_the_limit_do_not_ramp_down():
    c = RateController()
    assert c.next_rate(10_000, SECOND, 9_000, 8_000) == 20_000  # both backlogs == 1000


def test_receive_backlog_uses_lifetime_totals_and_ignores_subscriptions():
    """OMB quirk kept: total published − total received, whatever the subscriptions."""
    c = RateController()
    c.next_rate(10_000, SECOND, 10_000, 20_000)  # two subscriptions: received = 2 × sent
    assert c.ramping_factor == 1.0  # negative receive backlog never throttles


def test_factor_is_floored_and_capped():
    c = RateController()
    for i in range(20):
        c.next_rate(10_000, SECOND, 10_000 * (i + 1), 0)
    assert c.ramping_factor == 0.01
    c = RateController(RateControllerLimits(max_ramping_factor=0.5))
    assert c.ramping_factor == 0.5
    assert c.next_rate(1_000, SECOND, 1_000, 1_000) == 1_500
    assert c.ramping_factor == 0.5


def test_ramp_down_never_goes_negative():
    c = RateController()
    # receive backlog 20k above the 10k expected: max(0, 10k - 20k) = 0
    assert c.next_rate(10_000, SECOND, 20_000, 0) == 0.0


def test_environment_overrides_as_omb():
    env = {"PUBLISH_BACKLOG_LIMIT": "5000", "RECEIVE_BACKLOG_LIMIT": "200",
           "MIN_RAMPING_FACTOR": "0.1", "MAX_RAMPING_FACTOR": "0.25"}
    lim = RateControllerLimits.from_env(env)
    assert lim == RateControllerLimits(5000, 200, 0.1, 0.25)
    assert RateControllerLimits.from_env({}) == RateControllerLimits()
    assert RateControllerLimits.from_env({"PUBLISH_BACKLOG_LIMIT": " "}) == (
        RateControllerLimits())
    with pytest.raises(ConfigError, match="RECEIVE_BACKLOG_LIMIT='lots'"):
        RateControllerLimits.from_env({"RECEIVE_BACKLOG_LIMIT": "lots"})


class FakeSession:
    def __init__(self) -> None:
        self.acked = 0
        self.received = 0
        self.rates: list[float] = []

    def totals(self) -> dict[str, int]:
        return {"acked": self.acked, "received": self.received}

    def set_rate(self, rate: float) -> None:
        self.rates.append(rate)


def test_discovery_loop_controls_every_period_and_logs_each_step():
    loop = DiscoveryLoop(RateController(), INITIAL_RATE, control_period_s=0.0)
    s = FakeSession()
    loop.poll(s)  # the first poll starts the clock
    assert s.rates == []
    s.acked = s.received = 1
    loop.poll(s)
    assert len(loop.steps) == 1
    step = loop.steps[0]
    assert step["rate_msg_s"] == INITIAL_RATE and step["reason"] in (
        "no backlog", "publish backlog " + str(step["rate_msg_s"]))
    assert s.rates[-1] == max(step["next_rate_msg_s"], 1.0)  # OMB's 1 msg/s floor


def test_discovery_loop_waits_for_its_period():
    loop = DiscoveryLoop(RateController(), INITIAL_RATE, control_period_s=3600)
    s = FakeSession()
    loop.poll(s)
    loop.poll(s)
    assert loop.steps == [] and s.rates == []
