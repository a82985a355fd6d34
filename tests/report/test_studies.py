"""The report's Studies section: a study table rendered in its own layout with the
published figure, ours, the ratio, our verdict and the profile's scaling (from declared
types, no Spark); the study's chart on its axes; and ``brokerperf report --studies``
through Spark on synthetic study records (catch-up block, manifest set-up included)."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.report.command import EXIT_OK, EXIT_USAGE, ReportOptions, run
from pytest_brokerperf.report.model import CellKey, CellStats, Figures, LatencyStats, RateStats
from pytest_brokerperf.report.studies import RunSetup, StudyFacts, study_sections
from pytest_brokerperf.report.study_render import studies_html, studies_markdown
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")

SETUP = RunSetup(cpus="2 logical CPUs (2 cores), Test CPU, 25.0 GiB RAM",
                 disk="ext4 on /dev/vda, fsync p99 1.20 ms", nodes="1", provision="process")
NOTE = ("study case confluent {case} (Confluent, ...); scaled for --brokerperf-profile=smoke: "
        "partitions 100 -> 16")


def _cell(broker: str, case: str, source: str, scenario: str, level: int | None, *,
          peak: float = 0.0, e2e_us: float = 0.0, valid: int = 1) -> tuple[CellKey, CellStats,
                                                                        StudyFacts]:
    key = CellKey(broker=broker, scenario=scenario, params=f"case={case}",
                  durability="driver-defined" if level is None else f"d{level}",
                  fault="none", env="local", profile="smoke")
    lat = LatencyStats(count=5000, values={"p99": e2e_us or None})
    figs = Figures(latency={"e2e_latency": lat},
                   rates={"max_sustainable_rate": RateStats(1, peak or None, None, None, None)})
    stats = CellStats(key=key, records=1, valid=valid, runs=1, figures=figs,
                      run_figures={"r": figs} if valid else {}, p99_spread=None)
    facts = StudyFacts(study="confluent", case=case, source=source, message_size=1024,
                       note=NOTE.format(case=case), setups=(SETUP,))
    return key, stats, facts


def _sections(*cells: tuple[CellKey, CellStats, StudyFacts]) -> Any:
    return study_sections({k: s for k, s, _ in cells}, {k: f for k, _, f in cells},
                          ["confluent"])


def test_a_study_table_renders_published_ours_ratio_verdict_and_scaling() -> None:
    sections = _sections(
        _cell("kafka", "p100-4x4-1KiB-r200k-batch1MiB-linger1ms", "figure 13", "tailread",
              None, e2e_us=2500.0),
        _cell("kafka", "p100-4x4-1KiB-batch1MiB-linger10ms", "figure 5", "throughput", None,
              peak=200_000.0))
    md = "\n".join(studies_markdown(sections))
    # the header: both set-ups
    assert "| the study's | 3 broker instances i3en.2xlarge" in md
    assert ("| this run's | 1 broker node(s), provisioned as process; 2 logical CPUs (2 cores)"
            ", Test CPU, 25.0 GiB RAM; disk: ext4 on /dev/vda, fsync p99 1.20 ms "
            "(profile smoke) |") in md
    assert "Run it: `pytest scenarios -m \"study(name='confluent')\"" in md
    # the summary in its own rows and columns
    summary = md[md.index("#### confluent summary"):md.index("#### confluent figure 1:")]
    rows = [ln for ln in summary.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| | Kafka | Pulsar | RabbitMQ (mirrored) |"
    peak = rows[1].split(" | ")
    assert peak[0] == "| peak throughput"
    # 200,000 msg/s x 1 KiB = 195 MiB/s against 605 MB/s: ratio 0.323
    assert re.match(r"published 605 MB/s<br>ours 195 MB/s · ×0\.323 · valid 1/1 \[\d\]$",
                    peak[1]), peak[1]
    assert peak[2].startswith("published 305 MB/s<br>ours — [")
    p99 = rows[2].split(" | ")
    assert re.match(r"published 5 ms \[\d\]<br>ours 2\.5 ms · ×0\.5 · valid 1/1 \[\d\]$",
                    p99[1]), p99[1]
    notes = [ln for ln in summary.splitlines() if re.match(r"\d+\. ", ln)]
    assert any("kafka driver-defined, case p100-4x4-1KiB-r200k-batch1MiB-linger1ms: "
               "end-to-end latency p99 (OMB's e2e_latency); smoke: partitions 100 -> 16"
               in n for n in notes), notes
    assert any(n.endswith(". at 200 MB/s") for n in notes), notes  # the published note
    assert any("not in these results: pytest scenarios -m \"study(name='confluent')\"" in n
               for n in notes)
    # a table no case fills keeps its published figures, every cell saying why
    fig1 = md[md.index("#### confluent figure 1:"):md.index("#### confluent figure 2:")]
    assert "published 327 MB/s" in fig1 and "a disk benchmark (dd)" in fig1


def test_an_invalid_run_is_shown_with_its_verdict_never_its_figure() -> None:
    key, stats, facts = _cell("kafka", "p100-4x4-1KiB-r200k-batch1MiB-linger1ms",
                              "figure 13", "tailread", None, e2e_us=2500.0, valid=0)
    from dataclasses import replace

    from pytest_brokerperf.report.model import InvalidRecord

    stats = replace(stats, invalid=(InvalidRecord("r", "t", 1, "host-noise", ("busy",)),))
    md = "\n".join(studies_markdown(_sections((key, stats, facts))))
    assert "ours n/a · host-noise 0/1" in md
    assert "ours 2.5 ms" not in md


def test_the_fsync_figure_is_drawn_on_its_axes_with_both_series(tmp_path: Path) -> None:
    cells = [_cell("kafka", f"p100-1KiB-batch{b}", "figure 2", "throughput", lv,
                   peak=1000.0 * (i + 1) * (1 if lv == 3 else 4))
             for i, b in enumerate(("1KiB", "10KiB", "100KiB", "1MiB")) for lv in (3, 4)]
    page = "\n".join(studies_html(_sections(*cells), {}))
    fig2 = page[page.index("data-study-table='confluent/figure 2'"):]
    fig2 = fig2[:fig2.index("<h3")]
    svg = fig2[fig2.index("<figure data-chart='study'>"):fig2.index("</figure>")]
    # ours: both series (fsync off, fsync every message); the study's chart has no numbers
    assert 'id="study-ours-0"' in svg and 'id="study-ours-1"' in svg
    assert "study-published" not in svg
    assert "4,000 msg/s" in fig2 and "published — [" in fig2


# --------------------------------------------------------------------------- Spark


def _records() -> list[dict[str, Any]]:
    out = []
    for broker, level, scale in (("kafka", 1, 10), ("pulsar", 1, 2)):
        r = synthetic_record(SyntheticRun(
            broker=broker, scenario="catchup", durability_level=level,
            test_id=f"t.py::test_catchup_study[{broker}-d{level}-p100-1KiB-r200k-backlog512GiB]",
            params={"topics": 1, "partitions": 16, "message_size": 1024, "producers": 1,
                    "subscriptions": 1, "consumers": 1, "rate": 1000.0,
                    "study": "streamnative", "case": "p100-1KiB-r200k-backlog512GiB",
                    "study_source": "table 1"}),
            {"e2e_latency": np.arange(1, 3000, dtype=np.int64) * scale,
             "e2e_response": np.arange(1, 3000, dtype=np.int64) * scale})
        r["catchup"] = {"catchup_mib_s": 512.0 * scale}
        r["notes"] = ["study case streamnative p100-1KiB-r200k-backlog512GiB (...); scaled "
                      "for --brokerperf-profile=smoke: rate 200k -> 1k msg/s, backlog 512 GiB "
                      "-> 32 MiB, partitions 100 -> 16"]
        r["manifest"]["machine"].update(physical_cores=2, mem_total_bytes=25 * 2**30)
        r["manifest"]["fsync_probe"] = {"fs_type": "ext4", "mount_source": "/dev/vda",
                                        "p99_us": 1200.0, "suspicious": False}
        out.append(r)
    return out


def test_report_studies_reads_the_records_through_spark(spark: Any, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "res" / "results.jsonl", _records())
    out, err, html = io.StringIO(), io.StringIO(), tmp_path / "r.html"
    code = run(ReportOptions(dirs=[tmp_path / "res"], html=html, markdown=Path("-"),
                             studies=None, studies_asked=True), out=out, err=err)
    assert code == EXIT_OK, err.getvalue()
    md = out.getvalue()
    assert md.startswith("## brokerperf report")  # the whole summary, its Studies section
    assert '## Studies' in md and '### StreamNative: "Benchmarking Pulsar and Kafka' in md
    assert "### Confluent" not in md  # --studies alone: the studies the input has
    assert ("2 logical CPUs (2 cores), Test CPU, 25.0 GiB RAM; disk: ext4 on /dev/vda, "
            "fsync p99 1.20 ms (profile smoke)") in md
    row = next(ln for ln in md.splitlines()
               if ln.startswith("| publish and catch-up read / level 1 / 100 partitions |"))
    # catch-up read rate 5,120 MiB/s (kafka) and 1,024 MiB/s (pulsar), in GB/s
    assert re.search(r"published 1.7 GB/s<br>ours 1 GB/s · ×0.588 · valid 1/1", row), row
    assert re.search(r"published 1 GB/s<br>ours 5 GB/s · ×5 · valid 1/1", row), row
    assert "data-study-table='streamnative/table 1'" in html.read_text()


def test_studies_alone_on_results_without_a_study_is_a_usage_error(
        spark: Any, tmp_path: Path) -> None:
    recs = _records()
    for r in recs:
        del r["params"]["study"]
    write_jsonl(tmp_path / "res" / "results.jsonl", recs)
    err = io.StringIO()
    code = run(ReportOptions(dirs=[tmp_path / "res"], studies=None, studies_asked=True),
               out=io.StringIO(), err=err)
    assert code == EXIT_USAGE
    assert "--studies: the input has no study case's record" in err.getvalue()
    # named, a study's published tables are shown with every cell saying why it is empty
    out = io.StringIO()
    code = run(ReportOptions(dirs=[tmp_path / "res"], studies=("automq",),
                             studies_asked=True), out=out, err=err)
    assert code == EXIT_OK
    assert "published 870 MB/s<br>ours — [" in out.getvalue()
    assert "no record of this study in the input" in out.getvalue()


def test_automqs_reassignment_timeline_is_drawn_from_the_runs_series() -> None:
    from dataclasses import replace

    from pytest_brokerperf.report.series import RunSeries
    from tests.support.records import synthetic_timeline

    key, stats, facts = _cell("kafka", "p1-4KiB-r10.24k-throttle100MiB-after600s-bg-p4-r2.56k",
                              "section 3.3", "reassign", None)
    facts = replace(facts, study="automq", move_duration_s=7.5)
    sections = study_sections({key: stats}, {key: facts}, ["automq"])
    md = "\n".join(studies_markdown(sections))
    assert re.search(r"\| move duration \| published 2 s \[\d+\]<br>ours — \[\d+\] \| "
                     r"published 900 s \[\d+\]<br>ours 7\.5 s · ×0\.00833 · valid 1/1", md), md
    series = {key: RunSeries(key=key, run_id="r", test_id="t", attempt=1, status="valid",
                             columns=synthetic_timeline(8))}
    page = "\n".join(studies_html(sections, series))
    charts = re.findall(r"<figure data-chart='study-timeline' data-column='([a-z0-9_]+)'>",
                        page)
    assert charts == ["publish_rate_msg_s", "consume_rate_msg_s", "publish_latency_p99_us"]
    assert 'id="series-kafka"' in page
    # without the run's series (a report without --html reads none) there is no timeline
    assert "study-timeline" not in "\n".join(studies_html(sections, {}))
