"""Bare client loops: what one Python process gets from the client library alone.

The reference the harness is compared with in ``compare_native.py``: a plain produce
loop on confluent-kafka, pulsar-client or pika (asynchronous publisher confirms), with
the same client settings as the harness's driver, no per-message header, no latency
recording, no delivery ledger. Acknowledged messages are counted in a callback and
read at the window's two ends, so the loop itself does nothing per message but send.
At ``--rate 0`` it sends as fast as the client accepts (no pacing); at a fixed rate it
sends each batch of due messages, then sleeps at most 1 ms.

Run by ``compare_native.py`` as its own process (pinned to the generator's CPUs); it
prints one JSON line (:class:`BareResult`)::

    python benchmarks/bare_clients.py kafka --spec '{"bootstrap": ..., "topic": ...}'
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BareResult", "BareSpec", "Window", "main"]

_mono = time.monotonic
BATCH = 1000  # sends between two checks of the clock at maximum rate


@dataclass
class BareSpec:
    """What one bare run does; filled in by ``compare_native.py`` from the driver config."""

    address: str  # Kafka bootstrap, Pulsar service URL, AMQP URI
    topic: str  # Kafka topic, Pulsar full topic name, RabbitMQ exchange
    rate: float = 0.0  # msg/s; 0 = as fast as the client accepts
    warmup_s: float = 3.0
    duration_s: float = 10.0
    message_size: int = 1024
    client: dict[str, Any] = field(default_factory=dict)  # client/producer settings
    producer: dict[str, Any] = field(default_factory=dict)  # Pulsar producer kwargs
    queue: str = ""  # RabbitMQ: the quorum queue bound to the exchange
    routing_key: str = "0"
    queue_arguments: dict[str, Any] = field(default_factory=dict)
    persistent: bool = True
    max_pending: int = 10_000  # RabbitMQ: unconfirmed publishes allowed
    slice_bytes: int = 0  # Pulsar: >0 = sendCallbacks perSlice (a callback per slice)
    consume: bool = False  # Kafka, Pulsar: also consume the topic in this process


@dataclass
class BareResult:
    """Acknowledged messages in the measured window (after warm-up)."""

    acked: int
    seconds: float
    sent_total: int
    acked_total: int
    errors: int = 0
    error: str = ""
    received: int = 0  # consumed in the window (``consume``), else 0

    @property
    def msg_s(self) -> float:
        return self.acked / self.seconds if self.seconds > 0 else 0.0


class Window:
    """Reads an ack counter at the end of warm-up and at the end of the window."""

    def __init__(self, warmup_s: float, duration_s: float, start: float | None = None) -> None:
        self.t0 = _mono() if start is None else start
        self.begin = self.t0 + warmup_s
        self.end = self.begin + duration_s
        self.at_begin: tuple[float, int] | None = None
        self.at_end: tuple[float, int] | None = None

    def observe(self, now: float, acked: int) -> bool:
        """Note the counter at the window's edges; True once the window is over."""
        if self.at_begin is None and now >= self.begin:
            self.at_begin = (now, acked)
        if self.at_end is None and now >= self.end:
            self.at_end = (now, acked)
        return self.at_end is not None

    def result(self, sent: int, acked_total: int, errors: int, error: str = "") -> BareResult:
        if self.at_begin is None or self.at_end is None:
            return BareResult(0, 0.0, sent, acked_total, errors, error or "window not reached")
        return BareResult(self.at_end[1] - self.at_begin[1], self.at_end[0] - self.at_begin[0],
                          sent, acked_total, errors, error)


def _due(rate: float, t0: float, now: float, sent: int) -> int:
    """Messages due by ``now`` at ``rate`` (0: a batch, no pacing)."""
    if rate <= 0:
        return BATCH
    return max(0, int((now - t0) * rate) + 1 - sent)


def _sleep_until_due(rate: float, t0: float, sent: int) -> None:
    if rate > 0:
        wait = t0 + sent / rate - _mono()
        if wait > 0:
            time.sleep(min(wait, 0.001))


class Pace:
    """What every loop shares: its window, the count sent, what is due, the short sleep;
    and, when the loop also consumes, the consumer thread's count at the window's edges."""

    def __init__(self, spec: BareSpec, acked: list[int],
                 consumer: Consumer | None = None) -> None:
        self.rate = spec.rate
        self.acked = acked
        self.win = Window(spec.warmup_s, spec.duration_s)
        self.sent = 0
        self.consumer = consumer
        self._received: list[int] = []

    def due(self) -> int:
        """Messages due now (a batch at max rate); -1 once the window is over."""
        now = _mono()
        edges = (self.win.at_begin is None) + (self.win.at_end is None)
        over = self.win.observe(now, self.acked[0])
        if self.consumer is not None and (self.win.at_begin is None) + (
                self.win.at_end is None) < edges:
            self._received.append(self.consumer.received)
        if over:
            return -1
        return _due(self.rate, self.win.t0, now, self.sent)

    def sleep(self) -> None:
        _sleep_until_due(self.rate, self.win.t0, self.sent)

    def result(self, errors: int) -> BareResult:
        out = self.win.result(self.sent, self.acked[0], errors)
        if self.consumer is not None:
            self.consumer.stop()
            if len(self._received) == 2:
                out.received = self._received[1] - self._received[0]
            if self.consumer.error:
                out.error = out.error or f"consumer: {self.consumer.error}"
        return out


