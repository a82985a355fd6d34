"""Per-period series and scenario blocks of one record per matrix cell, for the charts.

The HTML report draws rates and latency over time (OpenMessaging Benchmark's chart set:
publish rate, consume rate, publish and end-to-end latency per stats period), the
before/during bars of the catch-up, mixed and reassignment scenarios, and fault
timelines. Those figures are per run, not pooled: for every cell the report picks one
record — the latest valid one (by ``end_time``, then run id and attempt), else the
latest of any status — and reads

* its ``timeline`` (the per-period series written with the record), or, for records
  written before it existed, the ``periods.csv`` of its artefact directory when that
  directory is still there;
* its ``catchup``, ``mixed`` and ``reassignment`` blocks (only when present);
* its ``faults`` events (only when present).

:func:`load_series` does the pick in Spark on a narrow read (the blocks as raw JSON
text, so their shape may grow without a schema change here) and parses only the chosen
records; :func:`pick_series` is the same rule over records already in memory.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.report.model import CellKey, cell_key_of, is_figure, record_status

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BLOCKS",
    "BeforeDuring",
    "FaultEvent",
    "RunSeries",
    "before_during",
    "load_history_series",
    "load_series",
    "pick_series",
    "series_from_record",
]

#: Record blocks with before/during figures, drawn as bars when a record has them.
BLOCKS: tuple[str, ...] = ("catchup", "mixed", "reassignment")
#: ``periods.csv`` columns read when a record has no ``timeline`` (numbers, or text).
_TEXT_COLUMNS = ("phase",)


@dataclass(frozen=True)
class FaultEvent:
    """One injected fault: when (s since the first period began), what, for how long."""

    t_s: float
    action: str
    duration_s: float | None = None
    target: str | None = None


@dataclass(frozen=True)
class BeforeDuring:
    """One figure measured before a disturbance and during it (µs)."""

    label: str  # e.g. "publish_response p99"
    before: float | None
    during: float | None


@dataclass(frozen=True)
class RunSeries:
    """One record's per-period columns, scenario blocks and fault events."""

    key: CellKey
    run_id: str
    test_id: str
    attempt: int
    status: str
    columns: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    source: str = "record"  # "record" (its timeline), a periods.csv path, or "none"
    blocks: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    faults: tuple[FaultEvent, ...] = ()

    @property
    def periods(self) -> int:
        return len(self.columns.get("t_s", ()))

    def values(self, column: str) -> list[float | None]:
        """The column as floats (``None`` where the period has no figure)."""
        out: list[float | None] = []
        for x in self.columns.get(column, [None] * self.periods):
            try:
                out.append(None if x is None or x == "" else float(x))
            except (TypeError, ValueError):
                out.append(None)
        return out


# --------------------------------------------------------------------------- reading


def _periods_csv_of(record: Mapping[str, Any], results_file: Path | None) -> Path | None:
    """The record's ``periods.csv``: under its ``artefacts`` path, else next to the
    results file it was read from (``<results>/<run id>/<test dir>/``), as copied
    artefacts are."""
    art = str(record.get("artefacts") or "")
    candidates = []
    if art:
        candidates.append(Path(art) / "periods.csv")
        if results_file is not None:
            candidates.append(results_file.parent / str(record.get("run_id") or "")
                              / Path(art).name / "periods.csv")
    for c in candidates:
        if c.is_file():
            return c
    return None


