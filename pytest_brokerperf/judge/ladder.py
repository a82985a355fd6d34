"""The throughput ladder's judgement: sustainable or not, what limited it, and the knee.

Pure functions over measured rungs (no processes, no broker), so every rule has a unit
test. Definitions (also in ``docs/explanation/throughput.md``):

* **Sustainable rung** — over its measured window: the *acknowledged* rate is within
  ``rate_tolerance`` (±5 %) of the target; consumer lag (backlog) and the client
  library's local queue do not grow (least-squares slope over the period ends at most
  ``growth_tolerance`` × target per second, or still below ``max(1000, 0.1 s × target)``
  messages at the end); publish delay p99 stays within ``publish_delay_budget_us``
  (10 ms); and no send failed.
* **Limiting resource** of a rung that is not sustainable, from independent signals:
  ``generator`` (the offered rate per worker process
  exceeds the harness's own calibrated ceiling, or a worker used ≥ 90 % of a core /
  missed its schedule without client push-back while the harness alone could not do
  that rate either), ``client-library`` (the same saturation at a
  per-process rate the harness alone sustains — the client library's cost saturated the
  process — or a rate above the driver's calibrated client-bound ceiling), and
  ``host-noise`` (checked first: the hypervisor took ≥ 5 % of the machine's CPU time
  during the rung — steal time —, so nothing in it is the broker's or the harness's;
  or a worker waited on a run queue ≥ 20 % of the time without using 90 % of a core
  while other processes used ≥ 20 % of the generator's CPUs — another process took
  its CPU; where that share is unknown, while those CPUs were ≥ 90 % busy),
  ``unsteady`` (checked next: the rung acknowledged more than target + tolerance, which
  an open-loop schedule only does while catching up on a stall from before its window),
  ``broker-backpressure`` (the generator had CPU to spare while the client queue filled
  or grew, consumer lag grew or acknowledgements fell short: the broker is the limit).
  A sustainable rung's limit is ``none``.
* **Knee** — scanning rungs by offered rate, the first rung whose p99 response time is
  more than ``knee_factor`` (2×) the lowest p99 of the rungs below it, and stays so at
  every higher rung, bends the curve; the knee is the rung before it: the highest
  offered rate at which p99 is still within 2× of its floor. No such rung: no knee
  within the ladder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_brokerperf.judge.trend import grows, slope
from pytest_brokerperf.judge.verdict import host_noise_reason, other_cpu_share, window_steal_share

if TYPE_CHECKING:
    from pytest_brokerperf.engine.plan import RunOutcome

__all__ = [
    "BROKER",
    "CLIENT_LIBRARY",
    "CONFLUENT_LADDER",
    "GENERATOR",
    "HOST",
    "LADDER_PROFILES",
    "NONE",
    "UNSTEADY",
    "LadderPolicy",
    "LadderProfile",
    "RungSignals",
    "attribute_limit",
    "format_rate",
    "judge_rung",
    "ladder_rates",
    "slope",
]

GENERATOR = "generator"
CLIENT_LIBRARY = "client-library"
BROKER = "broker-backpressure"
HOST = "host-noise"
UNSTEADY = "unsteady"
NONE = "none"

#: Confluent's fixed-rate ladder (msg/s), scaled per profile.
CONFLUENT_LADDER: tuple[float, ...] = (10_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)

#: Latency views and percentiles recorded per rung.
RUNG_VIEWS = ("publish_response", "e2e_response", "publish_latency", "e2e_latency",
              "publish_delay")
RUNG_PERCENTILES = (50.0, 99.0, 99.9)


@dataclass(frozen=True)
class LadderProfile:
    """Per-rung timing and ladder scale of one ``--brokerperf-profile``.

    ``None`` durations come from the workload file (the ``omb`` profile: each rung warms
    up ``warmupDurationMinutes`` and measures ``testDurationMinutes``).
    """

    scale: float
    warmup_max_s: float | None
    measure_s: float | None
    warmup_until_steady: bool = True


LADDER_PROFILES: dict[str, LadderProfile] = {
    # 2k, 10k, 20k, 40k, 100k, 200k: on a 2-core machine with 1 KiB messages one Python
    # worker process generates about 100k msg/s, so even the smoke ladder reaches a
    # failing rung (at 0.1 the 100k top rung sat right at that edge)
    # rungs fail, so even the smoke ladder brackets a limit.
    "smoke": LadderProfile(scale=0.2, warmup_max_s=5.0, measure_s=5.0),
    "standard": LadderProfile(scale=1.0, warmup_max_s=30.0, measure_s=60.0),
    "omb": LadderProfile(scale=1.0, warmup_max_s=None, measure_s=None,
                         warmup_until_steady=False),
}


def ladder_rates(profile: str) -> tuple[float, ...]:
    """Confluent's ladder scaled by the profile's factor."""
    scale = LADDER_PROFILES[profile].scale
    return tuple(round(r * scale) for r in CONFLUENT_LADDER)


def format_rate(rate: float | None) -> str:
    """20000 → ``20k``, 1500000 → ``1.5M``, 500 → ``500``."""
    if rate is None:
        return "n/a"
    if rate >= 1e6:
        return f"{rate / 1e6:g}M"
    if rate >= 1e3:
        return f"{rate / 1e3:g}k"
    return f"{rate:g}"


@dataclass(frozen=True)
class LadderPolicy:
    """The stated tolerances a rung is judged by (recorded with every ladder)."""

    rate_tolerance: float = 0.05  # ack rate within ±5 % of target
    growth_tolerance: float = 0.02  # lag/queue slope ≤ 2 % of target per second
    growth_floor_messages: int = 1000  # OMB's backlog limit: below it nothing "grows"
    growth_floor_s: float = 0.1  # ... or below 100 ms worth of messages at the target
    publish_delay_budget_us: float = 10_000.0
    cpu_share: float = 0.90  # of one core
    runq_share: float = 0.20  # of wall time
    other_cpu_share: float = 0.20  # of the generator's CPUs, used by other processes
    knee_factor: float = 2.0
    #: optional latency bound per rung: a rung whose ``latency_bound_metric`` (a
    #: ``view.pQ`` of the rung's views) exceeds it is not sustainable, and the knee is
    #: also reported against it (even when the lowest rung is already past it)
    latency_bound_us: float | None = None
    latency_bound_metric: str = "publish_response.p99"
    refuse_factor: float = 2.0  # refuse rungs above 2 × workers × harness ceiling
    steal_share: float = 0.05  # hypervisor steal, share of all the machine's CPU time

    def growth_floor(self, target: float) -> float:
        return max(float(self.growth_floor_messages), self.growth_floor_s * target)


@dataclass
class RungSignals:
    """What one rung's measured window shows, merged over workers."""

    target: float
    ack_rate: float
    consume_rate: float  # per subscription
    duration_s: float
    lag_slope: float  # messages per second
    lag_end: float
    queue_slope: float
    queue_end: float
    queue_full: int
    publish_delay_p99_us: float | None
    send_errors: int
    worker_cpu: dict[int, float] = field(default_factory=dict)  # share of one core
    worker_runq: dict[int, float] = field(default_factory=dict)  # share of wall time
    producing_workers: int = 1
    generator_cpu_busy: float | None = None  # the generator CPUs' busy share, all processes
    #: share of the generator's CPUs used by processes other than its workers
    other_cpu_share: float | None = None
    host_steal_share: float | None = None  # hypervisor steal over the rung (/proc/stat)
    #: the rung's latency percentiles, ``{"publish_response.p99": µs}`` (None: undersampled)
    latency_us: dict[str, float | None] = field(default_factory=dict)

    @property
    def ack_ratio(self) -> float:
        return self.ack_rate / self.target if self.target > 0 else 0.0

    @property
    def per_worker_rate(self) -> float:
        return self.target / max(1, self.producing_workers)

    @classmethod
    def from_outcome(cls, outcome: RunOutcome, *, subscriptions_per_topic: int = 1,
                     producing_workers: int = 1) -> RungSignals:
        periods = outcome.periods
        t0 = periods[0].start_ns if periods else 0
        lag_pts: list[tuple[float, float]] = []
        queue_pts: list[tuple[float, float]] = []
        cpu: dict[int, list[float]] = {}
        runq: dict[int, list[float]] = {}
        wall: dict[int, float] = {}
        queue_full = 0
        busy = [p.generator_cpu_busy for p in periods if p.generator_cpu_busy is not None]
        for p in periods:
            t = (p.start_ns - t0) / 1e9 + p.elapsed_s
            lag_pts.append((t, float(p.backlog)))
            queue_pts.append((t, float(sum(w.client_queue_depth for w in p.workers))))
            for w in p.workers:
                cpu.setdefault(w.worker, []).append(w.cpu_s)
                runq.setdefault(w.worker, []).append(w.runq_delay_s)
                wall[w.worker] = wall.get(w.worker, 0.0) + w.elapsed_s
                queue_full += w.queue_full
        return cls(
            target=outcome.plan.rate,
            ack_rate=outcome.ack_rate,
            consume_rate=outcome.consume_rate / max(1, subscriptions_per_topic),
            duration_s=outcome.measured_s,
            lag_slope=slope(lag_pts),
            lag_end=lag_pts[-1][1] if lag_pts else 0.0,
            queue_slope=slope(queue_pts),
            queue_end=queue_pts[-1][1] if queue_pts else 0.0,
            queue_full=queue_full,
            publish_delay_p99_us=outcome.cumulative["publish_delay"].percentile(
                99, allow_undersampled=True),
            send_errors=sum(p.send_errors for p in periods),
            worker_cpu={k: sum(v) / max(wall[k], 1e-9) for k, v in cpu.items()},
            worker_runq={k: sum(v) / max(wall[k], 1e-9) for k, v in runq.items()},
            producing_workers=producing_workers,
            generator_cpu_busy=sum(busy) / len(busy) if busy else None,
            other_cpu_share=other_cpu_share(
                periods, {k: sum(v) / max(wall[k], 1e-9) for k, v in cpu.items()},
                outcome.plan.generator_cpus),
            host_steal_share=window_steal_share(periods),
            latency_us={f"{view}.p{q:g}": outcome.cumulative[view].percentile(q)
                        for view in RUNG_VIEWS if view in outcome.cumulative
                        for q in RUNG_PERCENTILES},
        )


