"""The studies' tables in their own layout: every transcribed figure is found by its
cell (study, table, row, column); every table is filled by a binding or says why not;
every shipped study case lands in a cell of its table, converted to the published unit."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_brokerperf.report import published
from pytest_brokerperf.report.model import CellKey, CellStats, Figures, LatencyStats, RateStats
from pytest_brokerperf.report.studies import (
    BINDINGS,
    UNCOVERED,
    StudyFacts,
    StudyRun,
    convert,
    parse_studies,
    scaling_of,
    study_sections,
)
from pytest_brokerperf.scenario_library.study_cases import StudyCase

SUITE = Path(__file__).resolve().parents[2] / "scenarios"


def test_every_transcribed_figure_is_found_by_its_cell() -> None:
    for fig in published.figures():
        assert published.cell(fig.study, fig.table, fig.row, fig.column) == fig
    layout = published.layouts()[("streamnative", "table 2")]
    # a cell the study states nothing for is None, never invented
    assert published.cell("confluent", "rabbitmq latency", "classic without replication",
                          "p99 end-to-end latency").value is None  # type: ignore[union-attr]
    with pytest.raises(KeyError, match=r"has no cell 'nope'.*1 subscription / level 3"):
        published.cell("streamnative", "table 2", "nope", layout.columns[0])
    with pytest.raises(KeyError, match="is not a table"):
        published.cell("streamnative", "table 9", "a", "b")


def test_every_table_is_filled_by_a_binding_or_says_why_not() -> None:
    tables = published.layouts()
    bound = {(b.study, b.table) for b in BINDINGS}
    assert bound.isdisjoint(UNCOVERED)
    assert bound | set(UNCOVERED) == set(tables)
    for b in BINDINGS:
        layout = tables[(b.study, b.table)]
        for row, column in b.gaps:
            assert row in (*layout.rows, "*") and column in (*layout.columns, "*"), (b, row)


def test_units_convert_as_omb_and_pulsar_perf_print_them() -> None:
    assert convert(2.0**20, "B/s", "MB/s") == 1.0  # OMB: bytes / 1024 / 1024
    assert convert(1_060_184 * 1024, "B/s", "Mbit/s") == pytest.approx(8282.7, abs=0.1)
    assert convert(5860.0, "us", "ms") == 5.86
    assert convert(2.0**30, "B/s", "GB/s") == 1.0
    assert convert(1.0, "B/s", "x Apache Kafka") is None  # no ratio across units
    assert convert(None, "us", "ms") is None


def test_studies_option() -> None:
    assert parse_studies(None) is None
    assert parse_studies("") is None  # --studies alone: the studies the input has
    assert parse_studies("all") == ("confluent", "streamnative", "automq", "pulsar-limit")
    assert parse_studies("automq,confluent,automq") == ("automq", "confluent")
    from pytest_brokerperf.core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown study nope; known: confluent"):
        parse_studies("automq,nope")


def test_scaling_comes_from_the_records_study_note() -> None:
    from pytest_brokerperf.scenario_library.study_cases import StudyCase

    case = StudyCase("streamnative", "table 2", "tailread", partitions=100, rate=200_000)
    note = case.scaled("smoke").note()
    assert scaling_of(note, "smoke") == "smoke: rate 200k -> 1k msg/s, partitions 100 -> 16"
    assert scaling_of(case.scaled("omb").note(), "omb") == "omb: the study's numbers, unscaled"


def _suite_cases() -> list[StudyCase]:
    out: list[StudyCase] = []
    for path in sorted(SUITE.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_tables_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for value in vars(mod).values():
            if isinstance(value, list) and value and isinstance(value[0], StudyCase):
                out += value
    return out


def stats_of(key: CellKey, *, e2e_p99_us: float = 5000.0, peak: float = 1000.0) -> CellStats:
    """A valid cell with every figure a study table reads."""
    lat = LatencyStats(count=10_000, values={"p99": e2e_p99_us, "mean": e2e_p99_us / 3})
    rate = RateStats(n=1, mean=peak, stddev=None, min=peak, max=peak)
    figs = Figures(latency={"e2e_latency": lat, "publish_latency": lat},
                   rates={"max_sustainable_rate": rate, "ack_rate": rate,
                          "publish_mib_s": RateStats(1, 2.0, None, 2.0, 2.0)})
    return CellStats(key=key, records=1, valid=1, runs=1, figures=figs,
                     run_figures={"r": figs}, p99_spread=None)


def run_of(case: StudyCase, kind: str, level: int | None) -> StudyRun:
    key = CellKey(broker=kind, scenario=case.scenario, params=f"case={case.id}",
                  durability="driver-defined" if level is None else f"d{level}",
                  fault="none", env="local", profile="smoke")
    facts = StudyFacts(study=case.study, case=case.id, source=case.source,
                       message_size=case.message_size, note=case.scaled("smoke").note(),
                       catchup_bytes_s=3 * 2.0**20, mixed_publish_p99_during_us=9000.0,
                       move_duration_s=4.0, catchup_send_rate_ratio=0.97,
                       catchup_send_mean_before_us=2000.0, catchup_send_mean_drain_us=2600.0)
    return StudyRun(key, stats_of(key), facts)


#: shipped cases no published cell holds, and why
UNPLACED = {"journal-bypass": "StreamNative's journal-bypass rows (its table 8) are not "
            "among the transcribed tables"}


def test_every_shipped_study_case_fills_a_cell_of_its_table() -> None:
    cases = [c for c in _suite_cases() if (c.study, c.source) in published.layouts()]
    assert len(cases) > 30
    for case in cases:
        kinds = [k for k in (case.brokers or ("kafka", "pulsar"))]
        filled = 0
        for kind in kinds:
            runs = {run_of(case, kind, lv).key: run_of(case, kind, lv)
                    for lv in (None, 1, 2, 3, 4)}
            (section,) = study_sections({k: r.stats for k, r in runs.items()},
                                        {k: r.facts for k, r in runs.items()}, [case.study])
            for t in section.tables:
                for row in t.rows:
                    for cell in row:
                        for o in cell.ours:
                            assert o.case == case.id
                            assert o.value is not None, (case.id, cell.row, cell.column)
                            filled += 1
        if case.variant in UNPLACED:
            assert filled == 0, case.id
        else:
            assert filled, f"{case.study} {case.source} {case.id}: no cell of its table"


def test_a_cell_holds_ours_in_the_published_unit_with_the_ratio() -> None:
    case = StudyCase("streamnative", "table 2", "tailread", partitions=100, rate=200_000,
                     subscriptions=10)
    run = run_of(case, "kafka", 1)
    (section,) = study_sections({run.key: run.stats}, {run.key: run.facts}, None)
    table = next(t for t in section.tables if t.layout.table == "table 2")
    layout = table.layout
    i = layout.rows.index("10 subscriptions / level 1 (local sync, Ack-2)")
    cell = table.rows[i][layout.columns.index("Kafka")]
    (ours,) = cell.ours
    assert cell.published is not None and cell.published.value == 1599.79
    assert (ours.value, ours.unit) == (5.0, "ms")
    assert ours.ratio(cell.published) == pytest.approx(5.0 / 1599.79)
    assert ours.scaling == "smoke: rate 200k -> 1k msg/s, partitions 100 -> 16"
    assert (ours.valid, ours.records, ours.status) == (1, 1, "valid")
    # the other cells say why they are empty: the command that fills them
    other = table.rows[i][layout.columns.index("Pulsar")]
    assert other.ours == () and "study(name='streamnative')" in other.reason
    # a table no case fills says why, in every cell
    disk = next(t for t in section.tables if t.layout.table == "disk throughput")
    assert all("dd" in c.reason for row in disk.rows for c in row)


@pytest.mark.parametrize(("argv", "studies", "asked"), [
    ([], None, False),
    (["--studies"], None, True),
    (["--studies=all"], ("confluent", "streamnative", "automq", "pulsar-limit"), True),
    (["--studies", "automq"], ("automq",), True),
])
def test_the_studies_flag(argv: list[str], studies: object, asked: bool,
                          tmp_path: Path) -> None:
    import argparse

    from pytest_brokerperf.report.command import add_arguments, options_from

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    opts = options_from(parser.parse_args([str(tmp_path), *argv]))
    assert (opts.studies, opts.studies_asked) == (studies, asked)


def test_automq_catch_up_send_rate_change_and_mean_send_latency_fill_their_cells() -> None:
    """Section 3.2's send-side rows: the acknowledged rate's change during the drain (%)
    and the mean publish latency, AutoMQ's published as a rise, Kafka's as the mean; a
    change has no ratio to the published change."""
    case = StudyCase("automq", "section 3.2", "catchup", partitions=100, rate=76_800,
                     message_size=4096, backlog_bytes=2**40)
    run = run_of(case, "kafka", None)
    (section,) = study_sections({run.key: run.stats}, {run.key: run.facts}, ["automq"])
    table = next(t for t in section.tables if t.layout.table == "section 3.2")
    layout = table.layout

    def ours(row: str, column: str) -> tuple[float | None, str, float | None]:
        cell = table.rows[layout.rows.index(row)][layout.columns.index(column)]
        (o,) = cell.ours
        return o.value, o.unit, o.ratio(cell.published)

    value, unit, ratio = ours("send throughput during catch-up", "Apache Kafka")
    assert (unit, ratio) == ("% change", None) and value == pytest.approx(-3.0)
    assert ours("average send latency during catch-up", "Apache Kafka") == (
        pytest.approx(2.6), "ms", pytest.approx(2.6 / 900))
    # an AutoMQ cell of the same run is a rise over the window before, in ms
    automq = StudyRun(replace(run.key, broker="automq"), run.stats, run.facts)
    (section,) = study_sections({automq.key: automq.stats}, {automq.key: automq.facts},
                                ["automq"])
    table = next(t for t in section.tables if t.layout.table == "section 3.2")
    assert ours("average send latency during catch-up", "AutoMQ") == (
        pytest.approx(0.6), "ms increase", None)
