"""Regression gates: ``--fail-on 'e2e_response.p99:+15%,ack_rate:-10%'`` against a baseline.

The grammar follows pytest-benchmark's ``--benchmark-compare-fail=STAT:5%`` (a relative
budget with ``%``, otherwise an absolute one in the metric's unit), with direction: a
latency regresses when it rises, a rate when it falls. The sign may be omitted; when
given it must point the way a regression goes.

Each budget is checked per matrix cell. A cell's limit is the baseline's pooled figure
moved by the larger of the budget and the *noise floor* — twice the relative standard
deviation of the baseline's per-run figures — so a budget tighter than the baseline's
own run-to-run noise cannot trip on noise. The noise floor needs at least
:data:`MIN_BASELINE_RUNS` valid baseline runs; with fewer the cell is inconclusive.
A cell on one side only is never a pass: ``missing`` (in the baseline, not in this run)
or ``no-baseline``. The limit itself passes: a gate trips only beyond it.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Literal

from pytest_brokerperf.config.fail_on import Budget, parse_fail_on
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.report.model import (
    RATE_METRICS,
    SETUP_DIMENSIONS,
    UNKNOWN,
    CellKey,
    CellStats,
    natural_key,
)

__all__ = [
    "MIN_BASELINE_RUNS",
    "NOISE_SIGMAS",
    "Alignment",
    "Budget",
    "GateResult",
    "GateStatus",
    "align",
    "evaluate",
    "exit_code",
    "gate_tally",
    "parse_fail_on",
    "same_environment",
]

#: The ``--brokerperf-env`` default: no label chosen, the machine is the environment.
DEFAULT_ENV = "local"
#: Valid baseline runs needed before a noise floor (and so a verdict) is trusted.
MIN_BASELINE_RUNS = 3
#: The noise floor is this many relative standard deviations of the baseline's runs.
NOISE_SIGMAS = 2

GateStatus = Literal["pass", "regression", "inconclusive", "missing", "no-baseline"]

@dataclass(frozen=True)
class GateResult:
    """One budget judged on one cell."""

    cell: CellKey
    budget: Budget
    status: GateStatus
    observed: float | None
    baseline: float | None
    limit: float | None
    noise_floor: float | None  # relative (0.04 = 4 %), None when not learnt
    baseline_runs: int
    message: str


def noise_floor(values: Iterable[float | None]) -> tuple[float | None, int]:
    """``NOISE_SIGMAS`` × relative stddev of per-run figures, and how many runs had one."""
    vals = [v for v in values if v is not None]
    if len(vals) < MIN_BASELINE_RUNS:
        return None, len(vals)
    mean = statistics.fmean(vals)
    if mean == 0:
        return 0.0, len(vals)
    return NOISE_SIGMAS * statistics.stdev(vals) / abs(mean), len(vals)


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric in RATE_METRICS:
        return f"{value:,.1f}"
    return f"{value / 1000:.3f} ms"


def _judge(cell: CellKey, budget: Budget, cur: CellStats, base: CellStats) -> GateResult:
    metric = budget.metric

    def result(status: GateStatus, msg: str, observed: float | None = None,
               baseline: float | None = None, limit: float | None = None,
               noise: float | None = None, runs: int = 0) -> GateResult:
        return GateResult(cell, budget, status, observed, baseline, limit, noise, runs, msg)

    if cur.valid == 0:
        reasons = sorted({r.status for r in cur.invalid}) or ["no records"]
        return result("inconclusive", f"{metric}: no valid result in this run "
                      f"({', '.join(reasons)})")
    observed = cur.figures.metric(metric)
    baseline = base.figures.metric(metric)
    noise, runs = noise_floor(f.metric(metric) for f in base.run_figures.values())
    if noise is None:
        return result("inconclusive",
                      f"{metric}: the baseline has {runs} valid run(s) with this figure; a "
                      f"noise floor needs at least {MIN_BASELINE_RUNS}",
                      observed, baseline, runs=runs)
    if observed is None or baseline is None:
        side = "this run" if observed is None else "the baseline"
        return result("inconclusive", f"{metric}: n/a in {side} (undersampled or not "
                      "recorded)", observed, baseline, noise=noise, runs=runs)
    b = Fraction(baseline)
    allowance = max(budget.relative, Fraction(noise)) if budget.relative is not None else None
    if budget.higher_is_worse:
        if allowance is not None:
            limit = b * (1 + allowance)
        else:
            assert budget.absolute is not None
            limit = b + max(budget.absolute, Fraction(noise) * abs(b))
        bad = Fraction(observed) > limit
    else:
        if allowance is not None:
            limit = b * (1 - allowance)
        else:
            assert budget.absolute is not None
            limit = b - max(budget.absolute, Fraction(noise) * abs(b))
        bad = Fraction(observed) < limit
    change = (observed - baseline) / baseline * 100 if baseline else float("nan")
    msg = (f"{metric} = {_fmt(metric, observed)} vs baseline {_fmt(metric, baseline)} "
           f"({change:+.1f}%), budget {budget.describe()}, noise floor {noise * 100:.1f}% "
           f"over {runs} baseline runs, limit {_fmt(metric, float(limit))}")
    return result("regression" if bad else "pass", msg, observed, baseline, float(limit),
                  noise, runs)


def evaluate(current: Mapping[CellKey, CellStats], baseline: Mapping[CellKey, CellStats],
             budgets: Sequence[Budget], *,
             hints: Mapping[CellKey, str] | None = None) -> list[GateResult]:
    """Every budget on every cell of either side, in cell order; ``baseline`` keyed as
    :func:`align` keys it, ``hints`` its reasons a current cell has no baseline."""
    out: list[GateResult] = []
    for key in sorted(set(current) | set(baseline), key=natural_key):
        cur, base = current.get(key), baseline.get(key)
        for budget in budgets:
            if cur is None:
                out.append(GateResult(key, budget, "missing", None, None, None, None, 0,
                                      f"{budget.metric}: cell in the baseline but not in "
                                      "this run (test not run, renamed or crashed?)"))
            elif base is None:
                hint = (hints or {}).get(key)
                out.append(GateResult(key, budget, "no-baseline", None, None, None, None, 0,
                                      f"{budget.metric}: " + (hint or "no baseline for this "
                                      "cell (new test, parameters or --brokerperf-env "
                                      "label?)")))
            else:
                out.append(_judge(key, budget, cur, base))
    return out


def exit_code(results: Iterable[GateResult]) -> int:
    """1 on any regression, else 3 when anything could not be judged, else 0."""
    statuses = {r.status for r in results}
    if "regression" in statuses:
        return 1
    if statuses & {"inconclusive", "missing", "no-baseline"}:
        return 3
    return 0


def same_environment(cells: Mapping[CellKey, CellStats], env: str, *, across: bool,
                     source: str, fix: str,
                     machines: Collection[str] = ()) -> dict[CellKey, CellStats]:
    """The baseline's cells for a run labelled ``env`` on ``machines``.

    A baseline from another environment label is refused (a figure from another machine
    class is no baseline), naming both labels and ``fix``; with ``across`` its cells are
    re-keyed to ``env`` so they can be compared — one other label only, else it is
    ambiguous which machine's figure a cell would be. Under the default label ``local``
    (no label chosen) the machine is the environment: a run on a machine (CPU model ×
    logical CPUs, :func:`~.model.machine_label`) none of the baseline's runs used is
    refused the same way. A chosen label vouches for its machines (one CI runner class
    on several CPU models compares).
    """
    others = sorted({k.env for k in cells} - {env})
    if not others:
        if env == DEFAULT_ENV and not across:
            seen = {m for c in cells.values() for m in c.machines}
            new = sorted(set(machines) - seen)
            if new and seen:
                raise ConfigError(
                    f"{source}: the baseline's runs come from another machine "
                    f"({'; '.join(sorted(seen))}); this run is on {'; '.join(new)}, both "
                    f"under the default --brokerperf-env label {DEFAULT_ENV!r}. Fix: "
                    "compare with runs of this machine, give runs of comparable machines "
                    f"one --brokerperf-env label, or pass {fix} to compare across "
                    "machines on purpose")
        return dict(cells)
    if not across:
        raise ConfigError(
            f"{source}: the baseline holds runs of environment {', '.join(others)}; this "
            f"run is {env!r}. Fix: compare with runs of the same --brokerperf-env, or pass "
            f"{fix} to compare across environments on purpose")
    labels = {k.env for k in cells}
    if len(labels) > 1:
        raise ConfigError(
            f"{source}: the baseline mixes environments {', '.join(sorted(labels))}: "
            "comparing across environments needs a baseline of one label")
    return {replace(k, env=env): replace(c, key=replace(k, env=env))
            for k, c in cells.items()}


#: The cell key's identity: what is compared is always alike in these.
_IDENTITY = ("broker", "scenario", "params", "fault", "env")
#: The set-up fields, each with the ``--across-<name>`` that lets it differ.
_FLAG_OF = {f: name for name, fields in SETUP_DIMENSIONS.items() for f in fields}


@dataclass
class Alignment:
    """The baseline's cells keyed by the run's cells they are compared with.

    ``cells``: each current cell's baseline (re-keyed to the current key), plus baseline
    cells no current cell is near (``missing``). ``notes``: every difference a
    comparison crosses (an ``--across-*`` flag, or a field an older record lacks), to be
    printed. ``hints``: for a current cell without a baseline, the nearest baseline
    cell's differences and the flags that would compare them."""

    cells: dict[CellKey, CellStats]
    notes: list[str] = field(default_factory=list)
    hints: dict[CellKey, str] = field(default_factory=dict)
    #: current cell → the baseline cell's own key (to find its series)
    sources: dict[CellKey, CellKey] = field(default_factory=dict)


