"""Stash keys shared by the plugin's hooks and fixtures (``config.stash[KEY]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the summary module reads these keys: types only, no import cycle
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.plugin.spark_executor import SparkGenerators
    from pytest_brokerperf.report.session import SessionGate
    from pytest_brokerperf.results.live import ReservedArtefacts
    from pytest_brokerperf.results.summary_rows import LadderRow, SummaryRow

__all__ = ["ARTEFACTS_KEY", "DRY_RUN_PLANS_KEY", "GATE_KEY", "LADDER_ROWS_KEY", "SETTINGS_KEY",
           "SPARK_KEY", "SUMMARY_ROWS_KEY"]

#: The session's Spark generator launcher (--brokerperf-executor=spark), made by the
#: first run that needs it; its SparkSession is stopped as the session ends.
SPARK_KEY: pytest.StashKey[SparkGenerators] = pytest.StashKey()

#: The session's resolved settings, set once in ``pytest_configure``.
SETTINGS_KEY: pytest.StashKey[Settings] = pytest.StashKey()

#: One row per finished scenario run, appended by the ``brokerperf`` fixture and
#: printed by ``pytest_terminal_summary``; set to an empty list in ``pytest_configure``.
SUMMARY_ROWS_KEY: pytest.StashKey[list[SummaryRow]] = pytest.StashKey()

#: The plans printed by ``--brokerperf-dry-run`` (one list of lines per scenario), shown
#: again in the terminal summary.
DRY_RUN_PLANS_KEY: pytest.StashKey[list[list[str]]] = pytest.StashKey()

#: One row per throughput ladder (or rate discovery), printed under the summary table.
LADDER_ROWS_KEY: pytest.StashKey[list[LadderRow]] = pytest.StashKey()

#: ``--brokerperf-fail-on``: the budgets and the baseline's cells, loaded at session start.
GATE_KEY: pytest.StashKey[SessionGate] = pytest.StashKey()

#: A scenario test's artefact directory, reserved (made) before its fixtures start the
#: broker; the test's first run writes into it (``item.stash``).
ARTEFACTS_KEY: pytest.StashKey[ReservedArtefacts] = pytest.StashKey()

#: How many study, sweep and ``own_workload`` tests a ``--brokerperf-workload`` file
#: deselected (they never run the file); said after collection.
OWN_WORKLOAD_KEY: pytest.StashKey[int] = pytest.StashKey()
