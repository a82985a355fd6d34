"""Calibrated generator: what one worker process can generate, per driver and machine.

Before a throughput ladder the harness measures, for **one worker process** holding one
producer and one consumer (the per-process shape of the throughput scenario):

* the **harness ceiling** — against the in-process loopback driver, i.e. pacing, the
  header, five latency views, delivery ledgers and no client library or broker at all;
* the **driver ceiling** — the same process against the broker in use through the
  broker's client library (confluent-kafka for Kafka).

Each is a short open-loop ladder in one session: rates double from ``start_rate`` until
a step is not sustainable (the ladder's own rules,
:func:`~pytest_brokerperf.judge.ladder.judge_rung`), then two geometric bisection steps
(queues drained in between). A step that fails on the harness side without saturating
the process (a stall, not a ceiling) is measured once more before it counts, at most
twice per calibration. The ceiling is the highest sustained step. What stopped it is
recorded as the ceiling's ``bound``:

* ``client`` — the process itself (CPU, run queue, its own schedule): a true per-process
  ceiling, used to flag targets above ``workers × ceiling`` as ``client-bound``;
* ``broker`` — the broker pushed back first: the client's ceiling is *at least* this
  (a lower bound, used only to size the worker pool);
* ``not-reached`` — the calibration's top rate passed.

Results are cached in ``<cache dir>/calibration.json`` keyed by machine (host, CPU
model, CPUs, the generator's CPU set), plugin/Python/client versions, driver, broker
version, message size and partitions; ``--brokerperf-calibration=refresh`` measures
again, ``off`` skips calibration (results then say ``uncalibrated``).
``$BROKERPERF_CALIBRATION_DIR`` moves only the calibration cache (e.g. one per CI run,
shared by its sessions) and leaves the jars where they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.judge import ladder as lad

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.engine.plan import Rung, RunOutcome

__all__ = [
    "CALIBRATION_DIR_ENV",
    "CALIBRATION_MODES",
    "Ceiling",
    "cache_path",
    "cached_or_measured",
    "calibrate",
    "calibration_key",
]

CALIBRATION_MODES = ("auto", "refresh", "off")
CACHE_FILE = "calibration.json"
#: a directory for calibration.json alone (the jars stay in the cache dir)
CALIBRATION_DIR_ENV = "BROKERPERF_CALIBRATION_DIR"
#: 2: the generator's batch path raised the loopback (harness) ceiling; ceilings cached
#: before it would undersize worker pools
CACHE_SCHEMA = 2


@dataclass
class Ceiling:
    """The per-process ceiling of one driver (or of the harness alone) on this machine."""

    target: str  # "harness" (loopback) | "driver"
    driver: str
    broker: str
    rate_msg_s: float | None  # highest sustained per-process rate; None = even the lowest failed
    bound: str  # client | broker | not-reached
    failed_rate_msg_s: float | None
    limit_reasons: list[str]
    steps: list[dict[str, Any]]
    message_size: int
    partitions: int
    measured_at: str
    duration_s: float
    key: dict[str, Any] = field(default_factory=dict)
    cached: bool = False

    @property
    def client_ceiling(self) -> float | None:
        """The ceiling when the process itself was the limit (else unknown: None)."""
        return self.rate_msg_s if self.bound == "client" else None

    @property
    def sizing_rate(self) -> float | None:
        """What one process is known to sustain (a lower bound when broker-bound)."""
        return self.rate_msg_s

    def describe(self) -> str:
        r = "none" if self.rate_msg_s is None else f"{self.rate_msg_s:,.0f} msg/s"
        what = {"client": "process-bound ceiling", "broker": "broker-bound, a lower bound",
                "host": "stopped by hypervisor steal time, a lower bound; not cached",
                "not-reached": "ceiling not reached"}.get(self.bound, self.bound)
        src = "cached" if self.cached else "measured"
        return f"{self.driver} {r}/process ({what}; {src} {self.measured_at[:19]})"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["client_ceiling_msg_s"] = self.client_ceiling
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceiling:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


def cache_path() -> Path:
    """``$BROKERPERF_CALIBRATION_DIR/calibration.json``, else in the cache dir."""
    from pytest_brokerperf.brokers.provision.maven import cache_root

    own = os.environ.get(CALIBRATION_DIR_ENV, "").strip()
    return (Path(own).expanduser() if own else cache_root()) / CACHE_FILE


def calibration_key(driver: Driver, *, broker_version: str, message_size: int,
                    partitions: int, generator_cpus: tuple[int, ...] | None) -> dict[str, Any]:
    """Everything a per-process ceiling depends on."""
    from pytest_brokerperf.brokers.versions import __version__
    from pytest_brokerperf.metrics.sysstats import _cpu_model

    desc: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        desc = driver.describe()
    return {
        "schema": CACHE_SCHEMA,
        "plugin": __version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "generator_cpus": list(generator_cpus) if generator_cpus else None,
        "driver_kind": driver.kind,
        "driver": driver.name,
        "client": desc.get("client"),
        "client_version": desc.get("client_version"),
        "librdkafka_version": desc.get("librdkafka_version"),
        "broker_version": broker_version,
        "message_size": message_size,
        "partitions": partitions,
    }


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def load_cached(key: dict[str, Any], path: Path | None = None) -> Ceiling | None:
    entry = _load(path or cache_path()).get(_digest(key))
    if not isinstance(entry, dict):
        return None
    try:
        ceiling = Ceiling.from_dict(entry)
    except TypeError:
        return None
    ceiling.cached = True
    return ceiling


def store(ceiling: Ceiling, path: Path | None = None) -> None:
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            doc = _load(path)
            entry = ceiling.as_dict()
            entry["cached"] = False
            doc[_digest(ceiling.key)] = entry
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
            tmp.replace(path)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


#: A driver's ladder starts low: a broker or client library may hold only a few thousand
#: msg/s per process.
DRIVER_START_RATE = 4000.0
#: The harness alone (the loopback driver) holds hundreds of thousands of msg/s per
#: process on any machine this runs on: its ladder starts three doublings higher.
HARNESS_START_RATE = 32_000.0
#: When even the first step fails, rates halve down to about this before giving up.
DOWN_FLOOR_RATE = 500.0


def _step_rung(rate: float, warmup_s: float, measure_s: float, drain_s: float) -> Rung:
    from pytest_brokerperf.engine.plan import Rung

    return Rung(rate=rate, warmup_max_s=warmup_s, measure_s=measure_s, drain_before_s=drain_s,
                label="calibration")


def calibrate(
    driver: Driver,
    *,
    target: str,
    broker: str,
    message_size: int = 1024,
    partitions: int = 1,
    generator_cpus: tuple[int, ...] | None = None,
    start_rate: float = DRIVER_START_RATE,
    max_rate: float = 2_000_000.0,
    period_s: float = 0.5,
    warmup_s: float = 1.5,
    measure_s: float = 2.0,
    bisections: int = 2,
    retries: int = 2,
    policy: lad.LadderPolicy | None = None,
    topic_prefix: str = "bp-calibration",
    progress: Callable[[str], None] | None = None,
    key: dict[str, Any] | None = None,
) -> Ceiling:
    """Measure one worker process's ceiling with ``driver`` (see the module docstring)."""
    from pytest_brokerperf.engine.coordinator import run_rates
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    pol = policy or lad.LadderPolicy()
    wl = Workload(name=f"calibration-{target}", topics=1, partitions_per_topic=partitions,
                  message_size=message_size, subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=int(start_rate),
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=start_rate, period_s=period_s, warmup_max_s=warmup_s,
                   measure_s=measure_s, warmup_min_periods=2, steady_periods=2, workers=1,
                   topic_prefix=topic_prefix, generator_cpus=generator_cpus,
                   flush_timeout_s=20.0, drain_timeout_s=20.0, probe_timeout_s=60.0)
    steps: list[dict[str, Any]] = []
    judged: list[tuple[float, list[str], str, list[str]]] = []
    # halvings allowed when even the first step fails: down to the same floor (~500
    # msg/s) whatever the start
    down = max(0, int(math.log2(start_rate / DOWN_FLOOR_RATE)))
    state: dict[str, Any] = {"lo": None, "hi": None, "bisect_left": bisections,
                             "down_left": down, "retries_left": retries, "retried": set()}

    def on_rung(out: RunOutcome) -> None:
        sig = lad.RungSignals.from_outcome(out, subscriptions_per_topic=1, producing_workers=1)
        failures = lad.judge_rung(sig, pol)
        limit, reasons = lad.attribute_limit(sig, failures, pol)
        judged.append((out.plan.rate, failures, limit, reasons))
        steps.append({
            "rate_msg_s": out.plan.rate, "sustainable": not failures,
            "ack_rate_msg_s": round(sig.ack_rate, 1),
            "consume_rate_msg_s": round(sig.consume_rate, 1),
            "worker_cpu_share": round(max(sig.worker_cpu.values(), default=0.0), 3),
            "worker_runq_share": round(max(sig.worker_runq.values(), default=0.0), 3),
            "publish_delay_p99_us": sig.publish_delay_p99_us,
            "host_steal_share": sig.host_steal_share,
            "queue_full_events": sig.queue_full, "limit": limit,
            "failures": failures, "limit_reasons": reasons,
        })
        if progress is not None:
            cpu = max(sig.worker_cpu.values(), default=0.0)
            said = "sustained" if not failures else f"not sustained ({limit})"
            progress(f"brokerperf: calibrating {target} ({driver.name}) "
                     f"{out.plan.rate:>9,.0f} msg/s per process: ack {sig.ack_rate:,.0f}/s "
                     f"cpu {cpu:.0%} -> {said}")

    def next_rung(done: list[RunOutcome]) -> Rung | None:
        if not judged:
            return _step_rung(start_rate, warmup_s, measure_s, 0.0)
        rate, failures, limit, _ = judged[-1]
        if failures and _transient(steps[-1], limit) and state["retries_left"] > 0 and (
                rate not in state["retried"]):
            # a harness-side failure without a saturated process is a stall, not yet a
            # ceiling: measure the same rate once more before concluding
            state["retries_left"] -= 1
            state["retried"].add(rate)
            steps[-1]["retried"] = True
            return _step_rung(rate, warmup_s, measure_s, 5.0)
        if failures and limit == lad.HOST:
            # the hypervisor, not the rate, failed the step (already measured again): a
            # lower rate would say no more, so the ceiling stays unknown (bound "host")
            return None
        if not failures:
            state["lo"] = rate if state["lo"] is None else max(state["lo"], rate)
        else:
            state["hi"] = rate if state["hi"] is None else min(state["hi"], rate)
        lo, hi = state["lo"], state["hi"]
        if hi is None:  # still climbing
            nxt = rate * 2
            return None if nxt > max_rate else _step_rung(nxt, warmup_s, measure_s, 0.0)
        if lo is None:  # even the first step failed: go down
            if state["down_left"] <= 0:  # at the floor (DOWN_FLOOR_RATE)
                return None
            state["down_left"] -= 1
            return _step_rung(hi / 2, warmup_s, measure_s, 20.0)
        if state["bisect_left"] <= 0 or hi / lo < 1.15:
            return None
        state["bisect_left"] -= 1
        return _step_rung(round(math.sqrt(lo * hi), -2), warmup_s, measure_s, 20.0)

    def _transient(step: dict[str, Any], limit: str) -> bool:
        return limit == lad.HOST or (limit in (lad.GENERATOR, lad.CLIENT_LIBRARY)
                                     and step["worker_cpu_share"] < pol.cpu_share
                                     and not step["queue_full_events"])

    t0 = time.monotonic()
    run_rates(driver, wl, plan, next_rung, payloads=wl.payloads(None, seed=11), on_rung=on_rung)
    passed = [r for r, f, _, _ in judged if not f]
    failed = [(r, lim, why) for r, f, lim, why in judged if f]
    best = max(passed) if passed else None
    if failed:
        above = [x for x in failed if best is None or x[0] > best]
        first_fail = min(above or failed, key=lambda x: x[0])
        bound = ("client" if first_fail[1] in (lad.GENERATOR, lad.CLIENT_LIBRARY)
                 else "host" if first_fail[1] == lad.HOST else "broker")
        failed_rate: float | None = first_fail[0]
        reasons = list(first_fail[2])
    else:
        bound, failed_rate, reasons = "not-reached", None, []
    return Ceiling(
        target=target, driver=driver.name, broker=broker, rate_msg_s=best, bound=bound,
        failed_rate_msg_s=failed_rate, limit_reasons=reasons, steps=steps,
        message_size=message_size, partitions=partitions,
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - t0, 1), key=dict(key or {}),
    )


def cached_or_measured(driver: Driver, *, target: str, broker: str, broker_version: str,
                       message_size: int, partitions: int,
                       generator_cpus: tuple[int, ...] | None, mode: str = "auto",
                       progress: Callable[[str], None] | None = None,
                       topic_prefix: str = "bp-calibration",
                       policy: lad.LadderPolicy | None = None,
                       start_rate: float = DRIVER_START_RATE) -> Ceiling | None:
    """The cached ceiling for this key, or a fresh measurement (stored); None when off."""
    if mode == "off":
        return None
    key = calibration_key(driver, broker_version=broker_version, message_size=message_size,
                          partitions=partitions, generator_cpus=generator_cpus)
    if mode == "auto":
        hit = load_cached(key)
        if hit is not None:
            return hit
    ceiling = calibrate(driver, target=target, broker=broker, message_size=message_size,
                        partitions=partitions, generator_cpus=generator_cpus, key=key,
                        progress=progress, topic_prefix=topic_prefix, policy=policy,
                        start_rate=start_rate)
    if ceiling.bound != "host":  # a noisy host's figure must not outlive the noise
        with contextlib.suppress(OSError):
            store(ceiling)
    return ceiling