def _differences(cur: CellKey, base: CellKey) -> list[tuple[str, str, str]]:
    """(field, baseline value, this run's value) for each set-up field that differs."""
    return [(f, getattr(base, f), getattr(cur, f)) for f in _FLAG_OF
            if getattr(base, f) != getattr(cur, f)]


def _crossable(diffs: Sequence[tuple[str, str, str]], across: Collection[str]) -> bool:
    return all(_FLAG_OF[f] in across or UNKNOWN in (b, c) for f, b, c in diffs)


def align(current: Collection[CellKey], baseline: Mapping[CellKey, CellStats], *,
          across: Collection[str] = ()) -> Alignment:
    """Pair each current cell with the baseline cell of the same set-up.

    Set-up fields (nodes, broker version, profile and period, provisioning, driver file
    and settings hash, durability, client versions) must be equal, unless
    ``across`` names their dimension (``--across-nodes`` …) or one side does not record
    the field (an older record: ``?``); each such crossing is a note. Two baseline
    cells that could stand for one current cell are an error: it would pool different
    set-ups."""
    unknown = sorted(set(across) - set(SETUP_DIMENSIONS))
    if unknown:
        raise ConfigError(f"unknown --across dimension(s) {', '.join(unknown)}; known: "
                          f"{', '.join(SETUP_DIMENSIONS)}")
    out = Alignment(cells={})
    used: set[CellKey] = set()
    near: set[CellKey] = set()
    notes: dict[str, set[str]] = {}
    for cur in sorted(current):
        same = [b for b in baseline
                if all(getattr(b, f) == getattr(cur, f) for f in _IDENTITY)]
        if cur in baseline:
            out.cells[cur] = baseline[cur]
            out.sources[cur] = cur
            used.add(cur)
            continue
        ok = [b for b in same if _crossable(_differences(cur, b), across)]
        if len(ok) > 1:
            raise ConfigError(
                f"{cur.label()}: {len(ok)} baseline cells could stand for this cell "
                f"({'; '.join(b.setup() for b in ok)}); comparing with them would pool "
                "different set-ups. Fix: narrow the baseline (--env, fewer --across-* "
                "flags, or a baseline of one set-up)")
        if ok:
            b = ok[0]
            used.add(b)
            out.cells[cur] = replace(baseline[b], key=cur)
            out.sources[cur] = b
            for f, bv, cv in _differences(cur, b):
                why = (f"--across-{_FLAG_OF[f]}" if _FLAG_OF[f] in across
                       else "a side's records do not say")
                notes.setdefault(f"{f}: baseline {bv}, this run {cv} ({why})",
                                 set()).add(cur.label())
            continue
        if same:  # explained by the hint: not also "missing"
            near.update(same)
            b = min(same, key=lambda k: len(_differences(cur, k)))
            diffs = _differences(cur, b)
            flags = sorted({f"--across-{_FLAG_OF[f]}" for f, *_ in diffs})
            out.hints[cur] = (
                "no baseline of this set-up: the baseline's cell differs by "
                + ", ".join(f"{f} {bv} (baseline) vs {cv} (this run)" for f, bv, cv in diffs)
                + f"; not pooled. To compare across on purpose: {' '.join(flags)}")
    for k, c in baseline.items():
        if k not in used and k not in near:
            out.cells[k] = c
    out.notes = [f"comparing across {what}, in {len(cells)} cell(s)"
                 for what, cells in sorted(notes.items())]
    return out


def gate_tally(gates: Sequence[GateResult]) -> str:
    """``4 gate checks: 1 regression, 2 inconclusive, 1 passed``."""
    from collections import Counter

    counts: Counter[str] = Counter(g.status for g in gates)
    order = ("regression", "missing", "no-baseline", "inconclusive", "pass")
    parts = [f"{counts[s]} {'passed' if s == 'pass' else s}" for s in order if counts[s]]
    n = len(gates)
    return f"{n} gate check{'s' if n != 1 else ''}: {', '.join(parts) or 'none'}"
