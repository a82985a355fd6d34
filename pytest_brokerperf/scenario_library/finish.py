"""The one ending every scenario shares: judge the SLOs, write the record and artefacts,
add the summary row and the JUnit properties.

A scenario measures in its own way (one window, a ladder of rungs, a controller) and
hands :func:`finish` a :class:`Measured`; what a team reads afterwards — the
``results.jsonl`` line, the artefact directory, the terminal summary and the JUnit XML —
is written here and nowhere else, so every scenario's results have the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.judge.verdict import RATE_NOT_SUSTAINED
from pytest_brokerperf.results.record import ScenarioBlocks
from pytest_brokerperf.scenario_library.base import PreparedRun, ScenarioResult

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.judge.slo import SLO, SLOResult
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.metrics.broker import BrokerMetricsSampler
    from pytest_brokerperf.results.summary_rows import CatchupFigures
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.safety import ScenarioPlan

__all__ = ["BROKER_DIED", "INTERRUPTED", "JUNIT_FIGURES", "Measured", "finish", "finish_failed",
           "finish_interrupted", "omb_document", "ratios_text", "short_params"]

#: The verdict of a run a broker death stopped: nothing in it is judged.
BROKER_DIED = "broker-died"
#: The verdict (and ``run_status``) of a run Ctrl-C or SIGTERM stopped: nothing judged.
INTERRUPTED = "interrupted"

#: Figures every scenario reports as JUnit properties (``brokerperf.<figure>``).
JUNIT_FIGURES = ("ack_rate", "publish_mib_s", "publish_response.p99", "e2e_response.p50",
                 "e2e_response.p99", "e2e_response.p99.9", "lost", "duplicates")

#: ``write_extra(directory, omb)``: a scenario's own artefacts; ``omb(outcome)`` is the
#: OMB result document of one of its outcomes.
ExtraWriter = Callable[[Path, Callable[["RunOutcome"], dict[str, Any]]], None]


@dataclass
class Measured:
    """What a scenario measured, handed to :func:`finish`."""

    prepared: PreparedRun
    driver_name: str
    #: the outcome whose figures, latencies and delivery the record reports
    headline: RunOutcome
    verdict: Verdict
    slos: list[SLO]
    seed: int
    plan: ScenarioPlan
    sampler: BrokerMetricsSampler | None = None
    #: the whole session (periods.csv, hlogs, manifest, begin/end times); default headline
    session: RunOutcome | None = None
    #: scenario figures beside the computed ones (``max_sustainable_rate``), SLO-checkable
    extra_figures: dict[str, float | None] = field(default_factory=dict)
    #: scenario blocks of the record (``ladder``, ``throughput``, ``calibration``)
    record_extra: ScenarioBlocks = field(default_factory=lambda: ScenarioBlocks())
    #: measured windows discarded for host noise (or unsteadiness), with their reasons
    noise_retries: list[dict[str, Any]] = field(default_factory=list)
    summary_scenario: str | None = None  # summary table label; default the scenario name
    summary_params: str | None = None  # summary table parameters; default short_params
    #: a catch-up run's build, drain, rate and cache state, for the summary's own table
    summary_catchup: CatchupFigures | None = None
    #: findings that fail the test beside the SLOs (acknowledged messages lost where the
    #: durability level forbids it)
    findings: list[str] = field(default_factory=list)
    #: why the run stopped before its end (a broker died): the record is ``failed``, its
    #: figures are those up to then and its delivery was never reconciled
    failure: str | None = None
    #: the record's ``run_status``; default ``failed`` with a failure, else ``completed``
    run_status: str | None = None
    #: whether an invalid measurement (rate not sustained, host noise) makes the test
    #: INCONCLUSIVE; a fault run's own questions do not need it (its verdict then applies
    #: to the latency figures only, docs/reference/faults.md)
    validity_gates_test: bool = True
    #: reasons the scenario's own question could not be answered (INCONCLUSIVE)
    inconclusive: list[str] = field(default_factory=list)
    junit_figures: tuple[str, ...] = JUNIT_FIGURES
    extra_properties: list[tuple[str, object]] = field(default_factory=list)
    write_extra: ExtraWriter | None = None


def ratios_text(publish_p99: float | None, e2e_p99: float | None, e2e_what: str) -> str:
    """The progress line's ``; during/before publish p99 1.20, e2e p99 0.98`` part."""

    def fmt(r: float | None) -> str:
        return f"{r:.2f}" if r is not None else "n/a"

    return f"; during/before publish p99 {fmt(publish_p99)}, {e2e_what} p99 {fmt(e2e_p99)}"


def short_params(params: dict[str, Any], *, with_rate: bool = True) -> str:
    """The summary table's parameter cell: ``p=16 size=1KiB d=2 rate=10k``."""
    size = params.get("message_size", 0)
    size_s = f"{size // 1024}KiB" if size and size % 1024 == 0 else f"{size}B"
    rate = params.get("rate", 0) or 0
    rate_s = f"{rate / 1000:g}k" if rate >= 1000 else f"{rate:g}"
    level = params.get("durability")
    level_s = f" d={level}" if level is not None else ""
    head = f"p={params.get('partitions')} size={size_s}{level_s}"
    return f"{head} rate={rate_s}" if with_rate else head


