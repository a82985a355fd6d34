"""Report outputs: a Markdown summary (fit for a CI job summary), CSV, and one HTML page.

The HTML page is self-contained: charts are matplotlib SVG inlined in the page, no
script and no network access needed to open it (the charts themselves are drawn in
:mod:`.charts`). Charts follow OpenMessaging
Benchmark's set where the records allow (latency quantile curves on a log scale per
view, one series per broker), plus latency versus throughput (ladder rungs, or one
point per rate) and a matrix view of p99 per cell and broker. From one record per
cell (:mod:`.series`): publish and consume rates and publish and end-to-end latency over
time (one point per stats period), before/during bars of catch-up, mixed and
reassignment runs, and fault timelines — each only when the records hold the figures.
A chart mixing durability levels or machines says so above it (a fair-comparison
warning).
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.report.charts import (
    before_during_chart,
    fairness_warnings,
    fault_chart,
    group_cells,
    matrix_chart,
    median_series,
    quantile_chart,
    tail_gaps,
    throughput_chart,
    time_chart,
    without_rate,
)
from pytest_brokerperf.report.gates import Budget, GateResult, exit_code, gate_tally
from pytest_brokerperf.report.model import (
    LATENCY_STATS,
    RATE_METRICS,
    SETUP_FIELDS,
    VIEWS,
    CellKey,
    CellStats,
    ReportResult,
    natural_key,
    setup_split,
)
from pytest_brokerperf.report.series import BLOCKS, RunSeries
from pytest_brokerperf.report.studies import StudySection
from pytest_brokerperf.report.study_render import studies_html, studies_markdown

__all__ = ["TIME_CHARTS", "Report", "csv_text", "html_page", "markdown"]

#: Views drawn as quantile curves (OMB's publish latency, publish delay, end-to-end,
#: plus the coordinated-omission-corrected end-to-end response).
CHART_VIEWS = ("publish_latency", "publish_delay", "e2e_latency", "e2e_response")
VERDICT_WORDS = {0: "ok", 1: "REGRESSION", 3: "INCONCLUSIVE"}
#: The page's CSS class of a gate verdict: a regression red, could-not-judge amber.
VERDICT_CLASS = {0: "pass", 1: "regression", 3: "inconclusive"}
#: Charts over time (OMB's): record timeline column, y label, divisor (µs → ms), log y.
TIME_CHARTS: tuple[tuple[str, str, float, bool], ...] = (
    ("publish_rate_msg_s", "publish rate (msg/s)", 1.0, False),
    ("consume_rate_msg_s", "consume rate (msg/s)", 1.0, False),
    ("publish_latency_p99_us", "publish latency p99 (ms)", 1000.0, True),
    ("e2e_latency_p50_us", "end-to-end latency p50 (ms)", 1000.0, True),
    ("e2e_latency_p99_us", "end-to-end latency p99 (ms)", 1000.0, True),
)


@dataclass
class Report:
    """What the outputs show: this run, an optional baseline and the gates' results."""

    current: ReportResult
    baseline: ReportResult | None = None
    budgets: list[Budget] = field(default_factory=list)
    gates: list[GateResult] = field(default_factory=list)
    title: str = "brokerperf report"
    #: one record's series per cell of ``current`` (``series.load_series``); empty: no
    #: charts over time, no before/during bars, no fault timelines
    series: dict[CellKey, RunSeries] = field(default_factory=dict)
    #: the baseline's cells keyed by the current cells they are compared with
    #: (``gates.align``), and the differences those comparisons cross
    aligned: dict[CellKey, CellStats] = field(default_factory=dict)
    comparison_notes: list[str] = field(default_factory=list)
    #: current cell → the key of the baseline cell it is compared with
    baseline_of: dict[CellKey, CellKey] = field(default_factory=dict)
    #: the baseline's runs' series per baseline cell (their median over time is drawn)
    baseline_series: dict[CellKey, list[RunSeries]] = field(default_factory=dict)
    #: the "Studies" section: each study table in its own layout (``studies.study_sections``)
    studies: list[StudySection] = field(default_factory=list)

    def history(self, key: CellKey) -> list[RunSeries]:
        """The baseline runs' series of the cell ``key`` is compared with (none: [])."""
        from dataclasses import replace

        src = self.baseline_of.get(key)
        if src is None:
            return []
        if src in self.baseline_series:
            return self.baseline_series[src]
        # a baseline of another --brokerperf-env label, compared across on purpose
        return next((v for k, v in self.baseline_series.items()
                     if replace(k, env=src.env) == src), [])

    @property
    def exit_code(self) -> int:
        return exit_code(self.gates) if self.budgets else 0


