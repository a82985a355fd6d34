"""The report's charts as inline SVG (matplotlib, no script, no network): OMB's quantile
curves, latency versus throughput, matrix views, charts over time, before/during bars
and fault timelines. Each returns None when the records hold nothing to draw.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_brokerperf.metrics.hdr_layout import min_samples_for
from pytest_brokerperf.report.model import (
    PERCENTILE_NAMES,
    RATE_METRICS,
    SETUP_FIELDS,
    CellKey,
    CellStats,
    natural_key,
)
from pytest_brokerperf.report.series import RunSeries, before_during

__all__ = ["before_during_chart", "curve_points", "fairness_warnings", "fault_chart",
           "group_cells", "log_ticks", "matrix_chart", "median_series", "quantile_chart",
           "series_labels", "study_chart", "tail_gaps", "throughput_chart", "time_chart",
           "without_rate"]

#: Grey for what is neither pass nor fail (missing cells, n/a), as the page's CSS.
NEUTRAL = "#8a8a8a"


def _legend(ax: Any) -> None:
    """The legend right of the plot, never over a line."""
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0.0)


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
    varying = _chart_varying(c.key for c in cells)
    fields = sorted({part.split("=", 1)[0] for parts in varying.values() for part in parts})
    if fields:
        out.append(f"set-ups differ ({', '.join(fields)}): each series is labelled with "
                   "its own")
    return out


#: Set-up fields that go with the broker itself (Kafka's driver is not Pulsar's): they
#: tell two series apart only between cells of one broker.
_PER_BROKER = ("broker_version", "driver", "driver_file", "driver_settings", "clients")


def _chart_varying(keys: Iterable[CellKey]) -> dict[CellKey, list[str]]:
    """Per cell, the set-up fields that differ among a chart's cells: any difference
    of nodes, profile, period or provisioning; a per-broker field only where two cells
    of the same broker differ in it."""
    ks = sorted(set(keys), key=natural_key)
    fields = []
    for f in SETUP_FIELDS:
        if f in _PER_BROKER:
            by_broker: dict[str, set[str]] = defaultdict(set)
            for k in ks:
                by_broker[k.broker].add(getattr(k, f))
            if any(len(v) > 1 for v in by_broker.values()):
                fields.append(f)
        elif len({getattr(k, f) for k in ks}) > 1:
            fields.append(f)
    return {k: [f"{f}={getattr(k, f)}" for f in fields] for k in ks}


def series_labels(keys: Iterable[CellKey]) -> dict[CellKey, str]:
    """A series' legend label: the broker, plus the set-up fields that tell it apart
    from the chart's other series (``kafka nodes=3``)."""
    return {k: " ".join([k.broker, *v]) for k, v in _chart_varying(keys).items()}


