"""From a real scenario run on a local Kafka to the HTML report, opened in Chromium.

The README's main job, shortened: a short tail-read smoke run (the shipped
``scenarios/``, ``--broker=kafka``: the plugin starts its own broker) writes its results,
JUnit properties and artefacts and leaves no broker JVM behind; ``brokerperf report DIR
--html --markdown`` turns the results into the report; headless Chromium opens the page
with no network. Only functional truths are asserted — the record, its artefacts and
JUnit properties, the report exists, each chart has one series (the one broker) with one
point per recorded period, the record's figures appear — never speed.

The same session runs one published study's case too (Confluent's figure 13 Kafka case,
smoke-scaled: no second broker start), and ``--studies`` puts the study's tables in the
report: the published figure and ours side by side, in the study's layout.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from pytest_brokerperf.report.render import _ms, _num
from pytest_brokerperf.report.study_render import fmt
from pytest_brokerperf.results.omb import read_omb_result
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from tests.support.chromium import (
    check_page,
    external_urls,
    require_chromium,
    series_pixels,
)

pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")


def _markers(svg: str, gid: str) -> int:
    root = ET.fromstring(svg)
    (el,) = [e for e in root.iter() if e.get("id") == gid]
    return sum(1 for u in el.iter() if u.tag.rsplit("}", 1)[-1] == "use")


#: Confluent's figure 13 Kafka case (its latency test, batches of at most 1 ms)
STUDY_CASE = "test_tailread_study and linger1ms"


def test_tailread_on_kafka_to_html_report_in_chromium(
        pytester: pytest.Pytester, valid_or_noise: Callable[..., tuple[str, str]]) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    junit = pytester.path / "junit.xml"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "tailread", "-k",
        f"({PLAIN_SCENARIOS}) or ({STUDY_CASE})", "--broker=kafka",
        f"--brokerperf-results={results}", f"--junitxml={junit}", "--brokerperf-warmup=5",
        "--brokerperf-broker-warmup=3",
        "--brokerperf-duration=6", "--brokerperf-rate=2000", "--brokerperf-calibration=off",
        "--brokerperf-inconclusive=warn", "-p", "no:cacheprovider",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "--rootdir", str(pytester.path), timeout=600)
    lines = (results / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2, run.stdout.str()
    (rec,) = [json.loads(x) for x in lines if "study" not in json.loads(x)["params"]]
    (study,) = [json.loads(x) for x in lines if "study" in json.loads(x)["params"]]
    # the run: a record, its artefacts, JUnit properties, the summary, no orphan
    status, slo = valid_or_noise(rec)  # host-noise: INCONCLUSIVE, warned here
    study_status, _ = valid_or_noise(study)
    run.assert_outcomes(passed=2, warnings=run.parseoutcomes().get("warnings", 0))
    run.stdout.fnmatch_lines(["*brokerperf summary*", f"*kafka*tailread*{status}*{slo}*"])
    assert rec["broker"] == "kafka" and rec["broker_version"] == "4.3.1"
    assert rec["delivery"]["lost"] == 0 and rec["delivery"]["acknowledged"] > 3000
    assert rec["latency"]["e2e_response"]["p50_us"] > 0
    assert rec["manifest"]["broker_warmup"]["acknowledged"] > 0
    art = Path(rec["artefacts"])
    (omb_file,) = [p for p in art.glob("*.json")
                   if p.name not in ("manifest.json", "record.json", "broker-settings.json")]
    omb = read_omb_result(omb_file)
    assert len(omb["publishRate"]) == 6 and omb["sampleRateMillis"] == 1000
    assert (art / "logs").is_dir() and any((art / "logs").iterdir())
    settings = json.loads((art / "broker-settings.json").read_text())
    assert settings["cluster"]["brokers"] == 1
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).findall(
        ".//testcase[@name='test_tailread[kafka]']//property")}
    assert float(props["brokerperf.ack_rate"]) > 0
    assert props["brokerperf.verdict"] == status
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if "kafka.Kafka" in " ".join(p.info["cmdline"] or [])
                 and str(pytester.path) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []

    # the report
    timeline = rec["timeline"]
    assert len(timeline["t_s"]) == timeline["periods"] > rec["warmup_periods"]
    assert timeline["phase"].count("warmup") == rec["warmup_periods"]

    html, md = pytester.path / "out" / "report.html", pytester.path / "out" / "summary.md"
    report = subprocess.run(
        [sys.executable, "-c", "import sys; from pytest_brokerperf.plugin.cli import main; "
         "sys.exit(main())", "report", str(results), "--html", str(html), "--markdown",
         str(md), "--studies"], capture_output=True, text=True, timeout=600, check=False)
    assert report.returncode == 0, report.stderr
    assert "reading per-period series" in report.stderr  # the progress line
    page, summary = html.read_text(), md.read_text()

    # the record's figures, as the run wrote them (one record: pooled = its own)
    row = next(line for line in summary.splitlines()
               if line.startswith("| kafka | tailread") and "study=" not in line)
    if status == "valid":
        assert f"{rec['ack_rate_msg_s']:,.1f}" in row
        assert f"| {_ms(rec['latency']['e2e_response']['p99_us'])} |" in row
        assert _num(rec["ack_rate_msg_s"]) in page
    else:  # a host-noise window is counted, never pooled into the figures
        assert "| 1 | 0/1 |" in row and row.count("| n/a ") == 6, row
    assert rec["run_id"] in page

    # the study's tables: published and ours side by side, in the study's layout
    assert study["params"]["study_source"] == "figure 13"
    assert '### Confluent: "Benchmarking Apache Kafka, Apache Pulsar, and RabbitMQ' in summary
    p99 = next(line for line in summary.splitlines()
               if line.startswith("| p99 end-to-end latency |")).split(" | ")[1]
    ours = study["latency"]["e2e_latency"]["p99_us"] / 1000
    if study_status == "valid":
        want = f"ours {fmt(ours)} ms · ×{fmt(ours / 5)} · valid 1/1 "
    else:
        want = "ours n/a · host-noise 0/1 "
    assert re.fullmatch(r"published 5 ms \[\d+\]<br>" + re.escape(want) + r"\[\d+\]", p99), p99
    assert "1 broker node(s), provisioned as process;" in summary  # this run's set-up
    assert "3 broker instances i3en.2xlarge" in summary  # the study's
    assert "data-study-table='confluent/figure 13'" in page

    # charts over time: the one broker, one point per period that has the figure (the
    # plain run's group: the study case has its own)
    start = page.index(f"{rec['run_id']} {rec['test_id']}")
    group = page[start:min(i for i in (page.find("<h3>", start), page.find("<h2", start))
                           if i >= 0)]
    times = re.findall(r"<figure data-chart='time' data-column='([a-z0-9_]+)'>(.*?)</figure>",
                       group, flags=re.S)
    assert {c for c, _ in times} >= {"publish_rate_msg_s", "consume_rate_msg_s",
                                     "e2e_latency_p50_us"}
    for column, fig in times:
        svg = fig[fig.index("<svg"):fig.index("</svg>") + len("</svg>")]
        assert set(re.findall(r'id="(series-[a-z0-9-]+)"', svg)) == {"series-kafka"}
        # a latency chart (log scale) leaves out periods without the figure
        have = sum(1 for v in timeline[column]
                   if v is not None and (v > 0 or not column.endswith("_us")))
        assert _markers(svg, "series-kafka") == have, column
    for fig in page.split("<figure>")[1:]:  # quantiles, curve, matrix: kafka only
        ids = {i.split("-")[1] for i in re.findall(r'id="(series-[a-z0-9-]+)"', fig)}
        assert ids <= {"kafka"}

    # self-contained, and drawn by a real browser with no network
    assert external_urls(page) == [] and "<script" not in page
    check = check_page(html, pytester.path / "out" / "report.png", height=4000,
                       binary=require_chromium())
    print(f"\nscreenshot: {check.screenshot}\nreport: {html}")
    assert check.svgs_in_dom == page.count("<svg") == check.figures_in_dom >= 6
    assert 'data-study-table="confluent/summary"' in check.dom  # the page Chromium built
    assert series_pixels(check.screenshot)[0] > 300  # kafka's colour (C0) is on screen
