"""The terminal summary: the table of finished scenario runs, ladders and catch-ups.

Standard library only: the plugin imports this module at load time. The rows come from
:mod:`pytest_brokerperf.results.summary_rows` (the scenarios fill them in); numbers are formatted
as the progress lines do (:mod:`pytest_brokerperf.scenario_library.progress`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.plugin.stash import LADDER_ROWS_KEY, SETTINGS_KEY
from pytest_brokerperf.results.summary_rows import CatchupFigures, LadderRow, SummaryRow
from pytest_brokerperf.scenario_library.progress import (
    NA,
    format_mib,
    format_ms,
    format_msg_rate,
    format_progress,
    format_progress_line,
)

if TYPE_CHECKING:
    import pytest

__all__ = [
    "CatchupFigures",
    "LadderRow",
    "SummaryRow",
    "format_catchup_table",
    "format_ladder_table",
    "format_ms",
    "format_progress",
    "format_progress_line",
    "format_table",
    "write_summary",
]

TOPOLOGY_MARK = "[topology check]"


def format_ladder_table(rows: Sequence[LadderRow], width: int | None = None) -> list[str]:
    """The throughput ladders: one line per ladder, after a header."""
    head = ("test", "broker", "mode", "rungs", "max sustainable msg/s", "MiB/s", "limit",
            "at msg/s", "knee msg/s", "worker cpu", "verdict")
    cells = [
        (r.nodeid.rsplit("/", 1)[-1], r.broker, r.mode, r.rungs, format_msg_rate(r.highest),
         format_mib(r.highest_mib_s), r.limit, format_msg_rate(r.limit_rate),
         format_msg_rate(r.knee), NA if r.cpu_top is None else f"{r.cpu_top:.0%}", r.verdict)
        for r in rows
    ]
    return _plain_table(head, cells, {4, 5, 7, 8, 9}, width)


def format_catchup_table(rows: Sequence[SummaryRow], width: int | None = None) -> list[str]:
    """The catch-up runs' own figures: backlog, build and drain times, catch-up rate and
    where the drained bytes came from (the page cache or the disk)."""
    head = ("test", "backlog MiB", "build s", "drain s", "catch-up msg/s", "MiB/s", "cache")
    cells = [
        (_test_name(r), format_mib(c.backlog_bytes / 1024**2), f"{c.build_s:.1f}",
         "not done" if c.drain_s is None else f"{c.drain_s:.1f}", format_msg_rate(c.rate_msg_s),
         format_mib(c.mib_s), c.cache)
        for r in rows if (c := r.catchup) is not None
    ]
    return _plain_table(head, cells, {1, 2, 3, 4, 5}, width)


def _plain_table(head: Sequence[str], cells: Sequence[Sequence[str]], right: set[int],
                 width: int | None) -> list[str]:
    """A header and rows; wider than ``width``, each row's first cell (the test) goes on
    a line of its own above the rest, and what is still too wide is cut with "…"."""
    lines = _plain_lines(head, cells, right, names=False)
    if width is None or _fits(lines, width):
        return lines
    return [_clip(line, width) for line in _plain_lines(head, cells, right, names=True)]


def _plain_lines(head: Sequence[str], cells: Sequence[Sequence[str]], right: set[int], *,
                 names: bool) -> list[str]:
    first = 1 if names else 0
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]

    def render(values: Sequence[str]) -> str:
        parts = [v.rjust(widths[i]) if i in right else v.ljust(widths[i])
                 for i, v in enumerate(values) if i >= first]
        return ((_INDENT if names else "") + _SEP.join(parts)).rstrip()

    lines = [render(head)]
    for c in cells:
        if names:
            lines.append(c[0])
        lines.append(render(c))
    return lines


# --------------------------------------------------------------------------- table


@dataclass(frozen=True)
class _Column:
    title: str
    cell: Callable[[SummaryRow], str]
    right: bool = False  # numbers are right-aligned
    group: str = ""  # a label spanning adjacent columns of the same group
    short: str = ""  # the title in the compact layout (a narrow terminal), if shorter


def _test_name(row: SummaryRow) -> str:
    # "scenarios/test_tailread.py::test_tailread[kafka]" -> "test_tailread.py::test_..."
    return row.nodeid.rsplit("/", 1)[-1]


_PUB, _E2E = "publish response ms", "e2e response ms"

_COLUMNS: tuple[_Column, ...] = (
    _Column("test", _test_name),
    _Column("broker", lambda r: r.broker),
    _Column("scenario", lambda r: r.scenario),
    _Column("params", lambda r: r.params),
    _Column("ack msg/s", lambda r: format_msg_rate(r.ack_rate), right=True, short="msg/s"),
    _Column("MiB/s", lambda r: format_mib(r.mib_s), right=True),
    _Column("p50", lambda r: format_ms(r.pub_p50), True, _PUB),
    _Column("p99", lambda r: format_ms(r.pub_p99), True, _PUB),
    _Column("p99.9", lambda r: format_ms(r.pub_p999), True, _PUB),
    _Column("p50", lambda r: format_ms(r.e2e_p50), True, _E2E),
    _Column("p99", lambda r: format_ms(r.e2e_p99), True, _E2E),
    _Column("p99.9", lambda r: format_ms(r.e2e_p999), True, _E2E),
    _Column("verdict", lambda r: r.verdict + (f" {TOPOLOGY_MARK}" if r.topology_check else "")),
    _Column("SLO", lambda r: r.slo),
)
#: shown only when a baseline gate ran (--brokerperf-fail-on)
_BASELINE_COLUMN = _Column("vs baseline", lambda r: r.baseline)


def _columns(rows: Sequence[SummaryRow]) -> tuple[_Column, ...]:
    if any(r.baseline != "-" for r in rows):
        return (*_COLUMNS, _BASELINE_COLUMN)
    return _COLUMNS


#: Group labels in the compact layout.
_SHORT_GROUPS = {_PUB: "publish ms", _E2E: "e2e ms"}

_SEP = "  "
_INDENT = "  "  # rows under their test's name, in the layouts for narrow terminals


def format_table(rows: Sequence[SummaryRow], width: int | None = None) -> list[str]:
    """The summary table as lines: a group header, a column header, one line per row.

    ``width``: the terminal's columns. A table wider than that puts each test's name on
    a line of its own above its row, then shortens titles and group labels, then moves
    the parameters, and then the verdict and SLO before them, onto the name's line; a
    line still too wide (a very narrow terminal) is cut with "…", parameters first (they
    are in the record; an SLO failure is in the test's report).
    """
    everything = _columns(rows)  # with "vs baseline" when a gate ran
    lines = _render(rows, everything, compact=False)
    if width is None or _fits(lines, width):
        return lines
    def moved(*titles: str) -> tuple[list[_Column], list[_Column]]:
        by_title = {c.title: c for c in everything}  # in the order given: a cut takes the last
        return ([c for c in everything[1:] if c.title not in titles],
                [by_title[t] for t in titles])

    for (columns, on_name_line), compact in (((everything[1:], []), False),
                                             ((everything[1:], []), True),
                                             (moved("params"), True),
                                             (moved("verdict", "SLO", "params"), True)):
        lines = _render(rows, columns, compact=compact, names=True, name_extra=on_name_line)
        if _fits(lines, width):
            return lines
    return [_clip(line, width) for line in lines]


def _fits(lines: Sequence[str], width: int) -> bool:
    return all(len(line) <= width for line in lines)


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[:max(width - 1, 0)] + "…"


def _render(rows: Sequence[SummaryRow], columns: Sequence[_Column], *, compact: bool,
            names: bool = False, name_extra: Sequence[_Column] = ()) -> list[str]:
    """The table with ``columns``; ``names``: each row under a line with its test's name
    (and the cells of ``name_extra`` after it)."""
    titles = [(c.short or c.title) if compact else c.title for c in columns]
    groups = [(_SHORT_GROUPS.get(c.group, c.group) if compact else c.group) for c in columns]
    cells = [[col.cell(row) for col in columns] for row in rows]
    widths = [max([len(t), *(len(r[i]) for r in cells)]) for i, t in enumerate(titles)]
    # A group label is drawn as "-- label --" over its columns; widen the group's
    # columns evenly when the label needs more room than they give it.
    spans: dict[str, list[int]] = {}
    for i, label in enumerate(groups):
        if label:
            spans.setdefault(label, []).append(i)
    for label, idx in spans.items():
        span = sum(widths[i] for i in idx) + len(_SEP) * (len(idx) - 1)
        extra = max(0, len(label) + 6 - span)
        for k, i in enumerate(idx):
            widths[i] += extra // len(idx) + (1 if k < extra % len(idx) else 0)
    aligns = [c.right for c in columns]
    indent = _INDENT if names else ""

    def render(values: Iterable[str]) -> str:
        parts = [v.rjust(w) if r else v.ljust(w)
                 for v, w, r in zip(values, widths, aligns, strict=True)]
        return (indent + _SEP.join(parts)).rstrip()

    group_line: list[str] = []
    i = 0
    while i < len(columns):
        label = groups[i]
        if not label:
            group_line.append(" " * widths[i])
            i += 1
            continue
        idx = spans[label]
        span = sum(widths[j] for j in idx) + len(_SEP) * (len(idx) - 1)
        group_line.append(f" {label} ".center(span, "-"))
        i = idx[-1] + 1
    lines = [(indent + _SEP.join(group_line)).rstrip(), render(titles)]
    for row, values in zip(rows, cells, strict=True):
        if names:
            lines.append(_SEP.join([_test_name(row), *(c.cell(row) for c in name_extra)]))
        lines.append(render(values))
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


def _terminal_width(tr: pytest.TerminalReporter) -> int | None:
    """The terminal's columns (``COLUMNS`` wins), None when the output is no terminal
    (a CI log or a pipe: rows stay whole lines there, to be read and grepped)."""
    tw = tr.config.get_terminal_writer()
    stream = getattr(tw, "_file", None)
    try:
        tty = bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        tty = False
    return tw.fullwidth if tty or os.environ.get("COLUMNS", "").strip() else None


def write_summary(terminalreporter: pytest.TerminalReporter, rows: Sequence[SummaryRow]) -> None:
    """Write the "brokerperf summary" section: the table and where results went, fitted
    to the terminal's width as pytest's own lines are."""

    tr = terminalreporter
    width = _terminal_width(tr)
    tr.section("brokerperf summary")
    for line in format_table(rows, width):
        tr.write_line(line)
    tr.write_line(_tally(rows))

    if any(r.catchup is not None for r in rows):
        tr.write_line("")
        tr.write_line("catch-up (backlog built with consumers paused, then drained):")
        for line in format_catchup_table(rows, width):
            tr.write_line(line)
    ladders = tr.config.stash.get(LADDER_ROWS_KEY, [])
    if ladders:
        tr.write_line("")
        tr.write_line("throughput (rungs: + sustainable, x not sustainable, - refused):")
        for line in format_ladder_table(ladders, width):
            tr.write_line(line)
    if any(r.topology_check for r in rows):
        tr.write_line(f"{TOPOLOGY_MARK}: several broker nodes share this one machine; a "
                      "functional check of replication, not a performance figure")
    settings = tr.config.stash.get(SETTINGS_KEY, None)
    if settings is not None:
        cwd = Path(tr.config.invocation_params.dir)
        tr.write_line(f"results written to {_display_path(settings.run_dir, cwd)}")