def _read_periods_csv(path: Path) -> dict[str, list[Any]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return {}
    cols: dict[str, list[Any]] = {k: [] for k in rows[0]}
    for r in rows:
        for k, v in r.items():
            if k in _TEXT_COLUMNS:
                cols[k].append(v)
            else:
                try:
                    cols[k].append(None if v in ("", None) else float(v))
                except ValueError:
                    cols[k].append(None)
    # periods.csv has no end times: add the periods' lengths up
    t, ends = 0.0, []
    for e in cols.get("elapsed_s", []):
        t += e or 0.0
        ends.append(round(t, 3))
    cols["t_s"] = ends
    return cols


def _faults(raw: object) -> tuple[FaultEvent, ...]:
    if not isinstance(raw, list):
        return ()
    out = []
    for ev in raw:
        if not isinstance(ev, Mapping):
            continue
        t = ev.get("t_s", ev.get("at_s"))
        if not isinstance(t, (int, float)):
            continue
        dur = ev.get("duration_s")
        out.append(FaultEvent(
            t_s=float(t), action=str(ev.get("action") or ev.get("kind") or "fault"),
            duration_s=float(dur) if isinstance(dur, (int, float)) else None,
            target=None if ev.get("target") is None else str(ev.get("target"))))
    return tuple(sorted(out, key=lambda e: e.t_s))


def series_from_record(record: Mapping[str, Any], results_file: Path | None = None,
                       key: CellKey | None = None) -> RunSeries:
    """One record's series (its ``timeline``, else its ``periods.csv``), blocks, faults."""
    timeline = record.get("timeline")
    columns: Mapping[str, Sequence[Any]] = {}
    source = "none"
    if isinstance(timeline, Mapping) and timeline.get("t_s"):
        columns = {k: v for k, v in timeline.items() if isinstance(v, list)}
        source = "record"
    else:
        path = _periods_csv_of(record, results_file)
        if path is not None:
            columns, source = _read_periods_csv(path), str(path)
    return RunSeries(
        key=key if key is not None else cell_key_of(record),
        run_id=str(record.get("run_id") or "?"), test_id=str(record.get("test_id") or "?"),
        attempt=int(record.get("attempt") or 1),
        status=record_status(record),
        columns=columns, source=source,
        blocks={b: record[b] for b in BLOCKS if isinstance(record.get(b), Mapping)},
        faults=_faults(record.get("faults")))


def _rank(record: Mapping[str, Any]) -> tuple[bool, str, str, int, str]:
    return (is_figure(record_status(record)), str(record.get("end_time") or ""),
            str(record.get("run_id") or ""), int(record.get("attempt") or 1),
            str(record.get("test_id") or ""))


def pick_series(records: Iterable[Mapping[str, Any]], results_file: Path | None = None
                ) -> dict[CellKey, RunSeries]:
    """Per cell, the series of its latest valid record (else its latest record)."""
    best: dict[CellKey, Mapping[str, Any]] = {}
    for r in records:
        k = cell_key_of(r)
        if k not in best or _rank(r) > _rank(best[k]):
            best[k] = r
    return {k: series_from_record(r, results_file, k) for k, r in sorted(best.items())}


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _local_path(uri: str) -> Path:
    """Spark's ``input_file_name()`` (``file:///a%20b/results.jsonl``) as a local path."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme in ("file", "") else Path(uri)


def load_series(spark: SparkSession, dirs: Sequence[str | Path], *,
                run_id: str | None = None) -> dict[CellKey, RunSeries]:
    """:func:`pick_series` over result directories, the pick done in Spark.

    A narrow read: the cell's fields, the ranking fields, and ``timeline``, the blocks
    and ``faults`` as raw JSON text (parsed in Python for the chosen records only).
    """
    return {k: v[0] for k, v in _read_series(spark, dirs, run_id=run_id, newest=1,
                                             valid_only=False).items()}


#: How many of a baseline cell's newest valid runs its median over time is taken over.
HISTORY_RUNS = 20


def load_history_series(spark: SparkSession, dirs: Sequence[str | Path], *,
                        newest: int = HISTORY_RUNS) -> dict[CellKey, list[RunSeries]]:
    """Per cell, the series of its ``newest`` valid records (a baseline's history, whose
    median per period the charts over time draw)."""
    return _read_series(spark, dirs, run_id=None, newest=newest, valid_only=True)


def _read_series(spark: SparkSession, dirs: Sequence[str | Path], *, run_id: str | None,
                 newest: int, valid_only: bool) -> dict[CellKey, list[RunSeries]]:
    """Per cell, the series of its ``newest`` records by the :func:`pick_series` rank."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from pytest_brokerperf.report.spark import (
        CELL,
        _upgrade,
        _with_cell,
        cell_key,
        figure_column,
        find_result_files,
        manifest_schema,
        tls_schema,
    )

    s, d, long_ = T.StringType(), T.DoubleType(), T.LongType()

    def struct(**fields: Any) -> T.StructType:
        return T.StructType([T.StructField(k, v, True) for k, v in fields.items()])

    raw_fields = ("timeline", *BLOCKS, "faults")
    schema = struct(
        schema=s, run_id=s, test_id=s, attempt=long_, broker=s, scenario=s,
        params=T.MapType(s, s), env=s, durability=struct(level=long_), end_time=s,
        artefacts=s, verdict=struct(status=s), run_status=s,
        throughput=struct(highest_sustainable_rate_msg_s=d),
        nodes=long_, broker_version=s, profile=s, period_s=d, provision=s, driver=s,
        driver_file=s, driver_settings_sha256=s, tls=tls_schema(), manifest=manifest_schema(),
        _corrupt_record=s, **{f: s for f in raw_fields})
    files = find_result_files(dirs)
    df = (spark.read.schema(schema).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", "_corrupt_record")
          .json([str(f) for f in files])
          .withColumn("_file", F.input_file_name())
          .filter(F.col("_corrupt_record").isNull() & F.col("run_id").isNotNull()
                  & F.col("test_id").isNotNull()))
    if run_id is not None:
        df = df.filter(F.col("run_id") == run_id)
    df = _with_cell(_upgrade(df))
    if valid_only:
        df = df.filter(figure_column())
    w = Window.partitionBy(*CELL).orderBy(
        figure_column().desc(), F.col("end_time").desc_nulls_last(),
        F.col("run_id").desc(), F.col("attempt").desc(), F.col("test_id").desc())
    rows = (df.withColumn("_rank", F.row_number().over(w)).filter(F.col("_rank") <= newest)
            .select(*CELL, "_rank", "run_id", "test_id", "attempt", "status", "artefacts",
                    "_file", *raw_fields)
            .orderBy("_rank")
            .collect())
    out: dict[CellKey, list[RunSeries]] = {}
    for r in rows:
        key = cell_key(r)
        record: dict[str, Any] = {
            "run_id": r["run_id"], "test_id": r["test_id"], "attempt": r["attempt"],
            "verdict": {"status": r["status"]}, "artefacts": r["artefacts"],
            **{f: _json_or_none(r[f]) for f in raw_fields}}
        results_file = _local_path(str(r["_file"]))
        out.setdefault(key, []).append(series_from_record(record, results_file, key))
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- blocks


