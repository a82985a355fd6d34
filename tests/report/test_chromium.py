"""The HTML report in headless Chromium with no network: it opens, and charts render.

Skips (saying why) where Debian's ``chromium`` is not installed, and fails instead under
``CI=true``: ``ci/setup.sh`` installs it, so CI really runs this. The screenshot's path
is printed (``-s``) for a look.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.report.render import html_page
from tests.support.chromium import (
    check_page,
    external_urls,
    require_chromium,
    series_pixels,
)
from tests.support.records import (
    record_with_timeline,
    report_of_records,
    slowed_record,
)

PERIODS = {"kafka": 12, "pulsar": 8, "rabbitmq": 10}

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
pytest.importorskip("PIL", reason="Pillow (a matplotlib dependency) is not installed")


def test_external_urls_finds_what_a_browser_would_fetch() -> None:
    assert external_urls('<img src="https://cdn.example/x.png">')
    assert external_urls("<link href='//cdn.example/a.css'>")
    assert external_urls("<style>body{background:url(http://x/y.png)}</style>")
    assert external_urls('<script src="http://x/plotly.js"></script>')
    # namespaces and in-page references are not fetches
    assert not external_urls('<svg xmlns="http://www.w3.org/2000/svg" '
                             'xmlns:xlink="http://www.w3.org/1999/xlink">'
                             '<use xlink:href="#m1"/></svg>')


def test_report_opens_offline_in_headless_chromium_and_draws_every_chart(
        tmp_path: Path) -> None:
    binary = require_chromium()  # skips without one (fails in CI, which installs it)
    records = [record_with_timeline(b, n, rate=1000.0 * (i + 1), e2e_us=2000.0 * 4**i)
               for i, (b, n) in enumerate(PERIODS.items())]
    records[0]["catchup"] = {"publish_response_p99_before_us": 2000.0,
                             "publish_response_p99_drain_us": 9000.0}
    records[1]["faults"] = [{"t_s": 5.0, "action": "kill-broker"}]
    page = tmp_path / "report.html"
    page.write_text(html_page(report_of_records(records)), encoding="utf-8")
    text = page.read_text()
    assert external_urls(text) == []
    assert "<script" not in text

    check = check_page(page, tmp_path / "report.png", height=6000, binary=binary)
    print(f"\nscreenshot: {check.screenshot}")
    # every chart of the file is in the DOM Chromium built from it, offline
    assert check.svgs_in_dom == text.count("<svg") == check.figures_in_dom
    assert check.figures_in_dom >= 10  # 5 over time, quantiles, curve, matrix, bars, faults
    # and drawn: each broker's series colour (C0..C2) covers real area of the screenshot
    pixels = series_pixels(check.screenshot)
    assert all(n > 300 for n in pixels[:3]), pixels


def test_the_gated_report_draws_the_baseline_offline_in_chromium(tmp_path: Path) -> None:
    """A regression against a 4-run baseline: the page names it a regression, and the
    baseline's curve, band and median over time are in the DOM Chromium builds."""
    binary = require_chromium()
    def rec(broker: str, slow: float, run_id: str) -> dict[str, object]:
        return slowed_record(record_with_timeline(broker, 12, rate=2000.0), slow, run_id)

    cur = [rec("kafka", 2.0, "20260301-000000-cccccc"),  # every latency doubled
           rec("pulsar", 1.0, "20260301-000000-cccccc")]
    base = [rec(b, 1 + 0.02 * i, f"2026020{i}-000000-bbbbbb")
            for i in range(1, 5) for b in ("kafka", "pulsar")]
    report = report_of_records(cur, base, fail_on="e2e_response.p99:+15%")
    assert report.exit_code == 1
    page = tmp_path / "gated.html"
    page.write_text(html_page(report), encoding="utf-8")
    check = check_page(page, tmp_path / "gated.png", height=5000, binary=binary)
    print(f"\nscreenshot: {check.screenshot}")
    assert "Regression gate: <span class=\"regression\">REGRESSION</span>" in check.dom
    for gid in ("baseline-kafka", "band-kafka", "baseline-pulsar"):
        assert f'id="{gid}"' in check.dom, gid
    assert check.svgs_in_dom == page.read_text().count("<svg")
    pixels = series_pixels(check.screenshot)
    assert all(n > 300 for n in pixels[:2]), pixels
