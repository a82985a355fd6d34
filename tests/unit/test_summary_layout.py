"""The summary fits the terminal, shows catch-up figures, and progress lines have a p99
at low rates (issue 23, item 8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.plugin.summary import (
    CatchupFigures,
    SummaryRow,
    format_catchup_table,
    format_progress,
    format_table,
)


def _row(**kw: Any) -> SummaryRow:
    base: dict[str, Any] = dict(
        nodeid="scenarios/test_catchup.py::test_catchup_consumer_only[kafka]", broker="kafka",
        scenario="catchup", params="p=4 size=1KiB rate=1k backlog=9.8MiB", ack_rate=1000.0,
        mib_s=0.98, pub_p50=1234.0, pub_p99=5678.0, pub_p999=12_345.0, e2e_p50=2000.0,
        e2e_p99=8000.0, e2e_p999=15_000.0, verdict="valid", slo="pass")
    base.update(kw)
    return SummaryRow(**base)


def test_a_wide_table_fits_120_columns_and_keeps_every_figure() -> None:
    rows = [_row(), _row(nodeid="scenarios/test_tailread.py::test_tailread[kafka]",
                         scenario="tailread", params="p=4 size=1KiB rate=1k")]
    full = format_table(rows)
    assert max(map(len, full)) > 120  # what wrapped before
    fitted = format_table(rows, 120)
    assert max(map(len, fitted)) <= 120
    text = "\n".join(fitted)
    for value in ("test_catchup.py::test_catchup_consumer_only[kafka]", "1,000", "0.98",
                  "1.23", "5.68", "12.3", "2.00", "8.00", "15.0", "valid", "pass",
                  "backlog=9.8MiB"):
        assert value in text
    # the test's name (and parameters) on its own line, its figures on the next
    i = fitted.index("test_tailread.py::test_tailread[kafka]  p=4 size=1KiB rate=1k")
    assert fitted[i + 1].split()[:2] == ["kafka", "tailread"]


def test_a_table_that_fits_is_unchanged() -> None:
    rows = [_row()]
    assert format_table(rows, 300) == format_table(rows)


def test_a_narrow_terminal_cuts_lines_rather_than_wrapping_them() -> None:
    lines = format_table([_row(slo="FAIL: e2e_response.p99, publish_response.p99.9")], 80)
    assert max(map(len, lines)) <= 80
    assert any(line.endswith("…") for line in lines)


def test_catchup_figures_have_their_own_table() -> None:
    rows = [_row(catchup=CatchupFigures(backlog_bytes=10 * 1024**2, build_s=10.04,
                                        drain_s=3.52, rate_msg_s=6400.0, mib_s=6.25,
                                        cache="hot")),
            _row(nodeid="s/test_tailread.py::test_tailread[kafka]"),
            _row(nodeid="s/test_catchup.py::test_catchup[kafka]",
                 catchup=CatchupFigures(backlog_bytes=2 * 1024**3, build_s=100.0,
                                        drain_s=None, rate_msg_s=None, mib_s=None,
                                        cache="cold"))]
    head, first, second = format_catchup_table(rows)
    assert head.split() == ["test", "backlog", "MiB", "build", "s", "drain", "s",
                            "catch-up", "msg/s", "MiB/s", "cache"]
    assert first.split()[1:] == ["10.0", "10.0", "3.5", "6,400", "6.25", "hot"]
    assert second.split()[1:] == ["2,048", "100.0", "not", "done", "n/a", "n/a", "cold"]


@dataclass
class _Period:
    index: int = 4
    phase: str = "measure"
    target_rate: float = 200.0
    publish_rate: float = 200.0
    consume_rate: float = 200.0
    publish_mib_s: float = 0.2
    backlog: int = 0
    histograms: dict[str, Any] = field(default_factory=dict)


def _hist(n: int, us: float) -> LatencyHistogram:
    h = LatencyHistogram(highest_us=60_000_000)
    for _ in range(n):
        h.record(us)
    return h


def test_progress_p99_over_the_periods_since_the_last_line() -> None:
    """200 msg/s: one 1-s period holds 200 samples, too few for a p99 (n/a on every
    line); the five periods since the last line hold 1,000."""
    period = _Period(histograms={"publish_response": _hist(200, 3000)})
    assert "p99 publish n/a ms" in format_progress("kafka", "tailread", period)
    window = {"publish_response": _hist(1000, 3000), "e2e_response": _hist(1000, 5000)}
    line = format_progress("kafka", "tailread", period, window)
    assert "p99 publish 3.00 ms  e2e 5.00 ms" in line


def test_the_readmes_sample_summary_has_the_real_columns() -> None:
    """The README's sample summary once showed columns the table never had (issue 23,
    item 7): its two header lines must be one of the layouts format_table prints."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("The summary, in a 120-column terminal:\n\n```\n", 1)[1]
    sample = block.split("```", 1)[0].splitlines()
    start = next(i for i, line in enumerate(sample) if "publish" in line and "e2e" in line)
    header = [line.split() for line in sample[start:start + 2]]
    rows = [_row(nodeid="scenarios/test_tailread.py::test_tailread[kafka]",
                 scenario="tailread", params="p=4 size=1KiB rate=1k")]
    layouts = [format_table(rows, width)[:2] for width in (None, 160, 130, 120, 100, 80)]
    assert header in [[line.split() for line in layout] for layout in layouts]
