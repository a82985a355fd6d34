"""The wire-stamp proxy's AMQP scanner: publishes counted per confirm-mode channel,
confirms (single, multiple, nack) mapped to delivery tags, frames split across chunks."""

from __future__ import annotations

import struct

import pytest

from pytest_brokerperf.testing.wirestamp import AmqpScanner, WireStamps


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
    assert stamps.published == {1: [5, 6, 6]}


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
