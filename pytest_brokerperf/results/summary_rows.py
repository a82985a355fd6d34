"""What a finished scenario run hands to the terminal summary: one row per run, one per
ladder.

The scenarios fill these in and the plugin's :mod:`pytest_brokerperf.plugin.summary` prints them,
so they live below both. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CatchupFigures", "LadderRow", "SummaryRow"]


@dataclass
class SummaryRow:
    """One finished scenario run, as the terminal summary shows it.

    Rates in msg/s and MiB/s, latencies in µs (``None`` = n/a). ``verdict`` is the
    validity verdict (``valid``, ``generator-bound``, ...); ``slo`` is ``"pass"``,
    ``"FAIL: <metric>, ..."``, ``"inconclusive"`` or ``"-"`` (no SLO applied).
    """

    nodeid: str
    broker: str
    scenario: str
    params: str  # short, e.g. "p=4 size=1KiB rate=1k"
    ack_rate: float | None  # acknowledged msg/s in the measured window
    mib_s: float | None  # published MiB/s in the measured window
    pub_p50: float | None  # publish response time (intended send -> ack), µs
    pub_p99: float | None
    pub_p999: float | None
    e2e_p50: float | None  # end-to-end response time (intended send -> receive), µs
    e2e_p99: float | None
    e2e_p999: float | None
    verdict: str
    slo: str
    topology_check: bool = False  # several broker nodes on this one machine
    catchup: CatchupFigures | None = None  # a catch-up run's build, drain, rate, cache
    #: against a baseline (--brokerperf-fail-on): "-" (no gate), "pass",
    #: "REGRESSION: <metric>, ..." or "inconclusive"; a column only when a gate ran
    baseline: str = "-"


@dataclass(frozen=True)
class CatchupFigures:
    """A catch-up run's own figures, shown under the summary table."""

    backlog_bytes: int  # at the drain's start
    build_s: float
    drain_s: float | None  # None: the drain did not finish in time
    rate_msg_s: float | None  # messages read per second of the drain
    mib_s: float | None
    cache: str  # where the drained bytes came from: hot, cold, mixed or unknown


@dataclass
class LadderRow:
    """One throughput ladder in the summary: its rungs, highest sustainable rate, limit."""

    nodeid: str
    broker: str
    mode: str  # ladder | omb-rate-discovery
    rungs: str  # "+1k +5k x50k": + sustainable, x not sustainable, - refused
    highest: float | None  # highest sustainable msg/s
    highest_mib_s: float | None
    limit: str  # generator | client-library | broker-backpressure | not reached at R
    limit_rate: float | None  # the first rung that failed
    knee: float | None
    cpu_top: float | None  # busiest worker's CPU share at the highest sustainable rung
    verdict: str
