"""The throughput scenario's judgement of measured rungs: worker sizing, a rung's
verdict from the ladder's rules, the ladder's verdict, progress lines and the CSV.

Pure functions over outcomes (no broker), so each has a unit test; the rules are in
:mod:`pytest_brokerperf.judge.ladder` and ``docs/explanation/throughput.md``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.engine.plan import DEFAULT_PER_PROCESS_RATE
from pytest_brokerperf.judge import ladder as lad
from pytest_brokerperf.judge.verdict import (
    BACKPRESSURE,
    CLIENT_BOUND,
    GENERATOR_BOUND,
    HOST_NOISE,
    JUDGEABLE,
    UNSTEADY,
    VALID,
    Thresholds,
    Verdict,
    assess,
)
from pytest_brokerperf.metrics.cpus import allowed_cpus
from pytest_brokerperf.results import ladder as ladres

__all__ = [
    "LIMIT_STATUS",
    "WorkerSizing",
    "broker_per_rung",
    "ceiling_dict",
    "judge",
    "ladder_verdict",
    "plan_workers",
    "progress_rung",
    "rung_latency",
    "size_workers",
    "write_ladder_csv",
]

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.judge.calibration import Ceiling


#: Rung/ladder limit → validity verdict status.
LIMIT_STATUS = {
    lad.GENERATOR: GENERATOR_BOUND,
    lad.CLIENT_LIBRARY: CLIENT_BOUND,
    lad.BROKER: BACKPRESSURE,
    lad.HOST: HOST_NOISE,
    lad.UNSTEADY: UNSTEADY,
    lad.NONE: VALID,
}


@dataclass(frozen=True)
class WorkerSizing:
    """How many worker processes a ladder gets and from what: written to the record
    (``calibration.sizing``) so a reader sees the cores, the ceiling and the rule."""

    workers: int
    #: the CPUs the workers may run on: those the broker is not pinned to, else every
    #: CPU this process may run on
    generator_cpus: int
    #: the per-process rate the rule divided by, and where it came from
    per_process_msg_s: float
    #: ``calibration (<target> <driver>, bound <bound>)`` or ``default`` (no calibration:
    #: DEFAULT_PER_PROCESS_RATE)
    per_process_source: str
    top_rate_msg_s: float | None  # None: rate discovery (any rate)
    #: ceil(top rate / per-process rate): processes the rate needs
    needed: int | None
    #: a driver that keeps each topic in one worker (the loopback): at most one per topic
    topic_limit: int | None
    rule: str  # which bound decided: requested | rate | generator-cpus | topics

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        if self.rule == "rate":
            why = f"ceil({self.top_rate_msg_s or 0:,.0f} / {self.per_process_msg_s:,.0f})"
        else:
            why = {"requested": "--brokerperf-workers",
                   "generator-cpus": "one per generator CPU",
                   "topics": "one per topic (a topic stays in one worker)"}[self.rule]
        return (f"{self.workers} worker process(es) ({why}; {self.generator_cpus} generator "
                f"CPU(s), {self.per_process_msg_s:,.0f} msg/s per process from "
                f"{self.per_process_source})")


def plan_workers(top_rate: float | None, *, per_process: float | None,
                 cpus: tuple[int, ...] | None, requested: int | None,
                 topic_limit: int | None = None, source: str | None = None) -> WorkerSizing:
    """Worker processes for a ladder whose top rung is ``top_rate`` (None: any rate):
    enough processes for the rate at the calibrated per-process rate, at most one per
    generator CPU and, for a driver that keeps a topic in one worker, one per topic.
    ``source`` names the calibrated ceiling ``per_process`` came from."""
    limit = len(cpus) if cpus else len(allowed_cpus())
    calibrated = bool(per_process and per_process > 0)
    per = per_process if per_process and calibrated else DEFAULT_PER_PROCESS_RATE
    needed = None if top_rate is None else max(1, math.ceil(top_rate / per))
    if requested:
        workers, rule = requested, "requested"
    else:
        bounds = [(needed, "rate")] if needed is not None else []
        bounds.append((limit, "generator-cpus"))
        if topic_limit:
            bounds.append((topic_limit, "topics"))
        workers, rule = min(bounds, key=lambda b: b[0])
        workers = max(1, workers)
    return WorkerSizing(workers=workers, generator_cpus=limit, per_process_msg_s=per,
                        per_process_source=(source or "calibration") if calibrated
                        else "default",
                        top_rate_msg_s=top_rate, needed=needed,
                        topic_limit=topic_limit, rule=rule)


def size_workers(top_rate: float | None, *, per_process: float | None,
                 cpus: tuple[int, ...] | None, requested: int | None,
                 topic_limit: int | None = None) -> int:
    """The worker count of :func:`plan_workers`."""
    return plan_workers(top_rate, per_process=per_process, cpus=cpus, requested=requested,
                        topic_limit=topic_limit).workers


def rung_latency(outcome: RunOutcome) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for view in lad.RUNG_VIEWS:
        pct = outcome.cumulative[view].percentiles(lad.RUNG_PERCENTILES)
        out[view] = {f"p{q:g}": pct[q] for q in lad.RUNG_PERCENTILES}
    return out


def judge(outcome: RunOutcome, index: int, *, policy: lad.LadderPolicy,
          subscriptions_per_topic: int, producing_workers: int,
          harness_ceiling: float | None, client_ceiling: float | None) -> ladres.RungResult:
    """One measured rung → its judgement, limiting resource and validity verdict."""
    sig = lad.RungSignals.from_outcome(outcome, subscriptions_per_topic=subscriptions_per_topic,
                                       producing_workers=producing_workers)
    failures = lad.judge_rung(sig, policy)
    limit, reasons = lad.attribute_limit(sig, failures, policy,
                                         harness_ceiling=harness_ceiling,
                                         client_ceiling=client_ceiling)
    aggregate_client = client_ceiling * producing_workers if client_ceiling else None
    v = assess(outcome, Thresholds(cpu_share=policy.cpu_share, runq_share=policy.runq_share,
                                   publish_delay_p99_us=policy.publish_delay_budget_us,
                                   steal_share=policy.steal_share),
               client_ceiling=aggregate_client)
    if failures:  # the limit decides a failed rung's status; its signals are the reasons
        status = LIMIT_STATUS[limit]
        v = Verdict(status=status, reasons=failures + reasons,
                    flags=sorted(set(v.flags) | ({status} if status != VALID else set())),
                    details=v.details)
    return ladres.RungResult(
        index=index, target_rate=outcome.plan.rate,
        status="sustainable" if not failures else "unsustainable", signals=sig,
        failures=failures, limit=limit, limit_reasons=reasons, verdict=v.as_dict(),
        latency_us=rung_latency(outcome), warmup_s=sum(p.elapsed_s for p in outcome.warmup),
        warmup_periods=len(outcome.warmup), warmup_steady=outcome.warmup_steady,
        client_bound=aggregate_client is not None and outcome.plan.rate > aggregate_client,
        publish_mib_s=outcome.publish_mib_s, begin_time=outcome.begin_time,
        end_time=outcome.end_time,
    )


def ladder_verdict(ladder: ladres.LadderResult) -> Verdict:
    """The whole ladder's validity: its limit, and the headline rung's own verdict.

    A ladder stopped by the generator or the client library is not a broker figure
    (``generator-bound`` / ``client-bound``: INCONCLUSIVE); stopped by the broker it is
    ``broker-backpressure`` (a broker result); a ladder whose every rung held is ``valid``
    with the flag ``limit-not-reached``.
    """
    reasons: list[str] = []
    flags: list[str] = []
    status = LIMIT_STATUS.get(ladder.limit, VALID)
    failed = next((r for r in ladder.rungs if not r.sustainable), None)
    if status not in JUDGEABLE:
        reasons.append(ladder.summary())
        if failed is not None:
            reasons += failed.limit_reasons
    if status != VALID:
        flags.append(status)
    if ladder.outcome == "limit-not-reached":
        flags.append("limit-not-reached")
    top = ladder.top_rung
    if top is None:
        # a broker that failed even the lowest rung is a broker result (its limit lies
        # below the ladder); any other limit leaves no figure at all
        reasons.append(f"no rung was sustainable (lowest {ladder.rates[0]:,.0f} msg/s): no "
                       "throughput figure")
        if status in JUDGEABLE:
            reasons.insert(0, ladder.summary())
    else:
        t = str(top.verdict.get("status", VALID))
        if t not in JUDGEABLE and status in JUDGEABLE:
            status = t
            reasons += [f"highest sustainable rung {top.target_rate:,.0f} msg/s: {x}"
                        for x in top.verdict.get("reasons", [])]
        if t != VALID and t not in flags:
            flags.append(t)
    details = {"summary": ladder.summary(), "outcome": ladder.outcome, "limit": ladder.limit,
               "highest_sustainable_rate_msg_s": ladder.highest_sustainable_rate,
               "limit_rate_msg_s": ladder.limit_rate}
    return Verdict(status=status, reasons=reasons, flags=flags, details=details)


def ceiling_dict(c: Ceiling | None) -> dict[str, Any] | None:
    return None if c is None else c.as_dict()


def progress_rung(kind: str, rr: ladres.RungResult, n: int) -> str:
    s = rr.signals
    assert s is not None
    cpu = ", ".join(f"w{k} {v:.0%}" for k, v in sorted(s.worker_cpu.items()))
    head = (f"brokerperf: {kind} throughput rung {rr.index + 1}/{n} "
            f"{rr.target_rate:,.0f} msg/s: ack {s.ack_rate:,.0f}/s recv {s.consume_rate:,.0f}/s"
            f" lag {s.lag_slope:+,.0f}/s queue {s.queue_slope:+,.0f}/s p99 publish "
            f"{_ms(rr.p('publish_response', 'p99'))} e2e {_ms(rr.p('e2e_response', 'p99'))}"
            f" cpu {cpu}")
    if rr.sustainable:
        return head + " -> sustainable"
    return head + f" -> NOT sustainable, limit {rr.limit}: " + "; ".join(
        rr.failures[:2] + rr.limit_reasons[:1])


def _ms(us: float | None) -> str:
    from pytest_brokerperf.scenario_library.progress import format_ms

    return format_ms(us) + " ms"


def write_ladder_csv(path: Path, ladder: ladres.LadderResult) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(ladres.RungResult.CSV_HEADER)
        for r in ladder.rungs:
            w.writerow(r.csv_row())


def broker_per_rung(sampler: Any, rungs: list[RunOutcome],
                     results: list[ladres.RungResult]) -> None:
    """Attach the broker's own CPU (when sampled) to each measured rung."""
    rows = list(getattr(sampler, "rows", []) or [])
    if not rows:
        return
    by_rate = {o.plan.rate: o for o in rungs}
    for rr in results:
        out = by_rate.get(rr.target_rate)
        if out is None or not out.periods:
            continue
        lo = out.periods[0].start_ns
        hi = out.periods[-1].start_ns + int(out.periods[-1].elapsed_s * 1e9)
        cpu = [v for r in rows if r.phase == "measure" and lo - 1_000_000 <= r.start_ns <= hi
               and (v := r.figures.get("broker_cpu_cores")) is not None]
        if cpu:
            rr.broker_cpu_cores = round(sum(cpu) / len(cpu), 3)
            if not rr.sustainable:
                rr.limit_reasons.append(
                    f"(broker processes used {rr.broker_cpu_cores:.2f} cores on average)")
