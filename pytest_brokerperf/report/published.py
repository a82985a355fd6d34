"""The four studies' published figures as data, in each table's own layout.

``data/studies/layouts.yaml`` declares every table and figure of the studies
(:data:`STUDIES`: who published each, its title, its hardware; the cases of
:mod:`pytest_brokerperf.scenario_library.study_cases` name them by key) with its rows
and columns as the study draws them; ``data/studies/published.csv`` holds one row per
cell: study, table, row, column, value, unit and a note. A chart drawn without numbers
has cells with no value and the note "chart, no numbers published" — nothing is read off
a chart. The transcription is from the studies' texts; a reader holds a run's figures
against these (``study_source`` in a study case's record names its table). """

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

import yaml

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.shipped import DATA_DIR

__all__ = ["CHART", "FIGURES_FILE", "LAYOUTS_FILE", "STUDIES", "PublishedFigure", "Study",
           "TableLayout", "cell", "figures", "grid", "layouts", "load", "tables_of"]

STUDIES_DIR: Final = DATA_DIR / "studies"
LAYOUTS_FILE: Final = STUDIES_DIR / "layouts.yaml"
FIGURES_FILE: Final = STUDIES_DIR / "published.csv"
#: the note of a cell whose figure is drawn without numbers
CHART: Final = "chart, no numbers published"
COLUMNS: Final = ("study", "table", "row", "column", "value", "unit", "note")


@dataclass(frozen=True)
class Study:
    """A published study: who published it, its title, and the setup its figures come
    from (the hardware a reader holds our figures against)."""

    key: str
    publisher: str
    title: str
    hardware: str

    def cite(self) -> str:
        return f'{self.publisher}, "{self.title}"'


#: The four studies, by the key cases and published figures use.
STUDIES: Final[Mapping[str, Study]] = {
    "confluent": Study(
        "confluent", "Confluent",
        "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ: Which is the Fastest?",
        "3 broker instances i3en.2xlarge (8 vCPU, 64 GB, 2 x 2,500 GB NVMe SSD, 25 Gbps), "
        "4 client instances, 3 ZooKeeper instances; Kafka 2.6, Pulsar 2.6, RabbitMQ 3.8.5"),
    "streamnative": Study(
        "streamnative", "StreamNative",
        "Benchmarking Pulsar and Kafka – A More Accurate Perspective on Pulsar's "
        "Performance",
        "Confluent's testbed: 3 x i3en.2xlarge (8 vCPU, 64 GB, 2 x 2,500 GB NVMe SSD), "
        "the same instances for both systems, page cache dropped before each run; Pulsar "
        "2.6.1-sn-16"),
    "automq": Study(
        "automq", "Xiaohongshu and AutoMQ",
        "AutoMQ versus Apache Kafka 3.4 on the OpenMessaging Benchmark (tail read, "
        "catch-up read, partition reassignment)",
        "6 data nodes (2 for the reassignment), each 16 cores, 800 MB/s network, one "
        "150 MB/s cloud disk; Kafka 3.4.0 with acks=all, 3 replicas, min.insync.replicas=2"),
    "pulsar-limit": Study(
        "pulsar-limit", "pulsar-perf article",
        "Apache Pulsar performance limit test",
        "2 brokers (4 cores, 16 GB, 25 Gb network), 3 bookies (4 x 4 TB NVMe, 25 Gb "
        "network); namespace persistence 2/2/2"),
}


@dataclass(frozen=True)
class TableLayout:
    """A table or figure of a study: its rows and columns in the study's order."""

    study: str
    table: str
    title: str
    section: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    chart: bool = False
    setup: str = ""  # where the table ran on other hardware than the study's

    @property
    def hardware(self) -> str:
        """The setup the table's figures come from."""
        return self.setup or STUDIES[self.study].hardware


@dataclass(frozen=True)
class PublishedFigure:
    """One published cell. ``value`` is None when the study gives no number (a chart,
    or a cell it does not state); ``note`` says which, or qualifies the number."""

    study: str
    table: str
    row: str
    column: str
    value: float | None
    unit: str
    note: str = ""
    line: int = 0  # in published.csv

    @property
    def key(self) -> tuple[str, str]:
        return self.study, self.table


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _layouts(path: Path) -> dict[tuple[str, str], TableLayout]:
    docs = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(docs, list):
        raise ConfigError(f"{path}: expected a list of tables")
    out: dict[tuple[str, str], TableLayout] = {}
    for i, d in enumerate(docs):
        where = f"{path}: table #{i + 1}"
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: expected a mapping")
        try:
            layout = TableLayout(
                study=str(d["study"]), table=str(d["table"]), title=str(d["title"]),
                section=str(d.get("section", "")),
                rows=tuple(str(r) for r in d["rows"]),
                columns=tuple(str(c) for c in d["columns"]),
                chart=bool(d.get("chart", False)), setup=str(d.get("setup", "")))
        except KeyError as exc:
            raise ConfigError(f"{where}: missing key {exc.args[0]!r}") from None
        if layout.study not in STUDIES:
            raise ConfigError(f"{where}: unknown study {layout.study!r}; expected one of "
                              f"{', '.join(STUDIES)}")
        for what, names in (("rows", layout.rows), ("columns", layout.columns)):
            if not names or len(set(names)) != len(names):
                raise ConfigError(f"{where} ({layout.table}): {what} must be non-empty and "
                                  "distinct")
        if (layout.study, layout.table) in out:
            raise ConfigError(f"{where}: {layout.study} {layout.table!r} declared twice")
        out[(layout.study, layout.table)] = layout
    return out


