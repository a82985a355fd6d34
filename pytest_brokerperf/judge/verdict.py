"""Validity verdicts: is a run's figure the broker's, or the harness's?
(docs/explanation/measurement.md)

Each rule reads independent signals, so a harness limit is never reported as a
broker's and broker back-pressure is never thrown away as a harness limit:

* ``generator-bound`` — a worker process used ≥ 90 % of a core, or the generator
  missed its own schedule (publish delay over budget at the highest percentile the
  run's SLOs judge, p99 at least) while the client library did not push back in a
  sustained way (local-queue-full events in at most one period);
* ``broker-backpressure`` — the client's local queue filled up in at least two periods
  (librdkafka ``BufferError``, Pulsar pending queue, AMQP ``connection.blocked``): a
  *broker* result, the run stays valid; a single burst of events is noted, not judged;
* ``rate-not-sustained`` — the generator kept its schedule but fewer than 95 % of the
  offered messages were acknowledged in the window: a finding in its own right (the
  broker's limit at this rate, or the machine's under a topology check), not a latency
  figure at the offered rate;
* ``consumer-bound`` — the consumers fell behind (backlog growing over the window, a
  steady backlog of ≥ 1 s of publishing they never caught up, or messages still
  unconfirmed when the drain window closed): end-to-end figures then measure a queue,
  not reads at the tail;
* ``unsteady`` — the measured window acknowledged more than the target rate (beyond
  the steady-state tolerance): an open-loop schedule can only do that by catching up on
  slots a stall left behind before the window began, so its figures mix the stall and
  its catch-up, not a steady state at the offered rate;
* ``host-noise`` — the hypervisor took ≥ 5 % of the machine's CPU time during the
  measured window (``/proc/stat`` steal): a paused virtual machine delays messages that
  neither the generator nor the broker held, so the figures are the host's; or the
  generator's CPUs were ≥ 90 % busy, ≥ 20 % of them with other processes, while its
  workers (none of them at 90 % of a core) waited on a run queue for ≥ 20 % of the
  window. It outranks every other status, since a late generator on a robbed machine
  says nothing about either;
* ``undersampled`` — per percentile, never a whole-run status: q needs
  n ≥ 10/(1−q) samples, else it is reported n/a;
* ``clock-uncertain`` — a worker's stamps were not on the coordinator's clock in some
  period of the window (another boot, or a CLOCK_MONOTONIC reading outside the
  coordinator's bracket: another time namespace or host; engine/clock.py): end-to-end
  latency subtracts stamps of two processes, so those figures are not the broker's.
  Generator tasks on a cluster (``--brokerperf-executor=spark``) stamp on the
  coordinator's clock, corrected by their measured offsets; their run is
  ``clock-uncertain`` when the worst producer→consumer pair's uncertainty exceeds
  10 % (``engine/clock.py`` CLOCK_UNCERTAINTY_SHARE) of the measured window's
  end-to-end p50. Outranked only by ``host-noise``;
* ``resource-growth`` — a flag, never a status: over a soak's measured window a worker
  or a local broker process's RSS, open files or threads grew without levelling off
  (resource_growth.py, docs/reference/soak.md). The figures stay true; the test fails
  with the process, resource, start → end and slope per minute.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.judge.trend import grows, slope

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytest_brokerperf.engine.plan import RunOutcome
    from pytest_brokerperf.metrics.stats import PeriodStats

__all__ = ["CONSUMER_BOUND", "RATE_NOT_SUSTAINED", "RESOURCE_GROWTH", "Remeasure", "Thresholds",
           "Verdict", "assess", "discarded_windows_note", "host_noise_reason", "noise_note",
           "window_steal_share"]

VALID = "valid"
GENERATOR_BOUND = "generator-bound"
CLIENT_BOUND = "client-bound"
BACKPRESSURE = "broker-backpressure"
HOT_CACHE = "hot-cache"
CLOCK_UNCERTAIN = "clock-uncertain"
UNDERSAMPLED = "undersampled"
UNSTEADY = "unsteady"
HOST_NOISE = "host-noise"
RATE_NOT_SUSTAINED = "rate-not-sustained"
CONSUMER_BOUND = "consumer-bound"
#: a flag beside the status: a soak saw a process's resources grow without bound
RESOURCE_GROWTH = "resource-growth"

#: Statuses whose figures SLOs and gates may judge.
JUDGEABLE = frozenset({VALID, BACKPRESSURE})


@dataclass(frozen=True)
class Thresholds:
    cpu_share: float = 0.90
    runq_share: float = 0.20
    publish_delay_p99_us: float = 10_000.0  # 10 ms behind schedule ...
    #: ... at this percentile: the highest one the run's SLOs judge, never below p99
    publish_delay_q: float = 99.0
    #: acknowledged rate below target × (1 - this) with the generator on time: not sustained
    rate_tolerance: float = 0.05
    #: local-queue-full events in at least this many periods = sustained back-pressure
    backpressure_periods: int = 2
    #: share of the generator CPUs other processes used, with the workers run-queued
    other_cpu_share: float = 0.20
    #: measured ack rate above target × (1 + this) = catch-up of an earlier stall
    overshoot: float = 0.10
    #: hypervisor steal over the measured window, as a share of all the machine's CPU time
    steal_share: float = 0.05
    #: consumers this many seconds of publishing behind, on average over the window, are
    #: not reading at the tail (a tail read's backlog is its e2e latency times the rate)
    tail_lag_s: float = 1.0


@dataclass
class Verdict:
    status: str
    reasons: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def judgeable(self) -> bool:
        return self.status in JUDGEABLE

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": self.reasons, "flags": self.flags,
                "details": self.details}


def assess(outcome: RunOutcome, thresholds: Thresholds | None = None,
           client_ceiling: float | None = None) -> Verdict:
    """Classify a run from worker CPU, run-queue delay, publish delay and queue events."""
    th = thresholds or Thresholds()
    periods = outcome.periods
    flags: list[str] = []
    reasons: list[str] = []
    by_worker: dict[int, list[tuple[float, float, float]]] = {}
    queue_full = 0
    for p in periods:
        for w in p.workers:
            by_worker.setdefault(w.worker, []).append((w.cpu_s, w.runq_delay_s, w.elapsed_s))
            queue_full += w.queue_full
    cpu_share = {
        k: sum(c for c, _, _ in v) / max(sum(e for _, _, e in v), 1e-9)
        for k, v in by_worker.items()
    }
    runq_share = {
        k: sum(r for _, r, _ in v) / max(sum(e for _, _, e in v), 1e-9)
        for k, v in by_worker.items()
    }
    steal = window_steal_share(periods)
    q = max(99.0, th.publish_delay_q)
    delay_p = outcome.cumulative["publish_delay"].percentile(q)
    late = delay_p is not None and delay_p > th.publish_delay_p99_us
    full_periods = sum(1 for p in periods if any(w.queue_full for w in p.workers))
    sustained_full = full_periods >= min(th.backpressure_periods, max(1, len(periods)))
    other = other_cpu_share(periods, cpu_share, outcome.plan.generator_cpus)
    busy_samples = [p.generator_cpu_busy for p in periods if p.generator_cpu_busy is not None]
    busy = sum(busy_samples) / len(busy_samples) if busy_samples else None
    details: dict[str, Any] = {
        "worker_cpu_share": {str(k): round(v, 3) for k, v in cpu_share.items()},
        "worker_runq_share": {str(k): round(v, 3) for k, v in runq_share.items()},
        "publish_delay_p99_us": outcome.cumulative["publish_delay"].percentile(99),
        "publish_delay_judged": {"percentile": q, "us": delay_p},
        "queue_full_events": queue_full,
        "queue_full_periods": full_periods,
        "other_process_cpu_share": None if other is None else round(other, 3),
        "generator_cpu_busy": None if busy is None else round(busy, 3),
        "target_rate": outcome.plan.rate,
        "ack_rate": outcome.ack_rate,
        "warmup_steady": outcome.warmup_steady,
        "host_steal_share": None if steal is None else round(steal, 4),
        "thresholds": vars(th),
    }
    starved = [k for k, v in runq_share.items() if v >= th.runq_share]
    if steal is not None and steal >= th.steal_share:
        flags.append(HOST_NOISE)
        reasons.append(host_noise_reason(steal, th.steal_share, "measured window"))
    elif (starved and not [k for k, v in cpu_share.items() if v >= th.cpu_share]
          and other is not None and other >= th.other_cpu_share):
        # other processes took a fifth or more of the generator's CPUs while its workers
        # waited to run: the ladder's rule. The CPUs need not be full on average — a
        # burst of other work (a build, a JVM starting) delays the pacer while it lasts.
        flags.append(HOST_NOISE)
        reasons.append(
            f"other processes used {other:.0%} of the generator's CPUs while its workers "
            "waited on a run queue " + ", ".join(f"{runq_share[k]:.0%}" for k in starved)
            + " of the window: the figures are the machine's, not the broker's. Fix: stop "
            "the other load, or give the generator CPUs of its own")
    hot = [k for k, v in cpu_share.items() if v >= th.cpu_share]
    if hot:
        flags.append(GENERATOR_BOUND)
        reasons.append(
            "worker CPU at "
            + ", ".join(f"{cpu_share[k]:.0%} of a core (worker {k})" for k in hot)
            + f" ≥ {th.cpu_share:.0%}: the load generator, not the broker, may be the limit"
        )
    pname = f"p{q:g}"
    if late and delay_p is not None and not sustained_full and GENERATOR_BOUND not in flags:
        flags.append(GENERATOR_BOUND)
        why = (
            f"publish delay {pname} {delay_p / 1000:.1f} ms > budget "
            f"{th.publish_delay_p99_us / 1000:g} ms while the client library did not push "
            "back (local-queue-full events in "
            f"{full_periods} period{'s' if full_periods != 1 else ''}): the generator missed "
            "its own schedule"
        )
        if starved:
            why += (" and waited on a run queue "
                    + ", ".join(f"{runq_share[k]:.0%}" for k in starved) + " of the time")
        reasons.append(why)
    if queue_full and sustained_full:
        flags.append(BACKPRESSURE)
        reasons.append(
            f"client local queue full {queue_full} times in {full_periods} periods: the "
            "broker pushed back (a broker result, not a harness limit)"
        )
    elif queue_full:
        details["queue_full_note"] = (
            f"{queue_full} local-queue-full events in one period: a burst, not sustained "
            "back-pressure")
    if client_ceiling is not None and outcome.plan.rate > client_ceiling:
        flags.append(CLIENT_BOUND)
        reasons.append(
            f"target {outcome.plan.rate:.0f} msg/s exceeds the calibrated per-process "
            f"client ceiling {client_ceiling:.0f} msg/s"
        )
    target = outcome.plan.rate
    overshoot = target > 0 and outcome.ack_rate > target * (1 + th.overshoot)
    if overshoot:
        flags.append(UNSTEADY)
        reasons.append(
            f"the measured window acknowledged {outcome.ack_rate:,.0f} msg/s, more than "
            f"{1 + th.overshoot:.0%} of the target {target:,.0f} msg/s: an open-loop "
            "schedule only does that while catching up on a stall that began before the "
            "window, so these figures are not a steady state"
            + (" (the warm-up reached its time cap before it was steady)"
               if not outcome.warmup_steady else "")
            + ". Fix: a longer warm-up (--brokerperf-warmup) or a warmer broker"
        )
    if not outcome.warmup_steady:
        if not overshoot:
            reasons.append("warm-up reached its time cap before rate and p99 were steady")
        details["warmup_capped"] = True
    if target > 0 and outcome.ack_rate < target * (1 - th.rate_tolerance):
        flags.append(RATE_NOT_SUSTAINED)
        reasons.append(
            f"acknowledged {outcome.ack_rate:,.0f} msg/s, {outcome.ack_rate / target:.1%} of "
            f"the offered {target:,.0f} msg/s (tolerance {th.rate_tolerance:.0%}): the rate "
            "was not sustained, so latencies at it are not reported as the broker's; "
            "a lower rate, or the throughput scenario, finds what it sustains")
    clock = next((p.clock_note for p in periods if p.clock_note), None)
    if clock is None and outcome.executor is not None:
        # corrected clocks (a cluster's tasks): their uncertainty against the e2e p50
        from pytest_brokerperf.engine.clock import uncertainty_note

        p50 = outcome.cumulative["e2e_latency"].percentile(50)
        clock = uncertainty_note(outcome.executor.pair_uncertainty_ns / 1e3,
                                 float(p50) if p50 is not None else None)
        if clock:
            details["clock_pair_uncertainty_us"] = outcome.executor.pair_uncertainty_ns / 1e3
    if clock:
        flags.append(CLOCK_UNCERTAIN)
        reasons.append(clock)
    consumer_why = _consumers_behind(outcome, th.tail_lag_s)
    if consumer_why:
        flags.append(CONSUMER_BOUND)
        reasons.append(consumer_why)
    n = outcome.cumulative["e2e_response"].total_count
    if n < 10 / (1 - 0.999):
        details["undersampled_note"] = f"only {n} e2e samples: p99.9 and above are n/a"
    if HOST_NOISE in flags:
        status = HOST_NOISE
    elif CLOCK_UNCERTAIN in flags:
        status = CLOCK_UNCERTAIN
    elif GENERATOR_BOUND in flags:
        status = GENERATOR_BOUND
    elif CLIENT_BOUND in flags:
        status = CLIENT_BOUND
    elif UNSTEADY in flags:
        status = UNSTEADY
    elif BACKPRESSURE in flags:  # the broker's push-back explains a shortfall: judgeable
        status = BACKPRESSURE
    elif RATE_NOT_SUSTAINED in flags:
        status = RATE_NOT_SUSTAINED
    elif CONSUMER_BOUND in flags:
        status = CONSUMER_BOUND
    else:
        status = VALID
    return Verdict(status=status, reasons=reasons, flags=flags, details=details)


def other_cpu_share(periods: Sequence[PeriodStats], worker_cpu: dict[int, float],
                     generator_cpus: tuple[int, ...] | None) -> float | None:
    """Share of the generator's CPUs that processes other than its workers used."""
    busy = [p.generator_cpu_busy for p in periods if p.generator_cpu_busy is not None]
    if not busy:
        return None
    n = len(generator_cpus) if generator_cpus else (os.cpu_count() or 1)
    workers = sum(worker_cpu.values()) / max(1, n)
    return max(0.0, sum(busy) / len(busy) - workers)