class Consumer:
    """A consumer thread in the loop's process that only counts what it receives (the
    work a harness worker's consumer does besides recording)."""

    def __init__(self, poll: Callable[[], int], close: Callable[[], None]) -> None:
        self.received = 0
        self.error = ""
        self._poll, self._close = poll, close
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bare-consumer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.received += self._poll()
        except Exception as exc:  # reported in the result line
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)


def kafka_consumer(spec: BareSpec) -> Consumer:
    from confluent_kafka import Consumer as KafkaConsumer

    c = KafkaConsumer({"bootstrap.servers": spec.address, "group.id": f"bare-{spec.topic}",
                       "auto.offset.reset": "earliest", "enable.auto.commit": True})
    c.subscribe([spec.topic])

    def poll() -> int:
        return sum(1 for m in c.consume(500, 0.1) if m.error() is None)

    return Consumer(poll, c.close)


def pulsar_consumer(spec: BareSpec, client: Any) -> Consumer:
    import pulsar

    c = client.subscribe(spec.topic, f"bare-{spec.topic.rsplit('/', 1)[-1]}",
                         consumer_type=pulsar.ConsumerType.Failover,
                         initial_position=pulsar.InitialPosition.Earliest,
                         receiver_queue_size=10_000)
    timeout = pulsar.Timeout

    def poll() -> int:
        try:
            msgs = [c.receive(100)]
        except timeout:
            return 0
        while len(msgs) < 500:
            try:
                msgs.append(c.receive(0))
            except timeout:
                break
        last = {m.topic_name(): m for m in msgs}
        for m in last.values():
            c.acknowledge_cumulative(m)
        return len(msgs)

    return Consumer(poll, c.close)


def run_kafka(spec: BareSpec) -> BareResult:
    from confluent_kafka import Producer

    acked = [0]
    errors = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            errors[0] += 1

    conf = dict(spec.client)
    conf["bootstrap.servers"] = spec.address
    conf["on_delivery"] = delivered
    p = Producer(conf)
    produce, poll = p.produce, p.poll
    payload = bytes(spec.message_size)
    topic = spec.topic
    pace = Pace(spec, acked, kafka_consumer(spec) if spec.consume else None)
    while (due := pace.due()) >= 0:
        n = 0
        for _ in range(due):
            try:
                produce(topic, payload)
            except BufferError:
                poll(0.001)
                continue
            n += 1
        pace.sent += n
        poll(0)
        pace.sleep()
    p.flush(30)
    return pace.result(errors[0])


def run_pulsar(spec: BareSpec) -> BareResult:
    import pulsar

    from pytest_brokerperf.brokers.pulsar.client import _with_enums

    acked = [0]
    errors = [0]

    def delivered(res: Any, _msg_id: Any) -> None:
        if int(res) == 0:
            acked[0] += 1
        else:
            errors[0] += 1

    kwargs = dict(spec.client)
    kwargs["logger"] = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    client = pulsar.Client(**kwargs)
    if spec.slice_bytes:
        try:
            return _pulsar_slices(spec, client)
        finally:
            client.close()
    try:
        producer = client.create_producer(spec.topic, **_with_enums(dict(spec.producer)))
        send = producer.send_async
        payload = bytes(spec.message_size)
        pace = Pace(spec, acked, pulsar_consumer(spec, client) if spec.consume else None)
        while (due := pace.due()) >= 0:
            for _ in range(due):
                send(payload, delivered)  # blocks when the queue is full (blockIfQueueFull)
            pace.sent += due
            pace.sleep()
        producer.flush()
        producer.close()
        return pace.result(errors[0])
    finally:
        client.close()