def log_ticks(ax: Any, axis: str = "y") -> None:
    """Enough labelled ticks on a log axis, as plain numbers (0.5, 2, 20): the 1-2-5
    steps inside the axis' range, finer steps (1, 1.5, 2, 3, 5, 7) when those give fewer
    than four, evenly spaced nice values when even those give fewer than three."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if lo <= 0 or hi <= lo:
        return

    def steps(mantissas: Sequence[float]) -> list[float]:
        out = []
        for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
            out += [m * 10.0 ** e for m in mantissas]
        return sorted(v for v in out if lo <= v <= hi)

    ticks = steps((1, 2, 5))
    if len(ticks) < 4:
        ticks = steps((1, 1.5, 2, 3, 5, 7))
    if len(ticks) < 3:
        ticks = [v for v in MaxNLocator(5).tick_values(lo, hi) if lo <= v <= hi and v > 0]
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_ticks(ticks)
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())
    if axis == "y":
        ax.set_ylim(lo, hi)
    else:
        ax.set_xlim(lo, hi)


def group_cells(cells: Iterable[CellStats], key: Callable[[CellKey], tuple[str, ...]]
           ) -> dict[tuple[str, ...], list[CellStats]]:
    groups: dict[tuple[str, ...], list[CellStats]] = defaultdict(list)
    for c in cells:
        groups[key(c.key)].append(c)
    return dict(sorted(groups.items(),
                       key=lambda kv: tuple(natural_key(part) for part in kv[0])))


def without_rate(params: str) -> str:
    return " ".join(p for p in params.split() if not p.startswith("rate="))


def quantile_chart(view: str, cells: Sequence[CellStats],
                   baseline: Mapping[CellKey, CellStats] | None = None) -> str | None:
    """OMB-style quantile curve: x = 1/(1-q) on a log scale, one series per broker.

    With ``baseline`` (the baseline's cell for each current cell, ``gates.align``):
    the baseline's pooled curve dashed in the same colour, and a band over its runs'
    range (lowest to highest per-run figure at each percentile)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    drawn = 0
    labels = series_labels(c.key for c in cells)
    xs_all = [1 / (1 - q / 100) for _, q in PERCENTILE_NAMES]
    for c in sorted(cells, key=lambda c: natural_key(c.key)):
        lat = c.figures.latency.get(view)
        if lat is None:
            continue
        raw = [(1 / (1 - q / 100), lat.get(name)) for name, q in PERCENTILE_NAMES]
        pts = [(x, y / 1000) for x, y in raw if y is not None]
        if not pts:
            continue
        label = labels[c.key]
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label,
                       gid=f"series-{c.key.broker}", zorder=3)[0]
        drawn += 1
        base = (baseline or {}).get(c.key)
        blat = base.figures.latency.get(view) if base is not None else None
        if base is None or blat is None:
            continue
        bpts = [(x, y / 1000) for x, (name, _) in zip(xs_all, PERCENTILE_NAMES, strict=True)
                if (y := blat.get(name)) is not None]
        if bpts:
            ax.plot([p[0] for p in bpts], [p[1] for p in bpts], linestyle="--",
                    marker="s", markersize=3, color=line.get_color(), alpha=0.9,
                    label=f"{label} baseline ({base.valid_runs} runs)",
                    gid=f"baseline-{c.key.broker}")
        band = []
        for x, (name, _) in zip(xs_all, PERCENTILE_NAMES, strict=True):
            per_run = [v for f in base.run_figures.values()
                       if (lv := f.latency.get(view)) is not None
                       and (v := lv.get(name)) is not None]
            if len(per_run) >= 2:
                band.append((x, min(per_run) / 1000, max(per_run) / 1000))
        if len(band) >= 2:
            ax.fill_between([b[0] for b in band], [b[1] for b in band],
                            [b[2] for b in band], color=line.get_color(), alpha=0.15,
                            linewidth=0, label=f"{label} baseline runs' range",
                            gid=f"band-{c.key.broker}")
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs_all)
    ax.set_xticklabels([n for n, _ in PERCENTILE_NAMES])
    ax.minorticks_off()
    log_ticks(ax)
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"{view} (ms)")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax)
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
    log_ticks(ax)
    ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    ax.set_xlabel("acknowledged rate (msg/s)")
    ax.set_ylabel("e2e_response p99 (ms)")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax)
    return _svg(fig)


def _varying_params(cells: Sequence[CellStats]) -> dict[CellKey, str]:
    """Each cell's x label: only the parameters (and durability) that differ among the
    cells, e.g. ``rate=500``; every cell alike gives ``all alike``."""
    parsed = {c.key: dict(p.split("=", 1) for p in c.key.params.split() if "=" in p)
              for c in cells}
    names = sorted({n for d in parsed.values() for n in d})
    vary = [n for n in names if len({d.get(n) for d in parsed.values()}) > 1]
    levels = {c.key.durability for c in cells}

    def short(v: str | None) -> str:
        if v is None:
            return "-"
        return v[:-2] if v.endswith(".0") else v

    out = {}
    for k, d in parsed.items():
        parts = [f"{n}={short(d.get(n))}" for n in vary]
        if len(levels) > 1:
            parts.append(k.durability)
        out[k] = " ".join(parts) or "all alike"
    return out


def matrix_chart(cells: Sequence[CellStats], metric: str = "e2e_response.p99",
                 baseline: Mapping[CellKey, CellStats] | None = None) -> str | None:
    """Bars of one metric per parameter set (x, in numeric order) and broker (one series
    per broker). A cell the run does not have, or whose figure is n/a, is drawn as a
    grey hatched outline marked ``missing`` / ``n/a``, never as a bar of height 0. With
    ``baseline``, a black tick on each bar marks the baseline's figure."""
    import matplotlib.pyplot as plt

    if not cells:
        return None
    xlabel = _varying_params(cells)
    series_of = series_labels(c.key for c in cells)
    names = sorted(set(series_of.values()))
    labels = sorted(set(xlabel.values()), key=natural_key)
    values = {(xlabel[c.key], series_of[c.key]): c.figures.metric(metric) for c in cells}
    scale = 1000 if metric not in RATE_METRICS else 1
    fig, ax = plt.subplots(figsize=(max(6.4, 0.8 * len(labels) * max(1, len(names))), 3.8))
    width = 0.8 / max(1, len(names))
    top = max([v / scale for v in values.values() if v is not None] or [1.0])
    marked = False
    for i, name in enumerate(names):
        broker = name.split()[0]
        xs = [j + i * width for j in range(len(labels))]
        ys = [values.get((lab, name)) for lab in labels]
        present = [(x, y / scale) for x, y in zip(xs, ys, strict=True) if y is not None]
        bars = ax.bar([p[0] for p in present], [p[1] for p in present], width=width,
                      label=name)
        for j, patch in enumerate(bars):  # one bar per parameter set in this series
            patch.set_gid(f"series-{broker}-{j}")
        for x, lab, y in zip(xs, labels, ys, strict=True):
            if y is None:
                text = "n/a" if (lab, name) in values else "missing"
                ax.bar([x], [top * 0.3], width=width, fill=False, hatch="//",
                       edgecolor=NEUTRAL, linestyle="--", gid=f"gap-{broker}")
                ax.annotate(text, (x, top * 0.31), ha="center", va="bottom", rotation=90,
                            fontsize="small", color=NEUTRAL)
        for c in cells:
            if series_of[c.key] != name or xlabel[c.key] not in labels:
                continue
            base = (baseline or {}).get(c.key)
            bv = base.figures.metric(metric) if base is not None else None
            if bv is None:
                continue
            x = labels.index(xlabel[c.key]) + i * width
            ax.plot([x - width * 0.45, x + width * 0.45], [bv / scale] * 2, color="black",
                    linewidth=2, label=None if marked else "baseline",
                    gid=f"baseline-{broker}")
            top = max(top, bv / scale)
            marked = True  # one legend entry for every series' ticks
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(labels))])
    long = max(len(lab) for lab in labels) > 12 or len(labels) > 6
    ax.set_xticklabels(labels, fontsize="small", rotation=30 if long else 0,
                       ha="right" if long else "center")
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel(metric + (" (ms)" if metric not in RATE_METRICS else ""))
    _legend(ax)
    ax.grid(True, axis="y", alpha=0.3)
    return _svg(fig)


