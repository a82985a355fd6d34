"""The ``brokerperf`` fixture's object: run a scenario, judge it, record it.

Outcomes (DESIGN §7): an invalid measurement fails the test with ``INCONCLUSIVE:`` and
the reason (or warns, with ``--brokerperf-inconclusive=warn``) and its SLOs are not
judged; a violated SLO fails the test naming observed value, threshold and unit; a
broker or capability that is missing skips it.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.errors import BrokerPerfError
from pytest_brokerperf.warnings import BrokerPerfWarning

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.engine.coordinator import RunOutcome
    from pytest_brokerperf.scenarios import PreparedRun, Scenario
    from pytest_brokerperf.verdict import Verdict

__all__ = ["BrokerPerf", "ScenarioResult"]

#: Rough per-process ceiling used to size worker pools until calibration measures one.
DEFAULT_PER_PROCESS_RATE = 15_000.0


@dataclass
class ScenarioResult:
    """What one scenario run produced, after verdict and SLO evaluation."""

    prepared: PreparedRun
    outcome: RunOutcome
    verdict: Verdict
    figures: dict[str, float | None]
    slo_results: list[Any]
    record: dict[str, Any]
    artefacts: Path
    failures: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures and not self.inconclusive


def auto_workers(rate: float, clients: int, cpus: tuple[int, ...] | None) -> int:
    """Worker processes for a target rate: enough for the rate, at most one per CPU."""
    limit = len(cpus) if cpus else (os.cpu_count() or 1)
    want = max(1, math.ceil(rate / DEFAULT_PER_PROCESS_RATE))
    return max(1, min(want, limit, max(clients, 1)))


class BrokerPerf:
    """Scenario API for tests: ``brokerperf.run(TailRead(partitions=4))``."""

    def __init__(self, request: pytest.FixtureRequest, broker: BrokerEndpoint,
                 settings: Settings, session_info: dict[str, Any]) -> None:
        self.request = request
        self.broker = broker
        self.settings = settings
        self.session_info = session_info
        self.results: list[ScenarioResult] = []

    # -- public -----------------------------------------------------------------------
    def run(self, scenario: Scenario, *, check: bool = True, slos: tuple[str, ...] = ()
            ) -> ScenarioResult:
        """Run ``scenario`` on this test's broker; judge it unless ``check=False``."""
        try:
            result = self._run(scenario, extra_slos=slos)
        except BrokerPerfError as exc:
            from pytest_brokerperf.errors import BrokerUnavailable

            if isinstance(exc, BrokerUnavailable):
                pytest.skip(str(exc))
            raise
        self.results.append(result)
        if check:
            self.check(result)
        return result

    def check(self, result: ScenarioResult) -> None:
        """Fail the test for an invalid measurement (INCONCLUSIVE) or a violated SLO."""
        if result.inconclusive:
            msg = "INCONCLUSIVE: " + "; ".join(result.inconclusive)
            if self.settings.inconclusive == "warn":
                warnings.warn(BrokerPerfWarning(msg), stacklevel=2)
            else:
                pytest.fail(msg, pytrace=False)
        if result.failures:
            pytest.fail("SLO violated:\n  " + "\n  ".join(result.failures), pytrace=False)

    # -- internals --------------------------------------------------------------------
    def _slos_for(self, prepared: PreparedRun, scenario_slos: tuple[str, ...]) -> list[Any]:
        """Shipped bounds, replaced metric by metric by the user's applicable SLOs.

        User SLOs come from ``@pytest.mark.slo``, ``brokerperf.run(slos=...)`` /
        ``TailRead(slos=...)`` and the ``--brokerperf-slo`` file; all are parsed before any
        load starts, so a typo fails fast.
        """
        from pytest_brokerperf import slo

        user: list[Any] = []
        for mark in self.request.node.iter_markers("slo"):
            user += [slo.parse_slo(e, source=f"@pytest.mark.slo on {self.request.node.nodeid}")
                     for e in mark.args]
        user += [slo.parse_slo(e, source="scenario slos=") for e in scenario_slos]
        if self.settings.slo is not None:
            user += slo.load_slo_file(Path(self.settings.slo))
        return slo.merge_slos(
            prepared.slos, user, broker=self.broker.kind, scenario=prepared.scenario,
            params=prepared.params, env=self.settings.env,
        )

    def _progress(self, line: str) -> None:
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

    def _guard(self, plan: Any) -> None:
        """Show the plan (remote clusters, dry runs), refuse it over a cap, or stop (dry run).

        Nothing has been created yet: the refusal fails the test with the cap and the
        flag that raises it; a dry run skips it, labelled ``DRY RUN``.
        """
        if self.broker.mode == "remote" or self.settings.dry_run:
            for line in plan.lines():
                self._progress(line)
        if plan.refusals:
            pytest.fail("REFUSED before anything was created: " + "; ".join(plan.refusals),
                        pytrace=False)
        if self.settings.dry_run:
            _dry_run_plans(self.request.config).append(plan.lines())
            pytest.skip(f"DRY RUN: plan printed, nothing created ({len(plan.topics)} topic(s), "
                        f"<= {plan.bytes_max:,} bytes, {plan.rate_msg_s:g} msg/s peak)")

    def _run(self, scenario: Scenario, extra_slos: tuple[str, ...]) -> ScenarioResult:
        execute = getattr(scenario, "execute", None)
        if execute is not None:  # a scenario with its own run (the throughput ladder)
            if (self.broker.mode == "remote" or self.settings.dry_run) and not getattr(
                    scenario, "safety_plan", None):
                # DESIGN §7: nothing reaches a remote cluster without a plan and caps.
                what = f"scenario {getattr(scenario, 'name', type(scenario).__name__)!r}"
                if self.settings.dry_run:
                    pytest.skip(f"DRY RUN: {what} cannot print a plan yet; nothing created")
                pytest.fail(f"REFUSED before anything was created: {what} has no remote "
                            "safety plan (caps, retention) yet; run it on a local broker",
                            pytrace=False)
            return execute(self, extra_slos)
        from pytest_brokerperf import results as res
        from pytest_brokerperf import safety, slo
        from pytest_brokerperf.brokers import create_driver
        from pytest_brokerperf.engine.coordinator import (
            RunPlan,
            default_generator_cpus,
            run_workload,
        )
        from pytest_brokerperf.errors import ConfigError
        from pytest_brokerperf.figures import compute_figures
        from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
        from pytest_brokerperf.omb_result import build_omb_result, default_result_filename
        from pytest_brokerperf.safety import format_bytes
        from pytest_brokerperf.summary import SummaryRow, format_progress
        from pytest_brokerperf.verdict import (
            HOST_NOISE,
            Thresholds,
            assess,
            discarded_windows_note,
            noise_note,
        )

        settings = self.settings
        prepared = scenario.prepare(settings, self.broker)
        slos = self._slos_for(
            prepared, (*getattr(scenario, "slos", ()), *extra_slos))
        wl = prepared.workload
        base_dir = prepared.workload_file.parent if prepared.workload_file else None
        seed = int.from_bytes(os.urandom(4), "little")
        payloads = wl.payloads(base_dir, seed=seed)
        driver = create_driver(self.broker, prepared.driver_file, prepared.scenario,
                               stats_interval_ms=max(1000, int(prepared.period_s * 1000)))
        cpus = default_generator_cpus(self.broker.broker_cpus())
        clients = wl.total_producers + wl.total_consumers
        workers = settings.workers or auto_workers(prepared.rate, clients, cpus)
        test_id = self.request.node.nodeid
        plan = RunPlan(
            rate=prepared.rate, period_s=prepared.period_s, warmup_max_s=prepared.warmup_s,
            measure_s=prepared.measure_s, workers=workers,
            topic_prefix=safety.topic_prefix(settings, prepared.scenario, test_id),
            keep_topics=settings.keep_topics, generator_cpus=cpus, seed=seed,
        )
        driver, safety_notes = safety.safe_driver(driver, settings, self.broker, prepared, plan)
        prepared.notes.extend(safety_notes)
        splan = safety.build_plan(settings, self.broker, prepared, driver, plan,
                                  test_id=test_id,
                                  cluster_changes=tuple(getattr(scenario, "cluster_changes", ())))
        self._guard(splan)  # prints, refuses over a cap, stops here in a dry run
        sampler: BrokerMetricsSampler | None = None
        every = max(1, round(5.0 / prepared.period_s))
        verbose = self.request.config.getoption("verbose", 0) > 0
        acked_bytes = 0

        def on_period(p: Any) -> None:
            nonlocal acked_bytes
            if sampler is not None:
                sampler.on_period(p)
            acked_bytes += p.bytes_sent
            if splan.max_bytes is not None and acked_bytes > splan.max_bytes:
                raise ConfigError(f"REFUSED: {format_bytes(acked_bytes)} acknowledged, over "
                                  f"the byte cap {format_bytes(splan.max_bytes)} "
                                  "(--brokerperf-max-bytes); the run was stopped")
            if verbose or p.index % every == every - 1:
                self._progress(format_progress(self.broker.kind, prepared.scenario, p))

        self._progress(
            f"brokerperf: {self.broker.kind} {prepared.scenario} rate={prepared.rate:g} msg/s "
            f"warm-up≤{prepared.warmup_s:g}s measure={prepared.measure_s:g}s "
            f"period={prepared.period_s:g}s workers={workers}"
        )
        thresholds = Thresholds(steal_share=settings.max_steal / 100)
        discarded: list[dict[str, Any]] = []
        for attempt_no in range(1, settings.noise_retries + 2):
            sampler = BrokerMetricsSampler.for_endpoint(self.broker, settings)
            run_plan = plan if attempt_no == 1 else replace(
                plan, topic_prefix=f"{plan.topic_prefix}-m{attempt_no}")  # fresh topics
            if sampler is not None:
                sampler.start()
            try:
                outcome = run_workload(driver, wl, run_plan, payloads=payloads,
                                       on_period=on_period)
            finally:
                if sampler is not None:
                    sampler.stop()
            verdict = assess(outcome, thresholds)
            if verdict.status != HOST_NOISE or attempt_no > settings.noise_retries:
                break
            discarded.append(noise_note(attempt_no, verdict))
            self._progress(
                f"brokerperf: {self.broker.kind} {prepared.scenario}: measured window "
                f"{attempt_no} is host-noise (steal "
                f"{verdict.details['host_steal_share']:.1%}): measuring again "
                f"({attempt_no}/{settings.noise_retries}, --brokerperf-noise-retries)")
        if discarded:
            prepared.notes.append(discarded_windows_note(discarded))
        figures = compute_figures(outcome)
        slo_results = (
            slo.evaluate(slos, figures, context={"broker": self.broker.kind,
                                                 "scenario": prepared.scenario})
            if verdict.judgeable else []
        )
        failures = [r.message for r in slo_results if r.failed]
        inconclusive = list(verdict.reasons) if not verdict.judgeable else []
        inconclusive += [r.message for r in slo_results if r.inconclusive]
        directory, attempt = res.artefact_dir(Path(settings.results_dir), settings.run_id,
                                              test_id)
        manifest = res.manifest(broker=self.broker, prepared=prepared, outcome=outcome,
                                session_info=self.session_info, seed=seed)
        slo_dicts = [
            {"expr": str(r.slo), "metric": r.slo.metric, "observed": r.observed,
             "status": str(r.status), "message": r.message, "source": r.slo.source}
            for r in slo_results
        ]
        record = res.build_record(
            run_id=settings.run_id, test_id=test_id, attempt=attempt, broker=self.broker,
            prepared=prepared, outcome=outcome, verdict=verdict, slo_results=slo_dicts,
            figures=figures, profile=settings.profile, env_label=settings.env,
            artefacts=directory, manifest=manifest,
        )
        record["manifest"]["plan"] = splan.as_dict()
        record["noise_retries"] = discarded
        record["broker_metrics"] = None
        if sampler is not None:
            sampler.write_csv(directory / "broker-metrics.csv")
            record["broker_metrics"] = sampler.summary("broker-metrics.csv")
        stem = prepared.workload_file.stem if prepared.workload_file else prepared.scenario
        omb = build_omb_result(
            workload_name=wl.name or stem, driver_name=driver.name,
            message_size=wl.message_size, topics=wl.topics,
            partitions=wl.partitions_per_topic, producers_per_topic=wl.producers_per_topic,
            consumers_per_topic=wl.consumer_per_subscription, periods=outcome.periods,
            cumulative=outcome.cumulative, period_s=prepared.period_s,
            begin_time=outcome.begin_time, end_time=outcome.end_time,
        )
        from datetime import datetime

        omb_name = default_result_filename(stem, driver.name, datetime.now())
        res.write_artefacts(directory=directory, record=record, prepared=prepared,
                            outcome=outcome, broker=self.broker,
                            results_root=Path(settings.results_dir), omb_result=omb,
                            omb_filename=omb_name)
        if failures:
            slo_text = "FAIL: " + ", ".join(r.slo.metric for r in slo_results if r.failed)
        elif inconclusive:
            slo_text = "inconclusive"
        elif slo_results:
            slo_text = "pass"
        else:
            slo_text = "-"
        row = SummaryRow(
            nodeid=test_id, broker=self.broker.kind, scenario=prepared.scenario,
            params=_short_params(prepared.params), ack_rate=outcome.ack_rate,
            mib_s=outcome.publish_mib_s,
            pub_p50=figures["publish_response.p50"], pub_p99=figures["publish_response.p99"],
            pub_p999=figures["publish_response.p99.9"],
            e2e_p50=figures["e2e_response.p50"], e2e_p99=figures["e2e_response.p99"],
            e2e_p999=figures["e2e_response.p99.9"], verdict=verdict.status, slo=slo_text,
            topology_check=self.broker.topology_check,
        )
        from pytest_brokerperf._stash import SUMMARY_ROWS_KEY

        self.request.config.stash.setdefault(SUMMARY_ROWS_KEY, []).append(row)
        props = self.request.node.user_properties
        for key in ("ack_rate", "publish_mib_s", "publish_response.p99", "e2e_response.p50",
                    "e2e_response.p99", "e2e_response.p99.9", "lost", "duplicates"):
            props.append((f"brokerperf.{key}", figures.get(key)))
        props.append(("brokerperf.verdict", verdict.status))
        if self.broker.topology_check:
            props.append(("brokerperf.topology_check", f"{self.broker.nodes} nodes on one host"))
        props.append(("brokerperf.artefacts", str(directory)))
        return ScenarioResult(prepared=prepared, outcome=outcome, verdict=verdict,
                              figures=figures, slo_results=slo_results, record=record,
                              artefacts=directory, failures=failures,
                              inconclusive=inconclusive)


def _dry_run_plans(config: pytest.Config) -> list[list[str]]:
    from pytest_brokerperf._stash import DRY_RUN_PLANS_KEY

    return config.stash.setdefault(DRY_RUN_PLANS_KEY, [])


def _short_params(params: dict[str, Any]) -> str:
    size = params.get("message_size", 0)
    size_s = f"{size // 1024}KiB" if size and size % 1024 == 0 else f"{size}B"
    rate = params.get("rate", 0)
    rate_s = f"{rate / 1000:g}k" if rate >= 1000 else f"{rate:g}"
    level = params.get("durability")
    level_s = f" d={level}" if level is not None else ""
    return f"p={params.get('partitions')} size={size_s}{level_s} rate={rate_s}"
