"""The ``brokerperf`` fixture's object: run a scenario, judge it, record it.

Outcomes (docs/explanation/measurement.md): an invalid measurement fails the test with
``INCONCLUSIVE:`` and the reason (or warns, with ``--brokerperf-inconclusive=warn``) and
its SLOs are not judged; a violated SLO fails the test naming observed value, threshold
and unit; a broker or capability that is missing skips it.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.core.errors import BrokerPerfError, BrokerUnavailable
from pytest_brokerperf.core.warnings import BrokerPerfWarning
from pytest_brokerperf.judge.verdict import RATE_NOT_SUSTAINED
from pytest_brokerperf.plugin.stash import (
    ARTEFACTS_KEY,
    DRY_RUN_PLANS_KEY,
    GATE_KEY,
    LADDER_ROWS_KEY,
    SUMMARY_ROWS_KEY,
)
from pytest_brokerperf.scenario_library.base import (
    DEFAULT_PER_PROCESS_RATE,
    Scenario,
    ScenarioResult,
    auto_workers,
)
from pytest_brokerperf.scenario_library.context import RunContext, SessionSinks

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.fault_spec import FaultSpec
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.plugin.spark_executor import SparkGenerators
    from pytest_brokerperf.scenario_library.study_cases import StudyCase

__all__ = ["DEFAULT_PER_PROCESS_RATE", "BrokerPerf", "ScenarioResult", "auto_workers"]


class BrokerPerf:
    """Scenario API for tests: ``brokerperf.run(TailRead(partitions=4))``."""

    def __init__(self, request: pytest.FixtureRequest, broker: BrokerEndpoint,
                 settings: Settings, session_info: dict[str, Any], *,
                 broker_type: BrokerType, fault: FaultSpec | None = None) -> None:
        self.request = request
        self.broker = broker
        #: resolved once by the ``broker_type`` fixture: driver, capabilities, durability
        self.broker_type = broker_type
        self.settings = settings
        self.session_info = session_info
        self.fault = fault
        self.results: list[ScenarioResult] = []

    def run_case(self, case: StudyCase, *, check: bool = True, slos: tuple[str, ...] = ()
                 ) -> ScenarioResult:
        """Run a published study's case (``scenarios/``) scaled to the session's profile.

        The record's ``params`` carry ``study`` and ``case``, its notes what the profile
        shrank. Under ``--brokerperf-profile=omb`` a case this machine cannot produce is
        refused (skipped with the reason) before any load: a rate above the calibrated
        generator, or more data than the local broker's disk holds.
        """
        from pytest_brokerperf.engine.coordinator import default_generator_cpus
        from pytest_brokerperf.scenario_library import study_cases

        if not isinstance(case, study_cases.StudyCase):
            raise TypeError(f"brokerperf.run_case() takes a StudyCase, got {case!r}")
        workdir = Path(self.request.getfixturevalue("tmp_path"))
        # a case runs its study's numbers, never the user's workload file: its record
        # must not name that file (the plugin deselects cases when a file is given)
        settings = replace(self.settings, workload=None)
        try:
            scenario, scaled = case.build(settings, self.broker, workdir / "drivers",
                                          self.broker_type)
        except BrokerUnavailable as exc:
            pytest.skip(str(exc))
        if settings.profile == "omb":
            cpus = default_generator_cpus(self.broker.broker_cpus())
            driver = None
            # no calibration load on a remote cluster, nor in a dry run (which starts,
            # loads and writes nothing: a cached ceiling is used when there is one)
            measure = not settings.dry_run
            if self.broker.mode != "remote" and measure:
                driver = self.broker_type.create_driver(
                    self.broker, getattr(scenario, "driver_file", None),
                    scenario=case.scenario)
            local = self.broker.local
            data = Path(local.data_dirs[0]) if local is not None and local.data_dirs else workdir
            reasons = study_cases.refusals(
                scaled, settings, nodes=self.broker.nodes,
                remote=self.broker.mode == "remote", data_dir=data,
                generator=study_cases.generator_capacity(
                    scaled, settings, cpus, measure=measure, driver=driver,
                    broker=(self.broker.kind, self.broker.version)))
            if reasons:
                pytest.skip(f"REFUSED under --brokerperf-profile=omb (nothing was created): "
                            f"study case {case.study} {case.id}: " + "; ".join(reasons))
        notes = scaled.all_notes()
        server = case.server_settings_for(self.broker.kind)
        if server and self.broker.mode == "remote":
            notes.append("study deviation: not verified that the cluster runs with the "
                         f"study's broker settings: {'; '.join(server)}")
        elif server:  # a broker of its own, started with them
            notes.append("study case: the broker was started with the study's broker "
                         f"settings: {'; '.join(server)} (the manifest's broker_overrides)")
        study_driver = dict(case.drivers).get(self.broker.kind)
        if study_driver is not None and settings.driver:
            notes.append(f"study deviation: --brokerperf-driver={settings.driver} "
                         f"replaces the study's driver file {study_driver}.yaml")
        if case.drop_page_cache and not settings.dry_run:
            if self.broker.mode == "remote":
                notes.append("study deviation: the page cache of the remote brokers was not "
                             "dropped before the run (drop it on their hosts)")
            else:
                why = study_cases.drop_page_cache()
                notes.append(f"study deviation: {why}" if why else
                             "the host's page cache was dropped before the run (as the study)")
        return self._run(scenario, settings, check=check, slos=slos, labels=scaled.labels,
                         notes=notes)

    def run(self, scenario: Scenario, *, check: bool = True, slos: tuple[str, ...] = (),
            labels: dict[str, Any] | None = None, notes: list[str] | None = None
            ) -> ScenarioResult:
        """Run ``scenario`` on this test's broker; judge it unless ``check=False``.
        ``labels`` join the record's ``params`` (its matrix key), ``notes`` its notes."""
        return self._run(scenario, self.settings, check=check, slos=slos, labels=labels,
                         notes=notes)

    def _run(self, scenario: Scenario, settings: Settings, *, check: bool,
             slos: tuple[str, ...], labels: dict[str, Any] | None,
             notes: list[str] | None) -> ScenarioResult:
        if not isinstance(scenario, Scenario):
            raise TypeError(f"brokerperf.run() takes a Scenario (TailRead(), Throughput(), "
                            f"...), got {scenario!r}")
        if (self.broker.mode == "remote" or self.settings.dry_run) and not scenario.safety_plan:
            # nothing reaches a remote cluster without a plan and caps (docs/how-to/remote.md)
            what = f"scenario {scenario.name!r}"
            if self.settings.dry_run:
                pytest.skip(f"DRY RUN: {what} cannot print a plan yet; nothing created")
            pytest.fail(f"REFUSED before anything was created: {what} has no remote "
                        "safety plan (caps, retention) yet; run it on a local broker",
                        pytrace=False)
        if self.fault is not None and not scenario.takes_faults:
            pytest.fail(f"REFUSED before anything was created: fault {self.fault} asked for "
                        f"scenario {scenario.name!r}, which does not inject faults; faults "
                        "run with the tail-read scenario (docs/reference/faults.md)",
                        pytrace=False)
        ctx = RunContext(self.request, self.broker, self.broker_type, settings,
                         self.session_info,
                         fault=self.fault, labels=dict(labels or {}), notes=list(notes or ()),
                         sinks=_session_sinks(self.request),
                         launcher=spark_generators(self.request.config, settings))
        from pytest_brokerperf.core.interrupts import sigterm_interrupts

        try:
            with sigterm_interrupts():  # a SIGTERM leaves the record as Ctrl-C does
                result = scenario.execute(ctx, slos)
        except BrokerUnavailable as exc:
            pytest.skip(str(exc))
        except BrokerPerfError:
            raise
        finally:
            ctx.close_live()
        self.results.append(result)
        if check:
            self.check(result)
        return result

    def check(self, result: ScenarioResult) -> None:
        """Fail the test for a rate not sustained, an invalid measurement (INCONCLUSIVE)
        or a violated SLO."""
        if result.verdict.status == RATE_NOT_SUSTAINED and not self.broker.topology_check:
            # the broker's limit at this rate: a finding, never only a warning (under a
            # topology check it is the machine's, reported like any invalid measurement)
            pytest.fail("RATE NOT SUSTAINED: " + "; ".join(result.verdict.reasons),
                        pytrace=False)
        if result.inconclusive:
            msg = "INCONCLUSIVE: " + "; ".join(result.inconclusive)
            if self.settings.inconclusive == "warn":
                warnings.warn(BrokerPerfWarning(msg), stacklevel=2)
            else:
                pytest.fail(msg, pytrace=False)
        problems = []
        if result.failures:
            problems.append("SLO violated:\n  " + "\n  ".join(result.failures))
        if result.regressions:  # a baseline's finding, never called an SLO
            problems.append("REGRESSION against the baseline:\n  "
                            + "\n  ".join(result.regressions))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


