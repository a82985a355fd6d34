"""What judges an SLO: :func:`evaluate` compares a run's figures with the SLOs and gives
one :class:`SLOResult` each (pass, fail or inconclusive).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_brokerperf.judge.slo.expression import SLO
from pytest_brokerperf.judge.slo.vocabulary import EXPR_SOURCE, PERCENT_OF, UNITS, SLOStatus, _fmt


@dataclass(frozen=True)
class SLOResult:
    """The verdict on one SLO; ``observed`` is in the SLO's own unit (ms for an SLO in ms)."""

    slo: SLO
    observed: float | None
    status: SLOStatus
    message: str

    @property
    def passed(self) -> bool:
        return self.status is SLOStatus.PASS

    @property
    def failed(self) -> bool:
        return self.status is SLOStatus.FAIL

    @property
    def inconclusive(self) -> bool:
        return self.status is SLOStatus.INCONCLUSIVE

    def as_record(self) -> dict[str, Any]:
        """The result record's ``slo`` entry (docs/reference/results.md)."""
        return {
            "expr": str(self.slo),
            "metric": self.slo.metric,
            "observed": self.observed,
            "status": str(self.status),
            "message": self.message,
            "source": self.slo.source,
        }


def judged_percentile(slos: Sequence[SLO]) -> float:
    """The highest latency percentile the SLOs judge (99 when none is higher): the
    generator must keep its schedule at that percentile for the figure to be the broker's."""
    qs = [float(m.group(1)) for s in slos if (m := re.search(r"\.p(\d+(?:\.\d+)?)$", s.metric))]
    return max([99.0, *qs])


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def evaluate(
    slos: Sequence[SLO],
    figures: Mapping[str, float | None],
    *,
    context: Mapping[str, Any] | None = None,
    reasons: Mapping[str, str] | None = None,
) -> list[SLOResult]:
    """Judge each SLO against ``figures`` (time in µs; see module docstring).

    ``context`` (e.g. ``{"broker": "kafka", "scenario": "tailread"}``) is shown in each
    message; ``reasons`` explains missing figures (``{"e2e_response.p99.99": "undersampled:
    n=800 < 100000"}``). Missing, ``None`` or NaN figures give ``inconclusive``.
    """
    ctx = " ".join(f"{k}={v}" for k, v in (context or {}).items() if v is not None)
    ctx_text = f" ({ctx})" if ctx else ""
    results: list[SLOResult] = []
    for slo in slos:
        origin = "" if slo.source == EXPR_SOURCE else f" [{slo.source}]"
        bound = f"SLO {slo.bound_text()}{ctx_text}{origin}"
        raw = figures.get(slo.metric)
        reason = (reasons or {}).get(slo.metric)
        if _missing(raw):
            why = reason or (
                "not measured" if slo.metric not in figures else "undersampled or not measured"
            )
            results.append(
                SLOResult(
                    slo,
                    None,
                    SLOStatus.INCONCLUSIVE,
                    f"{slo.metric} = n/a ({why}), {bound}",
                )
            )
            continue
        assert raw is not None
        if slo.percent:
            denom_key = PERCENT_OF[slo.metric]
            denom = figures.get(denom_key)
            if _missing(denom) or not denom:
                results.append(
                    SLOResult(
                        slo,
                        None,
                        SLOStatus.INCONCLUSIVE,
                        f"{slo.metric} = {_fmt(raw)} of n/a {denom_key} messages (a percentage "
                        f"needs the {denom_key!r} figure > 0), {bound}",
                    )
                )
                continue
            assert denom is not None
            observed = 100.0 * raw / denom
            shown = f"{_fmt(observed)}% ({_fmt(raw)} of {_fmt(denom)} {denom_key})"
            ok = slo.check(observed)
        else:
            factor = UNITS[slo.kind][slo.unit]
            observed = raw / factor
            ok = slo.check(raw)
            shown = f"{_fmt(observed)}{' ' + slo.unit if slo.unit else ''}"
        status = SLOStatus.PASS if ok else SLOStatus.FAIL
        results.append(SLOResult(slo, observed, status, f"{slo.metric} = {shown}, {bound}"))
    return results
