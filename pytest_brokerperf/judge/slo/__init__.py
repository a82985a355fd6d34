"""SLO expressions, SLO files and their evaluation against a run's figures.

An SLO is ``<metric> <op> <number> [unit]``, e.g. ``"e2e_response.p99 < 50 ms"``. The package
keeps one job per module:

* :mod:`.vocabulary`: the metrics, operators and units an SLO may name;
* :mod:`.selector`: ``when`` selectors (which runs an SLO applies to);
* :mod:`.expression`: the :class:`SLO` type and the expression parser;
* :mod:`.files`: SLO files (``--brokerperf-slo``, ``slos:`` lists) with file:line errors;
* :mod:`.shipped`: the shipped sanity bounds and how user SLOs replace them;
* :mod:`.judge`: :func:`evaluate`, what judges an SLO against a run's figures.

Figures handed to :func:`evaluate` use fixed units: time in **microseconds**, rates in
msg/s, throughput in MiB/s, counts as numbers. A figure that is ``None`` or NaN (a
percentile with too few samples) or absent makes the SLO *inconclusive*, never a pass.
None of these modules imports pytest: the plugin turns :class:`SLOResult` into test
outcomes.
"""

from __future__ import annotations

from pytest_brokerperf.judge.slo.expression import (
    SLO as SLO,
)
from pytest_brokerperf.judge.slo.expression import (
    parse_slo as parse_slo,
)
from pytest_brokerperf.judge.slo.files import (
    load_slo_file as load_slo_file,
)
from pytest_brokerperf.judge.slo.judge import (
    SLOResult as SLOResult,
)
from pytest_brokerperf.judge.slo.judge import (
    evaluate as evaluate,
)
from pytest_brokerperf.judge.slo.judge import (
    judged_percentile as judged_percentile,
)
from pytest_brokerperf.judge.slo.selector import (
    Selector as Selector,
)
from pytest_brokerperf.judge.slo.shipped import (
    CATCHUP_SANITY_SLOS as CATCHUP_SANITY_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    MIXED_SANITY_SLOS as MIXED_SANITY_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    REASSIGN_SANITY_SLOS as REASSIGN_SANITY_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    SHIPPED_SLOS as SHIPPED_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    TAIL_READ_SANITY_SLOS as TAIL_READ_SANITY_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    THROUGHPUT_SANITY_SLOS as THROUGHPUT_SANITY_SLOS,
)
from pytest_brokerperf.judge.slo.shipped import (
    merge_slos as merge_slos,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    EXPR_SOURCE as EXPR_SOURCE,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    METRICS as METRICS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    OPERATORS as OPERATORS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    PERCENT_OF as PERCENT_OF,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    SCALARS as SCALARS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    STATS as STATS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    UNITS as UNITS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    VIEWS as VIEWS,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    SLOStatus as SLOStatus,
)
from pytest_brokerperf.judge.slo.vocabulary import (
    metric_kind as metric_kind,
)

__all__ = [
    "CATCHUP_SANITY_SLOS",
    "METRICS",
    "MIXED_SANITY_SLOS",
    "OPERATORS",
    "REASSIGN_SANITY_SLOS",
    "SCALARS",
    "SHIPPED_SLOS",
    "SLO",
    "STATS",
    "TAIL_READ_SANITY_SLOS",
    "THROUGHPUT_SANITY_SLOS",
    "UNITS",
    "VIEWS",
    "SLOResult",
    "SLOStatus",
    "Selector",
    "evaluate",
    "load_slo_file",
    "merge_slos",
    "parse_slo",
]