# --------------------------------------------------------------------------- formatting


def _ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    ms = us / 1000
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _num(x: float | None, fmt: str = ",.1f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f}%"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _metric_value(metric: str, value: float | None) -> str:
    if metric in RATE_METRICS:
        return _num(value)
    return f"{_ms(value)} ms"


def _input_line(r: ReportResult) -> str:
    extra = []
    if r.duplicates_dropped:
        extra.append(f"{r.duplicates_dropped} duplicate(s) dropped")
    if r.malformed_lines:
        extra.append(f"{r.malformed_lines} malformed line(s) skipped")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return (f"{_n(r.records_read, 'record')} from {_n(len(r.files), 'file')}{tail}; "
            f"{_n(len(r.cells), 'matrix cell')}")


def _n(n: int, noun: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _cells(result: ReportResult) -> list[tuple[CellKey, CellStats]]:
    """The cells in natural order: numbers by value (rate=500 before rate=1000)."""
    return sorted(result.cells.items(), key=lambda kv: natural_key(kv[0]))


# --------------------------------------------------------------------------- markdown


def markdown(report: Report) -> str:
    """The summary: verdict, gates, per-cell table, records left out of verdicts."""
    cur = report.current
    lines = [f"## {report.title}", "", f"Input: {_input_line(cur)}."]
    if report.baseline is not None:
        lines.append(f"Baseline: {_input_line(report.baseline)}.")
    for w in cur.warnings:
        lines.append(f"> warning: {_md_escape(w)}")
    for note in report.comparison_notes:
        lines.append(f"> note: {_md_escape(note)}")
    lines.append("")
    if report.budgets:

        code = report.exit_code
        lines += [f"**Regression gate: {VERDICT_WORDS.get(code, str(code))}** "
                  f"(budgets `{', '.join(b.text for b in report.budgets)}` against the "
                  f"baseline; {gate_tally(report.gates)})", "",
                  "| verdict | cell | metric | observed | baseline | change | budget | "
                  "noise floor | limit |",
                  "|---|---|---|---|---|---|---|---|---|"]
        order = {"regression": 0, "missing": 1, "no-baseline": 2, "inconclusive": 3, "pass": 4}
        for g in sorted(report.gates, key=lambda g: (order[g.status], natural_key(g.cell))):
            change = ("n/a" if g.observed is None or not g.baseline
                      else f"{(g.observed - g.baseline) / g.baseline * 100:+.1f}%")
            m = g.budget.metric
            obs = _metric_value(m, g.observed) if g.observed is not None else "n/a"
            base = _metric_value(m, g.baseline) if g.baseline is not None else "n/a"
            limit = _metric_value(m, g.limit) if g.limit is not None else "n/a"
            verdict = g.status if g.status == "pass" else f"**{g.status}**"
            lines.append(
                f"| {verdict} | {_md_escape(g.cell.label())} | `{m}` | {obs} | {base} | "
                f"{change} | {g.budget.describe()} | {_pct(g.noise_floor)} "
                f"({g.baseline_runs} runs) | {limit} |")
            if g.status not in ("pass", "regression"):
                lines.append(f"|  | {_md_escape(g.message)} | | | | | | | |")
        lines.append("")
    common, varying = setup_split(cur.cells)
    show_setup = any(varying.values())
    lines += ["### Matrix cells (valid results only)", "",
              f"Set-up{' shared by every cell' if show_setup else ''}: "
              f"`{_md_escape(common)}`", "",
              "| broker | scenario | parameters | durability | fault | env | "
              + ("set-up | " if show_setup else "")
              + "runs | valid/records | ack msg/s (mean ± sd) | spread | e2e p50 ms | "
              "e2e p99 ms | e2e p99.9 ms | publish p99 ms |",
              "|---|---|---|---|---|---|" + ("---|" if show_setup else "")
              + "---|---|---|---|---|---|---|---|"]
    for key, c in _cells(cur):
        ack = c.figures.rates.get("ack_rate")
        e2e, pub = c.figures.latency.get("e2e_response"), c.figures.latency.get("publish_response")
        ack_text = "n/a" if ack is None or ack.mean is None else (
            f"{ack.mean:,.1f}" + (f" ± {ack.stddev:,.1f}" if ack.stddev is not None else ""))
        lines.append(
            f"| {key.broker} | {key.scenario} | {_md_escape(key.params)} | {key.durability} "
            f"| {key.fault} | {key.env} | "
            + (f"{_md_escape(varying[key])} | " if show_setup else "")
            + f"{c.runs} | {c.valid}/{c.records} | {ack_text} | "
            f"{_pct(ack.spread if ack else None)} | "
            f"{_ms(e2e.get('p50') if e2e else None)} | {_ms(e2e.get('p99') if e2e else None)} "
            f"| {_ms(e2e.get('p99.9') if e2e else None)} | "
            f"{_ms(pub.get('p99') if pub else None)} |")
    left_out = [(k, r) for k, c in _cells(cur) for r in c.invalid]
    if left_out:
        lines += ["", "### Left out of verdicts", "",
                  "| cell | run | test | status | reasons |", "|---|---|---|---|---|"]
        for k, r in left_out:
            lines.append(f"| {_md_escape(k.label())} | {r.run_id} | {_md_escape(r.test_id)} "
                         f"(attempt {r.attempt}) | {r.status} | "
                         f"{_md_escape('; '.join(r.reasons)) or '-'} |")
    if report.studies:
        lines += ["", *studies_markdown(report.studies)]
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- csv


def csv_columns() -> list[str]:
    cols = ["broker", "scenario", "params", "durability", "fault", "env", *SETUP_FIELDS,
            "records", "valid", "runs", "valid_runs", "machines"]
    for name in RATE_METRICS:
        cols += [f"{name}_mean", f"{name}_stddev", f"{name}_min", f"{name}_max",
                 f"{name}_spread"]
    cols.append("e2e_response_p99_spread")
    for view in VIEWS:
        cols.append(f"{view}_count")
        cols += [f"{view}_{s.replace('.', '')}_us" for s in LATENCY_STATS]
    return cols


def csv_text(result: ReportResult) -> str:
    """One row per cell (latency in µs, pooled over valid records; rates across repeats)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_columns())
    for key, c in _cells(result):
        row: list[Any] = [key.broker, key.scenario, key.params, key.durability, key.fault,
                          key.env, *(getattr(key, f) for f in SETUP_FIELDS), c.records,
                          c.valid, c.runs, c.valid_runs, "; ".join(c.machines)]
        for name in RATE_METRICS:
            r = c.figures.rates.get(name)
            row += ([r.mean, r.stddev, r.min, r.max, r.spread] if r is not None
                    else [None] * 5)
        row.append(c.p99_spread)
        for view in VIEWS:
            lat = c.figures.latency.get(view)
            row.append(lat.count if lat else 0)
            row += [lat.get(s) if lat else None for s in LATENCY_STATS]
        w.writerow(["" if x is None else x for x in row])
    return buf.getvalue()


# --------------------------------------------------------------------------- html


def _whole_window(cell: CellStats, column: str) -> float | None:
    """The cell's figure over its whole measured window for a timeline percentile
    column (``e2e_latency_p99_us`` → ``e2e_latency.p99``), or None."""
    name = column.removesuffix("_us")
    view, _, stat = name.rpartition("_")
    if view not in VIEWS or not stat.startswith("p"):
        return None
    return cell.figures.metric(f"{view}.{stat}")


def _series_sections(report: Report) -> list[str]:
    """Over-time charts, before/during bars and fault timelines (one record per cell)."""
    cur = report.current
    chosen = [rs for k, rs in sorted(report.series.items()) if k in cur.cells]
    if not chosen:
        return []
    parts: list[str] = []
    groups: dict[tuple[str, ...], list[RunSeries]] = defaultdict(list)
    for rs in chosen:
        k = rs.key
        groups[(k.scenario, k.params, k.durability, k.fault, k.env)].append(rs)
    timed = {g: ss for g, ss in sorted(groups.items(), key=lambda kv: tuple(
        natural_key(part) for part in kv[0])) if any(rs.periods for rs in ss)}
    if timed:
        parts.append("<h2>Over time (one run per cell)</h2>")
        parts.append("<p>Per stats period, the latest valid record of each cell (else its "
                     "latest record); a period with too few samples for a percentile has "
                     "no point; dotted lines mark phase changes, red dashed ones faults."
                     "</p>")
    for (scenario, params, durability, fault, env), ss in timed.items():
        caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
        runs = "; ".join(f"{rs.key.broker}: run {rs.run_id} {rs.test_id} ({rs.status}, "
                         f"{rs.periods} periods)" for rs in ss if rs.periods)
        parts.append(f"<h3>{html.escape(caption)}</h3><p class='runs'>{html.escape(runs)}"
                     "</p>")
        parts += [f"<div class='warn'>{html.escape(w)}</div>"
                  for w in fairness_warnings([cur.cells[rs.key] for rs in ss])]
        history = {rs.key: report.history(rs.key) for rs in ss}
        for column, ylabel, divisor, log in TIME_CHARTS:
            whole = {rs.key: _whole_window(cur.cells[rs.key], column) for rs in ss}
            svg = time_chart(column, ylabel, ss, divisor=divisor, log=log,
                             baseline=history, whole=whole)
            if svg:
                gaps = "".join(f"<br><span class='gap'>{html.escape(g)}</span>"
                               for g in tail_gaps(column, ss))
                base = ("; dashed: the baseline's median per period"
                        if any(median_series(column, h) for h in history.values()) else "")
                parts.append(f"<figure data-chart='time' data-column='{column}'>{svg}"
                             f"<figcaption>{html.escape(ylabel)} over time{base}{gaps}"
                             "</figcaption></figure>")
            else:  # nothing to draw: still say why the tail is missing
                parts += [f"<p class='gap'>{html.escape(ylabel)}: {html.escape(g)}</p>"
                          for g in tail_gaps(column, ss)]
    bars = []
    for block in BLOCKS:
        by_group: dict[tuple[str, ...], list[RunSeries]] = defaultdict(list)
        for rs in chosen:
            if block in rs.blocks:
                k = rs.key
                by_group[(k.scenario, k.params, k.durability, k.fault, k.env)].append(rs)
        for (scenario, params, durability, fault, env), ss in sorted(by_group.items()):
            svg = before_during_chart(block, ss)
            if not svg:
                continue
            caption = f"{block}: {scenario} [{params}] {durability} fault={fault} env={env}"
            bars += [f"<div class='warn'>{html.escape(w)}</div>"
                     for w in fairness_warnings([cur.cells[rs.key] for rs in ss])]
            bars.append(f"<figure data-chart='before-during' data-block='{block}'>{svg}"
                        f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    if bars:
        parts.append("<h2>Before and during</h2>")
        parts += bars
    faults = [rs for rs in chosen if rs.faults]
    if faults:
        parts.append("<h2>Fault timelines</h2>")
        fgroups: dict[tuple[str, ...], list[RunSeries]] = defaultdict(list)
        for rs in faults:
            fgroups[(rs.key.scenario, rs.key.params, rs.key.durability, rs.key.fault,
                     rs.key.env)].append(rs)
        for (scenario, params, durability, fault, env), ss in sorted(fgroups.items()):
            svg = fault_chart(ss)
            if svg:
                caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
                parts.append(f"<figure data-chart='faults'>{svg}<figcaption>"
                             f"{html.escape(caption)}</figcaption></figure>")
    return parts


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:1em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .regression{color:#b00;font-weight:bold}
.inconclusive,.no-baseline,.missing{color:#5a5a5a;font-weight:bold;font-style:italic}
.pass{color:#070}
.note{background:#eef4ff;border-left:4px solid #4a7fd0;padding:4px 8px;margin:4px 0}
.warn{background:#fff4d6;border-left:4px solid #e0a000;padding:4px 8px;margin:4px 0}
figure{display:inline-block;margin:0.5em;vertical-align:top;max-width:720px}
figcaption{font-size:0.85em} .gap{color:#5a5a5a}
svg{max-width:100%;height:auto}
table.study td.empty{color:#5a5a5a} table.study td.filled{background:#f6fbf4}
ol.notes{font-size:0.8em;color:#444}
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]],
           classes: Iterable[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"]
    cls_iter = iter(classes) if classes is not None else None
    for row in rows:
        cls = next(cls_iter) if cls_iter is not None else ""
        attr = f' class="{cls}"' if cls else ""
        out.append(f"<tr{attr}>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in row)
                   + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def html_page(report: Report) -> str:
    """The self-contained page: summary, gates, cells, charts (inline SVG), left-outs."""
    import matplotlib

    matplotlib.use("Agg")
    cur = report.current
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(report.title)}</h1>",
             f"<p>Input: {html.escape(_input_line(cur))}.</p>"]
    if report.baseline is not None:
        parts.append(f"<p>Baseline: {html.escape(_input_line(report.baseline))}.</p>")
    parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in cur.warnings]
    parts += [f"<div class='note'>{html.escape(n)}</div>" for n in report.comparison_notes]
    if report.budgets:

        code = report.exit_code
        parts.append(f"<h2>Regression gate: <span class='{VERDICT_CLASS.get(code, '')}'>"
                     f"{VERDICT_WORDS.get(code, str(code))}</span></h2>")
        parts.append(f"<p>Budgets <code>{html.escape(', '.join(b.text for b in report.budgets))}"
                     f"</code> against the baseline: {html.escape(gate_tally(report.gates))}"
                     ".</p>")
        parts.append(_table(
            ["verdict", "cell", "metric", "observed", "baseline", "budget", "noise floor",
             "limit", "message"],
            ([g.status, g.cell.label(), g.budget.metric,
              _metric_value(g.budget.metric, g.observed) if g.observed is not None else "n/a",
              _metric_value(g.budget.metric, g.baseline) if g.baseline is not None else "n/a",
              g.budget.describe(), _pct(g.noise_floor),
              _metric_value(g.budget.metric, g.limit) if g.limit is not None else "n/a",
              g.message] for g in report.gates),
            (g.status for g in report.gates)))
    parts.append("<h2>Matrix cells</h2>")
    common, varying = setup_split(cur.cells)
    show_setup = any(varying.values())
    parts.append(f"<p>Set-up{' shared by every cell' if show_setup else ''}: "
                 f"<code>{html.escape(common)}</code></p>")
    rows = []
    for key, c in _cells(cur):
        ack = c.figures.rates.get("ack_rate")
        e2e = c.figures.latency.get("e2e_response")
        rows.append([key.broker, key.scenario, key.params, key.durability, key.fault, key.env,
                     *([varying[key]] if show_setup else []), str(c.runs), f"{c.valid}/{c.records}",
                     _num(ack.mean if ack else None), _pct(ack.spread if ack else None),
                     *[_ms(e2e.get(n) if e2e else None) for n in ("p50", "p99", "p99.9")],
                     _pct(c.p99_spread), "; ".join(c.machines)])
    parts.append(_table(["broker", "scenario", "parameters", "durability", "fault", "env",
                         *(["set-up"] if show_setup else []), "runs", "valid/records",
                         "ack msg/s", "spread", "e2e p50 ms", "e2e p99 ms", "e2e p99.9 ms",
                         "p99 spread", "machine"], rows))

    parts.append("<h2>Latency quantiles</h2>")
    groups = group_cells(cur.cells.values(), lambda k: (k.scenario, k.params, k.durability,
                                                   k.fault, k.env))
    for (scenario, params, durability, fault, env), cells in groups.items():
        caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
        parts.append(f"<h3>{html.escape(caption)}</h3>")
        parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in fairness_warnings(cells)]
        with_base = any(c.key in report.aligned for c in cells)
        for view in CHART_VIEWS:
            svg = quantile_chart(view, cells, report.aligned)
            if svg:
                what = (" — dashed: the baseline's pooled curve; band: its runs' range"
                        if with_base else "")
                parts.append(f"<figure data-chart='quantiles'>{svg}<figcaption>{view}{what}"
                             "</figcaption></figure>")

    parts += _series_sections(report)

    parts.append("<h2>Latency versus throughput</h2>")
    tgroups = group_cells(cur.cells.values(), lambda k: (k.scenario, without_rate(k.params),
                                                    k.durability, k.fault, k.env))
    for (scenario, params, durability, fault, env), cells in tgroups.items():
        svg = throughput_chart(cells)
        if not svg:
            continue
        caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
        parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in fairness_warnings(cells)]
        parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)} (x: unsustainable "
                     "rung)</figcaption></figure>")

    parts.append("<h2>Matrix: e2e_response p99 per parameter set and broker</h2>")
    for (scenario, env), cells in group_cells(cur.cells.values(),
                                         lambda k: (k.scenario, k.env)).items():
        svg = matrix_chart(cells, baseline=report.aligned)
        if svg:
            parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in fairness_warnings(cells)]
            parts.append(f"<figure>{svg}<figcaption>{html.escape(scenario)} env="
                         f"{html.escape(env)}</figcaption></figure>")

    parts += studies_html(report.studies, report.series)

    left_out = [(k, r) for k, c in _cells(cur) for r in c.invalid]
    if left_out:
        parts.append("<h2>Left out of verdicts</h2>")
        parts.append(_table(["cell", "run", "test", "status", "reasons"],
                            ([k.label(), r.run_id, f"{r.test_id} (attempt {r.attempt})",
                              r.status, "; ".join(r.reasons)] for k, r in left_out)))
    parts.append("</body></html>")
    return "\n".join(parts)