def _consumers_behind(outcome: RunOutcome, tail_lag_s: float = 1.0) -> str | None:
    """Why the consumers did not keep up at the tail, or None."""
    periods = outcome.periods
    target = outcome.plan.rate
    if periods and target > 0:
        t0 = periods[0].start_ns
        pts = [((p.start_ns - t0) / 1e9 + p.elapsed_s, float(p.backlog)) for p in periods]
        lag_slope, lag_end = slope(pts), pts[-1][1]
        if grows(lag_slope, lag_end, target):
            return (f"consumer backlog grew {lag_slope:+,.0f} msg/s to {lag_end:,.0f} "
                    "messages over the measured window: the consumers fell behind, so "
                    "end-to-end figures measure a growing queue, not reads at the tail")
        # A steady backlog is a tail read only while it is small: consumers that stay
        # seconds behind without catching up are at their own limit, and every e2e
        # figure then includes that queue.
        subs = max(1, len(outcome.subscriptions) // max(1, len(outcome.topics)))
        behind_s = sum(b for _, b in pts) / len(pts) / (subs * target)
        if behind_s >= tail_lag_s:
            return (f"the consumers stayed {behind_s:.1f} s of publishing behind on average "
                    f"over the measured window (backlog {sum(b for _, b in pts) / len(pts):,.0f}"
                    f" messages at {target:,.0f} msg/s x {subs} subscription"
                    f"{'s' if subs != 1 else ''}, limit {tail_lag_s:g} s) and did not catch "
                    "up: end-to-end figures measure that queue, not reads at the tail")
    missing = outcome.delivery.unconfirmed
    if not outcome.drain_complete and missing > 0:
        return (f"{missing:,} acknowledged messages were still unconfirmed (not received) "
                "when the drain window closed: the consumers did not keep up")
    return None


def window_steal_share(periods: Sequence[PeriodStats]) -> float | None:
    """Hypervisor steal over the periods (time-weighted); None when never sampled."""
    sampled = [(p.host_steal_share, p.elapsed_s) for p in periods
               if p.host_steal_share is not None and p.elapsed_s > 0]
    wall = sum(e for _, e in sampled)
    if not sampled or wall <= 0:
        return None
    return sum(s * e for s, e in sampled) / wall


def host_noise_reason(steal: float, threshold: float, window: str) -> str:
    """Why steal time voids a window's figures, and what to do about it."""
    return (
        f"the hypervisor took {steal:.1%} of the machine's CPU time during the {window} "
        f"(steal time in /proc/stat, ≥ {threshold:.0%}): a paused virtual machine delays "
        "messages that neither the generator nor the broker held, so these figures are the "
        "host's. Fix: rerun when the host is quiet, or on a dedicated (non-burstable) instance"
    )


def noise_note(attempt: int, verdict: Verdict, **extra: Any) -> dict[str, Any]:
    """What a measured window discarded as host-noise showed (kept in the record)."""
    return {"attempt": attempt, **extra,
            "host_steal_share": verdict.details.get("host_steal_share"),
            "other_process_cpu_share": verdict.details.get("other_process_cpu_share"),
            "status": verdict.status, "reasons": list(verdict.reasons)}


def noise_cause(reasons: Sequence[str], steal: float | None, other: float | None) -> str:
    """The host-noise signal that fired (its first reason says which), in a few words: a
    window voided by other processes on the generator's CPUs shows a steal of 0 %, which
    alone would read as no reason at all."""
    if reasons and reasons[0].startswith("other processes") and other is not None:
        return f"other processes {other:.0%} of the generator's CPUs"
    return "hypervisor steal " + ("n/a" if steal is None else f"{steal:.1%}")


@dataclass
class Remeasure:
    """Which fixed-rate windows are measured again, within their budgets.

    ``host-noise`` up to ``noise_retries`` times (``--brokerperf-noise-retries``); once,
    a window still catching up a stall (``unsteady``) or short of its rate or tail
    (``rate-not-sustained``, ``consumer-bound``) after a warm-up that reached its cap
    without settling — a second such window stands as the finding.
    """

    noise_retries: int
    noise_left: int = -1
    settle_left: int = 1

    def __post_init__(self) -> None:
        if self.noise_left < 0:
            self.noise_left = self.noise_retries

    def why(self, verdict: Verdict, warmup_steady: bool, warmup_cap_s: float) -> str | None:
        """Why this window is measured again (spending its budget), or None: it stands."""
        if verdict.status == HOST_NOISE and self.noise_left > 0:
            self.noise_left -= 1
            d = verdict.details
            cause = noise_cause(verdict.reasons, d.get("host_steal_share"),
                                d.get("other_process_cpu_share"))
            return (f"host-noise ({cause})"
                    + f": measuring again ({self.noise_retries - self.noise_left}/"
                    f"{self.noise_retries}, --brokerperf-noise-retries)")
        if verdict.status == UNSTEADY and self.settle_left > 0:
            # a stall from before the window (a fresh topic, a GC pause) was still being
            # caught up: the same rate measured again on fresh topics, once
            self.settle_left -= 1
            return "unsteady (catching up a stall from before its window): measuring again"
        if (verdict.status in (RATE_NOT_SUSTAINED, CONSUMER_BOUND) and not warmup_steady
                and self.settle_left > 0):
            # the shortfall may be the unsettled start, not the broker's limit
            self.settle_left -= 1
            return (f"{verdict.status} after a warm-up that never settled (capped at "
                    f"{warmup_cap_s:g} s): measuring again")
        return None


def discarded_windows_note(discarded: Sequence[dict[str, Any]]) -> str:
    """The result note that says which windows were measured again, and why."""
    noisy = [d for d in discarded if d.get("status") == HOST_NOISE]
    unsteady = [d for d in discarded if d.get("status") == UNSTEADY]
    unsettled = [d for d in discarded if d.get("status") in (RATE_NOT_SUSTAINED, CONSUMER_BOUND)]
    causes = ", ".join(noise_cause(d.get("reasons") or [], d.get("host_steal_share"),
                                   d.get("other_process_cpu_share")) for d in noisy)
    parts = []
    if noisy:
        parts.append(f"{len(noisy)} as host-noise ({causes}; --brokerperf-noise-retries)")
    if unsteady:
        parts.append(f"{len(unsteady)} as unsteady (catching up a stall from before the "
                     "window)")
    if unsettled:
        parts.append(f"{len(unsettled)} as " + ", ".join(d["status"] for d in unsettled)
                     + " after a warm-up that never settled")
    return (f"{len(discarded)} measured window(s) discarded and measured again: "
            f"{'; '.join(parts)}; see noise_retries")
