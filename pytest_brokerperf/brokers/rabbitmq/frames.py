"""AMQP 0-9-1 ``basic.publish`` frames for a burst of messages, built without pika's
per-message objects.

pika marshals every publish from scratch: a ``Basic.Publish`` method object, a content
header from the ``BasicProperties``, a body frame, three ``marshal()`` calls and three
writes. For one producer the method frame (exchange, routing key) and the content header
(properties, body size) are the same for every message of a given size, so they are
marshalled once, by pika itself, and reused; only the body frame is new per message.
The bytes on the wire are exactly what ``Channel.basic_publish`` would write (a unit
test compares them), in one write per burst.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["PublishFrames"]

_FRAME_BODY = 3
_FRAME_END = b"\xce"
_BODY_HEAD = struct.Struct(">BHI")
#: cached content headers (one per body size seen); sizes beyond it are marshalled anew
_MAX_SIZES = 256


class PublishFrames:
    """Marshalled publish frames of one channel, exchange and properties.

    Built from a connection whose channel is open; :meth:`available` says whether this
    pika exposes what the burst path needs (else the driver publishes one by one
    through ``basic_publish``).
    """

    __slots__ = ("_body_max", "_channel", "_conn", "_exchange", "_headers", "_methods",
                 "_props", "channel")

    def __init__(self, conn: Any, channel: Any, exchange: str, props: Any) -> None:
        self._conn = conn
        self.channel = channel  # pika's Channel these frames are for
        self._channel = int(channel.channel_number)
        self._exchange = exchange
        self._props = props
        self._body_max = int(conn._body_max_length)
        self._methods: dict[str, bytes] = {}
        self._headers: dict[int, bytes] = {}

    @staticmethod
    def available(conn: Any, channel: Any) -> bool:
        """pika's connection and channel have the attributes the burst write relies on."""
        return hasattr(channel, "channel_number") and all(
            hasattr(conn, a) for a in ("_adapter_emit_data", "_body_max_length",
                                       "bytes_sent", "frames_sent"))

    def _method(self, routing_key: str) -> bytes:
        from pika import frame, spec

        raw = frame.Method(self._channel, spec.Basic.Publish(
            exchange=self._exchange, routing_key=routing_key, mandatory=False)).marshal()
        self._methods[routing_key] = raw
        return raw

    def _body(self, value: bytes) -> list[bytes]:
        """Body frames of a message larger than one frame (as pika splits it)."""
        step, ch = self._body_max, self._channel
        out: list[bytes] = []
        for start in range(0, len(value), step):
            piece = value[start:start + step]
            out += (_BODY_HEAD.pack(_FRAME_BODY, ch, len(piece)), piece, _FRAME_END)
        return out

    def _prefix(self, size: int) -> bytes:
        """Content header and body-frame head of a one-frame message of ``size`` bytes
        (what comes between the method frame and the body)."""
        from pika import frame

        raw = frame.Header(self._channel, size, self._props).marshal()
        if 0 < size <= self._body_max:
            raw += _BODY_HEAD.pack(_FRAME_BODY, self._channel, size)
        if len(self._headers) < _MAX_SIZES:
            self._headers[size] = raw
        return raw

    def build(self, values: list[bytes], routing_keys: list[str]) -> tuple[list[bytes], int]:
        """The wire pieces of publishing ``values`` (to ``routing_keys``, pairwise) in
        order, and how many frames they are."""
        methods, prefixes, body_max = self._methods, self._headers, self._body_max
        parts: list[bytes] = []
        add = parts.extend
        frames = 0
        end = _FRAME_END
        for value, rk in zip(values, routing_keys, strict=True):
            n = len(value)
            method = methods.get(rk) or self._method(rk)
            if 0 < n <= body_max:
                add((method, prefixes.get(n) or self._prefix(n), value, end))
                frames += 3
            elif not n:  # pika sends no body frame for an empty body
                add((method, prefixes.get(0) or self._prefix(0)))
                frames += 2
            else:
                body = self._body(value)
                add((method, self._prefix(n), *body))
                frames += 2 + len(body) // 3
        return parts, frames

    def encode(self, values: list[bytes], routing_keys: list[str]) -> tuple[bytes, int]:
        """The bytes of publishing ``values`` in order, and how many frames they are."""
        parts, frames = self.build(values, routing_keys)
        return b"".join(parts), frames

    def emit(self, data: bytes, frames: int) -> None:
        """Hand ``data`` to pika's transport as one write, with pika's counters kept as
        its own ``basic_publish`` keeps them (heartbeats read them)."""
        conn = self._conn
        conn.bytes_sent += len(data)
        conn.frames_sent += frames
        conn._adapter_emit_data(data)
