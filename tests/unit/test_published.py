"""The studies' published figures: every row loads into a declared dataclass, and every
figure lands in its table's layout (so a table round-trips into the study's rows and
columns); a bad file is refused with its file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.report import published
from pytest_brokerperf.scenario_library.study_cases import STUDIES


def test_every_row_loads_into_a_figure() -> None:
    rows = published.FIGURES_FILE.read_text(encoding="utf-8").splitlines()
    figs = published.figures()
    assert len(figs) == len(rows) - 1  # one figure per data row, header excluded
    assert all(isinstance(f, published.PublishedFigure) for f in figs)
    assert all(f.value is not None or f.note for f in figs)


def test_every_figure_round_trips_into_its_tables_layout() -> None:
    tables = published.layouts()
    for fig in published.figures():
        layout = tables[fig.key]
        assert fig.row in layout.rows and fig.column in layout.columns, fig
        i, j = layout.rows.index(fig.row), layout.columns.index(fig.column)
        assert published.grid(fig.study, fig.table)[i][j] == fig


def test_every_study_and_every_declared_table_has_figures() -> None:
    tables = published.layouts()
    assert {s for s, _ in tables} == set(STUDIES)
    for key, layout in tables.items():
        figs = published.figures(*key)
        assert figs, key
        assert layout.hardware  # the study's setup, or the table's own
        if layout.chart:  # a chart without numbers says so rather than guess
            assert any(published.CHART in f.note for f in figs), key


@pytest.mark.parametrize(("study", "table", "row", "column", "value", "unit"), [
    ("confluent", "summary", "peak throughput", "Kafka", 605.0, "MB/s"),
    ("confluent", "pulsar deployment", "tiered", "peak producer throughput", 305.73, "MB/s"),
    ("streamnative", "table 1", "publish and tailing read / level 2 / 100 partitions",
     "Pulsar", 605.0, "MB/s"),
    ("streamnative", "table 2", "10 subscriptions / level 1 (local sync, Ack-2)", "Kafka",
     1599.79, "ms"),
    ("streamnative", "table 3", "level 2 (local async, Ack-2) / 10000 partitions", "Kafka",
     200793.0, "ms"),
    ("streamnative", "table 4", "level 2 (local async, Ack-2)", "Pulsar", 35.51, "ms"),
    ("automq", "section 3.1", "extreme throughput", "AutoMQ throughput", 870.0, "MB/s"),
    ("automq", "section 3.3", "move duration", "Apache Kafka", 900.0, "s"),
    ("pulsar-limit", "results table", "async 1 KB", "max rate", 1060184.0, "msg/s"),
])
def test_transcribed_cells(study: str, table: str, row: str, column: str, value: float,
                           unit: str) -> None:
    (fig,) = [f for f in published.figures(study, table) if (f.row, f.column) == (row, column)]
    assert (fig.value, fig.unit) == (value, unit)


def test_confluent_figure_14_is_a_chart_without_numbers() -> None:
    figs = published.figures("confluent", "figure 14")
    assert len(figs) == 8 and all(f.value is None and published.CHART in f.note for f in figs)


def _files(tmp_path: Path, csv_rows: list[str]) -> tuple[Path, Path]:
    layouts = tmp_path / "layouts.yaml"
    layouts.write_text("- study: confluent\n  table: t\n  title: T\n  rows: [a, b]\n"
                       "  columns: [x]\n")
    figures = tmp_path / "published.csv"
    figures.write_text("\n".join(["study,table,row,column,value,unit,note", *csv_rows]) + "\n")
    return layouts, figures


@pytest.mark.parametrize(("row", "words"), [
    ("confluent,t,c,x,1,ms,", "published.csv:2: row 'c' is not a row of confluent 't'"),
    ("confluent,t,a,y,1,ms,", "column 'y' is not a column"),
    ("confluent,u,a,x,1,ms,", "confluent 'u' is not a table of layouts.yaml"),
    ("confluent,t,a,x,fast,ms,", "value 'fast' is not a number"),
    ("confluent,t,a,x,,ms,", "needs a note saying why"),
    ("confluent,t,a,x,1,ms", "6 cells, expected 7"),
])
def test_a_bad_figure_is_refused_with_its_line(tmp_path: Path, row: str, words: str) -> None:
    layouts, figures = _files(tmp_path, [row])
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        published.load(layouts, figures)


def test_a_cell_given_twice_is_refused(tmp_path: Path) -> None:
    layouts, figures = _files(tmp_path, ["confluent,t,a,x,1,ms,", "confluent,t,a,x,2,ms,"])
    with pytest.raises(ConfigError, match=r"published\.csv:3: .* is given twice"):
        published.load(layouts, figures)
    layouts, figures = _files(tmp_path, ["confluent,t,a,x,1,ms,", "confluent,t,b,x,,ms,chart"])
    tables, figs = published.load(layouts, figures)
    assert [f.value for f in figs] == [1.0, None] and tables[("confluent", "t")].rows == ("a", "b")