def _label(stem: str) -> str:
    view, _, stat = stem.rpartition("_")
    if view and stat.startswith("p") and stat[1:].replace(".", "").isdigit():
        return f"{view} {stat}"
    return stem


def before_during(block: Mapping[str, Any]) -> list[BeforeDuring]:
    """The before/during pairs of a scenario block, by the records' naming.

    ``<figure>_before_us`` pairs with ``<figure>_during_us`` (mixed, reassignment) or
    ``<figure>_drain_us`` (catch-up). A value is µs, or an object of percentiles
    (``{"p99": …, "p99.9": …}``) giving one pair per percentile.
    """
    out: list[BeforeDuring] = []
    for k in sorted(block):
        if not k.endswith("_before_us"):
            continue
        stem = k[: -len("_before_us")]
        during_key = next((f"{stem}{suffix}" for suffix in ("_during_us", "_drain_us")
                           if f"{stem}{suffix}" in block), None)
        if during_key is None:
            continue
        b, d = block[k], block[during_key]
        if isinstance(b, Mapping) or isinstance(d, Mapping):
            bm = b if isinstance(b, Mapping) else {}
            dm = d if isinstance(d, Mapping) else {}
            for stat in sorted(set(bm) | set(dm), key=lambda s: float(s.lstrip("p") or 0)
                               if s.lstrip("p").replace(".", "").isdigit() else 1e9):
                out.append(BeforeDuring(f"{stem} {stat}", _num(bm.get(stat)),
                                        _num(dm.get(stat))))
        else:
            out.append(BeforeDuring(_label(stem), _num(b), _num(d)))
    return out


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None
