"""A deliberately CPU-starved generator is never classified as a broker result.

The loopback driver (no broker) with its worker process pinned to one CPU that three busy
loops also run on: whatever rung fails first, the limit is the machine (host-noise:
another process held the generator's CPU, from the run-queue signal) or the generator —
never broker back-pressure. It burns a CPU on purpose, so it runs
under the integration session lock (tests/integration/conftest.py), never beside another
session's broker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.engine.coordinator import run_rates
from pytest_brokerperf.engine.plan import Rung, RunOutcome, RunPlan
from pytest_brokerperf.judge.ladder import BROKER, GENERATOR, HOST, LadderPolicy
from pytest_brokerperf.scenario_library.throughput_judge import judge
from pytest_brokerperf.workload.model import Workload


def _ladder(rates: list[float], cpu: int):
    wl = Workload(name="starved", topics=1, partitions_per_topic=2, message_size=1024,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=1000, test_duration_minutes=1,
                  warmup_duration_minutes=0)
    plan = RunPlan(rate=rates[0], period_s=0.5, warmup_max_s=1.0, measure_s=1.5,
                   warmup_min_periods=2, steady_periods=2, workers=1,
                   topic_prefix="loop-starved", probe_timeout_s=30, generator_cpus=(cpu,))
    results = []

    def next_rung(done: list[RunOutcome]) -> Rung | None:
        if (results and not results[-1].sustainable) or len(results) >= len(rates):
            return None
        return Rung(rates[len(results)], plan.warmup_max_s, plan.measure_s)

    def on_rung(out: RunOutcome) -> None:
        # the hogs starve the generator here, not the hypervisor: steal is not judged
        results.append(judge(out, len(results), policy=LadderPolicy(steal_share=9.0),
                             subscriptions_per_topic=1, producing_workers=1,
                             harness_ceiling=None, client_ceiling=None))

    run_rates(LoopbackDriver(partitions=2), wl, plan, next_rung,
              payloads=wl.payloads(None, seed=3), on_rung=on_rung)
    return results


def test_cpu_starved_generator_is_host_noise_not_a_broker_result() -> None:
    """Pin the generator to one CPU and run three busy loops on the same CPU: whatever
    rung fails first, its limit is the machine (run-queue starvation) or the generator,
    never the broker."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    hogs = [
        subprocess.Popen([sys.executable, "-c",
                          f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
        for _ in range(3)
    ]
    try:
        time.sleep(0.3)
        results = _ladder([10_000, 40_000, 160_000], cpu)
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait(10)
    failed = [r for r in results if not r.sustainable]
    assert failed, "a starved generator sustained 160k msg/s"
    (first,) = failed
    assert first.limit in (HOST, GENERATOR), (first.limit, first.limit_reasons)
    assert first.limit != BROKER
    assert first.verdict["status"] in ("host-noise", "generator-bound")
    assert first.signals is not None
    # the independent signal: the worker waited on a run queue (or had its core)
    assert (max(first.signals.worker_runq.values()) >= 0.2
            or max(first.signals.worker_cpu.values()) >= 0.9)
