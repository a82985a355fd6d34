"""Charts over time, before/during bars, fault timelines and fair-comparison warnings.

Every chart is checked in its SVG (parsed as XML): one series per broker (the ``gid`` of
each line or bar), one marker per stats period that has the figure, and points in time
order. Records are synthetic with a ``timeline`` whose values differ per period.
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.report.charts import before_during_chart, fault_chart, time_chart
from pytest_brokerperf.report.render import TIME_CHARTS, html_page
from pytest_brokerperf.report.series import (
    before_during,
    load_series,
    pick_series,
    series_from_record,
)
from tests.support.records import (
    record_with_timeline,
    report_of_records,
    write_jsonl,
)

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")

PERIODS = {"kafka": 12, "pulsar": 8, "rabbitmq": 10}


def _series_ids(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {el.get("id", ""): el for el in root.iter() if el.get("id", "").startswith("series-")}


def _markers(el: ET.Element) -> list[tuple[float, float]]:
    return [(float(u.get("x", "nan")), float(u.get("y", "nan"))) for u in el.iter()
            if u.tag.endswith("}use") or u.tag == "use"]


def test_every_time_chart_has_one_series_per_broker_and_one_point_per_period() -> None:
    records = [record_with_timeline(b, n, undersampled=(4,)) for b, n in PERIODS.items()]
    series = list(pick_series(records).values())
    for column, label, divisor, log in TIME_CHARTS:
        svg = time_chart(column, label, series, divisor=divisor, log=log)
        assert svg is not None, column
        ids = _series_ids(svg)
        assert set(ids) == {f"series-{b}" for b in PERIODS}, column
        for broker, n in PERIODS.items():
            pts = _markers(ids[f"series-{broker}"])
            # an undersampled p99 period has no point: never invented
            expected = n - 1 if column.endswith("_p99_us") else n
            assert len(pts) == expected, (column, broker)
            xs = [x for x, _ in pts]
            assert xs == sorted(xs) and len(set(xs)) == len(xs)  # time order, one per period
        # rates rise by 1 msg/s per period in the synthetic series: SVG y falls (up)
        if column == "publish_rate_msg_s":
            ys = [y for _, y in _markers(ids["series-kafka"])]
            assert ys == sorted(ys, reverse=True)


def test_a_chart_of_two_runs_of_one_cell_shows_only_the_latest_valid_one() -> None:
    old = record_with_timeline("kafka", 5, end_time="2026-01-01T00:00:00+00:00")
    old["run_id"] = "20260101-000000-old000"
    new = record_with_timeline("kafka", 9, end_time="2026-01-02T00:00:00+00:00")
    new["run_id"] = "20260102-000000-new000"
    newest_invalid = record_with_timeline("kafka", 3, end_time="2026-01-03T00:00:00+00:00",
                             status="generator-bound")
    newest_invalid["run_id"] = "20260103-000000-bad000"
    (rs,) = pick_series([old, newest_invalid, new]).values()
    assert (rs.run_id, rs.periods, rs.status) == ("20260102-000000-new000", 9, "valid")
    svg = time_chart("publish_rate_msg_s", "rate", [rs])
    assert svg is not None and len(_markers(_series_ids(svg)["series-kafka"])) == 9


def test_before_during_bars_for_catchup_and_mixed_only_when_present() -> None:
    a = record_with_timeline("kafka", 6)
    a["catchup"] = {"publish_response_p99_before_us": 2_000.0,
                    "publish_response_p99_drain_us": 9_000.0, "drain_s": 3.0}
    a["mixed"] = {"publish_response_before_us": {"p99": 2000, "p99.9": 4000},
                  "publish_response_during_us": {"p99": 5000, "p99.9": None},
                  "e2e_response_before_us": {"p99": 3000}, "e2e_response_during_us": {"p99": 7000}}
    b = record_with_timeline("pulsar", 6)
    b["catchup"] = {"publish_response_p99_before_us": 3_000.0,
                    "publish_response_p99_drain_us": None}
    c = record_with_timeline("rabbitmq", 6)  # no block at all
    series = list(pick_series([a, b, c]).values())

    assert before_during(a["catchup"]) == [
        before_during(a["catchup"])[0].__class__("publish_response p99", 2000.0, 9000.0)]
    labels = [(p.label, p.before, p.during) for p in before_during(a["mixed"])]
    assert labels == [("e2e_response p99", 3000.0, 7000.0),
                      ("publish_response p99", 2000.0, 5000.0),
                      ("publish_response p99.9", 4000.0, None)]

    svg = before_during_chart("catchup", series)
    assert svg is not None
    ids = set(_series_ids(svg))
    # one series per broker that has the block; no bar for a missing figure
    assert ids == {"series-kafka-before-0", "series-kafka-during-0", "series-pulsar-before-0"}
    assert svg.count("n/a") == 1  # pulsar's drain figure, said to be missing
    mixed = set(_series_ids(before_during_chart("mixed", series) or ""))
    assert {i.split("-")[1] for i in mixed} == {"kafka"} and len(mixed) == 5
    assert before_during_chart("reassignment", series) is None

    page = html_page(report_of_records([a, b, c]))
    assert page.count("data-chart='before-during'") == 2  # catchup, mixed
    assert "data-block='reassignment'" not in page
    page = html_page(report_of_records([c]))
    assert "Before and during" not in page and "Fault timelines" not in page


def test_fault_timeline_only_when_a_record_has_fault_events() -> None:
    a = record_with_timeline("kafka", 10)
    a["faults"] = [{"t_s": 6.0, "action": "pause-broker", "duration_s": 2.0, "target": "node 1"},
                   {"t_s": 4.0, "action": "kill-broker"}]
    b = record_with_timeline("pulsar", 10)
    series = list(pick_series([a, b]).values())
    svg = fault_chart(series)
    assert svg is not None
    ids = _series_ids(svg)
    assert set(ids) == {"series-kafka"}  # the broker with faults, once
    assert len(_markers(ids["series-kafka"])) == 2
    assert "pause-broker (node 1)" in svg and "kill-broker" in svg
    # and on the charts over time: a dashed line per event, a span for the pause
    t = time_chart("e2e_latency_p50_us", "e2e", series, divisor=1000, log=True) or ""
    assert len(re.findall(r'id="fault-line-kafka-\d"', t)) == 2
    assert 'id="fault-kafka-1"' in t
    page = html_page(report_of_records([a, b]))
    assert page.count("data-chart='faults'") == 1
    assert fault_chart(list(pick_series([b]).values())) is None


def test_fair_comparison_warnings_on_durability_and_machines() -> None:
    a = record_with_timeline("kafka", 6, durability_level=1)
    b = record_with_timeline("pulsar", 6, durability_level=1, cpu_model="Other CPU")
    same = html_page(report_of_records([record_with_timeline("kafka", 6),
                                        record_with_timeline("pulsar", 6)]))
    assert "warn'>" not in same  # like for like: no warning
    page = html_page(report_of_records([a, b]))
    assert "results come from different machines" in page
    # different durability levels are different cells, so within one chart group only
    # machines can differ; the matrix view (per scenario) mixes levels and says so
    c = record_with_timeline("kafka", 6, durability_level=2)
    page = html_page(report_of_records([a, c]))
    assert "durability levels differ (d1, d2): not a like-for-like comparison" in page


def test_series_from_periods_csv_when_the_record_has_no_timeline(tmp_path: Path) -> None:
    rec = record_with_timeline("kafka", None)
    art = tmp_path / "elsewhere" / "run" / "t.py__test_kafka_"
    rec["artefacts"] = str(art)  # moved: found again next to the results file
    results = tmp_path / "copied" / "results.jsonl"
    d = results.parent / rec["run_id"] / art.name
    d.mkdir(parents=True)
    with open(d / "periods.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["phase", "index", "elapsed_s", "publish_rate_msg_s",
                    "e2e_latency_p99_us"])
        w.writerows([["warmup", 0, 1.0, 990, ""], ["measure", 0, 1.0, 1000, 2500],
                     ["measure", 1, 0.5, 1010, 2600]])
    rs = series_from_record(rec, results)
    assert rs.source == str(d / "periods.csv")
    assert rs.values("t_s") == [1.0, 2.0, 2.5]
    assert rs.values("e2e_latency_p99_us") == [None, 2500.0, 2600.0]
    assert list(rs.columns["phase"]) == ["warmup", "measure", "measure"]
    assert series_from_record(rec, None).source == "none"  # nothing to read


def test_load_series_in_spark_picks_as_pick_series(spark: Any, tmp_path: Path) -> None:
    recs = [record_with_timeline(b, n) for b, n in PERIODS.items()]
    older = record_with_timeline("kafka", 4, end_time="2025-12-31T00:00:00+00:00")
    older["run_id"] = "20251231-000000-old000"
    recs[1]["catchup"] = {"publish_response_p99_before_us": 1.0,
                          "publish_response_p99_drain_us": 2.0}
    recs[2]["faults"] = [{"t_s": 3, "action": "kill-broker"}]
    # a record without timeline whose artefacts were copied next to the results file
    # (a directory name with a space: Spark reports the file as a URI)
    moved = record_with_timeline("tansu", None)
    moved["artefacts"] = "/gone/run/t.py__test_tansu_"
    copied = tmp_path / "b c" / moved["run_id"] / "t.py__test_tansu_"
    copied.mkdir(parents=True)
    (copied / "periods.csv").write_text("phase,index,elapsed_s,publish_rate_msg_s\n"
                                        "measure,0,1.0,1000\nmeasure,1,1.0,1001\n")
    write_jsonl(tmp_path / "b c" / "results.jsonl", [moved])
    write_jsonl(tmp_path / "a" / "results.jsonl", recs[:2])
    write_jsonl(tmp_path / "b" / "results.jsonl", [recs[2], older])
    with (tmp_path / "b" / "results.jsonl").open("a") as fh:
        fh.write('{"cut short\n')  # skipped, as the job skips it
    got = load_series(spark, [tmp_path])
    want = pick_series([*recs, older])
    want.update(pick_series([moved], tmp_path / "b c" / "results.jsonl"))
    assert got.keys() == want.keys()
    for k in want:
        g, w = got[k], want[k]
        assert (g.run_id, g.periods, g.blocks, g.faults) == (w.run_id, w.periods, w.blocks,
                                                            w.faults)
        assert g.columns.keys() == w.columns.keys()
        assert list(g.columns["phase"]) == list(w.columns["phase"])
        for c in w.columns:
            if c != "phase":
                assert g.values(c) == w.values(c), c
    (tansu,) = [v for k, v in got.items() if k.broker == "tansu"]
    assert tansu.source == str(copied / "periods.csv") and tansu.values("t_s") == [1.0, 2.0]
    assert load_series(spark, [tmp_path], run_id="20251231-000000-old000").keys() == {
        next(k for k in want if k.broker == "kafka")}