def _pulsar_slices(spec: BareSpec, client: Any) -> BareResult:
    """The bare loop as ``sendCallbacks: perSlice`` sends: one producer per partition,
    slices of ``slice_bytes`` round robin, a callback on each slice's last message only
    (pulsar-client completes a producer's messages in order). At a fixed rate it sends
    whole slices (bursts of up to 128 messages), so it is a maximum-rate reference."""
    import _pulsar

    from pytest_brokerperf.brokers.pulsar.client import _with_enums

    acked = [0]
    errors = [0]
    per = max(1, spec.slice_bytes // max(1, spec.message_size))

    def delivered(res: Any, _msg_id: Any) -> None:
        if int(res) == 0:
            acked[0] += per
        else:
            errors[0] += per

    producers = [client.create_producer(name, **_with_enums(dict(spec.producer)))
                 for name in client.get_topic_partitions(spec.topic)]
    sends = [p._producer.send_async for p in producers]
    builder = _pulsar.MessageBuilder
    payload = bytes(spec.message_size)
    part = 0
    pace = Pace(spec, acked, pulsar_consumer(spec, client) if spec.consume else None)
    while (due := pace.due()) >= 0:
        while due > 0:  # whole slices only, so every message is counted by its callback
            send = sends[part]
            part = part + 1 if part + 1 < len(sends) else 0
            for _ in range(per - 1):
                send(builder().content(payload).build(), None)
            send(builder().content(payload).build(), delivered)
            pace.sent += per
            due -= per
        pace.sleep()
    for p in producers:
        p.flush()
        p.close()
    return pace.result(errors[0])


class _RabbitPublisher:
    """pika's SelectConnection in this thread: publish while fewer than ``max_pending``
    are unconfirmed, settle confirms (``multiple`` included) as they arrive."""

    def __init__(self, spec: BareSpec) -> None:
        import pika

        self.pika = pika
        self.spec = spec
        self.props = pika.BasicProperties(delivery_mode=2 if spec.persistent else 1)
        self.payload = bytes(spec.message_size)
        self.sent = 0
        self.acked = 0
        self.nacked = 0
        self.error = ""
        self.ch: Any = None
        self.win: Window | None = None
        self.scheduled = False
        self.done = False
        self.conn = pika.SelectConnection(
            pika.URLParameters(spec.address), on_open_callback=self._on_open,
            on_open_error_callback=self._on_error, on_close_callback=self._on_closed)

    def _on_error(self, _conn: Any, err: Any) -> None:
        self.error = f"connection failed: {err}"
        self.conn.ioloop.stop()

    def _on_closed(self, _conn: Any, reason: Any) -> None:
        if not self.done and not self.error:
            self.error = f"connection closed: {reason}"
        self.conn.ioloop.stop()

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_channel(self, ch: Any) -> None:
        self.ch = ch
        s = self.spec
        ch.exchange_declare(s.topic, exchange_type="direct", durable=True,
                            callback=lambda _f: ch.queue_declare(
                                s.queue, durable=True, arguments=s.queue_arguments,
                                callback=lambda _g: ch.queue_bind(
                                    s.queue, s.topic, routing_key=s.routing_key,
                                    callback=lambda _h: ch.confirm_delivery(
                                        self._on_confirm, callback=self._start))))

    def _start(self, _frame: Any) -> None:
        self.win = Window(self.spec.warmup_s, self.spec.duration_s)
        self._schedule()

    def _schedule(self) -> None:
        if not self.scheduled and not self.done:
            self.scheduled = True
            self.conn.ioloop.call_later(0, self._publish)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tag = method.delivery_tag
        settled_before = self.acked + self.nacked
        upto = tag if method.multiple else settled_before + 1
        n = max(0, upto - settled_before)
        if isinstance(method, self.pika.spec.Basic.Ack):
            self.acked += n
        else:
            self.nacked += n
        if self.done and self.acked + self.nacked >= self.sent:
            self.conn.close()
        else:
            self._schedule()

    def _publish(self) -> None:
        self.scheduled = False
        win = self.win
        assert win is not None
        now = _mono()
        if win.observe(now, self.acked):
            self.done = True
            if self.acked + self.nacked >= self.sent:
                self.conn.close()
            return
        room = self.spec.max_pending - (self.sent - self.acked - self.nacked)
        n = min(room, _due(self.spec.rate, win.t0, now, self.sent))
        publish, s = self.ch.basic_publish, self.spec
        for _ in range(max(0, n)):
            publish(s.topic, s.routing_key, self.payload, self.props)
        self.sent += max(0, n)
        if room > n:  # not waiting for confirms: come back when the next are due
            wait = 0.0 if s.rate <= 0 else max(0.0, win.t0 + self.sent / s.rate - _mono())
            self.scheduled = True
            self.conn.ioloop.call_later(min(wait, 0.001), self._publish)

    def run(self) -> BareResult:
        timer = threading.Timer(self.spec.warmup_s + self.spec.duration_s + 60.0,
                                lambda: self.conn.ioloop.add_callback_threadsafe(
                                    self.conn.ioloop.stop))
        timer.daemon = True
        timer.start()
        self.conn.ioloop.start()
        timer.cancel()
        win = self.win or Window(0, 0)
        return win.result(self.sent, self.acked, self.nacked, self.error)


def run_rabbitmq(spec: BareSpec) -> BareResult:
    return _RabbitPublisher(spec).run()


RUNNERS: dict[str, Callable[[BareSpec], BareResult]] = {
    "kafka": run_kafka, "pulsar": run_pulsar, "rabbitmq": run_rabbitmq,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("broker", choices=sorted(RUNNERS))
    ap.add_argument("--spec", required=True, help="a BareSpec as JSON")
    args = ap.parse_args(argv)
    spec = BareSpec(**json.loads(args.spec))
    result = RUNNERS[args.broker](spec)
    print(json.dumps({**asdict(result), "msg_s": result.msg_s,
                      "consume_msg_s": result.received / result.seconds
                      if result.seconds > 0 else 0.0}), flush=True)
    return 0 if not result.error else 1


if __name__ == "__main__":
    sys.exit(main())
