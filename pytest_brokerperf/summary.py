"""The terminal summary table and the live progress lines of scenario runs.

Standard library only: the plugin imports this module at load time. Latencies arrive
in microseconds and are shown in milliseconds; ``None`` (no samples, or too few for
the percentile) is shown as ``n/a``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf._stash import LADDER_ROWS_KEY, SETTINGS_KEY

if TYPE_CHECKING:
    import pytest

__all__ = [
    "LadderRow",
    "SummaryRow",
    "format_ladder_table",
    "format_ms",
    "format_progress",
    "format_progress_line",
    "format_table",
    "write_summary",
]

NA = "n/a"
TOPOLOGY_MARK = "[topology check]"


@dataclass
class SummaryRow:
    """One finished scenario run, as the terminal summary shows it.

    Rates in msg/s and MiB/s, latencies in µs (``None`` = n/a). ``verdict`` is the
    validity verdict (``valid``, ``generator-bound``, ...); ``slo`` is ``"pass"``,
    ``"FAIL: <metric>, ..."``, ``"inconclusive"`` or ``"-"`` (no SLO applied).
    """

    nodeid: str
    broker: str
    scenario: str
    params: str  # short, e.g. "p=4 size=1KiB rate=1k"
    ack_rate: float | None  # acknowledged msg/s in the measured window
    mib_s: float | None  # published MiB/s in the measured window
    pub_p50: float | None  # publish response time (intended send -> ack), µs
    pub_p99: float | None
    pub_p999: float | None
    e2e_p50: float | None  # end-to-end response time (intended send -> receive), µs
    e2e_p99: float | None
    e2e_p999: float | None
    verdict: str
    slo: str
    topology_check: bool = False  # several broker nodes on this one machine
    #: against a baseline (--brokerperf-fail-on): "-" (no gate), "pass",
    #: "REGRESSION: <metric>, ..." or "inconclusive"; a column only when a gate ran
    baseline: str = "-"


@dataclass
class LadderRow:
    """One throughput ladder in the summary: its rungs, highest sustainable rate, limit."""

    nodeid: str
    broker: str
    mode: str  # ladder | omb-rate-discovery
    rungs: str  # "+1k +5k x50k": + sustainable, x not sustainable, - refused
    highest: float | None  # highest sustainable msg/s
    highest_mib_s: float | None
    limit: str  # generator | client-library | broker-backpressure | not reached at R
    limit_rate: float | None  # the first rung that failed
    knee: float | None
    cpu_top: float | None  # busiest worker's CPU share at the highest sustainable rung
    verdict: str


def format_ladder_table(rows: Sequence[LadderRow]) -> list[str]:
    """The throughput ladders: one line per ladder, after a header."""
    head = ("test", "broker", "mode", "rungs", "max sustainable msg/s", "MiB/s", "limit",
            "at msg/s", "knee msg/s", "worker cpu", "verdict")
    cells = [
        (r.nodeid.rsplit("/", 1)[-1], r.broker, r.mode, r.rungs, _format_rate(r.highest),
         _format_mib(r.highest_mib_s), r.limit, _format_rate(r.limit_rate),
         _format_rate(r.knee), NA if r.cpu_top is None else f"{r.cpu_top:.0%}", r.verdict)
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    right = {4, 5, 7, 8, 9}

    def render(values: Sequence[str]) -> str:
        return _SEP.join(v.rjust(w) if i in right else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    return [render(head), *(render(c) for c in cells)]


# --------------------------------------------------------------------------- numbers


def format_ms(us: float | None) -> str:
    """µs → ms with about three significant digits: 0.412, 3.41, 25.3, 1,204."""
    if us is None:
        return NA
    ms = us / 1000.0
    if ms < 1:
        return f"{ms:.3f}"
    if ms < 10:
        return f"{ms:.2f}"
    if ms < 100:
        return f"{ms:.1f}"
    return f"{ms:,.0f}"


def _format_rate(rate: float | None) -> str:
    return NA if rate is None else f"{rate:,.0f}"


def _format_mib(mib: float | None) -> str:
    if mib is None:
        return NA
    if mib < 10:
        return f"{mib:.2f}"
    if mib < 100:
        return f"{mib:.1f}"
    return f"{mib:,.0f}"


# --------------------------------------------------------------------------- table


@dataclass(frozen=True)
class _Column:
    title: str
    cell: Callable[[SummaryRow], str]
    right: bool = False  # numbers are right-aligned
    group: str = ""  # a label spanning adjacent columns of the same group


def _test_name(row: SummaryRow) -> str:
    # "scenarios/test_tailread.py::test_tailread[kafka]" -> "test_tailread.py::test_..."
    return row.nodeid.rsplit("/", 1)[-1]


_COLUMNS: tuple[_Column, ...] = (
    _Column("test", _test_name),
    _Column("broker", lambda r: r.broker),
    _Column("scenario", lambda r: r.scenario),
    _Column("params", lambda r: r.params),
    _Column("ack msg/s", lambda r: _format_rate(r.ack_rate), right=True),
    _Column("MiB/s", lambda r: _format_mib(r.mib_s), right=True),
    _Column("p50", lambda r: format_ms(r.pub_p50), True, "publish response ms"),
    _Column("p99", lambda r: format_ms(r.pub_p99), True, "publish response ms"),
    _Column("p99.9", lambda r: format_ms(r.pub_p999), True, "publish response ms"),
    _Column("p50", lambda r: format_ms(r.e2e_p50), True, "e2e response ms"),
    _Column("p99", lambda r: format_ms(r.e2e_p99), True, "e2e response ms"),
    _Column("p99.9", lambda r: format_ms(r.e2e_p999), True, "e2e response ms"),
    _Column("verdict", lambda r: r.verdict + (f" {TOPOLOGY_MARK}" if r.topology_check else "")),
    _Column("SLO", lambda r: r.slo),
)
#: shown only when a baseline gate ran (--brokerperf-fail-on)
_BASELINE_COLUMN = _Column("vs baseline", lambda r: r.baseline)


def _columns(rows: Sequence[SummaryRow]) -> tuple[_Column, ...]:
    if any(r.baseline != "-" for r in rows):
        return (*_COLUMNS, _BASELINE_COLUMN)
    return _COLUMNS

_SEP = "  "


def format_table(rows: Sequence[SummaryRow]) -> list[str]:
    """The summary table as lines: a group header, a column header, one line per row."""
    columns = _columns(rows)
    cells = [[col.cell(row) for col in columns] for row in rows]
    widths = [
        max([len(col.title), *(len(r[i]) for r in cells)]) for i, col in enumerate(columns)
    ]
    # A group label is drawn as "-- label --" over its columns; widen the group's
    # columns evenly when the label needs more room than they give it.
    spans: dict[str, list[int]] = {}
    for i, col in enumerate(columns):
        if col.group:
            spans.setdefault(col.group, []).append(i)
    for label, idx in spans.items():
        span = sum(widths[i] for i in idx) + len(_SEP) * (len(idx) - 1)
        needed = len(label) + 6
        extra = max(0, needed - span)
        for k, i in enumerate(idx):
            widths[i] += extra // len(idx) + (1 if k < extra % len(idx) else 0)

    def render(values: Iterable[str], right: Sequence[bool]) -> str:
        parts = [
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ]
        return _SEP.join(parts).rstrip()

    aligns = [c.right for c in columns]
    group_line: list[str] = []
    i = 0
    while i < len(columns):
        label = columns[i].group
        if not label:
            group_line.append(" " * widths[i])
            i += 1
            continue
        idx = spans[label]
        span = sum(widths[j] for j in idx) + len(_SEP) * (len(idx) - 1)
        group_line.append(f" {label} ".center(span, "-"))
        i = idx[-1] + 1
    lines = [_SEP.join(group_line).rstrip()]
    lines.append(render([c.title for c in columns], aligns))
    lines.extend(render(r, aligns) for r in cells)
    return lines


def _display_path(path: Path, cwd: Path | None = None) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else absolute."""
    base = cwd if cwd is not None else Path.cwd()
    return os.path.relpath(path, base) if path.is_relative_to(base) else str(path)


