"""OMB's maximum-sustainable-rate discovery (``producerRate: 0``), reproduced as OMB does it.

OMB (``RateController``, openmessaging/benchmark PR #329) starts at 10 000 msg/s and every
3 s reads the *lifetime* published (acknowledged) and received counters, then:

* receive backlog = total published − total received; above ``RECEIVE_BACKLOG_LIMIT``
  (1000) → ramp down, next rate = min(received / period, max(0, expected − backlog) /
  period);
* else publish backlog = expected − published in the period; above
  ``PUBLISH_BACKLOG_LIMIT`` (1000) → ramp down, next rate = min(published / period,
  max(0, expected − backlog) / period);
* else ramp up: next rate = rate × (1 + factor).

The ramping factor starts at ``MAX_RAMPING_FACTOR`` (1.0); ramping up doubles it (capped
at the maximum), ramping down halves it (floored at ``MIN_RAMPING_FACTOR``, 0.01). All
four limits are read from environment variables of the same names, as OMB reads them.
Rates are applied with OMB's 1 msg/s floor (``adjustPublishRate``). The controller keeps
running through warm-up *and* the measured window, so the measured window contains rate
changes; results of this mode are labelled ``omb-rate-discovery`` and are never mixed
with ladder results.

OMB quirk kept on purpose: the receive backlog ignores ``subscriptionsPerTopic`` (with
two subscriptions, received exceeds published and consumer lag never throttles).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.engine.coordinator import LoadSession

__all__ = [
    "CONTROL_PERIOD_S",
    "INITIAL_RATE",
    "LABEL",
    "DiscoveryLoop",
    "RateController",
    "RateControllerLimits",
]

#: The label every result of this mode carries.
LABEL = "omb-rate-discovery"
#: OMB's hard-coded control period (``controlPeriodMillis = 3000``).
CONTROL_PERIOD_S = 3.0
#: OMB's hard-coded starting rate when ``producerRate`` is 0.
INITIAL_RATE = 10_000.0
ONE_SECOND_NS = 1_000_000_000


@dataclass(frozen=True)
class RateControllerLimits:
    """The four knobs of OMB's controller, with OMB's defaults."""

    publish_backlog_limit: int = 1000
    receive_backlog_limit: int = 1000
    min_ramping_factor: float = 0.01
    max_ramping_factor: float = 1.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RateControllerLimits:
        """OMB's environment overrides: ``PUBLISH_BACKLOG_LIMIT``, ``RECEIVE_BACKLOG_LIMIT``,
        ``MIN_RAMPING_FACTOR``, ``MAX_RAMPING_FACTOR``."""
        env = os.environ if env is None else env
        d = cls()

        def get(name: str, default: Any, kind: type) -> Any:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                return kind(raw)
            except ValueError:
                from pytest_brokerperf.core.errors import ConfigError

                raise ConfigError(
                    f"invalid {name}={raw!r} in the environment: expected "
                    f"{'an integer' if kind is int else 'a number'} (OMB's rate-discovery "
                    "limit); unset it for OMB's default"
                ) from None

        return cls(
            publish_backlog_limit=get("PUBLISH_BACKLOG_LIMIT", d.publish_backlog_limit, int),
            receive_backlog_limit=get("RECEIVE_BACKLOG_LIMIT", d.receive_backlog_limit, int),
            min_ramping_factor=get("MIN_RAMPING_FACTOR", d.min_ramping_factor, float),
            max_ramping_factor=get("MAX_RAMPING_FACTOR", d.max_ramping_factor, float),
        )


@dataclass
class RateController:
    """One controller per run; :meth:`next_rate` is called once per control period."""

    limits: RateControllerLimits = field(default_factory=RateControllerLimits)
    ramping_factor: float = -1.0  # set from limits.max_ramping_factor
    previous_total_published: int = 0
    previous_total_received: int = 0
    last_reason: str = ""

    def __post_init__(self) -> None:
        if self.ramping_factor < 0:
            self.ramping_factor = self.limits.max_ramping_factor

    def _ramp_up(self) -> None:
        self.ramping_factor = min(self.limits.max_ramping_factor, self.ramping_factor * 2)

    def _ramp_down(self) -> None:
        self.ramping_factor = max(self.limits.min_ramping_factor, self.ramping_factor / 2)

    def next_rate(self, rate: float, period_ns: int, total_published: int,
                  total_received: int) -> float:
        """The next target rate (msg/s) from lifetime counters after one control period."""
        expected = int(rate / ONE_SECOND_NS * period_ns)
        published = total_published - self.previous_total_published
        received = total_received - self.previous_total_received
        self.previous_total_published = total_published
        self.previous_total_received = total_received

        receive_backlog = total_published - total_received
        if receive_backlog > self.limits.receive_backlog_limit:
            self.last_reason = f"receive backlog {receive_backlog}"
            return self._down(period_ns, received, expected, receive_backlog)
        publish_backlog = expected - published
        if publish_backlog > self.limits.publish_backlog_limit:
            self.last_reason = f"publish backlog {publish_backlog}"
            return self._down(period_ns, published, expected, publish_backlog)
        self._ramp_up()
        self.last_reason = "no backlog"
        return rate + rate * self.ramping_factor

    def _down(self, period_ns: int, actual: int, expected: int, backlog: int) -> float:
        self._ramp_down()
        next_expected = max(0, expected - backlog)
        next_expected_rate = next_expected / period_ns * ONE_SECOND_NS
        actual_rate = actual / period_ns * ONE_SECOND_NS
        return min(actual_rate, next_expected_rate)


class DiscoveryLoop:
    """Drives a :class:`RateController` from a running :class:`LoadSession`.

    Pass :meth:`poll` as the session's wait hook: every ``control_period_s`` it reads the
    lifetime counters, asks the controller for the next rate and applies it (1 msg/s
    floor), logging every step.
    """

    def __init__(self, controller: RateController, initial_rate: float = INITIAL_RATE,
                 control_period_s: float = CONTROL_PERIOD_S) -> None:
        self.controller = controller
        self.rate = float(initial_rate)
        self.control_period_ns = int(control_period_s * 1e9)
        self.last_ns: int | None = None
        self.t0_ns: int | None = None
        self.steps: list[dict[str, Any]] = []

    def start(self, now_ns: int | None = None) -> None:
        self.last_ns = self.t0_ns = time.monotonic_ns() if now_ns is None else now_ns

    def poll(self, session: LoadSession) -> None:
        now = time.monotonic_ns()
        if self.last_ns is None:
            self.start(now)
            return
        if now - self.last_ns < self.control_period_ns:
            return
        totals = session.totals()
        now = time.monotonic_ns()
        period_ns = now - self.last_ns
        self.last_ns = now
        published, received = totals.get("acked", 0), totals.get("received", 0)
        before = self.rate
        nxt = self.controller.next_rate(before, period_ns, published, received)
        self.rate = nxt
        session.set_rate(max(nxt, 1.0))
        self.steps.append({
            "t_s": round((now - (self.t0_ns or now)) / 1e9, 3),
            "period_s": round(period_ns / 1e9, 3),
            "rate_msg_s": before,
            "total_published": published,
            "total_received": received,
            "next_rate_msg_s": nxt,
            "applied_rate_msg_s": max(nxt, 1.0),
            "ramping_factor": self.controller.ramping_factor,
            "reason": self.controller.last_reason,
        })
