"""A TCP proxy that stamps when each publish and each confirm crosses the wire.

Why: a client library stamps a send before it hands the message to its IO thread, and an
ack after that thread has read the broker's answer and won the GIL. Both hand-offs are
billed to the broker by ``ack - send``. A proxy in its own process, between the client
and the broker, sees the bytes on the wire: its stamps (``CLOCK_MONOTONIC``, the clock
every harness stamp uses) bound how much of the client-side figure is the client's own.

The proxy parses just enough of each protocol to give every message a wire time going up
and one for its confirm coming down:

* AMQP 0-9-1 (RabbitMQ): frames; ``Basic.Publish`` upstream, ``Basic.Ack``/``Basic.Nack``
  with delivery tag and ``multiple`` downstream; tags counted per channel after
  ``Confirm.Select`` (tag k is the k-th publish).
* Pulsar's binary protocol: ``[totalSize][commandSize][BaseCommand]`` frames; ``SEND``
  (producer id, sequence id, ``num_messages`` of a batch) upstream, ``SEND_RECEIPT``
  (producer id, sequence id) downstream; every message of a batch gets its batch's times.

Each stamp is taken when ``recv`` returned the chunk that completed the frame, before
the chunk is forwarded. docs/explanation/measurement.md states the figures.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["AmqpScanner", "PulsarScanner", "WireStampProxy", "WireStamps"]

LOOPBACK = "127.0.0.1"
_FRAME_END = 0xCE
_METHOD = 1
_BASIC, _PUBLISH, _ACK, _NACK = 60, 40, 80, 120
_CONFIRM, _SELECT = 85, 10
_PROTOCOL_HEADER = b"AMQP"


@dataclass
class WireStamps:
    """Per stream (AMQP channel, Pulsar producer id): message number → when it went up
    and when its confirm came down (ns, ``CLOCK_MONOTONIC``). Message numbers are AMQP
    delivery tags (1, 2, …) or Pulsar sequence ids (0, 1, …)."""

    published: dict[int, dict[int, int]] = field(default_factory=dict)
    confirmed: dict[int, dict[int, int]] = field(default_factory=dict)
    #: Pulsar: a batch's first sequence id → its message count (from the SEND)
    batches: dict[int, dict[int, int]] = field(default_factory=dict)


class AmqpScanner:
    """Frames of one direction of one AMQP connection, fed as chunks arrive."""

    def __init__(self, upstream: bool, stamps: WireStamps) -> None:
        self.upstream = upstream
        self.stamps = stamps
        self._buf = bytearray()
        self._header_seen = not upstream  # the client opens with b"AMQP\x00\x00\x09\x01"
        self._confirming: set[int] = set()
        self._settled: dict[int, int] = {}  # channel -> highest tag settled

    def feed(self, data: bytes, t_ns: int) -> None:
        buf = self._buf
        buf += data
        if not self._header_seen:
            if len(buf) < 8:
                return
            if buf[:4] == _PROTOCOL_HEADER:
                del buf[:8]
            self._header_seen = True
        pos = 0
        while len(buf) - pos >= 7:
            ftype, channel, size = struct.unpack_from(">BHI", buf, pos)
            end = pos + 7 + size
            if len(buf) < end + 1:
                break
            if buf[end] != _FRAME_END:
                raise ValueError(f"AMQP frame at offset {pos} does not end with 0xCE")
            if ftype == _METHOD and size >= 4:
                self._method(channel, bytes(buf[pos + 7:end]), t_ns)
            pos = end + 1
        del buf[:pos]

    def _method(self, channel: int, payload: bytes, t_ns: int) -> None:
        cls, meth = struct.unpack_from(">HH", payload, 0)
        if self.upstream:
            if (cls, meth) == (_CONFIRM, _SELECT):
                self._confirming.add(channel)
            elif (cls, meth) == (_BASIC, _PUBLISH) and channel in self._confirming:
                sent = self.stamps.published.setdefault(channel, {})
                sent[len(sent) + 1] = t_ns
            return
        if cls == _BASIC and meth in (_ACK, _NACK):
            tag, bits = struct.unpack_from(">QB", payload, 4)
            done = self.stamps.confirmed.setdefault(channel, {})
            first = self._settled.get(channel, 0) + 1 if bits & 1 else tag
            for t in range(first, tag + 1):
                done.setdefault(t, t_ns)
            self._settled[channel] = max(self._settled.get(channel, 0), tag)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> dict[int, int | bytes]:
    """The top-level fields of a protobuf message (varints and length-delimited)."""
    out: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            out[number] = buf[pos:pos + size]
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"protobuf wire type {wire} in a Pulsar command")
    return out


_PULSAR_SEND, _PULSAR_RECEIPT = 6, 7  # BaseCommand.Type, also the field numbers


class PulsarScanner:
    """Frames of one direction of one Pulsar binary-protocol connection."""

    def __init__(self, upstream: bool, stamps: WireStamps) -> None:
        self.upstream = upstream
        self.stamps = stamps
        self._buf = bytearray()

    def feed(self, data: bytes, t_ns: int) -> None:
        buf = self._buf
        buf += data
        pos = 0
        while len(buf) - pos >= 8:
            total, cmd_size = struct.unpack_from(">II", buf, pos)
            if len(buf) - pos < 4 + total:
                break
            command = _fields(bytes(buf[pos + 8:pos + 8 + cmd_size]))
            kind = command.get(1)
            if kind in (_PULSAR_SEND, _PULSAR_RECEIPT):
                body = command.get(kind)
                if isinstance(body, bytes):
                    self._command(int(kind), _fields(body), t_ns)
            pos += 4 + total
        del buf[:pos]

    def _command(self, kind: int, f: dict[int, int | bytes], t_ns: int) -> None:
        producer, seq = int(f.get(1, 0)), int(f.get(2, 0))
        st = self.stamps
        if kind == _PULSAR_SEND and self.upstream:
            n = int(f.get(3, 1))
            st.batches.setdefault(producer, {})[seq] = n
            sent = st.published.setdefault(producer, {})
            for s in range(seq, seq + n):
                sent[s] = t_ns
        elif kind == _PULSAR_RECEIPT and not self.upstream:
            n = st.batches.get(producer, {}).get(seq, 1)
            done = st.confirmed.setdefault(producer, {})
            for s in range(seq, seq + n):
                done.setdefault(s, t_ns)


_SCANNERS: dict[str, type[AmqpScanner] | type[PulsarScanner]] = {
    "amqp": AmqpScanner, "pulsar": PulsarScanner}


# -- the proxy's own process ----------------------------------------------------------------


def _pump(src: socket.socket, dst: socket.socket, scanner: AmqpScanner | PulsarScanner) -> None:
    with contextlib.suppress(OSError):
        while True:
            data = src.recv(256 * 1024)
            t_ns = time.monotonic_ns()
            if not data:
                break
            scanner.feed(data, t_ns)
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _child(ctrl: Connection, listen: socket.socket, target: tuple[str, int],
           protocol: str) -> None:
    scanner = _SCANNERS[protocol]
    stamps: list[WireStamps] = []
    threads: list[threading.Thread] = []
    conns: list[socket.socket] = []
    listen.settimeout(0.2)

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                client, _ = listen.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(target, timeout=10)
            for s in (client, upstream):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conns.extend((client, upstream))
            ws = WireStamps()
            stamps.append(ws)
            for a, b, up in ((client, upstream, True), (upstream, client, False)):
                t = threading.Thread(target=_pump, args=(a, b, scanner(up, ws)),
                                     daemon=True)
                t.start()
                threads.append(t)

    stop = threading.Event()
    acceptor = threading.Thread(target=accept_loop, daemon=True)
    acceptor.start()
    ctrl.send("ready")
    ctrl.recv()  # "stop"
    stop.set()
    acceptor.join(2)
    for s in conns:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv
        with contextlib.suppress(OSError):
            s.close()
    for t in threads:
        t.join(2)
    merged = [(s.published, s.confirmed) for s in stamps]
    ctrl.send(merged)


class WireStampProxy:
    """``with WireStampProxy(("127.0.0.1", 5672), "amqp") as proxy:`` point the client at
    ``proxy.port``; :meth:`stop` returns each connection's :class:`WireStamps`."""

    def __init__(self, target: tuple[str, int], protocol: str = "amqp") -> None:
        if protocol not in _SCANNERS:
            raise ValueError(f"protocol {protocol!r}: expected one of {sorted(_SCANNERS)}")
        self.target = target
        self.protocol = protocol
        self._listen = socket.socket()
        self._listen.bind((LOOPBACK, 0))
        self._listen.listen(16)
        self.port: int = self._listen.getsockname()[1]
        self._ctrl: Connection | None = None
        self._proc: Any = None

    def start(self) -> WireStampProxy:
        ctx = multiprocessing.get_context("fork")  # hands the listening socket over
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_child, args=(child, self._listen, self.target, self.protocol),
            daemon=True, name="wirestamp-proxy")
        self._proc.start()
        self._ctrl = parent
        if not parent.poll(10) or parent.recv() != "ready":
            self._proc.kill()
            raise RuntimeError("the wire-stamp proxy did not start within 10 s")
        self._listen.close()  # the proxy's process holds its own copy
        return self

    def stop(self) -> list[WireStamps]:
        """Stop forwarding; every connection's stamps, in accept order."""
        if self._ctrl is None:
            self._listen.close()
            return []
        self._ctrl.send("stop")
        got = self._ctrl.recv() if self._ctrl.poll(15) else []
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
        self._ctrl = None
        self._listen.close()
        return [WireStamps(published=p, confirmed=c) for p, c in got]

    def __enter__(self) -> WireStampProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
