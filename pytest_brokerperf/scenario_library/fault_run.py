"""A tail-read window with a fault in it: a broker node killed, paused or restarted.

The window before the fault shows that the harness measured soundly (its verdict is the
run's verdict); the periods from the fault on are the fault's effect, reported in the
record's ``fault`` block (unavailability, client errors, the longest publish wait) and
its ``faults`` events. Messages lost are judged against the durability level
(:mod:`pytest_brokerperf.faults.judge`). The shipped latency bounds do not apply: the
window holds the outage by design; the user's SLOs do. See docs/reference/faults.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.config.fault_spec import MIN_PERIODS_BEFORE
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.node_control import NodeControl
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import RunOutcome, SessionEnd
    from pytest_brokerperf.faults.injector import FaultInjector
    from pytest_brokerperf.faults.judge import FaultVerdict
    from pytest_brokerperf.judge.verdict import Verdict
    from pytest_brokerperf.scenario_library.base import PreparedRun, Scenario, ScenarioResult
    from pytest_brokerperf.scenario_library.context import RunContext
    from pytest_brokerperf.scenario_library.finish import Measured
    from pytest_brokerperf.scenario_library.session import RunSession

__all__ = ["FAULT_FAILED", "MIN_PERIODS_BEFORE", "run_with_fault", "window_before"]

#: The verdict of a run whose fault did not happen as asked: nothing in it is judged.
FAULT_FAILED = "fault-failed"


def window_before(outcome: RunOutcome, t_ns: int | None) -> RunOutcome:
    """``outcome`` cut to the measured periods that ended before ``t_ns`` (the fault)."""
    if t_ns is None:
        return outcome
    before = [p for p in outcome.periods if p.start_ns + int(p.elapsed_s * 1e9) <= t_ns]
    if not before:
        return replace(outcome, periods=[], cumulative={})
    cumulative = {m: h.copy() for m, h in before[0].histograms.items()}
    for p in before[1:]:
        for m, h in p.histograms.items():
            cumulative[m].add(h)
    return replace(outcome, periods=before, cumulative=cumulative)


def _check_timing(ctx: RunContext, at_s: float, period_s: float, measure_s: float) -> None:
    from pytest_brokerperf.config.fault_spec import timing_problem

    assert ctx.fault is not None and ctx.fault.at_s == at_s
    problem = timing_problem(ctx.fault, period_s, measure_s)
    if problem is not None:
        raise ConfigError(problem)


def _fault_prepared(ctx: RunContext, scenario: Scenario) -> tuple[PreparedRun, NodeControl]:
    """Refuse a fault this session cannot inject (before anything is created), else the
    run prepared for it (no shipped latency bounds: the window holds the outage) and the
    control over the broker's nodes."""
    from pytest_brokerperf.brokers.node_control import control_for
    from pytest_brokerperf.faults.offered import power_cut_problem

    fault, broker, settings = ctx.fault, ctx.broker, ctx.settings
    assert fault is not None
    if broker.mode == "remote":
        pytest.fail(f"REFUSED before anything was created: fault {fault} on a remote "
                    "cluster; faults disrupt only brokers this session started",
                    pytrace=False)
    problem = power_cut_problem(fault, broker.kind, broker.mode)
    if problem is not None:  # a marker's power cut (the flag's is refused at start-up)
        pytest.fail(f"REFUSED before anything was created: {problem}", pytrace=False)
    control = control_for(broker)
    if control is None:
        raise BrokerUnavailable(
            f"fault {fault}: this session did not start the {broker.kind} broker at "
            f"{broker.bootstrap} ({broker.mode} mode), so it has no control over its nodes; "
            "faults run on brokers the plugin starts (process or container mode)")
    prepared = scenario.prepare(settings, broker)
    _check_timing(ctx, fault.at_s, prepared.period_s, prepared.measure_s)
    prepared = replace(prepared, slos=(), params={**prepared.params, "fault": fault.text()})
    prepared.notes.append(
        f"fault {fault}: the shipped latency bounds do not apply (the window holds the "
        "outage); acknowledged messages lost are judged by the durability level")
    if fault.whole_cluster:
        prepared.notes.append(f"fault {fault}: every node of the {broker.kind} cluster "
                              f"({control.node_count()}) loses its power at the same instant")
    elif control.node_count() == 1:
        prepared.notes.append(f"fault {fault}: a single-node {broker.kind}: the fault takes "
                              "the whole broker down")
    return prepared, control


