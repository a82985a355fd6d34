"""Charts that read well and draw the baseline (matplotlib only; no Spark, no browser).

Each assertion is on the SVG a chart writes (element ids from matplotlib's ``gid``,
tick label text) or on the reason text beside it.
"""

from __future__ import annotations

import re

import pytest

from pytest_brokerperf.report.charts import (
    log_ticks,
    matrix_chart,
    median_series,
    quantile_chart,
    tail_gaps,
    time_chart,
)
from pytest_brokerperf.report.render import html_page
from tests.support.records import record_with_timeline, report_of_records

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")


def _baseline_report() -> object:
    cur = [record_with_timeline("kafka", 12, rate=2000.0, run_id="20260301-000000-cccccc",
                                e2e_us=3000.0)]
    base = [record_with_timeline("kafka", 12, rate=2000.0, e2e_us=2000.0 + 50 * i,
                                 run_id=f"2026020{i}-000000-bbbbbb") for i in range(1, 5)]
    return report_of_records(cur, base, fail_on="e2e_response.p99:+15%")


def test_log_axes_get_enough_labelled_ticks() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for lo, hi in ((1.0, 40.0), (2.0, 3.5), (0.08, 900.0)):
        fig, ax = plt.subplots()
        ax.plot([1, 2], [lo, hi])
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        log_ticks(ax)
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        plt.close(fig)
        assert len(labels) >= 3, (lo, hi, labels)
        assert all(re.fullmatch(r"[0-9.]+", t) for t in labels), labels  # plain numbers


def test_the_quantile_chart_draws_the_baseline_curve_and_band() -> None:
    report = _baseline_report()
    cells = list(report.current.cells.values())  # type: ignore[attr-defined]
    svg = quantile_chart("e2e_response", cells, report.aligned)  # type: ignore[attr-defined]
    assert svg is not None
    for gid in ("series-kafka", "baseline-kafka", "band-kafka"):
        assert f'id="{gid}"' in svg, gid
    assert "kafka baseline (4 runs)" in svg
    bare = quantile_chart("e2e_response", cells)
    assert bare is not None and 'id="baseline-kafka"' not in bare


def test_the_chart_over_time_draws_the_baselines_median() -> None:
    report = _baseline_report()
    [rs] = report.series.values()  # type: ignore[attr-defined]
    history = {rs.key: report.history(rs.key)}  # type: ignore[attr-defined]
    assert len(history[rs.key]) == 4
    med = median_series("e2e_latency_p99_us", history[rs.key])
    # synthetic_timeline: period i's p99 is 3 × e2e + i; the median of 2050..2200 × 3
    assert med[0] == (1.0, 3 * (2000.0 + 50 * 2.5))
    svg = time_chart("e2e_latency_p99_us", "e2e p99 (ms)", [rs], divisor=1000.0, log=True,
                     baseline=history)
    assert svg is not None and 'id="baseline-kafka"' in svg
    assert "kafka baseline median (4 runs)" in svg


def test_periods_without_a_tail_say_why_and_draw_the_whole_window() -> None:
    rec = record_with_timeline("kafka", 10, rate=500.0, undersampled=range(10))
    report = report_of_records([rec])
    [rs] = report.series.values()
    [why] = tail_gaps("e2e_latency_p99_us", [rs])
    assert why.startswith("kafka: p99 n/a in 10 of 10 periods: a period needs 1,000 "
                          "samples for a p99 (500 samples)"), why
    assert tail_gaps("e2e_latency_p50_us", [rs]) == []
    svg = time_chart("e2e_latency_p99_us", "e2e p99 (ms)", [rs], divisor=1000.0, log=True,
                     whole={rs.key: 2990.0})
    assert svg is not None and 'id="whole-kafka"' in svg  # drawn, not left out
    page = html_page(report)
    assert "p99 n/a in 10 of 10 periods" in page


def test_the_matrix_sorts_numbers_and_shows_a_missing_cell_as_missing() -> None:
    recs = [record_with_timeline("kafka", None, rate=r, run_id="20260301-000000-cccccc",
                                 params={"rate": r}) for r in (1000.0, 500.0, 2000.0)]
    recs += [record_with_timeline("pulsar", None, rate=r, run_id="20260301-000000-cccccc",
                                  params={"rate": r}) for r in (500.0, 2000.0)]
    cells = list(report_of_records(recs).current.cells.values())
    svg = matrix_chart(cells)
    assert svg is not None
    ticks = re.findall(r"<!-- (rate=[0-9.]+) -->", svg)
    assert ticks == ["rate=500", "rate=1000", "rate=2000"], ticks  # by value, short
    assert 'id="gap-pulsar"' in svg and "missing" in svg
    # the gap is no zero-height bar of the pulsar series
    assert len(re.findall(r'id="series-pulsar-\d+"', svg)) == 2


def test_inconclusive_is_styled_apart_from_regression() -> None:
    cur = [record_with_timeline("kafka", 4, run_id="20260301-000000-cccccc")]
    base = [record_with_timeline("kafka", 4, run_id="20260201-000000-bbbbbb")]
    report = report_of_records(cur, base, fail_on="e2e_response.p99:+15%")
    assert report.exit_code == 3  # one baseline run: no noise floor
    page = html_page(report)
    assert "Regression gate: <span class='inconclusive'>INCONCLUSIVE</span>" in page
    css = page[page.index("<style>"):page.index("</style>")]
    regression = re.search(r"\.regression\{([^}]*)\}", css)
    inconclusive = re.search(r"\.inconclusive[^{]*\{([^}]*)\}", css)
    assert regression and inconclusive and regression[1] != inconclusive[1]
    assert "#b00" in regression[1] and "#b00" not in inconclusive[1]
