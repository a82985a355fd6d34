"""Where a RabbitMQ publish-latency stall comes from: each 1-s period's p99 of the
harness's latency views beside the quorum queue's WAL and segment files.

At a fixed rate on a local single node (quorum queue, persistent, confirms, one producer
and one consumer, 1 KiB), a period whose publish latency p99 jumps to hundreds of
milliseconds while publish delay (the harness's own schedule) stays under a millisecond
is a stall between the socket write and the confirm; this prints, per period, the
files the node's Raft WAL and segment writer created, grew or removed in it::

    flock /tmp/brokerperf-broker.lock python benchmarks/rabbitmq_wal_stall.py \\
        --rate 10000 --seconds 60

Findings: docs/how-to/compare-native.md ("RabbitMQ: where it stands").
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from typing import Any

SUFFIXES = (".wal", ".segment")


def watch_files(dirs: list[str], stop: threading.Event,
                events: list[tuple[int, str, str, int]], every_s: float = 0.05) -> None:
    """Append (monotonic ns, new|grow|gone, file name, size or growth) for the WAL and
    segment files under ``dirs`` until ``stop``."""
    seen: dict[str, int] = {}
    while not stop.is_set():
        now = time.monotonic_ns()
        present = set()
        for d in dirs:
            for root, _, files in os.walk(d):
                for name in files:
                    if not name.endswith(SUFFIXES):
                        continue
                    path = os.path.join(root, name)
                    try:
                        size = os.stat(path).st_size
                    except FileNotFoundError:
                        continue
                    present.add(path)
                    old = seen.get(path)
                    if old is None:
                        events.append((now, "new", name, size))
                    elif name.endswith(".segment") and size != old:
                        events.append((now, "grow", name, size - old))
                    seen[path] = size
        for path in [p for p in seen if p not in present]:
            events.append((now, "gone", os.path.basename(path), 0))
            del seen[path]
        stop.wait(every_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--seconds", type=float, default=60.0, help="measured seconds")
    args = ap.parse_args(argv)

    from pytest_brokerperf.brokers import create_driver
    from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import Rung, RunPlan
    from pytest_brokerperf.workload.model import Workload

    with RabbitMQProcessCluster() as cluster:
        ep = cluster.endpoint
        aff = ep.info.get("cpu_affinity") or {}
        gen = tuple(aff.get("generator_cpus") or ()) or None
        dirs = list(ep.info.get("data_dirs") or [])
        events: list[tuple[int, str, str, int]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch_files, args=(dirs, stop, events), daemon=True)
        watcher.start()
        wl = Workload(name="wal-stall", topics=1, partitions_per_topic=1, message_size=1024,
                      subscriptions_per_topic=1, producers_per_topic=1,
                      consumer_per_subscription=1, producer_rate=int(args.rate),
                      test_duration_minutes=1, warmup_duration_minutes=0)
        plan = RunPlan(rate=args.rate, period_s=1.0, warmup_max_s=5.0, measure_s=args.seconds,
                       workers=1, topic_prefix="wal-stall", drain_timeout_s=5.0,
                       flush_timeout_s=10.0, generator_cpus=gen)
        driver = create_driver(ep, None, stats_interval_ms=0)
        with LoadSession(driver, wl, plan, payloads=wl.payloads(None, seed=1)) as s:
            out = s.run_rung(Rung(args.rate, 5.0, args.seconds, warmup_until_steady=True))
            s.finish()
        stop.set()
        watcher.join(2.0)

    def p99_ms(p: Any, view: str) -> str:
        h = p.histograms.get(view)
        v = None if h is None else h.percentile(99)
        return "-" if v is None else f"{v / 1000:.1f}"

    print(f"RabbitMQ {ep.version}, {args.rate:,.0f} msg/s, {len(out.periods)} periods of 1 s")
    print(f"{'period':>6} {'phase':>7} {'publish delay':>13} {'publish':>8} {'e2e':>8}  "
          "WAL / segment files (ms into the period)")
    for p in out.periods:
        t0 = p.start_ns
        t1 = t0 + int(p.elapsed_s * 1e9)
        files = " ".join(f"{kind}:{name}@{(ts - t0) / 1e6:.0f}" for ts, kind, name, _ in events
                         if t0 <= ts < t1)
        print(f"{p.index:>6} {p.phase:>7} {p99_ms(p, 'publish_delay'):>13} "
              f"{p99_ms(p, 'publish_latency'):>8} {p99_ms(p, 'e2e_latency'):>8}  {files}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
