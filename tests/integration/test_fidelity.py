"""Fidelity: an injected delay D must move the measured latencies by exactly D.

This is the evidence that the numbers pytest-brokerperf reports are true
(docs/explanation/measurement.md, "fidelity"). A :class:`DelayProxy` sits
between the producers and a real single-node Kafka and delays only the client → broker
direction by D. Then

* publish latency (send → ack) must grow by D: the produce request arrives D later,
  the ack comes back undelayed;
* end-to-end latency (send → receive) must grow by D: the message is appended D
  later, and the consumer (connected directly, not through the proxy) gets it D later.

The advertised-address trap: a Kafka client reconnects to the broker's *advertised*
address after bootstrap, which would bypass a proxy that only sits on the bootstrap
address, and the test would pass with no delay applied. So the broker gets an extra
listener ``DELAYED`` whose advertised port is the proxy's and whose bound port is
where the proxy forwards; producers bootstrap through the proxy, so the metadata they
receive keeps them on it. Consumers and the admin client bootstrap to the normal
listener. The test also checks, from the proxy's own byte counters, that every
produced byte went through the proxy and that the consumer's did not.

Shifts are measured against D = 0 through the same proxy, so the proxy's own overhead
cancels. A discarded warm-up run comes first (a fresh broker JVM is slower, and its
publish latency bimodal, for its first few thousand messages); then D = 0, 5, 20, 0 ms,
and the baseline is the mean of the two zero-delay runs, so a slow drift cancels and a
baseline that moves by more than the tolerance fails the attempt. A missed attempt is
repeated, up to three attempts (a neighbour's CPU burst on a shared 2-core machine can
move one run's p50 by milliseconds; a whole busy minute was seen to spoil two attempts
in a row); a systematic error misses all three and fails. When every attempt was
measurably disturbed — hypervisor steal at the harness's host-noise limit, or the proxy's
own sends late by more than half the tolerance — the test skips with those figures:
like a host-noise run, it then can say nothing either way. The shipped
``kafka-local`` driver config is used unchanged (acks=all, linger.ms=1), so the claim
is about the configuration users run. Tolerance: |shift − D| ≤ max(10 % of D, 0.5 ms).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.process import running_processes
from pytest_brokerperf.judge.verdict import Thresholds, assess, window_steal_share
from pytest_brokerperf.testing.delayproxy import DelayProxy, ProxyStats

pytestmark = pytest.mark.integration

#: Measured order: the zero-delay baseline runs first and last (A-B-C-A), and the
#: baseline is the mean of the two, so a slow drift of the broker or machine cancels.
DELAYS_MS = (0.0, 5.0, 20.0, 0.0)
RATE = 200  # msg/s: low and fixed, far below any limit, so only the delay changes
MESSAGE_SIZE = 1024
MEASURE_S = 9.0  # 1,800 samples per run at RATE: a p50 to within hundredths of a ms
WARM_MEASURE_S = 8.0  # the discarded warm-up run
#: The whole A-B-C-A sequence is repeated once when it misses: on a shared 2-core
#: machine a neighbour's CPU burst can move one run's p50 by a millisecond. A real
#: error (delay bypassed, harness-made latency) misses every attempt.
ATTEMPTS = 3
WARMUP_MAX_S = 3.0
REL_TOL = 0.10
ABS_TOL_MS = 0.5
LOOPBACK = "127.0.0.1"


@dataclass
class Rig:
    endpoint: BrokerEndpoint
    proxy: DelayProxy


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """One broker for every delay: Kafka with a DELAYED listener behind a delay proxy."""
    from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
    from pytest_brokerperf.brokers.provision.ports import free_port

    # tests/integration/conftest.py holds the one-broker-session lock and skips where
    # Kafka cannot be provided.
    proxy_port = free_port()  # advertised by the broker, so it must be known first
    cluster = KafkaProcessCluster(
        nodes=1,
        quorum="dynamic",  # an extra listener with a dynamic KRaft quorum
        workdir=tmp_path_factory.mktemp("fidelity-kafka"),
        extra_listeners={"DELAYED": proxy_port},
    )
    endpoint = cluster.start()
    try:
        listener = endpoint.info["listeners"]["DELAYED"]
        assert listener["advertised_port"] == proxy_port
        bind_port = int(listener["bind_port"])
        assert bind_port not in (proxy_port, endpoint.info["node_ports"][0]["port"])
        direct_port = int(endpoint.bootstrap.rsplit(":", 1)[1])
        assert _broker_ports(endpoint.bootstrap) == {1: direct_port}
        with DelayProxy(proxy_port, (LOOPBACK, bind_port)) as proxy:
            assert proxy.port == proxy_port
            # the metadata a client gets through the proxy keeps it on the proxy
            assert _broker_ports(proxy.address) == {1: proxy_port}
            yield Rig(endpoint, proxy)
    finally:
        cluster.stop()
    # nothing of the broker survives its stop
    assert not cluster.running
    assert not [pid for pid in endpoint.info["pids"] if psutil.pid_exists(pid)]
    assert not [p for p in psutil.process_iter(["cmdline"])
                if any(endpoint.info["workdir"] in a for a in (p.info["cmdline"] or []))]
    assert running_processes() == []


def _broker_ports(bootstrap: str) -> dict[int, int]:
    """node id -> port, as advertised in the metadata a client gets via ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {b.id: b.port for b in md.brokers.values()}


