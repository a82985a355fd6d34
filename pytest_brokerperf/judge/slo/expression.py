"""The :class:`SLO` type and the ``<metric> <op> <number> [unit]`` expression parser."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.judge.slo.selector import Selector
from pytest_brokerperf.judge.slo.vocabulary import (
    _EXPR_RE,
    _UNIT_HINTS,
    EXPR_SOURCE,
    METRICS,
    OPERATORS,
    PERCENT_OF,
    SCALARS,
    STATS,
    UNITS,
    VIEWS,
    _err,
    _fmt,
    metric_kind,
)


@dataclass(frozen=True)
class SLO:
    """One service-level objective. ``value`` and ``unit`` are as written; :attr:`threshold`
    is ``value`` in the figure's unit (µs for time metrics, percent for ``%``)."""

    metric: str
    op: str
    value: float
    unit: str = ""
    when: Selector = field(default_factory=Selector)
    source: str = EXPR_SOURCE
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.when, Selector):
            object.__setattr__(self, "when", Selector.from_mapping(self.when, source=self.source))
        object.__setattr__(self, "unit", _normalize_unit(self.unit))
        _validate(self.metric, self.op, self.value, self.unit, self.source, "expr", str(self))

    @classmethod
    def parse(
        cls,
        expr: str,
        *,
        when: Selector | Mapping[str, Any] | None = None,
        source: str = EXPR_SOURCE,
        key: str = "expr",
        description: str | None = None,
    ) -> SLO:
        """Parse ``"e2e_response.p99 < 50 ms"``; errors name source, key and the text."""
        if not isinstance(expr, str):
            raise _err(
                source,
                key,
                expr,
                "expected an SLO expression string",
                'quote it, e.g. "e2e_response.p99 < 50 ms"',
            )
        m = _EXPR_RE.match(expr)
        if m is None:
            raise _err(
                source,
                key,
                expr,
                "cannot parse the SLO; the grammar is `<metric> <op> <number> [unit]`",
                'write e.g. "e2e_response.p99 < 50 ms" or "lost == 0"',
            )
        op = m["op"]
        if op == "=":
            raise _err(source, key, expr, "'=' is not an operator", "write '==' for equality")
        metric, number, unit = m["metric"], float(m["number"]), _normalize_unit(m["unit"])
        number, unit = _apply_multiplier(metric, number, unit)
        _validate(metric, op, number, unit, source, key, expr)
        return cls(
            metric=metric,
            op=op,
            value=number,
            unit=unit,
            when=Selector.from_mapping(when, source=source),
            source=source,
            description=description,
        )

    @property
    def kind(self) -> str:
        return metric_kind(self.metric)

    @property
    def percent(self) -> bool:
        return self.unit == "%"

    @property
    def threshold(self) -> float:
        """The bound in the figure's unit (µs, msg/s, MiB/s, count) or in percent."""
        if self.percent:
            return self.value
        return self.value * UNITS[self.kind][self.unit]

    def applies_to(
        self,
        broker: str | None,
        scenario: str | None,
        params: Mapping[str, Any] | None = None,
        env: str | None = None,
    ) -> bool:
        """Whether this SLO's ``when`` selector matches the test."""
        return self.when.matches(broker, scenario, params, env)

    def check(self, observed: float) -> bool:
        """``observed`` (figure unit, or percent for ``%``) satisfies the bound."""
        return OPERATORS[self.op](observed, self.threshold)

    def bound_text(self) -> str:
        """``< 50 ms`` as written (normalized spacing)."""
        if self.unit == "%":
            return f"{self.op} {_fmt(self.value)}%"
        return f"{self.op} {_fmt(self.value)}{' ' + self.unit if self.unit else ''}"

    def __str__(self) -> str:
        return f"{self.metric} {self.bound_text()}"


_MULT_RE = re.compile(r"^(?P<mult>[kM])(?:\s*(?P<rest>msg/s)|\s+(?P<other>.*)|)$")


def _apply_multiplier(metric: str, number: float, unit: str) -> tuple[float, str]:
    """``5k msg/s`` / ``2M`` for rate and count metrics: k = 1000, M = 1 000 000."""
    m = _MULT_RE.match(unit)
    try:
        kind = metric_kind(metric)
    except KeyError:
        return number, unit
    if m is None or kind not in ("rate", "count"):
        return number, unit
    factor = 1e3 if m["mult"] == "k" else 1e6
    return number * factor, (m["rest"] or m["other"] or "").strip()


def _normalize_unit(unit: str) -> str:
    unit = unit.strip()
    return "%" if unit.replace(" ", "") == "%" else unit


def _validate(
    metric: str, op: str, value: float, unit: str, source: str, key: str, text: str
) -> None:
    try:
        kind = metric_kind(metric)
    except KeyError:
        close = difflib.get_close_matches(metric, METRICS, n=1, cutoff=0.5)
        mean = f" (did you mean {close[0]!r}?)" if close else ""
        raise _err(
            source,
            key,
            text,
            f"unknown metric {metric!r}{mean}; metrics are <view>.<stat> with views "
            f"{', '.join(VIEWS)} and stats {', '.join(STATS)}, or {', '.join(SCALARS)}",
            "use one of those names",
        ) from None
    if op not in OPERATORS:
        raise _err(
            source,
            key,
            text,
            f"unknown operator {op!r}",
            f"use one of {' '.join(OPERATORS)}",
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _err(source, key, text, "the bound is not a finite number", "write a number")
    if value < 0:
        raise _err(
            source, key, text, "the bound is negative, and no figure ever is", "use a bound >= 0"
        )
    units = UNITS[kind]
    if unit in units or (unit == "%" and metric in PERCENT_OF):
        return
    shown = [u for u in units if u and u != "μs"] + (["%"] if metric in PERCENT_OF else [])
    plain = "" in units
    accepted = ", ".join(shown) + (" or no unit" if plain and shown else "")
    accepted = accepted or "no unit"
    problem = (
        "a time bound needs a unit"
        if not unit and kind == "time"
        else f"unit {unit!r} is not accepted for {metric}"
    )
    hint = _UNIT_HINTS.get(unit)
    if hint is None:
        near = [u for u in shown if u.lower() == unit.lower()] or difflib.get_close_matches(
            unit, shown, n=1
        )
        if unit and near:
            hint = f"write {near[0]}"
        elif shown:
            hint = f"use {accepted}"
        else:
            hint = f"remove the unit ({kind}s are plain numbers)"
    raise _err(source, key, text, f"{problem} ({kind} metric; accepted: {accepted})", hint)


def parse_slo(expr: str, **kwargs: Any) -> SLO:
    """Shorthand for :meth:`SLO.parse`."""
    return SLO.parse(expr, **kwargs)
