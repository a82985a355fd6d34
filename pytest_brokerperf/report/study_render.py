"""The report's "Studies" section: each study table in its own layout, in Markdown and
HTML, each cell with the published figure, ours, their ratio, our verdict and the
profile's scaling (long texts as numbered notes under the table), and the study's
charts on their own axes with both series (:func:`.charts.study_chart`)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from pytest_brokerperf.report.model import CellKey
from pytest_brokerperf.report.series import RunSeries
from pytest_brokerperf.report.studies import Ours, StudyCell, StudySection, StudyTable

__all__ = ["studies_html", "studies_markdown"]

#: AutoMQ's timelines: the tables whose runs' series are drawn over time.
TIMELINES: Mapping[tuple[str, str], str] = {
    ("automq", "section 3.2"): "catch-up read: send rate and latency while the backlog "
    "drains (the study's timeline)",
    ("automq", "section 3.3"): "partition reassignment: send rate and latency around the "
    "move (the study's timeline)",
}
TIMELINE_COLUMNS = (("publish_rate_msg_s", "publish rate (msg/s)", 1.0, False),
                    ("consume_rate_msg_s", "consume rate (msg/s)", 1.0, False),
                    ("publish_latency_p99_us", "publish latency p99 (ms)", 1000.0, True))


def fmt(v: float | None) -> str:
    """A figure as a table shows it: 605, 5.86, 0.0032."""
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


class _Notes:
    """Numbered notes under a table; the same text gets the same number."""

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}

    def ref(self, text: str) -> str:
        n = self.texts.setdefault(text, len(self.texts) + 1)
        return f"[{n}]"


def _ours_text(o: Ours, cell: StudyCell, notes: _Notes, many: bool) -> str:
    where = f"{o.key.broker} {o.key.durability}: " if many else ""
    verdict = f"{o.status} {o.valid}/{o.records}"
    ratio = o.ratio(cell.published)
    parts = [f"{where}ours {fmt(o.value)} {o.unit}" if o.value is not None
             else f"{where}ours n/a"]
    if ratio is not None:
        parts.append(f"×{fmt(ratio)}")
    parts.append(verdict)
    detail = (f"{o.key.broker} {o.key.durability}, case {o.case}: {o.metric}; "
              f"{o.scaling}")
    return " · ".join(parts) + " " + notes.ref(detail)


def _published_text(cell: StudyCell, notes: _Notes) -> str:
    pub = cell.published
    if pub is None:
        return "published: not stated"
    if pub.value is None:
        return f"published — {notes.ref(pub.note)}"
    if pub.value == int(pub.value):  # as transcribed: 605, 18.75, 1,599.79
        return (f"published {int(pub.value):,} {pub.unit}"
                + (f" {notes.ref(pub.note)}" if pub.note else ""))
    note = f" {notes.ref(pub.note)}" if pub.note else ""
    return f"published {pub.value:,} {pub.unit}{note}"


def cell_lines(cell: StudyCell, notes: _Notes) -> list[str]:
    """A cell's lines: the published figure, then each of ours (or why none)."""
    lines = [_published_text(cell, notes)]
    if not cell.ours:
        lines.append(f"ours — {notes.ref(cell.reason)}")
    many = len(cell.ours) > 1
    lines += [_ours_text(o, cell, notes, many) for o in cell.ours]
    return lines


def _header_md(section: StudySection) -> list[str]:
    s = section.study
    run = ("; ".join(u.text() for u in section.setups) if section.setups
           else "no record of this study in the input")
    prof = ", ".join(section.profiles) or "-"
    return [f"### {s.publisher}: \"{s.title}\"", "",
            f"Run it: `{section.command}`", "",
            "| set-up | |", "|---|---|",
            f"| the study's | {_md(s.hardware)} |",
            f"| this run's | {_md(run)} (profile {prof}) |", ""]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_md(t: StudyTable) -> list[str]:
    lay = t.layout
    notes = _Notes()
    out = [f"#### {lay.study} {lay.table}: {_md(lay.title)}", ""]
    if lay.setup:
        out += [f"The study's set-up for this table: {_md(lay.setup)}.", ""]
    out += ["| | " + " | ".join(_md(c) for c in lay.columns) + " |",
            "|---|" + "---|" * len(lay.columns)]
    for row in t.rows:
        cells = ["<br>".join(_md(x) for x in cell_lines(c, notes)) for c in row]
        out.append(f"| {_md(row[0].row)} | " + " | ".join(cells) + " |")
    out.append("")
    out += [f"{n}. {_md(text)}" for text, n in notes.texts.items()]
    out.append("")
    return out


