"""The pika producer's burst path: ``send_many`` hands a burst to the IO thread at once,
the IO thread writes it as pika's own publish frames in one write, and confirms that
settle 16 or more messages reach the engine as one batch with each message's send time.
No broker: fake pika connections, and pika's own marshalling as the reference.
"""

from __future__ import annotations

import struct
from typing import Any

import pika
import pytest
from pika import frame, spec
from pika.connection import Connection as PikaConnection
from pika.frame import Method
from pika.spec import Basic
from test_rabbitmq_driver import FakeChannel, FakeSelectConnection, _driver, _wait

from pytest_brokerperf.brokers.rabbitmq.driver import ConfirmTracker
from pytest_brokerperf.brokers.rabbitmq.frames import PublishFrames

BODY_MAX = 131072 - 8  # pika's default frame_max less the frame overhead


class _Emitting:
    """What pika's ``Connection._send_message`` needs, recording its writes."""

    def __init__(self) -> None:
        self._body_max_length = BODY_MAX
        self.bytes_sent = 0
        self.frames_sent = 0
        self.writes: list[bytes] = []

    def _adapter_emit_data(self, data: bytes) -> None:
        self.writes.append(data)

    def _output_marshaled_frames(self, frames: list[bytes]) -> None:
        PikaConnection._output_marshaled_frames(self, frames)  # type: ignore[arg-type]


class _Ch:
    channel_number = 7


@pytest.mark.parametrize("size", [0, 1, 1024, BODY_MAX, BODY_MAX + 1, 3 * BODY_MAX + 5])
@pytest.mark.parametrize("persistent", [True, False])
def test_burst_frames_are_the_bytes_pika_writes(size: int, persistent: bool) -> None:
    props = spec.BasicProperties(delivery_mode=2 if persistent else 1)
    values = [bytes([i % 251]) * size for i in range(3)]
    keys = ["0", "1", "0"]
    ref = _Emitting()
    for v, rk in zip(values, keys, strict=True):
        PikaConnection._send_message(ref, 7, spec.Basic.Publish(  # type: ignore[arg-type]
            exchange="ex", routing_key=rk, mandatory=False), (props, v))
    mine = _Emitting()
    frames = PublishFrames(mine, _Ch(), "ex", props)
    data, n = frames.encode(values, keys)
    frames.emit(data, n)
    assert mine.writes == [b"".join(ref.writes)]  # same bytes, one write
    assert (mine.bytes_sent, mine.frames_sent) == (ref.bytes_sent, ref.frames_sent)


def test_tracker_add_many_numbers_in_order_and_settles_like_add() -> None:
    one, many = ConfirmTracker(), ConfirmTracker()
    for i in range(10):
        one.add(b"%d" % i, 5)
    many.add_many([b"%d" % i for i in range(4)], 5)
    many.add_many([b"%d" % i for i in range(4, 10)], 5)
    assert one.next_tag == many.next_tag == 11
    for tag, multiple in [(3, False), (5, True), (9, False), (0, True)]:
        assert one.settle(tag, multiple) == many.settle(tag, multiple)
    assert len(one) == len(many) == 0


# ------------------------------------------------------------ the producer end to end


class EmittingChannel(FakeChannel):
    channel_number = 1


class EmittingConnection(FakeSelectConnection):
    """A fake SelectConnection with pika's write hook: the burst path is taken."""

    def __init__(self, *a: Any, **k: Any) -> None:
        self._body_max_length = BODY_MAX
        self.bytes_sent = 0
        self.frames_sent = 0
        self.writes: list[bytes] = []
        super().__init__(*a, **k)

    def channel(self, on_open_callback: Any) -> None:
        self.ch = EmittingChannel(self)
        on_open_callback(self.ch)

    def _adapter_emit_data(self, data: bytes) -> None:
        self.writes.append(data)

    def published(self) -> list[tuple[str, bytes, int]]:
        """(routing key, body, delivery mode) of every publish written, decoded."""
        data, out = b"".join(self.writes), []
        while data:
            used, f = frame.decode_frame(data)
            data = data[used:]
            if isinstance(f, frame.Method):
                rk = f.method.routing_key
            elif isinstance(f, frame.Header):
                mode = f.properties.delivery_mode
                if f.body_size == 0:
                    out.append((rk, b"", mode))
            elif isinstance(f, frame.Body):
                out.append((rk, f.fragment, mode))
        return out