def _figures(path: Path) -> list[PublishedFigure]:
    out: list[PublishedFigure] = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = tuple(next(reader, ()))
        if header != COLUMNS:
            raise ConfigError(f"{_where(path, 1)}: header {header!r}, expected {COLUMNS!r}")
        for line, cells in enumerate(reader, start=2):
            if len(cells) != len(COLUMNS):
                raise ConfigError(f"{_where(path, line)}: {len(cells)} cells, expected "
                                  f"{len(COLUMNS)} ({', '.join(COLUMNS)})")
            study, table, row, column, raw, unit, note = cells
            value: float | None = None
            if raw.strip():
                try:
                    value = float(raw)
                except ValueError:
                    raise ConfigError(f"{_where(path, line)}: value {raw!r} is not a number "
                                      "(leave it empty and say why in the note)") from None
                if not math.isfinite(value):
                    raise ConfigError(f"{_where(path, line)}: value {raw!r} is not finite")
            elif not note.strip():
                raise ConfigError(f"{_where(path, line)}: a cell without a value needs a "
                                  f"note saying why (e.g. {CHART!r})")
            out.append(PublishedFigure(study, table, row, column, value, unit, note, line))
    return out


def load(layouts_file: Path = LAYOUTS_FILE, figures_file: Path = FIGURES_FILE
         ) -> tuple[dict[tuple[str, str], TableLayout], list[PublishedFigure]]:
    """Both files, each figure checked against its table's layout: the table is
    declared, its row and column are the layout's, no cell is given twice, a chart's
    cells carry no number."""
    tables = _layouts(layouts_file)
    figs = _figures(figures_file)
    seen: set[tuple[str, str, str, str]] = set()
    for fig in figs:
        where = _where(figures_file, fig.line)
        layout = tables.get(fig.key)
        if layout is None:
            raise ConfigError(f"{where}: {fig.study} {fig.table!r} is not a table of "
                              f"{layouts_file.name}")
        if fig.row not in layout.rows:
            raise ConfigError(f"{where}: row {fig.row!r} is not a row of {fig.study} "
                              f"{fig.table!r} ({'; '.join(layout.rows)})")
        if fig.column not in layout.columns:
            raise ConfigError(f"{where}: column {fig.column!r} is not a column of "
                              f"{fig.study} {fig.table!r} ({'; '.join(layout.columns)})")
        cell = (fig.study, fig.table, fig.row, fig.column)
        if cell in seen:
            raise ConfigError(f"{where}: {fig.study} {fig.table!r} {fig.row!r} x "
                              f"{fig.column!r} is given twice")
        seen.add(cell)
        if layout.chart and CHART not in fig.note and fig.value is None:
            raise ConfigError(f"{where}: a cell of chart {fig.table!r} without a number must "
                              f"say {CHART!r}")
    return tables, figs


@lru_cache(maxsize=1)
def _shipped() -> tuple[Mapping[tuple[str, str], TableLayout], tuple[PublishedFigure, ...]]:
    tables, figs = load()
    return tables, tuple(figs)


def layouts() -> Mapping[tuple[str, str], TableLayout]:
    """The shipped layouts, by (study, table)."""
    return _shipped()[0]


def figures(study: str | None = None, table: str | None = None
            ) -> tuple[PublishedFigure, ...]:
    """The shipped figures, optionally of one study and table."""
    return tuple(f for f in _shipped()[1]
                 if (study is None or f.study == study) and (table is None or f.table == table))


def grid(study: str, table: str) -> list[list[PublishedFigure | None]]:
    """The table in its own layout: one list per row, one cell per column (None where
    the study states nothing for that cell)."""
    layout = layouts()[(study, table)]
    cells = {(f.row, f.column): f for f in figures(study, table)}
    return [[cells.get((r, c)) for c in layout.columns] for r in layout.rows]


def cell(study: str, table: str, row: str, column: str) -> PublishedFigure | None:
    """The published figure of one cell (None: the study states nothing there); a row
    or column the table does not have is a KeyError naming the table's own."""
    layout = layouts().get((study, table))
    if layout is None:
        raise KeyError(f"{study} {table!r} is not a table of {LAYOUTS_FILE.name}")
    if row not in layout.rows or column not in layout.columns:
        raise KeyError(f"{study} {table!r} has no cell {row!r} x {column!r} (rows: "
                       f"{'; '.join(layout.rows)}; columns: {'; '.join(layout.columns)})")
    return next((f for f in figures(study, table) if (f.row, f.column) == (row, column)),
                None)


def tables_of(study: str) -> tuple[TableLayout, ...]:
    """A study's tables and figures in the order the data file declares them."""
    return tuple(t for (s, _), t in layouts().items() if s == study)
