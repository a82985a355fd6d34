"""A judged ladder: its rungs' results, the knee of the latency curve and the summary.

Built from the rung judgements in :mod:`pytest_brokerperf.judge.ladder`; definitions of the knee
and of a ladder's outcome are in ``docs/explanation/throughput.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from pytest_brokerperf.judge.ladder import BROKER, HOST, NONE, UNSTEADY, LadderPolicy, RungSignals
from pytest_brokerperf.judge.verdict import HOST_NOISE

__all__ = ["Knee", "LadderResult", "RungResult", "find_knee", "summarize"]


@dataclass(frozen=True)
class Knee:
    """Where p99 response time bends up (see the module docstring)."""

    metric: str
    rate_msg_s: float | None  # the knee: highest rate with p99 ≤ factor × floor
    bend_rate_msg_s: float  # the first rung past it
    floor_us: float
    bend_p99_us: float
    factor: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_knee(points: Iterable[tuple[float, float | None]], factor: float = 2.0,
              metric: str = "e2e_response.p99", bound_us: float | None = None) -> Knee | None:
    """The knee of (offered rate, p99 µs) points; None when p99 never bends by ``factor``.

    With ``bound_us`` the knee is the highest rate whose value stays within the bound
    (``factor`` 0 marks it): when the lowest rung is already past the bound the knee lies
    below the ladder (``rate_msg_s`` None), which is reported, not hidden. Points with no
    p99 (undersampled) are skipped.
    """
    pts = sorted((r, float(v)) for r, v in points if v is not None and math.isfinite(v))
    if bound_us is not None:
        prev: float | None = None
        for rate, value in pts:
            if value > bound_us:
                return Knee(metric=metric, rate_msg_s=prev, bend_rate_msg_s=rate,
                            floor_us=bound_us, bend_p99_us=value, factor=0.0)
            prev = rate
        return None
    floor: float | None = None
    prev_rate: float | None = None
    for i, (rate, p99) in enumerate(pts):
        if floor is not None:
            limit = factor * max(floor, 1.0)
            # the bend must hold: every higher rung stays above it (noise is not a knee)
            if p99 > limit and all(v > limit for _, v in pts[i + 1:]):
                return Knee(metric=metric, rate_msg_s=prev_rate, bend_rate_msg_s=rate,
                            floor_us=floor, bend_p99_us=p99, factor=factor)
        floor = p99 if floor is None else min(floor, p99)
        prev_rate = rate
    return None


@dataclass
class RungResult:
    """One rung of a ladder: its figures, its judgement and its limit."""

    index: int
    target_rate: float
    status: str  # sustainable | unsustainable | refused
    signals: RungSignals | None
    failures: list[str]
    limit: str
    limit_reasons: list[str]
    verdict: dict[str, Any]
    latency_us: dict[str, dict[str, float | None]] = field(default_factory=dict)
    warmup_s: float = 0.0
    warmup_periods: int = 0
    warmup_steady: bool = True
    client_bound: bool = False  # target above workers × the driver's client ceiling
    publish_mib_s: float = 0.0
    begin_time: str | None = None
    end_time: str | None = None
    broker_cpu_cores: float | None = None  # the broker processes' CPU, when sampled

    @property
    def sustainable(self) -> bool:
        return self.status == "sustainable"

    @property
    def measured(self) -> bool:
        return self.signals is not None

    def p(self, view: str, q: str) -> float | None:
        return self.latency_us.get(view, {}).get(q)

    def as_dict(self) -> dict[str, Any]:
        s = self.signals
        return {
            "index": self.index,
            "target_rate_msg_s": self.target_rate,
            "status": self.status,
            "sustainable": self.sustainable,
            "duration_s": s.duration_s if s else 0.0,
            "warmup_s": self.warmup_s,
            "warmup_periods": self.warmup_periods,
            "warmup_steady": self.warmup_steady,
            "ack_rate_msg_s": s.ack_rate if s else None,
            "consume_rate_msg_s": s.consume_rate if s else None,
            "ack_ratio": s.ack_ratio if s else None,
            "publish_mib_s": self.publish_mib_s,
            "lag_slope_msg_s": s.lag_slope if s else None,
            "lag_end": s.lag_end if s else None,
            "queue_slope_msg_s": s.queue_slope if s else None,
            "queue_end": s.queue_end if s else None,
            "queue_full_events": s.queue_full if s else None,
            "send_errors": s.send_errors if s else None,
            "publish_delay_p99_us": s.publish_delay_p99_us if s else None,
            "worker_cpu_share": {str(k): round(v, 3) for k, v in (s.worker_cpu if s else {}
                                                                  ).items()},
            "worker_runq_share": {str(k): round(v, 3) for k, v in (s.worker_runq if s else {}
                                                                   ).items()},
            "producing_workers": s.producing_workers if s else None,
            "generator_cpu_busy": s.generator_cpu_busy if s else None,
            "other_cpu_share": s.other_cpu_share if s else None,
            "host_steal_share": s.host_steal_share if s else None,
            "latency_us": self.latency_us,
            "failures": self.failures,
            "limit": self.limit,
            "limit_reasons": self.limit_reasons,
            "client_bound": self.client_bound,
            "broker_cpu_cores": self.broker_cpu_cores,
            "verdict": self.verdict,
            "begin_time": self.begin_time,
            "end_time": self.end_time,
        }

    CSV_HEADER: ClassVar[tuple[str, ...]] = (
        "index", "target_rate_msg_s", "status", "limit", "verdict", "duration_s",
        "warmup_s", "warmup_steady", "ack_rate_msg_s", "consume_rate_msg_s", "ack_ratio",
        "publish_mib_s", "lag_slope_msg_s", "lag_end", "queue_slope_msg_s", "queue_end",
        "queue_full_events", "publish_delay_p99_us",
        "publish_response_p50_us", "publish_response_p99_us", "publish_response_p999_us",
        "e2e_response_p50_us", "e2e_response_p99_us", "e2e_response_p999_us",
        "max_worker_cpu_share", "max_worker_runq_share", "generator_cpu_busy",
        "host_steal_share", "broker_cpu_cores", "client_bound", "reasons",
    )

    def csv_row(self) -> list[Any]:
        d = self.as_dict()
        s = self.signals

        def r(x: float | None, nd: int = 1) -> Any:
            return "" if x is None else round(x, nd)

        return [
            self.index, self.target_rate, self.status, self.limit,
            self.verdict.get("status", ""), r(d["duration_s"], 2), r(self.warmup_s, 2),
            self.warmup_steady, r(d["ack_rate_msg_s"]), r(d["consume_rate_msg_s"]),
            r(d["ack_ratio"], 4), r(self.publish_mib_s, 3), r(d["lag_slope_msg_s"]),
            r(d["lag_end"], 0), r(d["queue_slope_msg_s"]), r(d["queue_end"], 0),
            "" if s is None else s.queue_full, r(d["publish_delay_p99_us"], 0),
            r(self.p("publish_response", "p50"), 0), r(self.p("publish_response", "p99"), 0),
            r(self.p("publish_response", "p99.9"), 0), r(self.p("e2e_response", "p50"), 0),
            r(self.p("e2e_response", "p99"), 0), r(self.p("e2e_response", "p99.9"), 0),
            r(max(s.worker_cpu.values(), default=0.0) if s else None, 3),
            r(max(s.worker_runq.values(), default=0.0) if s else None, 3),
            r(s.generator_cpu_busy if s else None, 3),
            r(s.host_steal_share if s else None, 4), r(self.broker_cpu_cores, 3),
            self.client_bound,
            " | ".join(self.failures + self.limit_reasons),
        ]


@dataclass
class LadderResult:
    """A whole ladder: its rungs, the highest sustainable rate, the limit and the knee."""

    rates: tuple[float, ...]
    rungs: list[RungResult]
    policy: LadderPolicy
    highest_sustainable_rate: float | None
    outcome: str  # limit-found | limit-not-reached | harness-limited
    limit: str  # limiting resource of the ladder (none when not reached)
    limit_rate: float | None  # the first rung that failed or was refused
    knee: Knee | None
    knee_publish: Knee | None
    #: the knee against the policy's latency bound (None: no bound, or never past it)
    knee_bound: Knee | None = None
    workers: int = 1
    ceilings: dict[str, Any] = field(default_factory=dict)

    @property
    def top_rung(self) -> RungResult | None:
        """The highest sustainable rung (the headline's figures), if any."""
        ok = [r for r in self.rungs if r.sustainable]
        return ok[-1] if ok else None

    @property
    def limit_reached(self) -> bool:
        return self.outcome != "limit-not-reached"

    def summary(self) -> str:
        return self._summary() + self._bound_note()

    def _bound_note(self) -> str:
        bound = self.policy.latency_bound_us
        if bound is None:
            return ""
        what = f"{self.policy.latency_bound_metric} ≤ {bound / 1000:g} ms"
        k = self.knee_bound
        if k is None:
            return f"; every measured rung kept {what}"
        if k.rate_msg_s is None:
            return (f"; {what} held at no rung: the lowest ({k.bend_rate_msg_s:,.0f} msg/s) "
                    f"already had {k.bend_p99_us / 1000:,.1f} ms, so the latency knee lies "
                    "below the ladder")
        return (f"; {what} up to {k.rate_msg_s:,.0f} msg/s ({k.bend_p99_us / 1000:,.1f} ms "
                f"at {k.bend_rate_msg_s:,.0f})")

    def _summary(self) -> str:
        hs = self.highest_sustainable_rate
        best = f"{hs:,.0f} msg/s" if hs is not None else "none"
        if self.outcome == "limit-not-reached":
            return (f"limit not reached at {self.rates[-1]:,.0f} msg/s: every rung was "
                    f"sustainable (highest sustainable {best})")
        at = f"{self.limit_rate:,.0f} msg/s" if self.limit_rate is not None else "?"
        if self.outcome == "limit-found" and hs is not None:
            return (f"highest sustainable {best}; limit {self.limit} at {at} (the broker's "
                    f"limit lies between {best} and {at})")
        if self.outcome == "limit-found":  # the broker failed even the lowest rung
            return (f"no rung was sustainable; limit {self.limit} at {at}: the broker's limit "
                    f"lies below the lowest rung (lower --brokerperf-ladder to bracket it)")
        who = {HOST: "the host (hypervisor steal time)",
               UNSTEADY: "an unsteady rung (catching up a stall from before its window)",
               }.get(self.limit, "the harness")
        floor = f"the broker sustains at least {best}" if hs is not None else (
            "no broker figure")
        return (f"highest sustainable {best}; limit {self.limit} at {at}: {who}, not "
                f"the broker, stopped the ladder ({floor})")

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": "ladder",
            "rates_msg_s": list(self.rates),
            "policy": asdict(self.policy),
            "workers": self.workers,
            "ceilings": self.ceilings,
            "rungs": [r.as_dict() for r in self.rungs],
            "highest_sustainable_rate_msg_s": self.highest_sustainable_rate,
            "outcome": self.outcome,
            "limit_reached": self.limit_reached,
            "limit": self.limit,
            "limit_rate_msg_s": self.limit_rate,
            "knee": self.knee.as_dict() if self.knee else None,
            "knee_publish_response": self.knee_publish.as_dict() if self.knee_publish else None,
            "knee_latency_bound": self.knee_bound.as_dict() if self.knee_bound else None,
            "curve": [
                {"offered_rate_msg_s": r.target_rate,
                 "ack_rate_msg_s": r.signals.ack_rate if r.signals else None,
                 "sustainable": r.sustainable,
                 # host-noise: these latencies are the hypervisor's (never in the knee)
                 "verdict": r.verdict.get("status"),
                 **{f"{v}_{q.replace('.', '')}_us": r.p(v, q)
                    for v in ("publish_response", "e2e_response")
                    for q in ("p50", "p99", "p99.9")}}
                for r in self.rungs if r.measured
            ],
            "summary": self.summary(),
        }


