"""Report outputs: a Markdown summary (fit for a CI job summary), CSV, and one HTML page.

The HTML page is self-contained: charts are matplotlib SVG inlined in the page, no
script and no network access needed to open it. Charts follow OpenMessaging
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.report.gates import Budget, GateResult, exit_code
from pytest_brokerperf.report.model import (
    LATENCY_STATS,
    PERCENTILE_NAMES,
    RATE_METRICS,
    VIEWS,
    CellKey,
    CellStats,
    ReportResult,
)
from pytest_brokerperf.report.series import BLOCKS, RunSeries, before_during

__all__ = ["TIME_CHARTS", "Report", "before_during_chart", "csv_text", "fault_chart",
           "html_page", "markdown", "time_chart"]

#: Views drawn as quantile curves (OMB's publish latency, publish delay, end-to-end,
#: plus the coordinated-omission-corrected end-to-end response).
CHART_VIEWS = ("publish_latency", "publish_delay", "e2e_latency", "e2e_response")
VERDICT_WORDS = {0: "ok", 1: "REGRESSION", 3: "INCONCLUSIVE"}
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
    return (f"{r.records_read} records from {len(r.files)} file(s){tail}; "
            f"{len(r.cells)} matrix cell(s)")


# --------------------------------------------------------------------------- markdown


def markdown(report: Report) -> str:
    """The summary: verdict, gates, per-cell table, records left out of verdicts."""
    cur = report.current
    lines = [f"## {report.title}", "", f"Input: {_input_line(cur)}."]
    if report.baseline is not None:
        lines.append(f"Baseline: {_input_line(report.baseline)}.")
    for w in cur.warnings:
        lines.append(f"> warning: {_md_escape(w)}")
    lines.append("")
    if report.budgets:
        code = report.exit_code
        counts: dict[str, int] = defaultdict(int)
        for g in report.gates:
            counts[g.status] += 1
        tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        lines += [f"**Gate: {VERDICT_WORDS.get(code, str(code))}** "
                  f"(`{', '.join(b.text for b in report.budgets)}`: {tally})", "",
                  "| verdict | cell | metric | observed | baseline | change | budget | "
                  "noise floor | limit |",
                  "|---|---|---|---|---|---|---|---|---|"]
        order = {"regression": 0, "missing": 1, "no-baseline": 2, "inconclusive": 3, "pass": 4}
        for g in sorted(report.gates, key=lambda g: (order[g.status], g.cell)):
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
    lines += ["### Matrix cells (valid results only)", "",
              "| broker | scenario | parameters | durability | fault | env | runs | valid/records "
              "| ack msg/s (mean ± sd) | spread | e2e p50 ms | e2e p99 ms | e2e p99.9 ms | "
              "publish p99 ms |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, c in sorted(cur.cells.items()):
        ack = c.figures.rates.get("ack_rate")
        e2e, pub = c.figures.latency.get("e2e_response"), c.figures.latency.get("publish_response")
        ack_text = "n/a" if ack is None or ack.mean is None else (
            f"{ack.mean:,.1f}" + (f" ± {ack.stddev:,.1f}" if ack.stddev is not None else ""))
        lines.append(
            f"| {key.broker} | {key.scenario} | {_md_escape(key.params)} | {key.durability} "
            f"| {key.fault} | {key.env} | {c.runs} | {c.valid}/{c.records} | {ack_text} | "
            f"{_pct(ack.spread if ack else None)} | "
            f"{_ms(e2e.get('p50') if e2e else None)} | {_ms(e2e.get('p99') if e2e else None)} "
            f"| {_ms(e2e.get('p99.9') if e2e else None)} | "
            f"{_ms(pub.get('p99') if pub else None)} |")
    left_out = [(k, r) for k, c in sorted(cur.cells.items()) for r in c.invalid]
    if left_out:
        lines += ["", "### Left out of verdicts", "",
                  "| cell | run | test | status | reasons |", "|---|---|---|---|---|"]
        for k, r in left_out:
            lines.append(f"| {_md_escape(k.label())} | {r.run_id} | {_md_escape(r.test_id)} "
                         f"(attempt {r.attempt}) | {r.status} | "
                         f"{_md_escape('; '.join(r.reasons)) or '-'} |")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- csv


def csv_columns() -> list[str]:
    cols = ["broker", "scenario", "params", "durability", "fault", "env", "records", "valid",
            "runs", "valid_runs", "machines"]
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
    for key, c in sorted(result.cells.items()):
        row: list[Any] = [key.broker, key.scenario, key.params, key.durability, key.fault,
                          key.env, c.records, c.valid, c.runs, c.valid_runs,
                          "; ".join(c.machines)]
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


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline SVG


def _fairness(cells: Sequence[CellStats]) -> list[str]:
    out = []
    levels = sorted({c.key.durability for c in cells})
    if len(levels) > 1:
        out.append(f"durability levels differ ({', '.join(levels)}): not a like-for-like "
                   "comparison")
    machines = sorted({m for c in cells for m in c.machines})
    if len(machines) > 1:
        out.append(f"results come from different machines ({'; '.join(machines)})")
    envs = sorted({c.key.env for c in cells})
    if len(envs) > 1:
        out.append(f"environment labels differ ({', '.join(envs)})")
    return out


def _group(cells: Iterable[CellStats], key: Callable[[CellKey], tuple[str, ...]]
           ) -> dict[tuple[str, ...], list[CellStats]]:
    groups: dict[tuple[str, ...], list[CellStats]] = defaultdict(list)
    for c in cells:
        groups[key(c.key)].append(c)
    return dict(sorted(groups.items()))


def _without_rate(params: str) -> str:
    return " ".join(p for p in params.split() if not p.startswith("rate="))


def quantile_chart(view: str, cells: Sequence[CellStats]) -> str | None:
    """OMB-style quantile curve: x = 1/(1-q) on a log scale, one series per broker."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    drawn = 0
    for c in sorted(cells, key=lambda c: c.key.broker):
        lat = c.figures.latency.get(view)
        if lat is None:
            continue
        raw = [(1 / (1 - q / 100), lat.get(name)) for name, q in PERCENTILE_NAMES]
        pts = [(x, y / 1000) for x, y in raw if y is not None]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=c.key.broker,
                gid=f"series-{c.key.broker}")
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_ticks(ax)
    ax.set_xticks([1 / (1 - q / 100) for _, q in PERCENTILE_NAMES])
    ax.set_xticklabels([n for n, _ in PERCENTILE_NAMES])
    ax.minorticks_off()
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"{view} (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return _svg(fig)