@pytest.fixture
def emitting_pika(monkeypatch: pytest.MonkeyPatch) -> type[EmittingConnection]:
    FakeSelectConnection.instances = []
    monkeypatch.setattr(pika, "SelectConnection", EmittingConnection)
    return EmittingConnection


def _recorder() -> tuple[Any, list[tuple[bytes, int, int]], list[int]]:
    """An engine-like on_ack (with ``many``) recording (value, ack ns, sent ns)."""
    got: list[tuple[bytes, int, int]] = []
    batches: list[int] = []

    def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
        assert latency_ns is not None and sent_ns is not None
        got.append((value, sent_ns + latency_ns, sent_ns))

    def many(values: list[bytes], ack_ns: Any = None, *, latency_ns: Any = None,
             sent_ns: Any = None) -> None:
        assert latency_ns is None and len(ack_ns) == len(sent_ns) == len(values)
        batches.append(len(values))
        got.extend(zip(values, ack_ns, sent_ns, strict=True))

    on_ack.many = many  # type: ignore[attr-defined]
    return on_ack, got, batches


def test_send_many_is_one_write_and_big_confirms_one_batch(emitting_pika: Any) -> None:
    on_ack, got, batches = _recorder()
    errors: list[bytes] = []
    p = _driver(message_persistence=True).producer(
        "t", "p0", on_ack, lambda v, why: errors.append(v))
    conn = emitting_pika.instances[0]
    conn.ioloop.paused.set()  # both bursts wait for one drain
    values = [b"m%03d" % i for i in range(60)]
    assert p.send_many(values[:40], None) == 40
    assert p.send_many(values[40:], None) == 20
    conn.ioloop.paused.clear()
    _wait(lambda: len(conn.published()) == 60)
    assert len(conn.writes) == 1  # one write for the whole queue
    assert conn.ch.published == []  # never pika's basic_publish
    assert conn.published() == [(["0", "1", "2"][i % 3], v, 2) for i, v in enumerate(values)]
    ch = conn.ch
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=30, multiple=True))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=35, multiple=True))))
    p.service()
    assert batches == [35]  # both confirms in one batch: one ack time per confirm
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=40, multiple=False))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Nack(delivery_tag=45, multiple=True))))
    conn.run(lambda: ch.on_confirm(Method(1, Basic.Ack(delivery_tag=60, multiple=True))))
    p.service()
    assert batches == [35, 16]  # 40, then 46..60 (15 + 1: a batch)
    assert [v for v, _, _ in got] == [*values[:35], values[39], *values[45:]]
    assert errors == values[35:39] + values[40:45]
    sent = {s for _, _, s in got}
    assert len(sent) == 1  # the burst's write, for every message of it
    acks = [a for _, a, _ in got]
    assert len(set(acks[:30])) == 1 and acks[30] >= acks[29] and min(acks) > sent.pop()
    assert p.queue_depth() == 0
    p.close()


def test_small_confirms_go_one_by_one(emitting_pika: Any) -> None:
    on_ack, got, batches = _recorder()
    p = _driver().producer("t", "p0", on_ack, lambda v, why: None)
    conn = emitting_pika.instances[0]
    for i in range(5):
        p.send(b"x%d" % i, None)
    _wait(lambda: len(conn.published()) == 5)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=5, multiple=True))))
    p.service()
    assert batches == [] and [v for v, _, _ in got] == [b"x%d" % i for i in range(5)]
    p.close()


