"""The wire-stamp proxy's AMQP scanner: publishes counted per confirm-mode channel,
confirms (single, multiple, nack) mapped to delivery tags, frames split across chunks."""

from __future__ import annotations

import struct

import pytest

from tests.support.wirestamp import AmqpScanner, PulsarScanner, WireStamps


def _frame(channel: int, cls: int, meth: int, args: bytes = b"") -> bytes:
    payload = struct.pack(">HH", cls, meth) + args
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce"


def _body(channel: int, data: bytes) -> bytes:
    return struct.pack(">BHI", 3, channel, len(data)) + data + b"\xce"


def test_publishes_are_stamped_only_on_confirm_mode_channels() -> None:
    stamps = WireStamps()
    up = AmqpScanner(True, stamps)
    up.feed(b"AMQP\x00\x00\x09\x01", 1)
    up.feed(_frame(1, 60, 40) + _body(1, b"x" * 10), 2)  # before Confirm.Select
    up.feed(_frame(1, 85, 10), 3)
    stream = b"".join(_frame(1, 60, 40, b"\x00" * 8) + _body(1, b"y" * 100) for _ in range(3))
    up.feed(stream[:5], 4)  # a frame header split across chunks
    up.feed(stream[5:40], 5)
    up.feed(stream[40:], 6)
    assert stamps.published == {1: {1: 5, 2: 6, 3: 6}}


def test_confirms_map_to_delivery_tags_single_and_multiple() -> None:
    stamps = WireStamps()
    down = AmqpScanner(False, stamps)
    down.feed(_frame(1, 60, 80, struct.pack(">QB", 1, 0)), 10)
    down.feed(_frame(1, 60, 80, struct.pack(">QB", 4, 1)), 20)  # tags 2..4 at once
    down.feed(_frame(1, 60, 120, struct.pack(">QB", 5, 0)), 30)  # a nack is a confirm too
    assert stamps.confirmed == {1: {1: 10, 2: 20, 3: 20, 4: 20, 5: 30}}


def test_a_corrupt_stream_is_an_error_not_a_wrong_stamp() -> None:
    down = AmqpScanner(False, WireStamps())
    with pytest.raises(ValueError, match="does not end with 0xCE"):
        down.feed(struct.pack(">BHI", 1, 1, 4) + b"\x00<\x00P" + b"\x00", 1)


def _pb_varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _pb(fields: list[tuple[int, int | bytes]]) -> bytes:
    out = b""
    for number, value in fields:
        if isinstance(value, bytes):
            out += _pb_varint(number << 3 | 2) + _pb_varint(len(value)) + value
        else:
            out += _pb_varint(number << 3) + _pb_varint(value)
    return out


def _pulsar(kind: int, body: bytes, payload: bytes = b"") -> bytes:
    command = _pb([(1, kind), (kind, body)])
    return struct.pack(">II", 4 + len(command) + len(payload), len(command)) + command + payload


def test_pulsar_batches_give_every_message_its_batchs_wire_times() -> None:
    stamps = WireStamps()
    up, down = PulsarScanner(True, stamps), PulsarScanner(False, stamps)
    sends = (_pulsar(6, _pb([(1, 7), (2, 0), (3, 3)]), b"\x0e\x01" + b"m" * 300)
             + _pulsar(6, _pb([(1, 7), (2, 3)]), b"p" * 50))  # one of 3, then a single
    up.feed(sends[:11], 100)
    up.feed(sends[11:], 200)
    down.feed(_pulsar(7, _pb([(1, 7), (2, 0), (3, _pb([(1, 5), (2, 9)]))])), 300)
    down.feed(_pulsar(7, _pb([(1, 7), (2, 3)])), 400)
    assert stamps.published == {7: {0: 200, 1: 200, 2: 200, 3: 200}}
    assert stamps.confirmed == {7: {0: 300, 1: 300, 2: 300, 3: 400}}