def _tally(rows: Sequence[SummaryRow]) -> str:
    valid = sum(1 for r in rows if r.verdict == "valid")
    failed = sum(1 for r in rows if r.slo.startswith("FAIL"))
    inconclusive = sum(1 for r in rows if r.slo == "inconclusive")
    runs = f"{len(rows)} scenario run{'s' if len(rows) != 1 else ''}"
    text = (
        f"{runs}: {valid} valid, {len(rows) - valid} with an invalid measurement; "
        f"SLO failed in {failed}, inconclusive in {inconclusive}"
    )
    gated = [r for r in rows if r.baseline != "-"]
    if gated:  # the baseline's findings, counted apart from the budgets'
        regressed = sum(1 for r in gated if r.baseline.startswith("REGRESSION"))
        unjudged = sum(1 for r in gated if r.baseline == "inconclusive")
        text += f"; regression against the baseline in {regressed}, not judged in {unjudged}"
    return text


def write_summary(terminalreporter: pytest.TerminalReporter, rows: Sequence[SummaryRow]) -> None:
    """Write the "brokerperf summary" section: the table and where results went."""

    tr = terminalreporter
    tr.section("brokerperf summary")
    for line in format_table(rows):
        tr.write_line(line)
    tr.write_line(_tally(rows))

    ladders = tr.config.stash.get(LADDER_ROWS_KEY, [])
    if ladders:
        tr.write_line("")
        tr.write_line("throughput (rungs: + sustainable, x not sustainable, - refused):")
        for line in format_ladder_table(ladders):
            tr.write_line(line)
    if any(r.topology_check for r in rows):
        tr.write_line(f"{TOPOLOGY_MARK}: several broker nodes share this one machine; a "
                      "functional check of replication, not a performance figure")
    settings = tr.config.stash.get(SETTINGS_KEY, None)
    if settings is not None:
        cwd = Path(tr.config.invocation_params.dir)
        tr.write_line(f"results written to {_display_path(settings.run_dir, cwd)}")


