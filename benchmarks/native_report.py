"""Figures out of the brokers' own perf tools, and the side-by-side table.

Kept apart from ``compare_native.py`` (which starts brokers and processes) so the
parsing and the arithmetic are unit-tested on captured outputs without a broker
(``tests/unit/test_compare_native.py``). Every parser returns steady-state figures,
not the tool's whole-run ones, where the two differ:

* Kafka's ``ProducerPerformance`` (``kafka-producer-perf-test``) with
  ``--warmup-records`` prints a second summary for the records after the warm-up; that
  one is used, else the whole-run summary.
* Pulsar's ``pulsar-perf produce`` prints a line every 10 s, and its "Aggregated
  throughput" divides every message *including the warm-up* by the whole run, so the
  rate is the mean of the periodic lines after the warm-up. Its "Aggregated latency"
  line leaves out the samples of ``--warmup-time`` and is used for the percentiles.
* RabbitMQ's PerfTest prints a line a second; rate is the mean *confirmed* msg/s of the
  lines after the warm-up, percentiles the median of those lines' confirm latency
  (PerfTest reports min/median/75th/95th/99th, no 99.9th).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "PULSAR_PERF_INTERVAL_S",
    "Measurement",
    "Spread",
    "ToolFigures",
    "ToolOutputError",
    "format_report",
    "paired_ratios",
    "parse_perftest",
    "parse_producer_performance",
    "parse_pulsar_perf",
    "spread",
]


class ToolOutputError(ValueError):
    """A tool's output holds no figures this module can read (it failed, or its format
    changed); the message says which tool and what was missing."""


@dataclass(frozen=True)
class ToolFigures:
    """Steady-state figures of one run of one generator."""

    msg_s: float
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    how: str = ""  # how the steady state was taken from the output
    #: the highest p99 of any one measured second (PerfTest's per-second lines, the
    #: harness's 1-s periods): a stall of a few hundred ms shows here even where a
    #: median over seconds hides it; None where the tool reports no such lines
    worst_second_p99_ms: float | None = None
    #: the measured window in seconds the figures cover (a record-count tool's is its
    #: steady records over its rate), so the table can show the windows were equal
    window_s: float | None = None


# -- Kafka ProducerPerformance ------------------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_KAFKA_SUMMARY = re.compile(
    r"(?P<n>\d+) (?P<steady>steady state )?records sent, " + _NUM + r" records/sec.*?"
    + _NUM + r" ms 50th, " + _NUM + r" ms 95th, " + _NUM + r" ms 99th, " + _NUM
    + r" ms 99\.9th")


def parse_producer_performance(text: str) -> ToolFigures:
    """Kafka ``ProducerPerformance``: the steady-state summary if there is one."""
    whole: ToolFigures | None = None
    steady: ToolFigures | None = None
    for line in text.splitlines():
        m = _KAFKA_SUMMARY.search(line)
        if not m:
            continue
        rate = float(m.group(3))
        fig = ToolFigures(rate, float(m.group(4)), float(m.group(6)), float(m.group(7)),
                          how="steady-state summary (after --warmup-records)" if m.group("steady")
                          else "whole-run summary",
                          window_s=int(m.group("n")) / rate if rate > 0 else None)
        if m.group("steady"):
            steady = fig
        else:
            whole = fig
    if steady is not None:
        return steady
    if whole is not None:
        return whole
    raise ToolOutputError(
        "ProducerPerformance printed no summary line ('N records sent, ... ms 99.9th'); "
        "it failed or was stopped early - see its log")


# -- Pulsar pulsar-perf produce --------------------------------------------------------------

_PULSAR_PERIODIC = re.compile(
    r"Throughput produced:\s+[0-9,.]+ msg --- +(?P<rate>[0-9,.]+) msg/s.*?Latency: mean: +"
    r"[0-9,.]+ ms - med: +(?P<p50>[0-9,.]+) - 95pct: +[0-9,.]+ - 99pct: +(?P<p99>[0-9,.]+)"
    r" - 99\.9pct: +(?P<p999>[0-9,.]+)")
_PULSAR_AGG_LATENCY = re.compile(
    r"Aggregated latency stats --- Latency: mean: +[0-9,.]+ ms - med: +(?P<p50>[0-9,.]+) - "
    r"95pct: +[0-9,.]+ - 99pct: +(?P<p99>[0-9,.]+) - 99\.9pct: +(?P<p999>[0-9,.]+)")
_PULSAR_AGG_RATE = re.compile(r"Aggregated throughput stats --- +[0-9,.]+ records sent --- +"
                              r"(?P<rate>[0-9,.]+) msg/s")
PULSAR_PERF_INTERVAL_S = 10.0  # pulsar-perf's fixed reporting interval (4.0.x)


def _f(text: str) -> float:
    return float(text.replace(",", ""))


def parse_pulsar_perf(text: str, warmup_s: float,
                      interval_s: float = PULSAR_PERF_INTERVAL_S) -> ToolFigures:
    """``pulsar-perf produce``: mean rate of the periodic lines that start at or after
    ``warmup_s``; percentiles from the "Aggregated latency" line (which excludes
    ``--warmup-time``), else the median of the steady periodic lines'."""
    periodic = [m for m in (_PULSAR_PERIODIC.search(line) for line in text.splitlines()) if m]
    skip = int(-(-warmup_s // interval_s))  # lines whose interval overlaps the warm-up
    steady = periodic[skip:]
    if not steady:
        if "OutOfMemoryError" in text:  # its reporting thread died: no line will come
            raise ToolOutputError("pulsar-perf ran out of memory (java.lang.OutOfMemoryError) "
                                  "before its first periodic line; give its JVM more heap")
        agg = _PULSAR_AGG_RATE.search(text)
        raise ToolOutputError(
            f"pulsar-perf printed {len(periodic)} periodic line(s), none after the "
            f"{warmup_s:g} s warm-up (one every {interval_s:g} s); run it longer. "
            + (f"Its 'Aggregated' {agg.group('rate')} msg/s includes the warm-up, so it is "
               "not used." if agg else "It printed no Aggregated line either."))
    rate = statistics.fmean(_f(m.group("rate")) for m in steady)
    agg_lat = _PULSAR_AGG_LATENCY.search(text)
    how = f"mean of {len(steady)} periodic line(s) after {skip} warm-up line(s)"
    window = len(steady) * interval_s
    if agg_lat:
        return ToolFigures(rate, _f(agg_lat.group("p50")), _f(agg_lat.group("p99")),
                           _f(agg_lat.group("p999")),
                           how=how + "; latency: Aggregated (without --warmup-time)",
                           window_s=window)
    return ToolFigures(
        rate, statistics.median(_f(m.group("p50")) for m in steady),
        statistics.median(_f(m.group("p99")) for m in steady),
        statistics.median(_f(m.group("p999")) for m in steady),
        how=how + "; latency: median of those lines", window_s=window)


# -- RabbitMQ PerfTest ------------------------------------------------------------------------

_PERFTEST_PERIODIC = re.compile(
    r"time:? (?P<t>[0-9.]+) ?s, sent: (?P<sent>[0-9]+) msg/s, confirmed: (?P<conf>[0-9]+) "
    r"msg/s.*?confirm latency: (?P<lat>[0-9./]+) (?P<unit>µs|us|ms)")


def parse_perftest(text: str, warmup_s: float, interval_s: float = 1.0) -> ToolFigures:
    """RabbitMQ PerfTest: mean confirmed msg/s and median confirm latency of the lines
    (one every ``interval_s``, ``--interval``) whose interval starts after ``warmup_s``."""
    lines = [m for m in (_PERFTEST_PERIODIC.search(line) for line in text.splitlines()) if m]
    steady = [m for m in lines
              if float(m.group("t")) - interval_s >= warmup_s - 0.05 * interval_s]
    if not steady:
        raise ToolOutputError(
            f"PerfTest printed {len(lines)} per-second line(s) with confirms, none after the "
            f"{warmup_s:g} s warm-up; run it with --confirm and longer --time")
    rate = statistics.fmean(float(m.group("conf")) for m in steady)
    p50s: list[float] = []
    p99s: list[float] = []
    for m in steady:
        parts = [float(v) for v in m.group("lat").split("/")]
        scale = 1.0 if m.group("unit") == "ms" else 1e-3
        if len(parts) >= 5:  # min/median/75th/95th/99th
            p50s.append(parts[1] * scale)
            p99s.append(parts[4] * scale)
    return ToolFigures(
        rate, statistics.median(p50s) if p50s else None,
        statistics.median(p99s) if p99s else None, None,
        how=f"mean of {len(steady)} per-second line(s) after the warm-up; latency: median "
            "of those lines' confirm latency (no 99.9th in PerfTest's output)",
        worst_second_p99_ms=max(p99s) if p99s else None, window_s=len(steady) * interval_s)


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """One run of one generator ("harness", "bare", "native") at one rate label."""

    side: str
    rate: str  # "max" or the offered msg/s as text
    repeat: int
    figures: ToolFigures | None
    error: str = ""
    extra: dict[str, float] = field(default_factory=dict)  # e.g. harness worker CPU share
    #: False: the consumer did not keep up (judged as the throughput ladder judges a
    #: rung); such a run is printed as not sustainable and left out of every ratio
    sustainable: bool = True
    notes: tuple[str, ...] = ()  # why not sustainable, what rate a follow-up offered


@dataclass(frozen=True)
class Spread:
    """Minimum, median and maximum over repeats."""

    low: float
    median: float
    high: float
    n: int

    def text(self, fmt: str = "{:,.0f}") -> str:
        if self.n == 1:
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} [{fmt.format(self.low)}-{fmt.format(self.high)}]"


def spread(values: Iterable[float | None]) -> Spread | None:
    """Min/median/max of the values that are not None; None when there are none."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    return Spread(vals[0], statistics.median(vals), vals[-1], len(vals))


def paired_ratios(ms: Sequence[Measurement], num: str, den: str, rate: str) -> list[float]:
    """``num``/``den`` msg/s at ``rate``, paired within each repeat: runs of one repeat
    alternate on one broker, so they share its state (a disk filling, a warm cache).
    A run that was not sustainable pairs with nothing."""
    by_key = {(m.side, m.rate, m.repeat): m for m in ms
              if m.figures is not None and m.sustainable}
    out: list[float] = []
    for m in ms:
        if m.side != num or m.rate != rate or m.figures is None or not m.sustainable:
            continue
        d = by_key.get((den, m.rate, m.repeat))
        if d is not None and d.figures is not None and d.figures.msg_s > 0:
            out.append(m.figures.msg_s / d.figures.msg_s)
    return out


def _cell(s: Spread | None, fmt: str) -> str:
    return "-" if s is None else s.text(fmt)


#: the ratios printed when the caller names none
DEFAULT_RATIOS = (("harness", "native"), ("harness", "bare"))


def format_report(ms: Sequence[Measurement], sides: Sequence[tuple[str, str]],
                  rates: Sequence[str], mismatches: Sequence[str] = (), *,
                  kinds: Mapping[str, str] | None = None,
                  ratios: Sequence[tuple[str, str]] = DEFAULT_RATIOS,
                  settings: Mapping[str, Sequence[str]] | None = None) -> str:
    """The side-by-side table: per rate and generator msg/s and publish latency
    (median [min-max] over repeats) of the sustainable runs, the runs that were not
    sustainable apart (never a side's figure), then the ratios of sides of the same kind,
    each side's settings, and what could not be matched. ``sides`` pairs each side's key
    with its printed name; ``kinds`` names each side's kind ("end to end", "producer
    only"); a ratio is printed only between sides of one kind."""
    out: list[str] = []
    head = f"{'rate':>6}  {'generator':<34} {'kind':<12} {'msg/s median [min-max]':>28}  " \
           f"{'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8} {'window s':>8}  runs"
    out.append(head)
    out.append("-" * len(head))
    kind_of = dict(kinds or {})
    for rate in rates:
        for key, label in sides:
            runs = [m for m in ms if m.side == key and m.rate == rate]
            ok = [m.figures for m in runs if m.figures is not None and m.sustainable]
            behind = [m for m in runs if m.figures is not None and not m.sustainable]
            failed = len([m for m in runs if m.figures is None])
            rate_s = spread(f.msg_s for f in ok)
            p50 = spread(f.p50_ms for f in ok)
            p99 = spread(f.p99_ms for f in ok)
            p999 = spread(f.p999_ms for f in ok)
            window = spread(f.window_s for f in ok)
            note = f"{len(ok)}" + (f" ({failed} failed)" if failed else "")
            if behind:
                note += f" (+{len(behind)} not sustainable, below)"
            out.append(f"{rate:>6}  {label:<34} {kind_of.get(key, ''):<12} "
                       f"{_cell(rate_s, '{:,.0f}'):>28}  "
                       f"{'-' if p50 is None else f'{p50.median:.2f}':>7} "
                       f"{'-' if p99 is None else f'{p99.median:.2f}':>7} "
                       f"{'-' if p999 is None else f'{p999.median:.2f}':>8} "
                       f"{'-' if window is None else f'{window.median:.1f}':>8}  {note}")
            for m in behind:
                assert m.figures is not None
                why = "; ".join(m.notes) or "the consumer did not keep up"
                what = f"NOT SUSTAINABLE, {key} repeat {m.repeat}"
                out.append(f"{rate:>6}    {what:<45} {m.figures.msg_s:>28,.0f}  "
                           f"acknowledged, not a maximum: {why}")
        for key, _label in sides:
            worst = [m.figures.worst_second_p99_ms for m in ms
                     if m.side == key and m.rate == rate and m.figures is not None
                     and m.figures.worst_second_p99_ms is not None]
            if worst:
                out.append(f"{rate:>6}  {'worst 1-s p99 ms, ' + key:<34} {'':<12} "
                           f"{', '.join(f'{w:.1f}' for w in worst):>28}  (per run)")
        for key, _label in sides:
            cpu = spread(m.extra.get("worker_cpu_share") for m in ms
                         if m.side == key and m.rate == rate)
            if cpu is not None:
                out.append(f"{rate:>6}  {key + ' worker CPU (of a core)':<34} {'':<12} "
                           f"{cpu.text('{:.2f}'):>28}")
        for num, den in ratios:
            if kinds is not None and kind_of.get(num) != kind_of.get(den):
                continue
            r = spread(paired_ratios(ms, num, den, rate))
            if r is not None:
                text = f"min {r.low:.2f} median {r.median:.2f} max {r.high:.2f}"
                out.append(f"{rate:>6}  {'ratio ' + num + '/' + den:<34} "
                           f"{kind_of.get(num, ''):<12} {text:>28}")
        out.append("")
    errors = [m for m in ms if m.error]
    if errors:
        out.append("failed runs:")
        out.extend(f"  {m.side} rate={m.rate} repeat={m.repeat}: {m.error}" for m in errors)
        out.append("")
    if settings:
        out.append("settings per side:")
        for key, label in sides:
            for i, line in enumerate(settings.get(key, ())):
                out.append(f"  {label if i == 0 else '':<34} {line}")
        out.append("")
    if mismatches:
        out.append("settings the generators do not share:")
        out.extend(f"  - {s}" for s in mismatches)
    return "\n".join(out).rstrip() + "\n"