def curve_points(cells: Sequence[CellStats]) -> dict[str, list[tuple[float, float, bool]]]:
    """Latency-versus-throughput series per broker: (ack msg/s, e2e p99 µs, sustainable).

    Ladder cells contribute their rungs; other cells one point each (mean ack rate,
    pooled e2e_response p99), so cells that differ only by rate trace a curve.
    """
    series: dict[str, list[tuple[float, float, bool]]] = defaultdict(list)
    for c in cells:
        if c.curve:
            for p in c.curve:
                if p.ack_rate is not None and p.e2e_p99_us is not None:
                    series[c.key.broker].append((p.ack_rate, p.e2e_p99_us, bool(p.sustainable)))
            continue
        ack = c.figures.rates.get("ack_rate")
        e2e = c.figures.latency.get("e2e_response")
        p99 = e2e.get("p99") if e2e else None
        if ack is not None and ack.mean is not None and p99 is not None:
            series[c.key.broker].append((ack.mean, p99, True))
    return {b: sorted(pts) for b, pts in sorted(series.items())}


def throughput_chart(cells: Sequence[CellStats]) -> str | None:
    """e2e_response p99 versus acknowledged rate, one series per broker, knees marked."""
    import matplotlib.pyplot as plt

    series = curve_points(cells)
    if not any(len(p) for p in series.values()):
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for broker, pts in series.items():
        line = ax.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], marker="o",
                       label=broker, gid=f"series-{broker}")[0]
        bad = [p for p in pts if not p[2]]
        if bad:
            ax.scatter([p[0] for p in bad], [p[1] / 1000 for p in bad], marker="x", s=60,
                       color=line.get_color(), zorder=3)
    knees = sorted({(c.key.broker, p.knee_rate) for c in cells for p in c.curve
                    if p.knee_rate is not None})
    for broker, rate in knees:
        ax.axvline(rate, linestyle=":", alpha=0.6)
        ax.annotate(f"{broker} knee", (rate, ax.get_ylim()[1]), fontsize="x-small",
                    rotation=90, va="top")
    ax.set_yscale("log")
    _plain_log_ticks(ax)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.set_xlabel("acknowledged rate (msg/s)")
    ax.set_ylabel("e2e_response p99 (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return _svg(fig)


def matrix_chart(cells: Sequence[CellStats], metric: str = "e2e_response.p99") -> str | None:
    """Bars of one metric per parameter set (x) and broker (one series per broker)."""
    import matplotlib.pyplot as plt

    brokers = sorted({c.key.broker for c in cells})
    labels = sorted({f"{c.key.params} {c.key.durability}" for c in cells})
    if not labels:
        return None
    values = {(f"{c.key.params} {c.key.durability}", c.key.broker): c.figures.metric(metric)
              for c in cells}
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(labels) * max(1, len(brokers))), 3.8))
    width = 0.8 / max(1, len(brokers))
    for i, broker in enumerate(brokers):
        xs = [j + i * width for j in range(len(labels))]
        ys = [values.get((lab, broker)) for lab in labels]
        bars = ax.bar(xs, [(y or 0) / (1000 if metric not in RATE_METRICS else 1)
                           for y in ys], width=width, label=broker)
        for j, patch in enumerate(bars):  # one bar per parameter set in this series
            patch.set_gid(f"series-{broker}-{j}")
    ax.set_xticks([j + width * (len(brokers) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels([lab.replace(" ", "\n") for lab in labels], fontsize="xx-small")
    ax.set_ylabel(metric + (" (ms)" if metric not in RATE_METRICS else ""))
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return _svg(fig)


def _plain_log_ticks(ax: Any) -> None:
    """Log-axis tick labels as plain numbers (0.5, 20, not 5×10⁻¹); minor ticks labelled
    only when the axis spans about a decade or less (else they crowd the axis)."""
    from matplotlib.ticker import FuncFormatter

    def minor(v: float, _pos: int) -> str:
        lo, hi = ax.get_ylim()
        return f"{v:g}" if lo > 0 and hi / lo <= 12 else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def _phase_marks(ax: Any, rs: RunSeries, color: Any, *, label: bool = True) -> None:
    """A dotted line where the run's phase changes (warm-up → measure → build …), named
    (for the first series only: the brokers' phases are alike and the names would pile up)."""
    phases = list(rs.columns.get("phase", []))
    ends = rs.values("t_s")
    for i in range(1, min(len(phases), len(ends))):
        if phases[i] == phases[i - 1]:
            continue
        start = ends[i - 1]
        if start is None:
            continue
        ax.axvline(start, color=color, linestyle=":", alpha=0.7, linewidth=1,
                   gid=f"phase-{rs.key.broker}-{i}")
        if label:
            ax.annotate(str(phases[i]), (start, 1.0), xycoords=("data", "axes fraction"),
                        fontsize="xx-small", color=color, rotation=90, va="top", ha="right")


def _fault_marks(ax: Any, series: Sequence[RunSeries]) -> None:
    for rs in series:
        for j, ev in enumerate(rs.faults):
            if ev.duration_s:
                ax.axvspan(ev.t_s, ev.t_s + ev.duration_s, color="#d62728", alpha=0.12,
                           gid=f"fault-{rs.key.broker}-{j}")
            ax.axvline(ev.t_s, color="#d62728", linestyle="--", linewidth=1,
                       gid=f"fault-line-{rs.key.broker}-{j}")


def time_chart(column: str, ylabel: str, series: Sequence[RunSeries], *,
               divisor: float = 1.0, log: bool = False) -> str | None:
    """One timeline column over time: one line per broker, one marker per stats period.

    x is the period's end in seconds since the run's first period (warm-up included;
    phase changes dotted); a period without the figure (too few samples for the
    percentile) is left out, never invented.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    drawn = 0
    nan = float("nan")
    for rs in sorted(series, key=lambda r: r.key.broker):
        # a period without the figure is a gap in the line (NaN), not a point
        pts = [(x, y / divisor if y is not None and (y > 0 or not log) else nan)
               for x, y in zip(rs.values("t_s"), rs.values(column), strict=False)
               if x is not None]
        if all(math.isnan(y) for _, y in pts):
            continue
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                       linewidth=1.2, label=rs.key.broker, gid=f"series-{rs.key.broker}")[0]
        _phase_marks(ax, rs, line.get_color(), label=drawn == 0)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    _fault_marks(ax, series)
    if log:
        ax.set_yscale("log")
        _plain_log_ticks(ax)
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel("time since the first period (s)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return _svg(fig)


def before_during_chart(block: str, series: Sequence[RunSeries]) -> str | None:
    """Bars of a scenario block's figures before (hatched) and during, per broker."""
    import matplotlib.pyplot as plt

    pairs = {rs.key.broker: {p.label: p for p in before_during(rs.blocks[block])}
             for rs in sorted(series, key=lambda r: r.key.broker) if block in rs.blocks}
    labels = sorted({lab for ps in pairs.values() for lab in ps
                     if ps[lab].before is not None or ps[lab].during is not None})
    if not labels:
        return None
    brokers = [b for b, ps in pairs.items() if any(lab in ps for lab in labels)]
    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(labels) * len(brokers)), 3.6))
    width = 0.8 / (2 * len(brokers))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, broker in enumerate(brokers):
        color = colors[i % len(colors)]
        labelled = False
        for j, lab in enumerate(labels):
            p = pairs[broker].get(lab)
            if p is None:
                continue
            x = j + 2 * i * width
            for k, (what, v) in enumerate((("before", p.before), ("during", p.during))):
                if v is None:  # not measured (e.g. too few samples in a short drain)
                    ax.annotate("n/a", (x + k * width, 0), ha="center", va="bottom",
                                fontsize="x-small", color=color)
                    continue
                bar = ax.bar(x + k * width, v / 1000, width=width, color=color,
                             alpha=0.45 if what == "before" else 0.95,
                             hatch="//" if what == "before" else None,
                             label=None if labelled else broker)
                labelled = True
                bar[0].set_gid(f"series-{broker}-{what}-{j}")
    ax.set_xticks([j + width * (2 * len(brokers) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, fontsize="x-small")
    ax.set_ylabel(f"{block} (ms)")
    ax.set_title("hatched: before; solid: during; n/a: not measured", fontsize="x-small")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return _svg(fig)


def fault_chart(series: Sequence[RunSeries]) -> str | None:
    """Fault timeline: one row per broker, each event at its time (span = its length)."""
    import matplotlib.pyplot as plt

    rows = [rs for rs in sorted(series, key=lambda r: r.key.broker) if rs.faults]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 0.8 + 0.5 * len(rows)))
    for i, rs in enumerate(rows):
        spans = [(ev.t_s, ev.duration_s) for ev in rs.faults if ev.duration_s]
        if spans:
            ax.broken_barh(spans, (i - 0.3, 0.6), color="#d62728", alpha=0.3,
                           gid=f"fault-span-{rs.key.broker}")
        ax.scatter([ev.t_s for ev in rs.faults], [i] * len(rs.faults), marker="v",
                   color="#d62728", zorder=3, gid=f"series-{rs.key.broker}")
        for ev in rs.faults:
            ax.annotate(ev.action + (f" ({ev.target})" if ev.target else ""), (ev.t_s, i),
                        xytext=(3, 6), textcoords="offset points", fontsize="x-small")
        end = rs.values("t_s")
        if end and end[-1] is not None:  # the run's extent, for scale
            ax.plot([0, end[-1]], [i, i], color="#999", linewidth=0.8, zorder=1)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([rs.key.broker for rs in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("time since the first period (s)")
    ax.grid(True, axis="x", alpha=0.3)
    return _svg(fig)


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
    timed = {g: ss for g, ss in sorted(groups.items()) if any(rs.periods for rs in ss)}
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
                  for w in _fairness([cur.cells[rs.key] for rs in ss])]
        for column, ylabel, divisor, log in TIME_CHARTS:
            svg = time_chart(column, ylabel, ss, divisor=divisor, log=log)
            if svg:
                parts.append(f"<figure data-chart='time' data-column='{column}'>{svg}"
                             f"<figcaption>{html.escape(ylabel)} over time</figcaption>"
                             "</figure>")
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
                     for w in _fairness([cur.cells[rs.key] for rs in ss])]
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
th{background:#f3f3f3} .regression,.missing{color:#b00;font-weight:bold}
.inconclusive,.no-baseline{color:#a60;font-weight:bold} .pass{color:#070}
.warn{background:#fff4d6;border-left:4px solid #e0a000;padding:4px 8px;margin:4px 0}
figure{display:inline-block;margin:0.5em;vertical-align:top} figcaption{font-size:0.85em}
svg{max-width:100%;height:auto}
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
    if report.budgets:
        code = report.exit_code
        parts.append(f"<h2>Gate: <span class='{'pass' if code == 0 else 'regression'}'>"
                     f"{VERDICT_WORDS.get(code, str(code))}</span></h2>")
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
    rows = []
    for key, c in sorted(cur.cells.items()):
        ack = c.figures.rates.get("ack_rate")
        e2e = c.figures.latency.get("e2e_response")
        rows.append([key.broker, key.scenario, key.params, key.durability, key.fault, key.env,
                     str(c.runs), f"{c.valid}/{c.records}",
                     _num(ack.mean if ack else None), _pct(ack.spread if ack else None),
                     *[_ms(e2e.get(n) if e2e else None) for n in ("p50", "p99", "p99.9")],
                     _pct(c.p99_spread), "; ".join(c.machines)])
    parts.append(_table(["broker", "scenario", "parameters", "durability", "fault", "env",
                         "runs", "valid/records", "ack msg/s", "spread", "e2e p50 ms",
                         "e2e p99 ms", "e2e p99.9 ms", "p99 spread", "machine"], rows))

    parts.append("<h2>Latency quantiles</h2>")
    groups = _group(cur.cells.values(), lambda k: (k.scenario, k.params, k.durability,
                                                   k.fault, k.env))
    for (scenario, params, durability, fault, env), cells in groups.items():
        caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
        parts.append(f"<h3>{html.escape(caption)}</h3>")
        parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in _fairness(cells)]
        for view in CHART_VIEWS:
            svg = quantile_chart(view, cells)
            if svg:
                parts.append(f"<figure>{svg}<figcaption>{view}</figcaption></figure>")

    parts += _series_sections(report)

    parts.append("<h2>Latency versus throughput</h2>")
    tgroups = _group(cur.cells.values(), lambda k: (k.scenario, _without_rate(k.params),
                                                    k.durability, k.fault, k.env))
    for (scenario, params, durability, fault, env), cells in tgroups.items():
        svg = throughput_chart(cells)
        if not svg:
            continue
        caption = f"{scenario} [{params}] {durability} fault={fault} env={env}"
        parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in _fairness(cells)]
        parts.append(f"<figure>{svg}<figcaption>{html.escape(caption)} (x: unsustainable "
                     "rung)</figcaption></figure>")

    parts.append("<h2>Matrix: e2e_response p99 per parameter set and broker</h2>")
    for (scenario, env), cells in _group(cur.cells.values(),
                                         lambda k: (k.scenario, k.env)).items():
        svg = matrix_chart(cells)
        if svg:
            parts += [f"<div class='warn'>{html.escape(w)}</div>" for w in _fairness(cells)]
            parts.append(f"<figure>{svg}<figcaption>{html.escape(scenario)} env="
                         f"{html.escape(env)}</figcaption></figure>")

    left_out = [(k, r) for k, c in sorted(cur.cells.items()) for r in c.invalid]
    if left_out:
        parts.append("<h2>Left out of verdicts</h2>")
        parts.append(_table(["cell", "run", "test", "status", "reasons"],
                            ([k.label(), r.run_id, f"{r.test_id} (attempt {r.attempt})",
                              r.status, "; ".join(r.reasons)] for k, r in left_out)))
    parts.append("</body></html>")
    return "\n".join(parts)