def _run_once(rig: Rig, delay_ms: float, index: int,
              measure_s: float = MEASURE_S) -> dict[str, Any]:
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    # producerConfig's bootstrap.servers wins over the endpoint's: producers (and only
    # they) bootstrap through the proxy; the broker's metadata then keeps them on it.
    config = KafkaDriverConfig.from_yaml(shipped_driver("kafka-local")).with_overrides(
        producer={"bootstrap.servers": rig.proxy.address},
        reason="fidelity test: producers through the delay proxy",
    )
    driver = KafkaDriver(rig.endpoint, config, stats_interval_ms=0)
    assert driver.config.producer_settings(rig.endpoint.bootstrap)["bootstrap.servers"] == (
        rig.proxy.address
    )
    assert driver.config.consumer_settings(rig.endpoint.bootstrap, "g")["bootstrap.servers"] == (
        rig.endpoint.bootstrap
    )
    workload = Workload(
        name=f"fidelity-{delay_ms:g}ms",
        topics=1,
        partitions_per_topic=1,
        message_size=MESSAGE_SIZE,
        subscriptions_per_topic=1,
        producers_per_topic=1,
        consumer_per_subscription=1,
        producer_rate=RATE,
        test_duration_minutes=measure_s / 60,
        warmup_duration_minutes=WARMUP_MAX_S / 60,
    )
    broker_cpus = rig.endpoint.info.get("cpu_affinity", {}).get("broker_cpus")
    plan = RunPlan(
        rate=RATE,
        period_s=1.0,
        warmup_max_s=WARMUP_MAX_S,
        measure_s=measure_s,
        workers=1,
        topic_prefix=f"fidelity-{index}-{int(delay_ms * 1000)}us",
        generator_cpus=default_generator_cpus(broker_cpus),
    )
    rig.proxy.set_delay(delay_ms, 0.0)
    before = rig.proxy.stats()
    cpu_before = _cpu_times()
    outcome = run_workload(driver, workload, plan, payloads=workload.payloads(None, seed=1))
    cpu_after = _cpu_times()
    after = rig.proxy.stats()

    assert outcome.worker_errors == [], outcome.worker_errors[:5]
    delivery = outcome.delivery
    assert delivery.acknowledged > 0
    assert delivery.lost == 0, delivery.as_dict()
    assert delivery.received >= delivery.acknowledged, delivery.as_dict()
    assert outcome.drain_complete
    # A window that did not acknowledge the offered rate (a stall before it, caught up
    # inside it, or a shortfall) is not a steady state: judged by the harness's own
    # verdict and counted as noise below, never as a fidelity miss (nor a pass).
    verdict = assess(outcome)

    pub = outcome.cumulative["publish_latency"].percentile(50)
    e2e = outcome.cumulative["e2e_latency"].percentile(50)
    assert pub is not None and e2e is not None
    assert pub > 0 and e2e > 0
    qs = (10, 25, 50, 75, 90, 99)
    runq = [w.runq_share for p in outcome.periods for w in p.workers]
    return {
        # The hypervisor's steal time over the measured window (the harness's host-noise
        # signal): a paused VM adds delay nobody injected.
        "host_steal_share": window_steal_share(outcome.periods),
        # How busy the machine was (all CPUs, everything on it, ours included) and how
        # long the worker waited for a CPU: a noisy neighbour explains a missed run.
        "machine_busy": _busy_share(cpu_before, cpu_after),
        "worker_runq_share": sum(runq) / len(runq) if runq else None,
        "publish_pcts_ms": {
            q: v / 1000 for q, v in outcome.cumulative["publish_latency"].percentiles(qs).items()
            if v is not None
        },
        "e2e_pcts_ms": {
            q: v / 1000 for q, v in outcome.cumulative["e2e_latency"].percentiles(qs).items()
            if v is not None
        },
        "delay_ms": delay_ms,
        "ack_rate": outcome.ack_rate,
        "verdict": verdict.status,
        "verdict_reasons": verdict.reasons,
        "publish_p50_ms": pub / 1000,
        "e2e_p50_ms": e2e / 1000,
        "acked": delivery.acknowledged,
        "measured_messages": sum(p.messages_sent for p in outcome.periods),
        "proxy_bytes_up": after.bytes_up - before.bytes_up,
        "proxy_bytes_down": after.bytes_down - before.bytes_down,
        "proxy_delay_up_ms": after.delay_up_ms,
        "proxy_late_mean_us_up": _late_mean_us(before, after),
    }


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs from /proc/stat; (0, 0) where unavailable."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def _busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else None