def omb_document(prepared: PreparedRun, driver_name: str, out: RunOutcome) -> dict[str, Any]:
    """OMB's result JSON for one outcome of this run."""
    from pytest_brokerperf.results.omb import build_omb_result

    wl = prepared.workload
    stem = prepared.workload_file.stem if prepared.workload_file else prepared.scenario
    return build_omb_result(
        workload_name=wl.name or stem, driver_name=driver_name,
        message_size=wl.message_size, topics=wl.topics,
        partitions=wl.partitions_per_topic, producers_per_topic=wl.producers_per_topic,
        consumers_per_topic=wl.consumer_per_subscription, periods=out.periods,
        cumulative=out.cumulative, period_s=prepared.period_s,
        begin_time=out.begin_time, end_time=out.end_time,
    )


def _slo_text(slo_results: list[SLOResult], failures: list[str],
              inconclusive: list[str]) -> str:
    """The summary's SLO column: budgets only (a baseline's regression has its own)."""
    if failures:
        failed = [r.slo.metric for r in slo_results if r.failed]
        return "FAIL: " + (", ".join(failed) if failed else "finding")
    if inconclusive:
        return "inconclusive"
    return "pass" if slo_results else "-"


def finish(ctx: RunContext, m: Measured) -> ScenarioResult:
    """Judge ``m``'s SLOs (only for a valid measurement), write its record and artefacts,
    add its summary row and JUnit properties; the scenario's result."""
    from pytest_brokerperf.judge import slo
    from pytest_brokerperf.results import record as res
    from pytest_brokerperf.results.figures import compute_figures
    from pytest_brokerperf.results.omb import default_result_filename
    from pytest_brokerperf.results.summary_rows import SummaryRow

    settings, broker, prepared = ctx.settings, ctx.broker, m.prepared
    prepared.params.update(ctx.labels)
    prepared.notes.extend(n for n in ctx.notes if n not in prepared.notes)
    headline, session = m.headline, m.session or m.headline
    if m.sampler is not None:  # the brokers' RSS, open files and threads per period
        m.sampler.attach_resources([*session.warmup, *session.periods])
    figures = compute_figures(headline)
    figures.update(m.extra_figures)
    slo_results = (slo.evaluate(m.slos, figures, context={"broker": broker.kind,
                                                           "scenario": prepared.scenario})
                   if m.verdict.judgeable else [])
    if m.verdict.status == RATE_NOT_SUSTAINED and broker.topology_check:
        m.verdict.reasons.append(
            f"topology check: {broker.nodes} broker nodes share this machine, so the "
            "shortfall is the machine's limit, not the cluster's")
    if broker.mode != "remote":
        # the harness chose this layout: say when it is not a clean split (docs/
        # explanation/measurement.md, "CPU layout")
        from pytest_brokerperf.metrics.cpus import cpu_layout

        layout = cpu_layout(broker.broker_cpus(), headline.plan.generator_cpus,
                            headline.coordinator_cpus)
        if layout["note"]:
            m.verdict.details["cpu_layout"] = layout["note"]
    failures = [*m.findings, *(r.message for r in slo_results if r.failed)]
    gated = m.validity_gates_test and not m.verdict.judgeable
    inconclusive = [*(m.verdict.reasons if gated else []), *m.inconclusive]
    inconclusive += [r.message for r in slo_results if r.inconclusive]

    results_root = Path(settings.results_dir)
    directory, attempt = ctx.artefact_directory()  # made before the broker started
    manifest = res.manifest(broker=broker, prepared=prepared, outcome=session,
                            session_info=ctx.session_info, seed=m.seed)
    manifest["plan"] = m.plan.as_dict()
    record = res.build_record(
        run_id=settings.run_id, test_id=ctx.test_id, attempt=attempt, broker=broker,
        prepared=prepared, outcome=headline, verdict=m.verdict,
        slo_results=[r.as_record() for r in slo_results], figures=figures,
        profile=settings.profile, env_label=settings.env, artefacts=directory,
        manifest=manifest, broker_type=ctx.broker_type,
    )
    record["begin_time"] = session.begin_time
    record["end_time"] = session.end_time
    record["noise_retries"] = m.noise_retries
    record["broker_metrics"] = None
    record["run_status"] = m.run_status or ("failed" if m.failure else "completed")
    record["failure"] = m.failure
    if m.failure:
        record["delivery"] = {
            "reconciled": False,
            "why": "the run stopped before its drain: nothing can be said of loss",
            "acknowledged_until_then": sum(p.messages_sent for p in (
                *session.warmup, *session.periods)),
        }
    record.update(m.record_extra)
    from pytest_brokerperf.report.session import apply_gate

    slo_text = _slo_text(slo_results, failures, inconclusive)  # before the gate's lines
    regressions: list[str] = []
    gate_text = apply_gate(ctx.sinks.gate, record, regressions, inconclusive)
    if m.sampler is not None:
        m.sampler.write_csv(directory / "broker-metrics.csv")
        record["broker_metrics"] = m.sampler.summary("broker-metrics.csv")

    stem = prepared.workload_file.stem if prepared.workload_file else prepared.scenario
    now = datetime.now()
    ctx.close_live()  # the files appended during the run are replaced below
    from pytest_brokerperf.core.interrupts import signals_deferred

    with signals_deferred():  # a Ctrl-C now stops the session once the record is written
        if m.write_extra is not None:
            m.write_extra(directory, lambda out: omb_document(prepared, m.driver_name, out))
        res.write_artefacts(directory=directory, record=record, prepared=prepared,
                            outcome=session, broker=broker, results_root=results_root,
                            omb_result=omb_document(prepared, m.driver_name, headline),
                            omb_filename=default_result_filename(stem, m.driver_name, now))

    ctx.add_summary_row(SummaryRow(
        nodeid=ctx.test_id, broker=broker.kind,
        scenario=m.summary_scenario or prepared.scenario,
        params=m.summary_params if m.summary_params is not None else short_params(
            prepared.params),
        ack_rate=headline.ack_rate, mib_s=headline.publish_mib_s,
        pub_p50=figures["publish_response.p50"], pub_p99=figures["publish_response.p99"],
        pub_p999=figures["publish_response.p99.9"],
        e2e_p50=figures["e2e_response.p50"], e2e_p99=figures["e2e_response.p99"],
        e2e_p999=figures["e2e_response.p99.9"], verdict=m.verdict.status,
        slo=slo_text,
        topology_check=broker.topology_check, catchup=m.summary_catchup,
        baseline=gate_text,
    ))
    props: list[tuple[str, object]] = [(f"brokerperf.{k}", figures.get(k))
                                       for k in m.junit_figures]
    props.append(("brokerperf.verdict", m.verdict.status))
    if broker.topology_check:
        props.append(("brokerperf.topology_check", f"{broker.nodes} nodes on one host"))
    props += m.extra_properties
    props.append(("brokerperf.artefacts", str(directory)))
    ctx.add_properties(props)
    return ScenarioResult(prepared=prepared, outcome=headline, verdict=m.verdict,
                          figures=figures, slo_results=slo_results, record=record,
                          artefacts=directory, failures=failures, inconclusive=inconclusive,
                          regressions=regressions)


