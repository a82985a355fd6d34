"""CPU per message of the RabbitMQ driver's client paths against pika's own, no broker.

Two measurements, each on 1 KiB messages with pika's real code:

* publish: ``basic_publish`` frames marshalled by pika (``Connection._send_message``, one
  ``Basic.Publish`` object, three ``marshal()`` calls per message) against the driver's
  :class:`~pytest_brokerperf.brokers.rabbitmq.frames.PublishFrames` (bursts of 128,
  one write each);
* deliver: ``basic.deliver`` bytes fed to pika's ``Connection._on_data_available`` with an
  open ``Channel`` and a consumer callback (the ``SelectConnection`` level: a
  ``BlockingConnection`` adds a delivery event and its dispatch per message on top) in
  pika's 4 KiB reads, against the driver's
  :class:`~pytest_brokerperf.brokers.rabbitmq.deliveries.DeliveryReader` in 64 KiB reads.

``python benchmarks/rabbitmq_client_cost.py [--messages N]`` prints µs of CPU per
message (process time; the machine's other load shows in neither). What a real broker
run costs in all is in ``compare_native.py``'s output; this says how much of it is the
client library's per-message work (docs/how-to/compare-native.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pika import frame, spec
from pika.channel import Channel
from pika.connection import Connection

from pytest_brokerperf.brokers.rabbitmq.deliveries import DeliveryReader
from pytest_brokerperf.brokers.rabbitmq.frames import PublishFrames

SIZE = 1024
TAG = "ctag." + "a" * 32
PROPS = spec.BasicProperties(delivery_mode=2)


class _Wire(Connection):
    """A pika ``Connection`` without a socket: what marshalling and frame processing
    touch, writes dropped."""

    # the IO adapter's hooks: never called here
    _adapter_add_callback_threadsafe = _adapter_call_later = None  # type: ignore[assignment]
    _adapter_connect_stream = _adapter_disconnect_stream = None  # type: ignore[assignment]
    _adapter_remove_timeout = None  # type: ignore[assignment]

    def __init__(self) -> None:  # no super().__init__: it would start connecting
        self.frames_received = self.bytes_received = 0
        self.frames_sent = self.bytes_sent = 0
        self._frame_buffer = b""
        self._body_max_length = 131072 - 8
        self._channels: dict[int, Any] = {}
        self.callbacks = __import__("pika").callback.CallbackManager()
        self.connection_state = self.CONNECTION_OPEN
        self._heartbeat_checker = None

    def _adapter_emit_data(self, data: bytes) -> None:
        pass


def _cpu_us(n: int, fn: Callable[[], None]) -> float:
    t = time.process_time()
    fn()
    return (time.process_time() - t) / n * 1e6


def publish_costs(n: int) -> dict[str, float]:
    values = [bytes(SIZE)] * n
    conn = _Wire()

    def pika_publish() -> None:
        for v in values:
            conn._send_message(1, spec.Basic.Publish(exchange="t", routing_key="0"),
                               (PROPS, v))

    frames = PublishFrames(conn, type("Ch", (), {"channel_number": 1})(), "t", PROPS)
    keys = ["0"] * 128

    def burst() -> None:
        for i in range(0, n, 128):
            chunk = values[i:i + 128]
            data, nframes = frames.encode(chunk, keys[:len(chunk)])
            frames.emit(data, nframes)

    return {"pika basic_publish marshalling": _cpu_us(n, pika_publish),
            "driver burst frames (128 per write)": _cpu_us(n, burst)}


def _deliveries(n: int) -> bytes:
    return b"".join(
        frame.Method(1, spec.Basic.Deliver(consumer_tag=TAG, delivery_tag=i + 1,
                                           exchange="t", routing_key="0")).marshal()
        + frame.Header(1, SIZE, PROPS).marshal() + frame.Body(1, bytes(SIZE)).marshal()
        for i in range(n))


def deliver_costs(n: int) -> dict[str, float]:
    data = _deliveries(n)
    got: list[Any] = []
    conn = _Wire()
    ch = Channel(conn, 1, lambda *_: None)
    ch._set_state(ch.OPEN)
    conn._channels[1] = ch
    ch._consumers[TAG] = lambda _c, m, _p, body: got.append((body, m.delivery_tag))

    def pika_path() -> None:
        for i in range(0, len(data), 4096):
            conn._on_data_available(data[i:i + 4096])

    blocking = type("Blocking", (), {"_impl": _Wire(),
                                     "_request_channel_dispatch": lambda self, n: None})()
    reader = DeliveryReader(blocking, 1, {TAG: 0}.__contains__,
                            lambda tag, dtag, body: got.append((body, dtag)))

    def reader_path() -> None:
        for i in range(0, len(data), 65536):
            reader.on_data(data[i:i + 65536])

    out = {"pika deliver path (SelectConnection level, 4 KiB reads)": _cpu_us(n, pika_path)}
    if len(got) != n:
        raise SystemExit(f"pika delivered {len(got)} of {n} messages")
    got.clear()
    out["driver DeliveryReader (64 KiB reads)"] = _cpu_us(n, reader_path)
    if len(got) != n:
        raise SystemExit(f"the reader delivered {len(got)} of {n} messages")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=30_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for k, v in {**publish_costs(args.messages), **deliver_costs(args.messages)}.items():
            rows.setdefault(k, []).append(v)
    print(f"CPU µs per 1 KiB message, {args.messages} messages, "
          f"min / median / max of {args.repeats}:")
    for k, vs in rows.items():
        s = sorted(vs)
        print(f"  {k:58s} {s[0]:6.2f} {s[len(s) // 2]:6.2f} {s[-1]:6.2f}")


if __name__ == "__main__":
    main()
