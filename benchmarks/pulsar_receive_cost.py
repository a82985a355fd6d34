"""What pulsar-client's ``batch_receive`` would save the harness's Pulsar consumer, and
what it would cost the end-to-end latency view.

The harness's consumer (``pytest_brokerperf/brokers/pulsar/consumer.py``) takes one
message with ``receive(timeout)`` and then drains the receiver queue with ``receive(0)``,
one client call per message. ``Consumer.batch_receive()`` returns a whole batch in one
call, but under a ``ConsumerBatchReceivePolicy`` it returns early only when the queue holds
``max_num_messages`` (or ``max_num_bytes``); otherwise it waits for the policy's timeout
(the client's ``hasEnoughMessagesForBatchReceive``) and the messages that were already
there are stamped late. On a local standalone broker this prints:

1. client CPU per message draining a deep backlog (16 partitions, 1 KiB), each way, alone
   and beside a thread that holds the GIL as the harness's pacer does;
2. at a fixed low rate, how long after its publish time each message reached the
   consumer's caller (median and p99), each way: the bias ``batch_receive`` would add.

    flock /tmp/brokerperf-broker.lock taskset -c 0 python benchmarks/pulsar_receive_cost.py

Findings: docs/how-to/compare-native.md ("Pulsar: receive one by one, not in batches").
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

MODES = ("receive", "batch_receive")
BATCH = 500  # the harness's receive(500, ...) call


def create_topic(admin_url: str, name: str, partitions: int) -> str:
    req = urllib.request.Request(
        f"{admin_url}/admin/v2/persistent/public/default/{name}/partitions",
        data=str(partitions).encode(), method="PUT",
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
    return f"persistent://public/default/{name}"


def subscribe(client: Any, topic: str, mode: str, timeout_ms: int) -> Any:
    import pulsar

    kw: dict[str, Any] = {"consumer_type": pulsar.ConsumerType.Failover,
                          "initial_position": pulsar.InitialPosition.Earliest,
                          "receiver_queue_size": 10_000}
    if mode == "batch_receive":
        kw["batch_receive_policy"] = pulsar.ConsumerBatchReceivePolicy(BATCH, -1, timeout_ms)
    return client.subscribe(topic, "s", **kw)


def receiver(consumer: Any, mode: str) -> Callable[[float], list[Any]]:
    """One call of the harness's receive shape: up to BATCH messages, [] on a timeout."""
    import _pulsar

    raw = consumer._consumer  # the harness uses the binding's consumer too
    timeout = _pulsar.Timeout
    if mode == "batch_receive":
        return lambda _t: list(raw.batch_receive())

    def take(timeout_s: float) -> list[Any]:
        try:
            msgs = [raw.receive(max(1, int(timeout_s * 1000)))]
        except timeout:
            return []
        while len(msgs) < BATCH:
            try:
                msgs.append(raw.receive(0))
            except timeout:
                break
        return msgs

    return take


def ack_last(consumer: Any, msgs: list[Any]) -> None:
    last = {m.topic_name(): m for m in msgs}
    for m in last.values():
        consumer._consumer.acknowledge_cumulative(m)


def fill(client: Any, topic: str, n: int) -> None:
    p = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1,
                               batching_max_messages=1000,
                               batching_max_allowed_size_in_bytes=131072,
                               block_if_queue_full=True, max_pending_messages=20_000)
    payload = b"x" * 1024
    for _ in range(n):
        p.send_async(payload, None)
    p.flush()
    p.close()


def drain_cost(client: Any, topic: str, mode: str, n: int) -> tuple[float, float]:
    """(client CPU µs per message, msg/s) draining ``n`` messages of backlog."""
    c = subscribe(client, topic, mode, timeout_ms=100)
    take = receiver(c, mode)
    got = 0
    cpu0, wall0 = time.thread_time(), time.monotonic()
    idle_until = time.monotonic() + 15.0  # the first messages: the subscription connects
    while got < n and time.monotonic() < idle_until:
        msgs = take(0.5)
        if not msgs:
            continue
        if got == 0:
            wall0 = time.monotonic()
        idle_until = time.monotonic() + 2.0
        _ = [(m.data(), m.topic_name()) for m in msgs]
        ack_last(c, msgs)
        got += len(msgs)
    cpu, wall = time.thread_time() - cpu0, time.monotonic() - wall0
    c.close()
    if got < n:
        raise SystemExit(f"{mode}: {got} of {n} messages drained")
    return cpu / got * 1e6, got / wall


def receive_delay(client: Any, topic: str, mode: str, rate: float, seconds: float,
                  timeout_ms: int) -> list[float]:
    """Milliseconds from each message's publish time to its return to the caller."""
    c = subscribe(client, topic, mode, timeout_ms)
    take = receiver(c, mode)
    p = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1)
    stop = threading.Event()
    delays: list[float] = []

    def consume() -> None:
        while not stop.is_set():
            msgs = take(0.05)
            now_ms = time.time() * 1000
            delays.extend(now_ms - m.publish_timestamp() for m in msgs)
            if msgs:
                ack_last(c, msgs)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(1.0)
    payload = b"x" * 1024
    t0 = time.monotonic()
    for i in range(int(rate * seconds)):
        due = t0 + i / rate
        while (lag := due - time.monotonic()) > 0:
            time.sleep(lag)
        p.send_async(payload, None)
    p.flush()
    time.sleep(1.0)
    stop.set()
    t.join(5)
    p.close()
    c.close()
    return delays


def gil_holder(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        x += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--timeout-ms", type=int, default=10,
                    help="batch_receive policy timeout in the fixed-rate part")
    a = ap.parse_args(argv)

    import pulsar

    from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

    cluster = PulsarStandalone()
    ep = cluster.start()
    admin_url = ep.admin_url or ""
    try:
        client = pulsar.Client(ep.bootstrap)
        print(f"1. draining {a.messages:,} messages of backlog ({a.partitions} partitions, "
              "1 KiB), client CPU of the consuming thread")
        for contended in (False, True):
            stop = threading.Event()
            holder = threading.Thread(target=gil_holder, args=(stop,), daemon=True)
            if contended:
                holder.start()
            for mode in MODES:
                topic = create_topic(admin_url, f"drain-{mode}-{int(contended)}",
                                     a.partitions)
                subscribe(client, topic, mode, 100).close()  # the backlog is kept for "s"
                fill(client, topic, a.messages)
                us, rate = drain_cost(client, topic, mode, a.messages)
                where = "beside a GIL-holding thread" if contended else "alone"
                print(f"   {mode:14s} {where:28s} {us:6.2f} µs/msg  {rate:10,.0f} msg/s",
                      flush=True)
            stop.set()
        print(f"2. at {a.rate:,.0f} msg/s for {a.seconds:.0f} s: publish time to the "
              f"caller (batch_receive policy: {BATCH} messages or {a.timeout_ms} ms)")
        for k, mode in enumerate((*MODES, *reversed(MODES))):  # ABBA: neither always first
            topic = create_topic(admin_url, f"delay-{mode}-{k}", a.partitions)
            d = sorted(receive_delay(client, topic, mode, a.rate, a.seconds, a.timeout_ms))
            p99 = d[int(0.99 * (len(d) - 1))] if d else float("nan")
            print(f"   {mode:14s} {len(d):7,d} msgs  median {statistics.median(d):6.2f} ms  "
                  f"p99 {p99:6.2f} ms", flush=True)
        client.close()
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