def _late_mean_us(before: ProxyStats, after: ProxyStats) -> float:
    """Mean lateness of the proxy's up-direction sends over one run (its own timing error)."""
    n0 = before.chunks_up
    n1 = after.chunks_up
    if n1 <= n0:
        return 0.0
    return (after.late_mean_us_up * n1 - before.late_mean_us_up * n0) / (n1 - n0)


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "injected D | publish p50   shift   error | e2e p50   shift   error | proxy late | busy"
        " | steal",
        "-----------+-----------------------------+-------------------------+------------+-----"
        "+------",
    ]
    for r in rows:
        busy = r["machine_busy"]
        steal = r.get("host_steal_share")
        lines.append(
            f"{r['delay_ms']:7.1f} ms | {r['publish_p50_ms']:11.3f} {r['publish_shift_ms']:7.3f} "
            f"{r['publish_error_ms']:+7.3f} | {r['e2e_p50_ms']:7.3f} {r['e2e_shift_ms']:7.3f} "
            f"{r['e2e_error_ms']:+7.3f} | {r['proxy_late_mean_us_up']:7.0f} µs | "
            + (f"{busy:4.0%}" if busy is not None else " n/a")
            + (f" | {steal:5.1%}" if steal is not None else " |   n/a")
            + (" noisy" if r.get("noisy") else "")
        )
    lines.append(
        f"(ms; baseline = mean of the two D=0 runs; tolerance |shift − D| ≤ "
        f"max({REL_TOL:.0%} of D, {ABS_TOL_MS} ms); busy = all CPUs of the machine; steal = "
        "what the hypervisor took of them)"
    )
    return "\n".join(lines)


def _evaluate(rows: list[dict[str, Any]]) -> tuple[dict[str, float], list[str]]:
    """Shifts against the mean of the two zero-delay runs, and what misses the tolerance."""
    zeros = [r for r in rows if r["delay_ms"] == 0.0]
    assert len(zeros) == 2 and rows[0] is zeros[0] and rows[-1] is zeros[1]
    base = {view: sum(z[f"{view}_p50_ms"] for z in zeros) / 2 for view in ("publish", "e2e")}
    for r in rows:
        r["tolerance_ms"] = max(REL_TOL * r["delay_ms"], ABS_TOL_MS)
        for view in ("publish", "e2e"):
            r[f"{view}_shift_ms"] = r[f"{view}_p50_ms"] - base[view]
            r[f"{view}_error_ms"] = r[f"{view}_shift_ms"] - r["delay_ms"]
    for r in rows:
        r["noisy"] = _noise(r)
    # The zero-delay rows are checked too: each must be within the tolerance of their
    # mean, or the baseline drifted and no shift can be trusted.
    failures = [
        f"D={r['delay_ms']} ms: {view} shift {r[f'{view}_shift_ms']:.3f} ms "
        f"(error {r[f'{view}_error_ms']:+.3f} ms > ±{r['tolerance_ms']:.3f} ms)"
        for r in rows
        for view in ("publish", "e2e")
        if abs(r[f"{view}_error_ms"]) > r["tolerance_ms"]
    ]
    return base, failures