# --------------------------------------------------------------------------- progress


class _Period(Protocol):
    """What :func:`format_progress` reads from a period (``metrics.stats.PeriodStats``)."""

    @property
    def index(self) -> int: ...
    @property
    def phase(self) -> str: ...
    @property
    def target_rate(self) -> float: ...
    @property
    def publish_rate(self) -> float: ...
    @property
    def consume_rate(self) -> float: ...
    @property
    def publish_mib_s(self) -> float: ...
    @property
    def backlog(self) -> int: ...
    @property
    def histograms(self) -> Mapping[str, Any]: ...


def format_progress_line(
    period_index: int,
    phase: str,
    *,
    target_rate: float | None = None,
    publish_rate: float | None = None,
    consume_rate: float | None = None,
    mib_s: float | None = None,
    publish_response_p99_us: float | None = None,
    e2e_response_p99_us: float | None = None,
    backlog: int | None = None,
    label: str = "",
) -> str:
    """One live progress line, e.g.::

        brokerperf: kafka tailread #  7 measure  sent 1,000/s (target 1,000)  recv 1,000/s
        0.98 MiB/s  p99 publish 3.41 ms  e2e 5.02 ms  backlog 12

    (on one line). Rates in msg/s, latencies in µs (shown in ms), ``None`` → n/a.
    """
    head = f"brokerperf: {label + ' ' if label else ''}#{period_index:>3} {phase:<7}"
    sent = f"sent {_format_rate(publish_rate)}/s"
    if target_rate:
        sent += f" (target {_format_rate(target_rate)})"
    parts = [
        head,
        sent,
        f"recv {_format_rate(consume_rate)}/s",
        f"{_format_mib(mib_s)} MiB/s",
        f"p99 publish {format_ms(publish_response_p99_us)} ms"
        f"  e2e {format_ms(e2e_response_p99_us)} ms",
    ]
    if backlog is not None:
        parts.append(f"backlog {backlog:,}")
    return "  ".join(parts)


def _p99(period: _Period, metric: str) -> float | None:
    hist = period.histograms.get(metric)
    if hist is None:
        return None
    try:
        value = hist.percentile(99)
    except Exception:  # a progress line must never break a run
        return None
    return None if value is None else float(value)


def format_progress(broker: str, scenario: str, period: _Period) -> str:
    """The progress line of one stats period of ``broker``/``scenario`` (response p99s)."""
    return format_progress_line(
        period.index,
        period.phase,
        target_rate=period.target_rate,
        publish_rate=period.publish_rate,
        consume_rate=period.consume_rate,
        mib_s=period.publish_mib_s,
        publish_response_p99_us=_p99(period, "publish_response"),
        e2e_response_p99_us=_p99(period, "e2e_response"),
        backlog=period.backlog,
        label=f"{broker} {scenario}",
    )