def _grows(slope_: float, end: float, target: float, policy: LadderPolicy) -> bool:
    return grows(slope_, end, target, tolerance=policy.growth_tolerance,
                 floor_messages=policy.growth_floor_messages, floor_s=policy.growth_floor_s)


def judge_rung(sig: RungSignals, policy: LadderPolicy | None = None) -> list[str]:
    """Why a rung is not sustainable (an empty list: it is sustainable)."""
    pol = policy or LadderPolicy()
    why: list[str] = []
    if sig.target <= 0 or abs(sig.ack_rate - sig.target) > pol.rate_tolerance * sig.target:
        why.append(
            f"acknowledged {sig.ack_rate:,.0f} msg/s is {sig.ack_ratio:.1%} of the target "
            f"{sig.target:,.0f} (tolerance ±{pol.rate_tolerance:.0%})"
        )
    if _grows(sig.lag_slope, sig.lag_end, sig.target, pol):
        why.append(f"consumer lag grew {sig.lag_slope:+,.0f} msg/s to {sig.lag_end:,.0f}")
    if _grows(sig.queue_slope, sig.queue_end, sig.target, pol):
        why.append(
            f"client local queue grew {sig.queue_slope:+,.0f} msg/s to {sig.queue_end:,.0f}")
    d = sig.publish_delay_p99_us
    if d is not None and d > pol.publish_delay_budget_us:
        why.append(f"publish delay p99 {d / 1000:,.1f} ms over the "
                   f"{pol.publish_delay_budget_us / 1000:g} ms budget")
    if sig.send_errors:
        why.append(f"{sig.send_errors} sends failed")
    over = latency_over_bound(sig, pol)
    if over:
        why.append(over)
    return why