def test_send_many_stops_at_a_full_window_without_losing_or_repeating(
        emitting_pika: Any) -> None:
    on_ack, got, _ = _recorder()
    d = _driver(max_pending_confirms=50)
    p = d.producer("t", "p0", on_ack, lambda v, why: None)
    conn = emitting_pika.instances[0]
    values = [struct.pack(">I", i) for i in range(80)]
    assert p.send_many(values, None) == 50
    assert p.send_many(values[50:], None) == 0  # window full: the caller keeps them
    _wait(lambda: len(conn.published()) == 50)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=50, multiple=True))))
    p.service()
    assert p.send_many(values[50:], None) == 30
    _wait(lambda: len(conn.published()) == 80)
    conn.run(lambda: conn.ch.on_confirm(Method(1, Basic.Ack(delivery_tag=80, multiple=True))))
    p.service()
    assert [body for _, body, _ in conn.published()] == values  # each once, in order
    assert [v for v, _, _ in got] == values
    assert p.stats["queue_full"] == 1
    p.close()


# ------------------------------------------------------------ the consumer's reader


class _Impl:
    def __init__(self) -> None:
        self.frames_received = 0
        self.bytes_received = 0
        self.processed: list[Any] = []

    def _on_data_available(self, data: bytes) -> None:
        raise AssertionError("replaced by the reader")

    def _process_frame(self, value: Any) -> None:
        self.frames_received += 1
        self.processed.append(value)


class _Blocking:
    def __init__(self) -> None:
        self._impl = _Impl()
        self.dispatch: list[int] = []

    def _request_channel_dispatch(self, n: int) -> None:
        self.dispatch.append(n)


def _delivery(ch: int, tag: str, dtag: int, body: bytes, frame_max: int = BODY_MAX) -> bytes:
    out = [frame.Method(ch, spec.Basic.Deliver(consumer_tag=tag, delivery_tag=dtag,
                                               exchange="ex", routing_key="0")).marshal(),
           frame.Header(ch, len(body), spec.BasicProperties(delivery_mode=2)).marshal()]
    out += [frame.Body(ch, body[i:i + frame_max]).marshal()
            for i in range(0, len(body), frame_max)]
    return b"".join(out)


@pytest.mark.parametrize("chunk", [1, 7, 1000, 1 << 20])
def test_delivery_reader_takes_its_deliveries_and_leaves_the_rest_to_pika(chunk: int) -> None:
    from pytest_brokerperf.brokers.rabbitmq.deliveries import DeliveryReader

    blocking = _Blocking()
    got: list[tuple[str, int, bytes]] = []
    reader = DeliveryReader(blocking, 1, lambda tag: tag.startswith("mine"),
                            lambda *d: got.append(d))
    assert DeliveryReader.available(blocking)
    reader.install()
    assert blocking._impl._on_data_available == reader.on_data
    big = bytes(range(256)) * 10
    stream = b"".join([
        _delivery(1, "mine-a", 1, b"x" * 1024),
        frame.Heartbeat().marshal(),  # channel 0: pika's
        _delivery(1, "theirs", 2, b"other"),  # a tag the reader does not keep: pika's
        _delivery(1, "mine-b", 3, b""),  # empty body: no body frame
        _delivery(1, "mine-a", 4, big, frame_max=1000),  # three body frames
        _delivery(2, "mine-a", 5, b"channel 2"),  # another channel: pika's
        frame.Method(1, spec.Basic.CancelOk(consumer_tag="mine-a")).marshal(),
    ])
    for i in range(0, len(stream), chunk):
        reader.on_data(stream[i:i + chunk])
    assert got == [("mine-a", 1, b"x" * 1024), ("mine-b", 3, b""), ("mine-a", 4, big)]
    processed = blocking._impl.processed
    assert [type(f).__name__ for f in processed] == [
        "Heartbeat", "Method", "Header", "Body", "Method", "Header", "Body", "Method"]
    assert processed[1].method.consumer_tag == "theirs" and processed[3].fragment == b"other"
    assert isinstance(processed[-1].method, spec.Basic.CancelOk)
    # pika's counters: every frame and byte, whichever path read it
    assert blocking._impl.bytes_received == len(stream)
    assert blocking._impl.frames_received == 3 + 1 + 3 + 2 + 5 + 3 + 1
    assert blocking.dispatch and set(blocking.dispatch) == {-1}
    assert reader._buf == b""