def _phase_marks(ax: Any, rs: RunSeries, color: Any, *, label: bool = True) -> None:
    """A dotted line where the run's phase changes (warm-up → measure → build …), named
    above the plot, level (for the first series only: the brokers' phases are alike and
    the names would pile up; a name too close to the previous one is left out)."""
    phases = list(rs.columns.get("phase", []))
    ends = rs.values("t_s")
    span = max((e for e in ends if e is not None), default=0.0) or 1.0
    last_named = None
    for i in range(1, min(len(phases), len(ends))):
        if phases[i] == phases[i - 1]:
            continue
        start = ends[i - 1]
        if start is None:
            continue
        ax.axvline(start, color=color, linestyle=":", alpha=0.7, linewidth=1,
                   gid=f"phase-{rs.key.broker}-{i}")
        if label and (last_named is None or start - last_named > 0.08 * span):
            ax.annotate(str(phases[i]), (start, 1.01), xycoords=("data", "axes fraction"),
                        fontsize="small", color="#444", ha="left", va="bottom",
                        annotation_clip=False)
            last_named = start


def _fault_marks(ax: Any, series: Sequence[RunSeries]) -> None:
    for rs in series:
        for j, ev in enumerate(rs.faults):
            if ev.duration_s:
                ax.axvspan(ev.t_s, ev.t_s + ev.duration_s, color="#d62728", alpha=0.12,
                           gid=f"fault-{rs.key.broker}-{j}")
            ax.axvline(ev.t_s, color="#d62728", linestyle="--", linewidth=1,
                       gid=f"fault-line-{rs.key.broker}-{j}")


def median_series(column: str, runs: Sequence[RunSeries]
                  ) -> list[tuple[float, float]]:
    """Per stats period (by index), the median of ``column`` over ``runs`` (periods a
    run lacks, or has no figure in, are left out; x is the median period end)."""
    import statistics

    out: list[tuple[float, float]] = []
    longest = max((r.periods for r in runs), default=0)
    cols = [(r.values("t_s"), r.values(column)) for r in runs]
    for i in range(longest):
        ys = [y for _, v in cols if i < len(v) and (y := v[i]) is not None]
        ts = [x for t, _ in cols if i < len(t) and (x := t[i]) is not None]
        if ys and ts:
            out.append((statistics.median(ts), statistics.median(ys)))
    return out


def tail_gaps(column: str, series: Sequence[RunSeries]) -> list[str]:
    """Why a percentile column has no point in some periods: too few samples (a
    percentile q needs 10 / (1 − q/100) of them: p99 1,000). One line per series."""
    name = column.removesuffix("_us")
    view, _, stat = name.rpartition("_")
    if not stat.startswith("p"):
        return []
    q = float(stat[1:]) if stat[1:].isdigit() else None
    if q is None or q <= 50:
        return []
    need = min_samples_for(q)
    out = []
    for rs in series:
        vals, counts = rs.values(column), rs.values(f"{view}_count")
        gaps = [i for i, v in enumerate(vals) if v is None]
        if not gaps:
            continue
        have = [int(c) for i in gaps if i < len(counts) and (c := counts[i]) is not None]
        seen = (f" ({min(have):,}–{max(have):,} samples)" if have and min(have) != max(have)
                else f" ({have[0]:,} samples)" if have else "")
        out.append(f"{rs.key.broker}: {stat} n/a in {len(gaps)} of {len(vals)} periods: a "
                   f"period needs {need:,} samples for a {stat}{seen}; a longer "
                   "--brokerperf-period or a higher rate gives one. The dotted line is the "
                   f"whole window's {stat}.")
    return out