def _periods_done(m: Measured) -> tuple[int, int]:
    """(measured, warm-up) stats periods of ``m``'s session: every phase's periods but
    the warm-ups (a run of several phases keeps them in its periods, labelled)."""
    session = m.session or m.headline
    warm = len(session.warmup) + sum(p.phase == "warmup" for p in session.periods)
    return len(session.periods) + len(session.warmup) - warm, warm


def finish_failed(ctx: RunContext, m: Measured, exc: Exception, *,
                  phase: str | None = None) -> None:
    """Write the record of a run that a broker death stopped: ``run_status: failed``,
    the figures up to the death, the verdict ``broker-died`` with the reason (and the
    ``phase`` it stopped in, for a run of several); the caller re-raises ``exc`` (the
    test errors with the broker's name, status and log tail).

    Best effort: a failure to write is added to the exception's notes, never hides it.
    """
    from pytest_brokerperf.judge.verdict import Verdict

    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if phase is not None:
        first_line += (f"; the run stopped during {phase} after {_periods_done(m)[0]} "
                       "measured period(s)")
    m.verdict = Verdict(status=BROKER_DIED, reasons=[first_line])
    m.failure = str(exc)
    try:
        finish(ctx, m)
    except Exception as write_exc:  # the death is the story; say the record is missing
        exc.add_note(f"brokerperf: the failed run's record could not be written: "
                     f"{write_exc!r}")


def finish_interrupted(ctx: RunContext, m: Measured, exc: BaseException, *,
                       phase: str | None = None) -> None:
    """Write the record of a run Ctrl-C (SIGINT) or SIGTERM stopped: ``run_status:
    interrupted``, the periods and figures completed until then, the verdict
    ``interrupted`` (its reason names the ``phase`` it stopped in, for a run of
    several); the caller re-raises ``exc`` so pytest stops as it would.

    A second Ctrl-C or SIGTERM while the record is written waits until it is written
    (both are held back meanwhile, then delivered). Best effort, as
    :func:`finish_failed`.
    """
    from pytest_brokerperf.core.interrupts import signals_deferred
    from pytest_brokerperf.judge.verdict import Verdict

    what = getattr(exc, "signal_name", "SIGINT")
    done, warm = _periods_done(m)
    during = f" during {phase}" if phase is not None else ""
    reason = f"interrupted by {what}{during} after {done} measured period(s) ({warm} warm-up)"
    m.verdict = Verdict(status=INTERRUPTED, reasons=[reason])
    m.failure = reason
    m.run_status = INTERRUPTED
    with signals_deferred():
        try:
            finish(ctx, m)
        except Exception as write_exc:
            exc.add_note(f"brokerperf: the interrupted run's record could not be written: "
                         f"{write_exc!r}")
