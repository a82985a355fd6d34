"""Stop an overdriven loopback worker many times and count runs that report loss.

Drives one in-process ``Worker`` (no coordinator, no pipes, so the end of a run comes
much sooner after the stop than in a real run): a producer and a consumer on the
loopback driver at 1.5M msg/s offered, then ``stop_producers``, a drain (received ≥
acknowledged, at most 5 s), ``final`` and the delivery reconciliation — the order
``LoadSession.finish`` uses. Before the pacer confirmed its own stop, 12 of 40 such runs
reported 500-1,500 messages lost (see docs/explanation/measurement.md, "Delivery
accounting"); any loss or worker error printed here is a bug in the harness.

    python benchmarks/stop_stress.py [--runs 40] [--load-s 0.15]
"""

from __future__ import annotations

import argparse
import sys
import time


def one_run(i: int, load_s: float) -> tuple[int, list[dict[str, int]], list[str]]:
    """(lost, lost ranges, worker errors) of one stop."""
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.engine.delivery import reconcile
    from pytest_brokerperf.engine.pacing import Schedule
    from pytest_brokerperf.engine.worker import (
        ConsumerSpec,
        ProducerSpec,
        Worker,
        WorkerAssignment,
    )

    topic, sub = f"stop-stress-{i}", f"stop-stress-{i}-s"
    w = Worker(WorkerAssignment(worker_id=0, driver=LoopbackDriver(),
                                producers=[ProducerSpec(0, topic)],
                                consumers=[ConsumerSpec(0, topic, sub)],
                                payloads=[b"\0" * 1024]))
    w.create_consumers()
    w.create_producers()
    w.pending_schedule = Schedule(1_500_000.0, time.monotonic_ns())
    time.sleep(load_s)
    w.stop_producers(5.0)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        t = w.totals()
        if t["received"] >= t["acked"]:
            break
        time.sleep(0.1)
    f = w.final()
    rep = reconcile([f["acks"]], f["receipts"], {0: [sub]})
    return rep.lost, rep.subscriptions[0].lost_ranges, f["errors"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--load-s", type=float, default=0.15, help="seconds of load per run")
    args = ap.parse_args(argv)
    bad = 0
    for i in range(args.runs):
        lost, ranges, errors = one_run(i, args.load_s)
        if lost or errors:
            bad += 1
            print(f"run {i}: lost {lost} {ranges} errors {errors}", flush=True)
    print(f"{args.runs} runs: {bad} with loss or worker errors")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