def run_with_fault(ctx: RunContext, scenario: Scenario,
                   extra_slos: tuple[str, ...]) -> ScenarioResult:
    """Run ``scenario`` (a fixed-rate tail read) with ``ctx.fault`` in its window."""
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.faults.injector import FaultInjector
    from pytest_brokerperf.faults.judge import judge_fault
    from pytest_brokerperf.scenario_library.session import RunSession

    fault, broker = ctx.fault, ctx.broker
    assert fault is not None
    prepared, control = _fault_prepared(ctx, scenario)
    run = RunSession(ctx, scenario, extra_slos, prepared=prepared, phases=False)
    watch = run.guard(cluster_changes=(f"fault {fault}",),
                      label=f"{prepared.scenario} {fault.short}")
    btype = ctx.broker_type
    injector = FaultInjector(
        fault, control,
        leader=lambda session: btype.fault_leader(broker, session.driver, session.topics[0]))
    ctx.progress(f"brokerperf: {broker.kind} {prepared.scenario} rate={prepared.rate:g} msg/s "
                 f"measure={prepared.measure_s:g}s with fault {fault}")

    def stopped(*, headline: RunOutcome, session: RunOutcome, verdict: Verdict) -> Measured:
        # a node the fault did not ask for went away, or Ctrl-C / SIGTERM
        injector.settle()
        judged = judge_fault(injector, headline, broker.durability, control.node_count())
        return run.measured(headline, verdict, session=session, sampler=None,
                            record_extra={"fault": judged.block,
                                          "faults": judged.block["events"]})

    # the sampler stops before a stopped run's record (which has no broker metrics)
    with run.stopped_records(stopped, record_sampler=False), run.sampling():
        try:
            outcome = run_workload(run.driver, run.prepared.workload, run.plan,
                                   payloads=run.payloads, on_period=watch,
                                   on_wait=injector, after_measure=injector.settle,
                                   after_drain=_read_back_hook(fault.action, broker, btype,
                                                              injector))
        finally:
            injector.settle()  # never leave a node down for the next test
    return _fault_record(run, outcome, judge_fault(injector, outcome, broker.durability,
                                                   control.node_count()), injector)


def _fault_record(run: RunSession, outcome: RunOutcome, judged: FaultVerdict,
                  injector: FaultInjector) -> ScenarioResult:
    """The window before the fault judged, the fault's own questions answered, recorded."""
    from pytest_brokerperf.faults.judge import questions
    from pytest_brokerperf.judge.slo import judged_percentile
    from pytest_brokerperf.judge.verdict import Verdict

    prepared = run.prepared
    run.thresholds = replace(run.thresholds, publish_delay_q=judged_percentile(run.slos))
    own_question: list[str] = []
    if judged.inconclusive is not None:
        verdict = Verdict(status=FAULT_FAILED, reasons=[judged.inconclusive])
    else:
        verdict = run.assess(window_before(outcome, injector.first_ns()))
        verdict.details["window"] = ("judged on the measured periods before the fault; "
                                     "the rest is the fault's effect (record.fault)")
        verdict.details["applies_to"] = (
            "the latency figures only: the fault's own questions (loss, duplicates, "
            "unavailability) are judged on what they need (record.fault.questions)")
        answers, why = questions(judged.block, verdict.status)
        judged.block["questions"] = answers
        if why is not None:
            own_question.append(why)
    run.ctx.progress(_progress_line(run.kind, judged.block))
    figures: dict[str, float | None] = {
        "fault.unavailable_s": judged.block["unavailable_s"],
        "fault.longest_publish_wait_s": judged.block["longest_publish_wait_s"],
        "fault.node_down_s": judged.block["node_down_s"],
        "fault.send_errors": float(judged.block["send_errors"]),
    }
    assert run.ctx.fault is not None
    return run.finish(
        outcome, verdict, extra_figures=figures,
        record_extra={"fault": judged.block, "faults": judged.block["events"]},
        findings=[judged.finding] if judged.finding else [],
        validity_gates_test=judged.inconclusive is not None, inconclusive=own_question,
        summary_scenario=f"{prepared.scenario}+{run.ctx.fault.short}")


def _read_back_hook(action: str, broker: BrokerEndpoint, btype: BrokerType,
                    injector: FaultInjector
                    ) -> Callable[[LoadSession, SessionEnd], None] | None:
    """After a power cut: read the topics back (the broker's own way, its ``read_back``
    capability) and keep what is missing on the injector (the judge reports it); None
    for other faults, and for a kind without a read-back (delivery accounting decides)."""
    reader = btype.capabilities.read_back
    if action != "power-cut" or reader is None:
        return None

    def read_back(session: LoadSession, end: SessionEnd) -> None:
        from pytest_brokerperf.faults.readback import ReadBack, compare

        acked = end.delivery.acked_bits
        try:
            got = reader.read_back(broker, session.topics)
        except Exception as exc:  # reported in the record, never swallowed
            injector.read_back = ReadBack(
                read=0, acknowledged=end.delivery.acknowledged, missing=0, complete=False,
                error=f"{type(exc).__name__}: {exc}"[:500])
            return
        if got is not None:  # None: nothing to read again, delivery accounting decides
            present, read, complete = got
            injector.read_back = compare(acked, present, read, complete)

    return read_back


def _progress_line(kind: str, block: dict[str, Any]) -> str:
    def num(key: str) -> str:
        v = block.get(key)
        bound = ">= " if key == "unavailable_s" and block.get("recovered") is False else ""
        return "n/a" if v is None else f"{bound}{v:g} s"

    return (f"brokerperf: {kind} fault {block['spec']} on {block['target']}: node down "
            f"{num('node_down_s')}, unavailable {num('unavailable_s')}, longest publish wait "
            f"{num('longest_publish_wait_s')}, send errors {block['send_errors']}, lost "
            f"{block['lost']} ({block['verdict']})")