def _noise(r: dict[str, Any]) -> list[str]:
    """Why a run's figures say nothing about the harness: measured, never guessed."""
    why = []
    if r["verdict"] != "valid":
        why.append(f"D={r['delay_ms']} ms: verdict {r['verdict']} "
                   f"(ack rate {r['ack_rate']:.1f} of {RATE} msg/s): "
                   + "; ".join(r["verdict_reasons"])[:300])
    steal = r.get("host_steal_share")
    if steal is not None and steal >= Thresholds().steal_share:
        why.append(f"D={r['delay_ms']} ms: the hypervisor took {steal:.1%} of the CPUs")
    # the proxy's own sends were late by more than half the tolerance: the delay actually
    # injected is not D, so the shift cannot be held to D
    if r["proxy_late_mean_us_up"] / 1000 > r["tolerance_ms"] / 2:
        why.append(f"D={r['delay_ms']} ms: the proxy itself ran "
                   f"{r['proxy_late_mean_us_up']:.0f} µs late on average")
    return why


def _check_path(r: dict[str, Any]) -> None:
    """The traffic really went through the proxy, with the delay applied; otherwise
    (advertised-address trap) the test would pass with no delay at all."""
    assert r["proxy_delay_up_ms"] == r["delay_ms"]
    assert r["proxy_bytes_up"] > r["acked"] * MESSAGE_SIZE, (
        f"D={r['delay_ms']} ms: only {r['proxy_bytes_up']} bytes went up through the proxy "
        f"for {r['acked']} acked messages of {MESSAGE_SIZE} B: producers bypass it"
    )
    # ... and the consumer's fetches did not (they would come back down through it).
    assert r["proxy_bytes_down"] < r["acked"] * MESSAGE_SIZE / 2, (
        f"D={r['delay_ms']} ms: {r['proxy_bytes_down']} bytes came down through the proxy: "
        "the consumer is connected through it"
    )


def test_injected_delay_shifts_publish_and_e2e_latency(rig: Rig, tmp_path: Path) -> None:
    t0 = time.monotonic()
    # A fresh JVM is slow and bimodal for its first few thousand messages (JIT): warm
    # the broker and the whole path once, through the proxy at D = 0, and discard it.
    warm = _run_once(rig, 0.0, 0, measure_s=WARM_MEASURE_S)
    _check_path(warm)
    attempts: list[dict[str, Any]] = []
    for attempt in range(1, ATTEMPTS + 1):
        rows = [_run_once(rig, d, 10 * attempt + i) for i, d in enumerate(DELAYS_MS)]
        for r in rows:
            _check_path(r)  # never retried: a bypassed proxy is a bug, not noise
        base, failures = _evaluate(rows)
        table = _table(rows)
        noise = [w for r in rows for w in r["noisy"]]
        attempts.append({"baseline_p50_ms": base, "runs": rows, "failures": failures,
                         "noise": noise, "table": table})
        print(f"\nfidelity, attempt {attempt} (the proxy delays client→broker only):\n{table}")
        if not failures:
            break

    out = tmp_path / "fidelity.json"
    out.write_text(json.dumps({
        "rate_msg_s": RATE, "message_size": MESSAGE_SIZE, "measure_s": MEASURE_S,
        "relative_tolerance": REL_TOL, "absolute_tolerance_ms": ABS_TOL_MS,
        "warmup_run": warm, "attempts": attempts,
        "broker": rig.endpoint.redacted(), "wall_s": round(time.monotonic() - t0, 1),
    }, indent=2, default=str))
    print(f"written to {out}")
    last = attempts[-1]
    if last["failures"] and all(a["noise"] for a in attempts):
        # every attempt ran while the host (or the proxy's own scheduling) was measurably
        # disturbed: no claim about the harness can be made either way
        pytest.skip(f"host too noisy in all {len(attempts)} attempts: "
                    + "; ".join(w for a in attempts for w in a["noise"][:2]))
    assert not last["failures"], (
        f"missed in all {len(attempts)} attempts:\n"
        + "\n\n".join("\n".join(a["failures"]) + "\n" + a["table"] for a in attempts)
    )
