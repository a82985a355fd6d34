"""The ``--brokerperf-fail-on`` budget grammar: ``METRIC:[+|-]N[%|unit]`` items.

It follows pytest-benchmark's ``--benchmark-compare-fail=STAT:5%`` (a relative budget with
``%``, otherwise an absolute one in the metric's unit), with direction: a latency
regresses when it rises, a rate when it falls. Read when the options are (so a bad
budget is refused before any broker starts); judged by :mod:`pytest_brokerperf.report.gates`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.metric_names import LATENCY_STATS, RATE_METRICS, VIEWS

__all__ = ["Budget", "parse_fail_on"]

_UNITS_US = {"us": Fraction(1), "µs": Fraction(1), "ms": Fraction(1000),
             "s": Fraction(1_000_000)}
_ITEM = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_.]*)\s*:\s*(?P<sign>[+-])?\s*"
    r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>%|us|µs|ms|s)?\s*$")


@dataclass(frozen=True)
class Budget:
    """One ``METRIC:[+|-]N[%|unit]`` item. ``relative`` is a fraction (0.15 for 15 %)."""

    text: str
    metric: str
    higher_is_worse: bool
    relative: Fraction | None
    absolute: Fraction | None  # in the metric's unit (µs for latency)

    def describe(self) -> str:
        sign = "+" if self.higher_is_worse else "-"
        if self.relative is not None:
            return f"{sign}{float(self.relative * 100):g}%"
        assert self.absolute is not None
        unit = " µs" if not self.metric_is_rate else ""
        return f"{sign}{float(self.absolute):g}{unit}"

    @property
    def metric_is_rate(self) -> bool:
        return self.metric in RATE_METRICS


def _check_metric(metric: str, item: str) -> bool:
    """True when higher is worse (latency); raises for unknown metric names."""
    if metric in RATE_METRICS:
        return False
    view, _, stat = metric.partition(".")
    if view in VIEWS and stat in LATENCY_STATS:
        return True
    raise ConfigError(
        f"--fail-on item {item!r}: unknown metric {metric!r}. Use a latency view and "
        f"statistic ({', '.join(VIEWS)} . {', '.join(LATENCY_STATS)}, e.g. "
        f"e2e_response.p99) or a rate ({', '.join(RATE_METRICS)})")


def parse_fail_on(exprs: str | Sequence[str]) -> list[Budget]:
    """Parse one or more comma-separated budget lists; raises ``ConfigError`` naming the item."""
    texts = [exprs] if isinstance(exprs, str) else list(exprs)
    budgets: list[Budget] = []
    for text in texts:
        for item in text.split(","):
            if not item.strip():
                continue
            m = _ITEM.match(item)
            if m is None:
                raise ConfigError(
                    f"--fail-on item {item.strip()!r} is not METRIC:[+|-]NUMBER[%|us|ms|s], "
                    "e.g. 'e2e_response.p99:+15%' or 'ack_rate:-10%'")
            metric = m["metric"]
            worse_up = _check_metric(metric, item.strip())
            sign, unit = m["sign"], m["unit"]
            if sign is not None and (sign == "+") != worse_up:
                good = "+" if worse_up else "-"
                what = "a latency regresses upwards" if worse_up else "a rate regresses downwards"
                raise ConfigError(
                    f"--fail-on item {item.strip()!r}: {what}; write "
                    f"'{metric}:{good}{m['num']}{unit or ''}' (or leave the sign out)")
            num = Fraction(m["num"])
            if unit == "%":
                budgets.append(Budget(item.strip(), metric, worse_up, num / 100, None))
                continue
            if unit is not None and not worse_up:
                raise ConfigError(
                    f"--fail-on item {item.strip()!r}: {metric} is a rate; give a percentage "
                    "or a number in its own unit (msg/s, MiB/s), without a time unit")
            scale = _UNITS_US[unit] if unit else Fraction(1)
            budgets.append(Budget(item.strip(), metric, worse_up, None, num * scale))
    if not budgets:
        raise ConfigError("--fail-on is empty; give e.g. 'e2e_response.p99:+15%'")
    return budgets
