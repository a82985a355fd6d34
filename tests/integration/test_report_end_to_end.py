"""From a real scenario run on a local Kafka to the HTML report, opened in Chromium.

A short tail-read smoke run (the shipped ``scenarios/``, ``--broker=kafka``: the plugin
starts its own broker) writes its results; ``brokerperf report DIR --html --markdown``
turns them into the report; headless Chromium opens the page with no network. Only
functional truths are asserted — the report exists, each chart has one series (the one
broker) with one point per recorded period, the record's figures appear — never speed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_brokerperf.report.render import _ms, _num
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from pytest_brokerperf.testing.chromium import (
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


def test_tailread_on_kafka_to_html_report_in_chromium(pytester: pytest.Pytester) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "tailread", "-k", PLAIN_SCENARIOS, "--broker=kafka",
        f"--brokerperf-results={results}", "--brokerperf-warmup=5",
        "--brokerperf-duration=8", "--brokerperf-rate=2000", "--brokerperf-calibration=off",
        "--brokerperf-inconclusive=warn", "-p", "no:cacheprovider",
        "-W", "default::pytest_brokerperf.warnings.BrokerPerfWarning",
        "--rootdir", str(pytester.path), timeout=600)
    lines = (results / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1, run.stdout.str()
    rec = json.loads(lines[0])
    timeline = rec["timeline"]
    assert len(timeline["t_s"]) == timeline["periods"] > rec["warmup_periods"]
    assert timeline["phase"].count("warmup") == rec["warmup_periods"]

    html, md = pytester.path / "out" / "report.html", pytester.path / "out" / "summary.md"
    report = subprocess.run(
        [sys.executable, "-c", "import sys; from pytest_brokerperf.cli import main; "
         "sys.exit(main())", "report", str(results), "--html", str(html), "--markdown",
         str(md)], capture_output=True, text=True, timeout=600, check=False)
    assert report.returncode == 0, report.stderr
    assert "reading per-period series" in report.stderr  # the progress line
    page, summary = html.read_text(), md.read_text()

    # the record's figures, as the run wrote them (one record: pooled = its own)
    row = next(line for line in summary.splitlines() if line.startswith("| kafka | tailread"))
    assert f"{rec['ack_rate_msg_s']:,.1f}" in row
    assert f"| {_ms(rec['latency']['e2e_response']['p99_us'])} |" in row
    assert _num(rec["ack_rate_msg_s"]) in page and rec["run_id"] in page

    # charts over time: the one broker, one point per period that has the figure
    times = re.findall(r"<figure data-chart='time' data-column='([a-z0-9_]+)'>(.*?)</figure>",
                       page, flags=re.S)
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
    assert series_pixels(check.screenshot)[0] > 300  # kafka's colour (C0) is on screen