def studies_markdown(sections: Sequence[StudySection]) -> list[str]:
    """The Markdown "Studies" section (empty list: no study asked for or present)."""
    if not sections:
        return []
    out = ["## Studies", "",
           "Each study table in its own rows and columns: the published figure, ours (in "
           "the published unit; MB/s as OMB prints it, 2^20 bytes/s), ours ÷ published, "
           "our verdict (valid/records) and, in the numbered notes, the case, the figure "
           "and what the profile scaled. A cell this run did not fill says why.", ""]
    for section in sections:
        out += _header_md(section)
        for t in section.tables:
            out += _table_md(t)
    return out


# --------------------------------------------------------------------------- html


def _chart(t: StudyTable) -> str | None:
    """The study's chart on its own axes: x its rows, one series per column."""
    from pytest_brokerperf.report.charts import study_chart

    lay = t.layout
    if not lay.chart or len(lay.rows) < 2 or not t.filled:
        return None
    first = next(o for row in t.rows for c in row for o in c.ours)
    ours = {col: [next((o.value for o in row[j].ours if o.value is not None), None)
                  for row in t.rows] for j, col in enumerate(lay.columns)}
    def published(cell: StudyCell) -> float | None:
        p = cell.published
        return p.value if p is not None and p.unit == first.unit else None

    pub = {col: [published(row[j]) for row in t.rows] for j, col in enumerate(lay.columns)}
    return study_chart(list(lay.rows), f"{first.metric} ({first.unit})", ours, pub)


def _timelines(t: StudyTable, series: Mapping[CellKey, RunSeries]) -> list[str]:
    from pytest_brokerperf.report.charts import time_chart

    what = TIMELINES.get((t.layout.study, t.layout.table))
    keys = sorted({o.key for row in t.rows for c in row for o in c.ours})
    runs = [series[k] for k in keys if k in series and series[k].periods]
    if what is None or not runs:
        return []
    out = []
    for column, ylabel, divisor, log in TIMELINE_COLUMNS:
        svg = time_chart(column, ylabel, runs, divisor=divisor, log=log)
        if svg:
            out.append(f"<figure data-chart='study-timeline' data-column='{column}'>{svg}"
                       f"<figcaption>{html.escape(what)}: ours ({html.escape(ylabel)}); the "
                       "study's timeline has no numbers (its text is in the table)"
                       "</figcaption></figure>")
    return out


def _table_html(t: StudyTable, series: Mapping[CellKey, RunSeries]) -> list[str]:
    lay = t.layout
    notes = _Notes()
    out = [f"<h3 data-study-table='{html.escape(lay.study)}/{html.escape(lay.table)}'>"
           f"{html.escape(lay.study)} {html.escape(lay.table)}: {html.escape(lay.title)}</h3>"]
    if lay.setup:
        out.append(f"<p>The study's set-up for this table: {html.escape(lay.setup)}.</p>")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in lay.columns)
    rows = [f"<table class='study'><tr><th></th>{head}</tr>"]
    for row in t.rows:
        tds = []
        for c in row:
            cls = "filled" if any(o.value is not None for o in c.ours) else "empty"
            tds.append(f"<td class='{cls}'>"
                       + "<br>".join(html.escape(x) for x in cell_lines(c, notes)) + "</td>")
        rows.append(f"<tr><th>{html.escape(row[0].row)}</th>{''.join(tds)}</tr>")
    rows.append("</table>")
    out += rows
    out.append("<ol class='notes'>" + "".join(f"<li>{html.escape(text)}</li>"
                                             for text in notes.texts) + "</ol>")
    svg = _chart(t)
    if svg:
        out.append(f"<figure data-chart='study'>{svg}<figcaption>{html.escape(lay.table)} on "
                   "the study's axes: ours solid, published dashed (none where the study "
                   "gives the chart without numbers)</figcaption></figure>")
    out += _timelines(t, series)
    return out


def studies_html(sections: Sequence[StudySection],
                 series: Mapping[CellKey, RunSeries]) -> list[str]:
    """The HTML "Studies" section (empty list: no study asked for or present)."""
    if not sections:
        return []
    out = ["<h2 id='studies'>Studies</h2>",
           "<p>Each study table in its own rows and columns: the published figure, ours "
           "(in the published unit; MB/s as OMB prints it, 2<sup>20</sup> bytes/s), ours ÷ "
           "published, our verdict (valid/records) and, in the numbered notes, the case, "
           "the figure and what the profile scaled. A cell this run did not fill says why."
           "</p>"]
    for section in sections:
        s = section.study
        run = ("; ".join(u.text() for u in section.setups) if section.setups
               else "no record of this study in the input")
        out += [f"<h2>{html.escape(s.publisher)}: “{html.escape(s.title)}”</h2>",
                f"<p>Run it: <code>{html.escape(section.command)}</code></p>",
                "<table class='setup'>"
                f"<tr><th>the study's set-up</th><td>{html.escape(s.hardware)}</td></tr>"
                f"<tr><th>this run's</th><td>{html.escape(run)} (profile "
                f"{html.escape(', '.join(section.profiles) or '-')})</td></tr></table>"]
        for t in section.tables:
            out += _table_html(t, series)
    return out
