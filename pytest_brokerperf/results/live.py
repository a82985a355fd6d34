"""The artefact directory while a run is in progress (docs/reference/results.md).

A test's directory is reserved before its fixtures start the broker (the plugin's
``pytest_runtest_setup``), so whatever a run leaves behind — also when it is killed —
is in the one place the record would name. During the run, every stats period is
appended to ``periods.csv`` and to one HdrHistogram interval log per latency view as the
period ends, and flushed (readable at once; written to disk by the OS, with an
``fsync`` only when the run ends, so the run's own disk sees no extra flushes while it
measures). When the run ends, the record's writer replaces them with the record's
periods.
"""

from __future__ import annotations

import contextlib
import csv
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pytest_brokerperf.metrics.hlog import HlogWriter
    from pytest_brokerperf.metrics.stats import PeriodStats

__all__ = ["LiveArtefacts", "ReservedArtefacts"]


@dataclass
class ReservedArtefacts:
    """A test's artefact directory made before its broker started, and its attempt."""

    path: Path
    attempt: int
    claimed: bool = False

    def release_if_unused(self) -> None:
        """Remove the directory when no run used it (a skipped test), and the session's
        run directory when it is empty then: a session that ran nothing leaves nothing."""
        from pytest_brokerperf.results.record import release_record_space

        release_record_space(self.path)  # a run that wrote its record gave it back already
        if self.claimed:
            return
        with contextlib.suppress(OSError):
            self.path.rmdir()  # only when empty
            self.path.parent.rmdir()  # only when empty


@dataclass
class LiveArtefacts:
    """``periods.csv`` and ``histograms/<view>.hlog`` appended period by period."""

    directory: Path
    _csv: TextIO | None = field(default=None, init=False)
    _writer: Any = field(default=None, init=False)
    _hlogs: dict[str, HlogWriter] = field(default_factory=dict, init=False)
    _base_ns: int = field(default=0, init=False)
    periods: int = field(default=0, init=False)

    def append(self, p: PeriodStats) -> None:
        """Append period ``p`` to every file and flush them."""
        from pytest_brokerperf.metrics.hlog import HlogWriter
        from pytest_brokerperf.metrics.stats import METRICS
        from pytest_brokerperf.results.record import PERIODS_HEADER, period_row

        if self._csv is None:
            self._csv = open(self.directory / "periods.csv", "w", newline="",  # noqa: SIM115
                             encoding="utf-8")  # open for the run, closed by close()
            self._writer = csv.writer(self._csv)
            self._writer.writerow(PERIODS_HEADER)
            self._base_ns = p.start_ns
            start_epoch = time.time() - (time.monotonic_ns() - p.start_ns) / 1e9
            hdir = self.directory / "histograms"
            hdir.mkdir(exist_ok=True)
            for metric in METRICS:
                self._hlogs[metric] = HlogWriter(
                    hdir / f"{metric}.hlog", start_epoch_s=start_epoch,
                    comment=f"[brokerperf metric {metric}, values in us]")
        self._writer.writerow(period_row(p))
        self._csv.flush()
        tag = "warmup" if p.phase == "warmup" else None
        for metric, writer in self._hlogs.items():
            hist = p.histograms.get(metric)
            if hist is not None:
                writer.write_interval(hist, (p.start_ns - self._base_ns) / 1e9, p.elapsed_s,
                                      tag)
                writer.flush()
        self.periods += 1

    def close(self) -> None:
        """Flush to disk and close every file (idempotent)."""
        out, self._csv = self._csv, None
        if out is not None:
            out.flush()
            os.fsync(out.fileno())
            out.close()
        hlogs, self._hlogs = self._hlogs, {}
        for writer in hlogs.values():
            writer.close()
