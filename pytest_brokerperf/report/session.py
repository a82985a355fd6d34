"""The report inside a pytest session: per-test gates and the session-end report.

``--brokerperf-baseline DIR --brokerperf-fail-on EXPR``: the baseline is aggregated with
Spark once, at session start; each scenario test's record is then judged against its
cell (a single run's own percentiles), and a regression fails that test with observed,
baseline, budget and noise floor in the message. ``--brokerperf-report=html,markdown``:
at session end the session's own records are aggregated into
``<results>/<run id>/report.html`` and ``summary.md`` (and ``cells.csv``).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.report.gates import Budget, GateResult, evaluate, parse_fail_on
from pytest_brokerperf.report.model import (
    CellKey,
    CellStats,
    cell_key_of,
    figures_of,
    is_figure,
    machine_label,
    record_status,
)

if TYPE_CHECKING:
    from pytest_brokerperf.config.settings import Settings

__all__ = ["SessionGate", "apply_gate", "judge_record", "load_gate", "session_report"]


@dataclass
class SessionGate:
    """The budgets and the baseline's cells, loaded once per session."""

    budgets: list[Budget]
    baseline: Mapping[CellKey, CellStats]
    seen: set[CellKey] = field(default_factory=set)


def baseline_dirs(settings: Settings) -> list[Path]:
    """The result directories ``--brokerperf-baseline`` names (a directory, or runs saved
    in ``--brokerperf-storage`` under this environment's key)."""
    from pytest_brokerperf.report.storage import machine_key, resolve_baseline

    assert settings.baseline is not None
    return resolve_baseline(settings.baseline, Path(settings.storage),
                            machine_key(settings.env), source="--brokerperf-baseline")


def load_gate(settings: Settings) -> SessionGate | None:
    """Aggregate the baseline (Spark) when ``--brokerperf-fail-on`` asks for a gate; a
    baseline from another environment label is refused unless asked for."""
    if not settings.fail_on or settings.baseline is None:
        return None
    budgets = parse_fail_on(settings.fail_on)
    dirs = baseline_dirs(settings)
    from pytest_brokerperf.report.gates import same_environment
    from pytest_brokerperf.report.spark import QuietSpark, progress, quick_jit, run_job

    quiet = QuietSpark(quick=quick_jit(dirs))
    try:
        with progress(f"aggregating the baseline {settings.baseline}", sys.stderr):
            baseline = run_job(quiet.start(), dirs)
    finally:
        quiet.stop()  # the session-end report, if asked for, starts its own
    cells = same_environment(baseline.cells, settings.env,
                             across=settings.compare_across_env,
                             source=f"--brokerperf-baseline={settings.baseline}",
                             fix="--brokerperf-compare-across-env",
                             machines={session_machine()})
    return SessionGate(budgets, cells)


def session_machine() -> str:
    """This machine as the records of this session will name it (``manifest.machine``)."""
    from pytest_brokerperf.metrics.sysstats import _cpu_model

    return machine_label(_cpu_model(), os.cpu_count())


def save_session(settings: Settings) -> str | None:
    """``--brokerperf-autosave`` / ``--brokerperf-save=NAME``: store this session's
    records; the line saying where (None when nothing was asked or written)."""
    if not (settings.autosave or settings.save):
        return None
    from pytest_brokerperf.report.storage import machine_key, save_run

    stored = save_run(Path(settings.storage), machine_key(settings.env),
                      Path(settings.results_dir) / "results.jsonl", settings.run_id,
                      settings.save)
    if stored is None:
        return "brokerperf: nothing to save: this session wrote no result record"
    return (f"brokerperf: saved this run as {stored.label} in {stored.path.parent} "
            f"(--brokerperf-baseline={stored.number:04d}, {stored.name}, last or all)")


def cell_of_record(record: Mapping[str, Any]) -> CellStats:
    key = cell_key_of(record)
    valid = is_figure(record_status(record))
    figs = figures_of(record)
    return CellStats(key=key, records=1, valid=int(valid), runs=1, figures=figs,
                     run_figures={str(record.get("run_id")): figs} if valid else {},
                     p99_spread=None)