def _session_sinks(request: pytest.FixtureRequest) -> SessionSinks:
    """The session's lists a run appends to, its gate and the test's reserved artefact
    directory, from the plugin's stash."""
    stash = request.config.stash
    return SessionSinks(summary_rows=stash.setdefault(SUMMARY_ROWS_KEY, []),
                        ladder_rows=stash.setdefault(LADDER_ROWS_KEY, []),
                        dry_run_plans=stash.setdefault(DRY_RUN_PLANS_KEY, []),
                        gate=stash.get(GATE_KEY, None),
                        reserved=request.node.stash.get(ARTEFACTS_KEY, None))


def spark_generators(config: pytest.Config, settings: Settings) -> SparkGenerators | None:
    """The session's Spark launcher under ``--brokerperf-executor=spark`` (made once,
    its SparkSession stopped as the pytest session ends); None for local workers."""
    if settings.executor != "spark":
        return None
    from pytest_brokerperf.config.options import DEFAULT_GENERATORS
    from pytest_brokerperf.plugin.spark_executor import SparkGenerators
    from pytest_brokerperf.plugin.stash import SPARK_KEY

    launcher = config.stash.get(SPARK_KEY, None)
    if launcher is None:
        launcher = SparkGenerators(settings.spark_master,
                                   settings.generators or DEFAULT_GENERATORS)
        config.stash[SPARK_KEY] = launcher
        config.add_cleanup(launcher.shutdown)
    return launcher