def time_chart(column: str, ylabel: str, series: Sequence[RunSeries], *,
               divisor: float = 1.0, log: bool = False,
               baseline: Mapping[CellKey, Sequence[RunSeries]] | None = None,
               whole: Mapping[CellKey, float | None] | None = None) -> str | None:
    """One timeline column over time: one line per broker, one marker per stats period.

    x is the period's end in seconds since the run's first period (warm-up included;
    phase changes dotted); a period without the figure (too few samples for the
    percentile) is left out, never invented. ``baseline``: per current cell, the
    baseline's runs, drawn as their median per period (dashed, same colour).
    ``whole``: per cell, the whole window's figure, drawn as a dotted level line when
    some periods lack theirs.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    drawn = 0
    nan = float("nan")
    labels = series_labels(rs.key for rs in series)
    top = 0.0
    for rs in sorted(series, key=lambda r: natural_key(r.key)):
        # a period without the figure is a gap in the line (NaN), not a point
        pts = [(x, y / divisor if y is not None and (y > 0 or not log) else nan)
               for x, y in zip(rs.values("t_s"), rs.values(column), strict=False)
               if x is not None]
        level = (whole or {}).get(rs.key)
        if not pts or (all(math.isnan(y) for _, y in pts) and level is None):
            continue
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3,
                       linewidth=1.2, label=labels[rs.key], gid=f"series-{rs.key.broker}")[0]
        top = max([top, *(y for _, y in pts if not math.isnan(y))])
        _phase_marks(ax, rs, line.get_color(), label=drawn == 0)
        drawn += 1
        if level is not None and any(math.isnan(y) for _, y in pts):
            ax.axhline(level / divisor, color=line.get_color(), linestyle=":", linewidth=1.2,
                       label=f"{labels[rs.key]} whole window", gid=f"whole-{rs.key.broker}")
            top = max(top, level / divisor)
        runs = (baseline or {}).get(rs.key) or ()
        med = [(x, y / divisor) for x, y in median_series(column, runs)
               if not log or y > 0]
        if med:
            ax.plot([p[0] for p in med], [p[1] for p in med], linestyle="--", linewidth=1.2,
                    color=line.get_color(), alpha=0.8,
                    label=f"{labels[rs.key]} baseline median ({len(runs)} runs)",
                    gid=f"baseline-{rs.key.broker}")
            top = max([top, *(p[1] for p in med)])
    if not drawn:
        plt.close(fig)
        return None
    _fault_marks(ax, series)
    ends = [x for rs in series for x in rs.values("t_s") if x is not None]
    if ends:  # the whole run, even where no period has the figure
        ax.set_xlim(0, max(ends) * 1.02)
    if log:
        ax.set_yscale("log")
        log_ticks(ax)
    else:
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)  # headroom: no line on the frame
    ax.set_xlabel("time since the first period (s)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax)
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
    _legend(ax)
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


def study_chart(xs: Sequence[str], ylabel: str,
                ours: Mapping[str, Sequence[float | None]],
                published: Mapping[str, Sequence[float | None]]) -> str | None:
    """A study's figure on its own axes: x its rows (batch sizes, rates, brokers), one
    series per column, ours solid and the published one dashed in the same colour. A
    point without a figure is left out (a study's chart without numbers draws no
    published line); a log y axis when the values span more than 20x."""
    import matplotlib.pyplot as plt

    values = [v for series in (*ours.values(), *published.values()) for v in series
              if v is not None and v > 0]
    if not any(v is not None for series in ours.values() for v in series):
        return None
    fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(xs)), 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, name in enumerate(dict.fromkeys([*ours, *published])):
        color = colors[i % len(colors)]
        for what, series, style in (("ours", ours.get(name), "-"),
                                    ("published", published.get(name), "--")):
            pts = [(j, v) for j, v in enumerate(series or ()) if v is not None]
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, marker="o"
                    if what == "ours" else "s", color=color, label=f"{name}: {what}",
                    gid=f"study-{what}-{i}")
    ax.set_xticks(range(len(xs)))
    long = max(len(x) for x in xs) > 12
    ax.set_xticklabels(xs, fontsize="small", rotation=30 if long else 0,
                       ha="right" if long else "center")
    ax.set_xlim(-0.5, len(xs) - 0.5)
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
        log_ticks(ax)
    else:
        ax.set_ylim(0, max(values or [1.0]) * 1.15)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    _legend(ax)
    return _svg(fig)