def judge_record(gate: SessionGate, record: Mapping[str, Any]) -> list[GateResult]:
    """Every budget on this record's cell (``no-baseline`` when the baseline lacks it)."""
    from dataclasses import replace

    from pytest_brokerperf.report.gates import align

    cell = cell_of_record(record)
    gate.seen.add(cell.key)
    aligned = align([cell.key], gate.baseline)
    base = {cell.key: aligned.cells[cell.key]} if cell.key in aligned.cells else {}
    results = evaluate({cell.key: cell}, base, gate.budgets, hints=aligned.hints)
    if aligned.notes:  # a field an older baseline record does not record
        results = [replace(g, message=f"{g.message} ({'; '.join(aligned.notes)})")
                   for g in results]
    return results


def gate_dicts(results: list[GateResult]) -> list[dict[str, Any]]:
    """The record's ``gates`` list."""
    return [{"metric": g.budget.metric, "budget": g.budget.text, "status": g.status,
             "observed": g.observed, "baseline": g.baseline, "limit": g.limit,
             "noise_floor": g.noise_floor, "baseline_runs": g.baseline_runs,
             "message": g.message} for g in results]


def session_report(settings: Settings) -> tuple[int, list[str]]:
    """The session-end report of this run's records; (exit code, lines to show)."""
    from pytest_brokerperf.report.command import ReportOptions, run

    out_dir = Path(settings.results_dir) / settings.run_id
    formats = set(settings.report)
    opts = ReportOptions(
        dirs=[Path(settings.results_dir) / "results.jsonl"], run_id=settings.run_id,
        html=out_dir / "report.html" if "html" in formats else None,
        markdown=out_dir / "summary.md" if "markdown" in formats else None,
        csv=out_dir / "cells.csv" if "csv" in formats else None,
        baseline=baseline_dirs(settings) if settings.baseline else [],
        env=None, across_env=settings.compare_across_env, current_env=settings.env,
        baseline_source=f"--brokerperf-baseline={settings.baseline}",
        across_fix="--brokerperf-compare-across-env",
        fail_on=[settings.fail_on] if settings.fail_on else [],
        title=f"brokerperf report: run {settings.run_id} (env {settings.env})")
    err = io.StringIO()
    code = run(opts, out=io.StringIO(), err=err)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    written = [str(p) for p in (opts.html, opts.markdown, opts.csv) if p is not None
               and p.exists()]
    if written:
        lines.append("report written to " + ", ".join(written))
    return code, lines


def apply_gate(gate: SessionGate | None, record: Any, regressions: list[str],
               inconclusive: list[str]) -> str:
    """``--brokerperf-fail-on``: judge one scenario's record against the baseline's cell
    (``gate``: the session's budgets and baseline, None without the flag).

    A regression joins the test's ``regressions`` (it fails the test, called a
    regression, never an SLO); a gate that cannot judge (no baseline cell, fewer than 3
    baseline runs, an undersampled figure) makes the test INCONCLUSIVE, never a silent
    pass. The results go into the record's ``gates`` list. Returns the summary's
    ``baseline`` column: ``-`` (no gate), ``pass``, ``REGRESSION: <metric>, ...`` or
    ``inconclusive``.
    """
    if gate is None:
        return "-"
    results = judge_record(gate, record)
    record["gates"] = gate_dicts(results)
    regressed = [g for g in results if g.status == "regression"]
    regressions += [g.message for g in regressed]  # under "REGRESSION against the baseline:"
    unjudged = [g for g in results if g.status not in ("pass", "regression")]
    inconclusive += [f"gate {g.status}: {g.message}" for g in unjudged]
    if regressed:
        return "REGRESSION: " + ", ".join(dict.fromkeys(g.budget.metric for g in regressed))
    return "inconclusive" if unjudged else "pass"
