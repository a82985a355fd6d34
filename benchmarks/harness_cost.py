"""The harness's own cost: what one worker process can generate with full recording.

Runs the real engine (spawned worker, open-loop pacer, header, five latency views,
delivery ledgers, batched HdrHistogram recording) against the in-process loopback
driver, which has no broker behind it, at rising offered rates, and prints per rate:
acknowledged and consumed msg/s, worker CPU share of one core, CPU µs per message
(produced and consumed once), publish-delay p99 and the verdict. The highest rate that
stays ``valid`` is the per-process ceiling of the harness itself; a broker figure above
it would be the generator's, which is why the verdict flags it.

    python benchmarks/harness_cost.py [--rates 5000,20000,50000] [--seconds 5] [--json out.json]

Add ``--broker kafka`` (or ``--kafka``) to run the same ladder against a local
single-node Kafka started from the project's jars (then the figures include
confluent-kafka's client cost), or ``--broker pulsar`` against a local single-bookie
Pulsar standalone through pulsar-client (acks as the shipped ``pulsar-local.yaml``
configures them; ``--driver`` picks another driver YAML, e.g. the shipped
``pulsar-sync.yaml``), ``--broker rabbitmq`` against a local single-node RabbitMQ
through pika with asynchronous publisher confirms (quorum queues as the shipped
``rabbitmq-quorum.yaml``; ``--driver`` e.g. ``rabbitmq-stream.yaml``), or
``--broker tansu`` (Kafka driver, in-memory storage). A broker run holds the integration
tests' broker lock, so it never overlaps another broker on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import sys
from collections.abc import Iterator
from typing import Any


def measure(driver: Any, rate: float, seconds: float, message_size: int) -> dict[str, Any]:
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.judge.verdict import assess
    from pytest_brokerperf.workload.model import Workload

    wl = Workload(name="harness-cost", topics=1, partitions_per_topic=1,
                  message_size=message_size, subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=int(rate),
                  test_duration_minutes=1, warmup_duration_minutes=0)
    plan = RunPlan(rate=rate, period_s=1.0, warmup_max_s=2.0, measure_s=seconds, workers=1,
                   topic_prefix=f"harness-cost-{int(rate)}", drain_timeout_s=20)
    out = run_workload(driver, wl, plan, payloads=wl.payloads(None, seed=1))
    cpu = sum(w.cpu_s for p in out.periods for w in p.workers)
    acked = sum(p.messages_sent for p in out.periods)
    verdict = assess(out)
    return {
        "offered_msg_s": rate,
        "acked_msg_s": round(out.ack_rate),
        "consumed_msg_s": round(out.consume_rate),
        "worker_cpu_share": round(cpu / out.measured_s, 3),
        "cpu_us_per_msg": round(cpu / acked * 1e6, 2) if acked else None,
        "publish_delay_p99_us": out.cumulative["publish_delay"].percentile(99),
        "e2e_latency_p50_us": out.cumulative["e2e_latency"].percentile(50),
        "lost": out.delivery.lost,
        "verdict": verdict.status,
    }


@contextlib.contextmanager
def _broker_lock() -> Iterator[None]:
    """The integration tests' lock: never two brokers on this machine at once."""
    from pytest_brokerperf.brokers.provision.maven import cache_root

    path = cache_root() / ".integration-brokers.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="5000,20000,50000,100000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--message-size", type=int, default=1024)
    ap.add_argument("--broker", choices=["loopback", "kafka", "pulsar", "rabbitmq", "tansu"],
                    default="loopback",
                    help="loopback (no broker), or a local 1-node Kafka / 1-bookie Pulsar / "
                    "1-node RabbitMQ / Tansu")
    ap.add_argument("--kafka", action="store_true", help="same as --broker kafka")
    ap.add_argument("--driver", default=None, help="driver YAML (default: the shipped one)")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    broker = "kafka" if args.kafka else args.broker
    rows = []
    if broker != "loopback":
        from pathlib import Path

        from pytest_brokerperf.brokers import create_driver
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
        from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone
        from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster
        from pytest_brokerperf.brokers.tansu.process import TansuProcess

        cluster: Any = {"kafka": KafkaProcessCluster, "pulsar": PulsarStandalone,
                        "rabbitmq": RabbitMQProcessCluster, "tansu": TansuProcess}[broker]()
        with _broker_lock(), cluster:
            driver = create_driver(cluster.endpoint, Path(args.driver) if args.driver else None,
                                   stats_interval_ms=0)
            print(json.dumps({"broker": broker, "version": cluster.endpoint.version,
                              "driver": driver.name,
                              "startup_s": cluster.endpoint.info.get("startup_s")}), flush=True)
            for r in rates:
                rows.append(measure(driver, r, args.seconds, args.message_size))
                print(json.dumps(rows[-1]), flush=True)
    else:
        from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

        for r in rates:
            rows.append(measure(LoopbackDriver(), r, args.seconds, args.message_size))
            print(json.dumps(rows[-1]), flush=True)
    cols = list(rows[0])
    print("\n" + " | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
