"""How many messages a worker process generates and consumes with full recording, and how
that scales over 1, 2, 4 … worker processes.

Runs the real engine (``LoadSession`` through ``run_workload``: spawned workers, the
open-loop pacer, the message header, five latency views, delivery ledgers, 1 s stats
periods) on the in-process loopback driver, which has no broker and no client library
behind it. Each worker holds one topic with one producer and one consumer (the loopback
driver keeps a topic's clients in one worker), and each is offered more than it can send
(``--rate`` per worker, default 1.5M msg/s), so what it acknowledges and consumes is its
ceiling. Printed per worker count: acknowledged and consumed msg/s in total and per
worker, each worker's CPU share of one core, CPU µs per message (produced and consumed
once), delivery (lost, unconfirmed, the lost sequence ranges, whether the drain
completed, acks outstanding after the producers' flush, worker errors), the hypervisor's
steal share, and the CPUs this process may run on (``os.sched_getaffinity``) — on fewer
cores than workers the aggregate cannot grow.

    python benchmarks/loopback_rate.py [--workers 1,2,4] [--seconds 5] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any


def measure(workers: int, rate_per_worker: float, seconds: float,
            message_size: int) -> dict[str, Any]:
    """One run with ``workers`` worker processes, each overdriven on its own topic."""
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    rate = rate_per_worker * workers
    wl = Workload(name="loopback-rate", topics=workers, partitions_per_topic=1,
                  message_size=message_size, subscriptions_per_topic=1,
                  producers_per_topic=1, consumer_per_subscription=1,
                  producer_rate=int(rate), test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=rate, period_s=1.0, warmup_max_s=2.0, warmup_min_periods=1,
                   measure_s=seconds, workers=workers, drain_timeout_s=30,
                   topic_prefix=f"loopback-rate-{workers}")
    out = run_workload(LoopbackDriver(), wl, plan, payloads=wl.payloads(None, seed=1))
    measured = out.measured_s
    acked = sum(p.messages_sent for p in out.periods)
    consumed = sum(p.messages_received for p in out.periods)
    cpu: dict[int, float] = {}
    runq: dict[int, float] = {}
    for p in out.periods:
        for w in p.workers:
            cpu[w.worker] = cpu.get(w.worker, 0.0) + w.cpu_s
            runq[w.worker] = runq.get(w.worker, 0.0) + w.runq_delay_s
    steal = [p.host_steal_share for p in out.periods if p.host_steal_share is not None]
    return {
        "workers": workers,
        "cpus_seen": len(os.sched_getaffinity(0)),
        "acked_msg_s": round(acked / measured),
        "consumed_msg_s": round(consumed / measured),
        "acked_per_worker_msg_s": round(acked / measured / workers),
        "worker_cpu_share": [round(cpu[k] / measured, 2) for k in sorted(cpu)],
        # waiting for a CPU while runnable: the machine's other load, not this process
        "worker_runq_share": [round(runq[k] / measured, 2) for k in sorted(runq)],
        "cpu_us_per_msg": round(sum(cpu.values()) / acked * 1e6, 2) if acked else None,
        # what one process would reach on a whole core of its own at that cost
        "msg_s_per_cpu_s": round(acked / sum(cpu.values())) if acked else None,
        "lost": out.delivery.lost,
        # what would tell a loss in the harness's own accounting from a real one
        "unconfirmed": out.delivery.unconfirmed,
        "lost_ranges": [r for sub in out.delivery.subscriptions for r in sub.lost_ranges][:5],
        "drain_complete": out.drain_complete,
        "outstanding_after_flush": out.outstanding_after_flush,
        "worker_errors": [e.strip().splitlines()[-1][:200] for e in out.worker_errors][:5],
        "host_steal_share": round(max(steal), 3) if steal else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    ap.add_argument("--rate", type=float, default=1_500_000.0,
                    help="offered msg/s per worker (above its ceiling)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    ap.add_argument("--repeats", type=int, default=1, help="runs per worker count")
    ap.add_argument("--message-size", type=int, default=1024)
    ap.add_argument("--json", help="write every run to this file")
    args = ap.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    print(f"cpus this process may run on: {len(os.sched_getaffinity(0))} "
          f"(machine: {os.cpu_count()})", flush=True)
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeats):
        for n in counts:
            runs.append(measure(n, args.rate, args.seconds, args.message_size))
            print(json.dumps(runs[-1]), flush=True)
    print("\nworkers | acked msg/s (min/median/max) | per worker (median) | consumed (median)"
          " | CPU µs/msg (median) | msg per CPU-second (median) | runs with loss or errors")
    for n in counts:
        mine = [r for r in runs if r["workers"] == n]
        acked = [r["acked_msg_s"] for r in mine]
        print(f"{n} | {min(acked):,} / {statistics.median(acked):,.0f} / {max(acked):,} | "
              f"{statistics.median(r['acked_per_worker_msg_s'] for r in mine):,.0f} | "
              f"{statistics.median(r['consumed_msg_s'] for r in mine):,.0f} | "
              f"{statistics.median(r['cpu_us_per_msg'] or 0 for r in mine):.2f} | "
              f"{statistics.median(r['msg_s_per_cpu_s'] or 0 for r in mine):,.0f} | "
              f"{sum(1 for r in mine if r['lost'] or r['worker_errors'])} of {len(mine)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(runs, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
