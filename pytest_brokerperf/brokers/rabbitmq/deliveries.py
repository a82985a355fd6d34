"""Reading ``basic.deliver`` messages off a pika ``BlockingConnection`` without pika's
per-frame objects.

pika turns every delivery into three decoded frames (``Basic.Deliver`` method, content
header with its ``BasicProperties``, body), runs each through its callback manager and
content assembler, wraps the message in a delivery event and dispatches it to the
consumer callback; and it keeps the unread bytes in one ``bytes`` buffer that it slices
after every frame (a copy of everything still unread, per frame). The consumer needs
only each message's consumer tag, delivery tag and body, so :class:`DeliveryReader` takes
the incoming bytes first: deliveries to the consumer tags it is told to take become
``(consumer tag, delivery tag, body)`` straight away, everything else (other methods,
heartbeats, deliveries to other tags) is decoded and processed by pika exactly as
before. pika's frame counters are kept (its heartbeat checker reads them).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

__all__ = ["DeliveryReader"]

_HEAD = struct.Struct(">BHI")  # frame type, channel, payload size
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_METHOD, _HEADER, _BODY = 1, 2, 3
_FRAME_END = 0xCE
_BASIC_DELIVER = (60 << 16) | 60  # class basic, method deliver
#: socket reads per call (pika's default is 4 KiB: one read per ~4 messages of 1 KiB)
RECV_BYTES = 65536

#: ``take(consumer_tag)`` -> whether this reader keeps that consumer's deliveries
TakeTest = Callable[[str], bool]
#: ``sink(consumer_tag, delivery_tag, body)``
Sink = Callable[[str, int, bytes], None]


class DeliveryReader:
    """Incoming bytes of one connection: deliveries on ``channel_number`` to consumer
    tags ``take`` accepts go to ``sink``; every other frame goes to pika."""

    __slots__ = ("_blocking", "_buf", "_channel", "_cur", "_impl", "_sink", "_take",
                 "delivered")

    def __init__(self, blocking: Any, channel_number: int, take: TakeTest,
                 sink: Sink) -> None:
        self._blocking = blocking
        self._impl = blocking._impl
        self._channel = channel_number
        self._take = take
        self._sink = sink
        self._buf = b""
        #: the delivery being assembled: [consumer tag, delivery tag, size, body parts]
        self._cur: list[Any] | None = None
        self.delivered = 0

    @staticmethod
    def available(blocking: Any) -> bool:
        """This pika has the hooks the reader relies on (else pika reads as usual)."""
        impl = getattr(blocking, "_impl", None)
        return (impl is not None and hasattr(blocking, "_request_channel_dispatch")
                and all(hasattr(impl, a) for a in ("_on_data_available", "_process_frame",
                                                   "frames_received", "bytes_received")))

    def install(self) -> None:
        """Read the connection's incoming bytes from now on (and in bigger reads)."""
        self._impl._on_data_available = self.on_data
        transport = getattr(self._impl, "_transport", None)
        if transport is not None and hasattr(transport, "_MAX_RECV_BYTES"):
            transport._MAX_RECV_BYTES = RECV_BYTES

    def on_data(self, data: bytes) -> None:
        """pika's ``_on_data_available``: every complete frame in the buffer."""
        from pika import frame as pika_frame

        buf = self._buf + data if self._buf else data
        end = len(buf)
        off = 0
        impl = self._impl
        ours = self._channel
        head = _HEAD.unpack_from
        taken = taken_bytes = 0
        before = self.delivered
        try:
            while end - off >= 8:
                ftype, ch, size = head(buf, off)
                stop = off + size + 8
                if stop > end:
                    break
                if (ch == ours and buf[stop - 1] == _FRAME_END
                        and self._frame(ftype, buf, off + 7, size)):
                    taken += 1
                    taken_bytes += size + 8
                    off = stop
                    continue
                # pika's own path (its decode raises on a malformed frame)
                _, value = pika_frame.decode_frame(buf[off:stop])
                off = stop
                impl.bytes_received += size + 8
                if value is not None:
                    impl._process_frame(value)
        finally:
            self._buf = buf[off:] if off < end else b""
            impl.frames_received += taken
            impl.bytes_received += taken_bytes
            if self.delivered != before:  # let process_data_events return
                self._blocking._request_channel_dispatch(-ours)

    def _frame(self, ftype: int, buf: bytes, at: int, size: int) -> bool:
        """Take one frame of our channel if it belongs to a delivery we keep."""
        cur = self._cur
        if cur is None:
            if ftype != _METHOD or size < 4 or _U32.unpack_from(buf, at)[0] != _BASIC_DELIVER:
                return False
            n = buf[at + 4]
            tag = buf[at + 5:at + 5 + n].decode()
            if not self._take(tag):
                return False
            self._cur = [tag, _U64.unpack_from(buf, at + 5 + n)[0], -1, []]
            return True
        if ftype == _HEADER and cur[2] < 0:
            cur[2] = _U64.unpack_from(buf, at + 4)[0]  # after class id and weight
            if cur[2] == 0:
                self._deliver(b"")
            return True
        if ftype == _BODY and cur[2] > 0:
            parts = cur[3]
            parts.append(buf[at:at + size])
            got = sum(map(len, parts)) if len(parts) > 1 else size
            if got >= cur[2]:
                self._deliver(parts[0] if len(parts) == 1 else b"".join(parts))
            return True
        # a frame out of a delivery's order: a protocol error pika reports
        self._cur = None
        return False

    def _deliver(self, body: bytes) -> None:
        cur = self._cur
        assert cur is not None
        self._cur = None
        self.delivered += 1
        self._sink(cur[0], cur[1], body)