def latency_over_bound(sig: RungSignals, policy: LadderPolicy) -> str | None:
    """Why the rung's latency exceeds the policy's bound (None: no bound, or within it)."""
    bound = policy.latency_bound_us
    if bound is None:
        return None
    value = sig.latency_us.get(policy.latency_bound_metric)
    if value is None or value <= bound:
        return None
    return (f"{policy.latency_bound_metric} {value / 1000:,.1f} ms over the rung's latency "
            f"bound {bound / 1000:g} ms")


def attribute_limit(sig: RungSignals, failures: Sequence[str],
                    policy: LadderPolicy | None = None, *,
                    harness_ceiling: float | None = None,
                    client_ceiling: float | None = None) -> tuple[str, list[str]]:
    """The limiting resource of a rung and the signals behind it.

    ``harness_ceiling`` is the per-process ceiling of the harness alone (loopback
    calibration); ``client_ceiling`` the per-process ceiling of this driver when its
    calibration was limited by the client process (not by the broker). Either may be
    unknown (None).
    """
    pol = policy or LadderPolicy()
    if not failures:
        return NONE, []
    if sig.host_steal_share is not None and sig.host_steal_share >= pol.steal_share:
        return HOST, [host_noise_reason(sig.host_steal_share, pol.steal_share, "rung")]
    if sig.target > 0 and sig.ack_rate > sig.target * (1 + pol.rate_tolerance):
        # ahead of an open-loop schedule: the catch-up of a stall that began before the
        # window (a cold topic, a GC pause); nothing in it is a steady rate or a limit
        return UNSTEADY, [
            f"acknowledged {sig.ack_rate:,.0f} msg/s, {sig.ack_ratio:.1%} of the target "
            f"{sig.target:,.0f}: an open-loop schedule only runs ahead of its target while "
            "catching up on a stall that began before the window, so the rung was not in "
            "a steady state (neither sustained nor a limit)"
        ]
    per_worker = sig.per_worker_rate
    starved = {k: v for k, v in sig.worker_runq.items() if v >= pol.runq_share}
    hot = {k: v for k, v in sig.worker_cpu.items() if v >= pol.cpu_share}
    queue_grew = _grows(sig.queue_slope, sig.queue_end, sig.target, pol)
    pushback = sig.queue_full > 0 or queue_grew
    d = sig.publish_delay_p99_us
    late = d is not None and d > pol.publish_delay_budget_us
    if harness_ceiling is not None and per_worker > harness_ceiling:
        return GENERATOR, [
            f"{per_worker:,.0f} msg/s per worker process is above the harness's own "
            f"calibrated ceiling of {harness_ceiling:,.0f} msg/s (loopback, no broker)"
        ]
    # Run-queue wait alone also counts a worker's own threads queueing behind each other
    # (librdkafka runs several); starvation needs the generator's CPUs to be full too.
    busy, other = sig.generator_cpu_busy, sig.other_cpu_share
    cpus_full = busy is None or busy >= pol.cpu_share
    # Other processes using a fifth of the generator's CPUs (full on average or not: a
    # burst of other work, a build or a JVM starting, delays the pacer while it lasts).
    # Full CPUs alone count only where that share is unknown: full with the worker's
    # own threads (a worker at 88 % of a core) is the generator near its limit.
    others_took = cpus_full if other is None else other >= pol.other_cpu_share
    if starved and not hot and others_took:
        # another process held the generator's CPU: the machine's noise, like steal time
        # (measured again under --brokerperf-noise-retries), never the broker's limit.
        full = "" if busy is None else f", its CPUs {busy:.0%} busy"
        if other is not None:
            full += f" ({other:.0%} by other processes)"
        return HOST, [
            "worker process CPU-starved: waited on a run queue "
            + ", ".join(f"{v:.0%} (worker {k})" for k, v in sorted(starved.items()))
            + f" of the rung (≥ {pol.runq_share:.0%}) while using less than "
            f"{pol.cpu_share:.0%} of a core{full}: another process took its CPU"
        ]
    if hot or (late and not pushback):
        if hot:
            why = ("worker CPU at " + ", ".join(
                f"{v:.0%} of a core (worker {k})" for k, v in sorted(hot.items()))
                + f" (≥ {pol.cpu_share:.0%})")
        else:
            why = (f"publish delay p99 {(d or 0) / 1000:,.1f} ms while the client library "
                   "still accepted messages (no queue-full events, queue not growing): the "
                   "generator missed its own schedule")
        if harness_ceiling is not None and per_worker < harness_ceiling * (
                1 - pol.rate_tolerance):
            if hot:
                blame = "so the client library's cost saturated the process"
            else:  # not CPU: the sender was held up inside the client's send call
                cpu = max(sig.worker_cpu.values(), default=0.0)
                blame = (f"and the busiest worker used only {cpu:.0%} of a core, so sends "
                         "blocked inside the client library (waiting on its own queues or "
                         "on the broker without reporting a full queue)")
            return CLIENT_LIBRARY, [
                why + f"; the harness alone sustains {harness_ceiling:,.0f} msg/s per process "
                f"(loopback calibration) against {per_worker:,.0f} here, " + blame
            ]
        return GENERATOR, [why]
    if client_ceiling is not None and per_worker > client_ceiling:
        return CLIENT_LIBRARY, [
            f"{per_worker:,.0f} msg/s per worker process is above the driver's calibrated "
            f"per-process ceiling of {client_ceiling:,.0f} msg/s"
        ]
    reasons = []
    if sig.queue_full:
        reasons.append(f"client local queue full {sig.queue_full} times")
    if queue_grew:
        reasons.append(f"client queue grew {sig.queue_slope:+,.0f} msg/s")
    if _grows(sig.lag_slope, sig.lag_end, sig.target, pol):
        reasons.append(f"consumer lag grew {sig.lag_slope:+,.0f} msg/s")
    over = latency_over_bound(sig, pol)
    if over:
        reasons.append(over)
    if not reasons:
        reasons.append(f"acknowledged only {sig.ack_ratio:.1%} of the target")
    cpu = max(sig.worker_cpu.values(), default=0.0)
    reasons.append(f"while the generator had CPU to spare (busiest worker {cpu:.0%} of a "
                   "core, no run-queue starvation): the broker is the limit")
    return BROKER, ["; ".join(reasons)]


