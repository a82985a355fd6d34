"""The report's charts as inline SVG (matplotlib, no script, no network): OMB's quantile
curves, latency versus throughput, matrix views, charts over time, before/during bars
and fault timelines. Each returns None when the records hold nothing to draw.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_brokerperf.report.model import (
    PERCENTILE_NAMES,
    RATE_METRICS,
    CellKey,
    CellStats,
)
from pytest_brokerperf.report.series import RunSeries, before_during

__all__ = ["before_during_chart", "curve_points", "fairness_warnings", "fault_chart",
           "group_cells", "matrix_chart", "quantile_chart", "throughput_chart", "time_chart",
           "without_rate"]


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline SVG


def fairness_warnings(cells: Sequence[CellStats]) -> list[str]:
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


def group_cells(cells: Iterable[CellStats], key: Callable[[CellKey], tuple[str, ...]]
           ) -> dict[tuple[str, ...], list[CellStats]]:
    groups: dict[tuple[str, ...], list[CellStats]] = defaultdict(list)
    for c in cells:
        groups[key(c.key)].append(c)
    return dict(sorted(groups.items()))


def without_rate(params: str) -> str:
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
