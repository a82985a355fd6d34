"""The harness's own share of every latency figure, at fixed rates on the loopback driver.

With no client library and no broker, every microsecond the five latency views record
is the harness's: the pacer's lateness (publish delay), the hand-over to the consumer
thread, the GIL. This runs the real engine (one worker process, full recording, 1 s
periods unless told) at each rate and prints the views' percentiles: the floor under
any broker's figures at that rate on this machine.

    python benchmarks/harness_delay.py --rates 8000,64000,128000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

VIEWS = ("publish_delay", "publish_response", "e2e_latency", "e2e_response")


def measure(rate: float, seconds: float, period_s: float, message_size: int) -> dict[str, Any]:
    """One paced run at ``rate`` msg/s: ack rate, worker CPU, each view's percentiles (ms)."""
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    wl = Workload(name="harness-delay", topics=1, partitions_per_topic=16,
                  message_size=message_size, subscriptions_per_topic=1,
                  producers_per_topic=1, consumer_per_subscription=1,
                  producer_rate=int(rate), test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=rate, period_s=period_s, warmup_max_s=3 * period_s,
                   warmup_min_periods=2, measure_s=seconds, workers=1, drain_timeout_s=30,
                   topic_prefix="harness-delay")
    out = run_workload(LoopbackDriver(), wl, plan, payloads=wl.payloads(None, seed=1))
    measured = out.measured_s
    cpu = sum(w.cpu_s for p in out.periods for w in p.workers) / measured
    acked = sum(p.messages_sent for p in out.periods) / measured
    row: dict[str, Any] = {"rate": rate, "acked_msg_s": round(acked),
                           "worker_cpu_share": round(cpu, 2), "lost": out.delivery.lost}
    for view in VIEWS:
        h = out.cumulative[view]
        for q in (50.0, 99.0, 99.9):
            p = h.percentile(q)
            row[f"{view}_p{q:g}_ms"] = None if p is None else round(p / 1000, 3)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="8000,64000,128000", help="msg/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    ap.add_argument("--period", type=float, default=1.0, help="stats period, seconds")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--message-size", type=int, default=1024)
    ap.add_argument("--json", help="write every run to this file")
    args = ap.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    runs = []
    for _ in range(args.repeats):
        for rate in rates:
            runs.append(measure(rate, args.seconds, args.period, args.message_size))
            print(json.dumps(runs[-1]), flush=True)
    print("\nmsg/s | worker CPU | " + " | ".join(f"{v} p50/p99/p99.9 ms" for v in VIEWS)
          + "   (medians over repeats)")
    for rate in rates:
        mine = [r for r in runs if r["rate"] == rate]

        def med(key: str, rows: list[dict[str, Any]] = mine) -> str:
            vals = [r[key] for r in rows if r[key] is not None]
            return f"{statistics.median(vals):.2f}" if vals else "-"
        cells = ["/".join(med(f"{v}_p{q}_ms") for q in ("50", "99", "99.9")) for v in VIEWS]
        print(f"{rate:,.0f} | {med('worker_cpu_share')} | " + " | ".join(cells))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(runs, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
