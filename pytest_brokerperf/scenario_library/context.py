"""What a running scenario may use of its pytest test: one public surface.

Scenarios get a :class:`RunContext` instead of the ``brokerperf`` fixture's object, so
they depend on this small surface (settings, broker, progress lines, the safety guard,
the applicable SLOs, the terminal summary and JUnit properties) and not on pytest's
request or the fixture's internals.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.fault_spec import FaultSpec
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.executor import WorkerLauncher
    from pytest_brokerperf.judge.slo import SLO
    from pytest_brokerperf.metrics.stats import PeriodStats
    from pytest_brokerperf.report.session import SessionGate
    from pytest_brokerperf.results.live import LiveArtefacts, ReservedArtefacts
    from pytest_brokerperf.results.prepared import PreparedRun
    from pytest_brokerperf.results.summary_rows import LadderRow, SummaryRow
    from pytest_brokerperf.scenario_library.safety import ScenarioPlan

__all__ = ["RunContext", "SessionSinks"]


@dataclass
class SessionSinks:
    """Where a run's output joins the pytest session: the summary's rows, ladders and
    dry-run plans, the ``--brokerperf-fail-on`` gate and the artefact directory reserved
    for the test. The runner hands them in from the plugin's stash, so a scenario never
    reads the stash itself."""

    summary_rows: list[SummaryRow] = field(default_factory=list)
    ladder_rows: list[LadderRow] = field(default_factory=list)
    dry_run_plans: list[list[str]] = field(default_factory=list)
    #: ``--brokerperf-fail-on``'s budgets and baseline cells (None without the flag)
    gate: SessionGate | None = None
    reserved: ReservedArtefacts | None = None


@dataclass
class RunContext:
    """One test's view of the session while a scenario runs on its broker."""

    request: pytest.FixtureRequest
    broker: BrokerEndpoint
    #: the broker's kind, resolved once by the fixture: its driver and capabilities
    broker_type: BrokerType
    settings: Settings
    session_info: dict[str, Any]
    #: the test's fault (``broker_fault``), injected by scenarios that take faults
    fault: FaultSpec | None = None
    #: record parameters the test adds (a study case's ``case`` and ``study``), merged
    #: into the record's ``params`` and so into its matrix key
    labels: dict[str, Any] = field(default_factory=dict)
    #: notes the test adds to the record (where a study case comes from, its scaling)
    notes: list[str] = field(default_factory=list)
    sinks: SessionSinks = field(default_factory=SessionSinks)
    #: starts the load generators (--brokerperf-executor): None, local worker processes;
    #: the plugin injects a cluster's (plugin/spark_executor.py)
    launcher: WorkerLauncher | None = None
    _artefacts: tuple[Path, int] | None = field(default=None, init=False, repr=False)
    _live: LiveArtefacts | None = field(default=None, init=False, repr=False)
    _live_failed: bool = field(default=False, init=False, repr=False)

    @property
    def test_id(self) -> str:
        return str(self.request.node.nodeid)

    def artefact_directory(self) -> tuple[Path, int]:
        """This run's artefact directory and attempt number, made once per run: the one
        the plugin reserved for the test before its broker started, else a fresh one (a
        test's second ``brokerperf.run``)."""
        if self._artefacts is None:
            reserved = self.sinks.reserved
            if reserved is not None and not reserved.claimed and reserved.path.is_dir():
                reserved.claimed = True
                self._artefacts = (reserved.path, reserved.attempt)
            else:
                from pytest_brokerperf.results.record import artefact_dir

                self._artefacts = artefact_dir(Path(self.settings.results_dir),
                                               self.settings.run_id, self.test_id)
        return self._artefacts

    def record_period(self, p: PeriodStats) -> None:
        """Append a finished stats period to the artefact directory's ``periods.csv`` and
        interval logs. A file that cannot be written is said once, never stops the run
        (the record's writer tries again at the end)."""
        if self._live_failed:
            return
        try:
            if self._live is None:
                from pytest_brokerperf.results.live import LiveArtefacts

                self._live = LiveArtefacts(self.artefact_directory()[0])
            self._live.append(p)
        except OSError as exc:
            from pytest_brokerperf.results.record import write_error

            self._live_failed = True
            where = self.artefact_directory()[0] / (Path(exc.filename).name if exc.filename
                                                    else "periods.csv")
            self.progress(f"brokerperf: RESULTS NOT WRITTEN: {write_error(where, exc)}. The "
                          "run goes on; its record is written when it ends (record.json "
                          "first, bulky artefacts dropped if there is no room)")

    def close_live(self) -> None:
        """Close the files :meth:`record_period` appends to (before they are replaced)."""
        live, self._live = self._live, None
        if live is not None:
            with contextlib.suppress(OSError):
                live.close()

    @property
    def verbose(self) -> bool:
        return int(self.request.config.getoption("verbose", 0) or 0) > 0

    def progress(self, line: str) -> None:
        """Write a progress line to the terminal, past pytest's output capture."""
        config = self.request.config
        tr = config.pluginmanager.getplugin("terminalreporter")
        capman = config.pluginmanager.getplugin("capturemanager")
        if tr is None:
            return
        if capman is not None:
            with capman.global_and_fixture_disabled():
                tr.write_line(line)
        else:
            tr.write_line(line)

    def slos_for(self, prepared: PreparedRun, scenario_slos: tuple[str, ...]) -> list[SLO]:
        """Shipped bounds, replaced metric by metric by the user's applicable SLOs.

        User SLOs come from ``@pytest.mark.slo``, ``brokerperf.run(slos=...)`` /
        ``TailRead(slos=...)`` and the ``--brokerperf-slo`` file; all are parsed before any
        load starts, so a typo fails fast.
        """
        from pytest_brokerperf.judge import slo

        node = self.request.node
        user: list[SLO] = []
        for mark in node.iter_markers("slo"):
            user += [slo.parse_slo(e, source=f"@pytest.mark.slo on {node.nodeid}")
                     for e in mark.args]
        user += [slo.parse_slo(e, source="scenario slos=") for e in scenario_slos]
        if self.settings.slo is not None:
            user += slo.load_slo_file(Path(self.settings.slo))
        return slo.merge_slos(
            prepared.slos, user, broker=self.broker.kind, scenario=prepared.scenario,
            params=prepared.params, env=self.settings.env,
        )

    def guard(self, plan: ScenarioPlan) -> None:
        """Show the plan (remote clusters, dry runs), refuse it over a cap, or stop (dry run).

        Nothing has been created yet: the refusal fails the test with the cap and the
        flag that raises it; a dry run skips it, labelled ``DRY RUN``.
        """
        if self.broker.mode == "remote" or self.settings.dry_run:
            for line in plan.lines():
                self.progress(line)
        if plan.refusals:
            pytest.fail("REFUSED before anything was created: " + "; ".join(plan.refusals),
                        pytrace=False)
        if self.settings.dry_run:
            self.sinks.dry_run_plans.append(plan.lines())
            pytest.skip(f"DRY RUN: plan printed, nothing created ({len(plan.topics)} topic(s), "
                        f"<= {plan.bytes_max:,} bytes, {plan.rate_msg_s:g} msg/s peak)")

    def add_summary_row(self, row: SummaryRow) -> None:
        """A line of the session's "brokerperf summary" table."""
        self.sinks.summary_rows.append(row)

    def add_ladder_row(self, row: LadderRow) -> None:
        """A line of the summary's throughput table."""
        self.sinks.ladder_rows.append(row)

    def add_properties(self, props: list[tuple[str, object]]) -> None:
        """JUnit XML ``<property>`` entries of this test."""
        self.request.node.user_properties.extend(props)