def summarize(rates: Sequence[float], rungs: list[RungResult], policy: LadderPolicy, *,
              workers: int = 1, ceilings: dict[str, Any] | None = None) -> LadderResult:
    """Fold judged rungs into the ladder's result."""
    ok = [r.target_rate for r in rungs if r.sustainable]
    failed = next((r for r in rungs if not r.sustainable), None)
    if failed is None:
        outcome, limit, limit_rate = "limit-not-reached", NONE, None
    else:
        limit, limit_rate = failed.limit, failed.target_rate
        outcome = "limit-found" if limit == BROKER else "harness-limited"
    # a rung the hypervisor robbed may still have sustained its rate (noise only hurts),
    # but its latencies are the host's: neither a floor nor a bend of the curve
    measured = [r for r in rungs if r.measured and r.verdict.get("status") != HOST_NOISE]
    knee = find_knee(((r.target_rate, r.p("e2e_response", "p99")) for r in measured),
                     policy.knee_factor, "e2e_response.p99")
    knee_pub = find_knee(((r.target_rate, r.p("publish_response", "p99")) for r in measured),
                         policy.knee_factor, "publish_response.p99")
    knee_bound = None
    if policy.latency_bound_us is not None:
        view, _, q = policy.latency_bound_metric.rpartition(".")
        knee_bound = find_knee(((r.target_rate, r.p(view, q)) for r in measured),
                               metric=policy.latency_bound_metric,
                               bound_us=policy.latency_bound_us)
    return LadderResult(
        rates=tuple(rates), rungs=rungs, policy=policy,
        highest_sustainable_rate=max(ok) if ok else None, outcome=outcome, limit=limit,
        limit_rate=limit_rate, knee=knee, knee_publish=knee_pub, knee_bound=knee_bound,
        workers=workers,
        ceilings=dict(ceilings or {}),
    )
