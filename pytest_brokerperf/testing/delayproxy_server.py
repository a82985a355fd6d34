"""The delay proxy's own process: the server, its connections and the per-direction
reader and writer threads that hold each chunk until exactly its due time.

Started by :class:`pytest_brokerperf.testing.delayproxy.DelayProxy` (multiprocessing
``spawn``; control over a ``Pipe``); how the timing is kept honest is explained there.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ProxyStats:
    """What went through the proxy since it started (lifetime counters).

    ``bytes_*`` count payload bytes read from the sending side; ``late_*`` is how much
    later than ``arrival + delay`` a chunk actually went out (timer overshoot, TCP
    back-pressure), a direct check of the proxy's own timing.
    """

    bytes_up: int = 0
    bytes_down: int = 0
    chunks_up: int = 0
    chunks_down: int = 0
    connections_total: int = 0
    connections_open: int = 0
    late_mean_us_up: float = 0.0
    late_mean_us_down: float = 0.0
    late_max_us_up: float = 0.0
    late_max_us_down: float = 0.0
    delay_up_ms: float = 0.0
    delay_down_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["LOOPBACK", "ProxyStats", "child_main"]

_UP, _DOWN = 0, 1
_RECV_BYTES = 256 * 1024
_MAX_QUEUED_BYTES = 32 * 1024 * 1024  # per connection and direction
_CONNECT_TIMEOUT_S = 10.0
_ACCEPT_POLL_S = 0.2
_JOIN_TIMEOUT_S = 3.0  # for all proxy threads together, on stop


class _Sleeper:
    """Sleep until a ``monotonic_ns`` deadline: sleep most of the way, yield the rest.

    ``time.sleep`` oversleeps by ~0.05–0.2 ms on a VM; sleeping until ``due - margin``
    and then yielding (``time.sleep(0)`` releases the GIL) until ``due`` makes the send
    time exact to a few µs in the common case. The margin follows a moving average of
    the observed oversleep. The yielding costs CPU, so it has a budget (10 % of one
    core, bursts of 50 ms): a high chunk rate falls back to plain sleeping, and its
    lateness shows in :class:`ProxyStats`. Shared by all writer threads; the races on
    the averages are harmless.
    """

    _MIN_MARGIN_NS = 30_000
    _MAX_MARGIN_NS = 1_000_000
    _SPIN_SHARE = 0.10
    _SPIN_BURST_NS = 50_000_000

    def __init__(self) -> None:
        self._over_ns = 150_000.0  # moving average of the oversleep
        self._budget_ns = float(self._SPIN_BURST_NS)
        self._refilled_ns = time.monotonic_ns()

    def margin_ns(self) -> int:
        m = int(self._over_ns * 1.5) + 20_000
        return min(max(m, self._MIN_MARGIN_NS), self._MAX_MARGIN_NS)

    def until(self, due_ns: int) -> None:
        now = time.monotonic_ns()
        if now >= due_ns:
            return
        margin = self.margin_ns()
        if due_ns - now > margin:
            target = due_ns - margin
            time.sleep((target - now) / 1e9)
            now = time.monotonic_ns()
            over = now - target
            if over >= 0:
                self._over_ns += (min(over, 5_000_000) - self._over_ns) / 16.0
        if now >= due_ns:
            return
        self._budget_ns = min(
            float(self._SPIN_BURST_NS),
            self._budget_ns + (now - self._refilled_ns) * self._SPIN_SHARE,
        )
        self._refilled_ns = now
        if self._budget_ns <= 0:
            time.sleep((due_ns - now) / 1e9)
            return
        spin_from = now
        while now < due_ns:
            time.sleep(0)
            now = time.monotonic_ns()
        self._budget_ns -= now - spin_from


class _Direction:
    """One direction of one connection: a reader, a queue of stamped chunks, a writer."""

    def __init__(self, conn: _Conn, index: int, src: socket.socket, dst: socket.socket) -> None:
        self.conn = conn
        self.index = index
        self.src = src
        self.dst = dst
        self.cond = threading.Condition(threading.Lock())
        self.queue: collections.deque[tuple[int, bytes | None]] = collections.deque()
        self.queued_bytes = 0
        self.connected = index == _DOWN  # up: set once the upstream connect succeeded
        self.sending = False  # a chunk is being sent (by the writer or, at delay 0, the reader)
        # counters: written by one thread each, read (racily, monotone) for stats
        self.bytes_in = 0
        self.chunks_in = 0
        self.chunks_out = 0
        self.late_sum_ns = 0
        self.late_max_ns = 0

    def read_loop(self) -> None:
        server = self.conn.server
        cond = self.cond
        try:
            while True:
                data = self.src.recv(_RECV_BYTES)
                now = time.monotonic_ns()
                delay = server.delays_ns[self.index]
                due = now + delay
                with cond:
                    if self.conn.dead:
                        return
                    if not data:
                        self.queue.append((due, None))
                        cond.notify_all()
                        return
                    self.bytes_in += len(data)
                    self.chunks_in += 1
                    # Zero delay and nothing queued or being sent: send from this thread,
                    # so a zero delay does not pay a thread hand-over that a non-zero
                    # delay hides (that would make a measured shift smaller than D).
                    direct = delay == 0 and self.connected and not self.queue and not self.sending
                    if direct:
                        self.sending = True
                    else:
                        self.queue.append((due, data))
                        self.queued_bytes += len(data)
                        cond.notify_all()
                        while self.queued_bytes > _MAX_QUEUED_BYTES and not self.conn.dead:
                            cond.wait()
                if direct:
                    try:
                        self._send(due, data)
                    finally:
                        with cond:
                            self.sending = False
                            cond.notify_all()
        except OSError:
            self.conn.abort()
        finally:
            self.conn.thread_done()

    def _send(self, due: int, data: bytes) -> None:
        late = time.monotonic_ns() - due
        self.dst.sendall(data)
        self.chunks_out += 1
        self.late_sum_ns += late
        if late > self.late_max_ns:
            self.late_max_ns = late

    def write_loop(self) -> None:
        cond = self.cond
        sleeper = self.conn.server.sleeper
        try:
            while True:
                with cond:
                    while (not self.queue or self.sending) and not self.conn.dead:
                        cond.wait()
                    if self.conn.dead:
                        return
                    due, data = self.queue.popleft()
                    self.sending = True
                    if data is not None:
                        self.queued_bytes -= len(data)
                        cond.notify_all()
                try:
                    sleeper.until(due)
                    if self.conn.dead:
                        return
                    if data is None:  # EOF from the sender: forward the half-close
                        self.dst.shutdown(socket.SHUT_WR)
                        return
                    self._send(due, data)
                finally:
                    with cond:
                        self.sending = False
        except OSError:
            self.conn.abort()
        finally:
            self.conn.thread_done()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()


def _nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Conn:
    """One proxied connection: client socket, server socket, two directions, four threads."""

    def __init__(self, server: _ProxyServer, client: socket.socket, cid: int) -> None:
        self.server = server
        self.cid = cid
        self.client = client
        self.upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.dead = False
        self._lock = threading.Lock()
        self._threads_left = 4
        self._closed = False
        self.threads: list[threading.Thread] = []
        self.up = _Direction(self, _UP, client, self.upstream)
        self.down = _Direction(self, _DOWN, self.upstream, client)

    def _thread(self, fn: Any, name: str) -> threading.Thread:
        t = threading.Thread(target=fn, name=f"delayproxy-{self.cid}-{name}", daemon=True)
        self.threads.append(t)
        return t

    def run(self) -> None:
        """Connect upstream, then run the four loops (called on the connection thread)."""
        _nodelay(self.client)
        # Read (and stamp) the client's first bytes at once, even while connecting.
        self._thread(self.up.read_loop, "up-r").start()
        try:
            self.upstream.settimeout(_CONNECT_TIMEOUT_S)
            self.upstream.connect(self.server.target)
            self.upstream.settimeout(None)
            _nodelay(self.upstream)
            with self.up.cond:
                self.up.connected = True
        except OSError:
            self.abort()
            self.thread_done(3)  # this thread and the two writers that never start
            return
        self._thread(self.up.write_loop, "up-w").start()
        self._thread(self.down.write_loop, "down-w").start()
        self.down.read_loop()  # this thread becomes the down-reader

    def abort(self) -> None:
        """Reset both sides and wake every loop of this connection (idempotent)."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
        linger = struct.pack("ii", 1, 0)  # close() then sends RST
        for s in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.up.wake()
        self.down.wake()

    def thread_done(self, n: int = 1) -> None:
        with self._lock:
            self._threads_left -= n
            last = self._threads_left <= 0 and not self._closed
            if last:
                self._closed = True
        if last:
            for s in (self.client, self.upstream):
                with contextlib.suppress(OSError):
                    s.close()
            self.server.conn_finished(self)


class _ProxyServer:
    def __init__(self, listen_port: int, target: tuple[str, int], up_ms: float,
                 down_ms: float) -> None:
        self.listen_port = listen_port
        self.target = target
        self.delays_ns: tuple[int, int] = (_ms_to_ns(up_ms), _ms_to_ns(down_ms))
        self.sleeper = _Sleeper()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: dict[int, _Conn] = {}
        self._next_id = 0
        self._total_conns = 0
        self._done: list[int] = [0] * 8  # totals of finished connections
        self._late_max = [0, 0]
        self.listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._conn_threads: list[threading.Thread] = []

    def bind(self) -> int:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            ls.bind((LOOPBACK, self.listen_port))
            ls.listen(512)
        except OSError:
            ls.close()
            raise
        ls.settimeout(_ACCEPT_POLL_S)
        self.listener = ls
        return int(ls.getsockname()[1])

    def start(self) -> None:
        self._acceptor = threading.Thread(target=self._accept_loop, name="delayproxy-accept",
                                          daemon=True)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        assert self.listener is not None
        while not self.stopping.is_set():
            try:
                client, _addr = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                time.sleep(0.01)  # e.g. EMFILE: back off instead of spinning
                continue
            client.setblocking(True)
            with self._lock:
                if self.stopping.is_set():
                    client.close()
                    return
                cid = self._next_id
                self._next_id += 1
                self._total_conns += 1
                conn = _Conn(self, client, cid)
                self._conns[cid] = conn
                t = threading.Thread(target=conn.run, name=f"delayproxy-{cid}-down-r",
                                     daemon=True)
                conn.threads.append(t)
                self._conn_threads = [x for x in self._conn_threads if x.is_alive()]
                self._conn_threads.append(t)
            t.start()

    def conn_finished(self, conn: _Conn) -> None:
        with self._lock:
            self._conns.pop(conn.cid, None)
            for i, v in enumerate(_direction_counters(conn)):
                self._done[i] += v
            self._late_max[0] = max(self._late_max[0], conn.up.late_max_ns)
            self._late_max[1] = max(self._late_max[1], conn.down.late_max_ns)

    def set_delay(self, up_ms: float, down_ms: float) -> None:
        self.delays_ns = (_ms_to_ns(up_ms), _ms_to_ns(down_ms))

    def stats(self) -> ProxyStats:
        with self._lock:
            tot = list(self._done)
            late_max = list(self._late_max)
            live = list(self._conns.values())
            total_conns = self._total_conns
        for conn in live:
            for i, v in enumerate(_direction_counters(conn)):
                tot[i] += v
            late_max[0] = max(late_max[0], conn.up.late_max_ns)
            late_max[1] = max(late_max[1], conn.down.late_max_ns)
        b_up, b_down, c_up, c_down, o_up, o_down, l_up, l_down = tot
        return ProxyStats(
            bytes_up=b_up, bytes_down=b_down, chunks_up=c_up, chunks_down=c_down,
            connections_total=total_conns, connections_open=len(live),
            late_mean_us_up=(l_up / o_up / 1e3) if o_up else 0.0,
            late_mean_us_down=(l_down / o_down / 1e3) if o_down else 0.0,
            late_max_us_up=late_max[0] / 1e3, late_max_us_down=late_max[1] / 1e3,
            delay_up_ms=self.delays_ns[0] / 1e6, delay_down_ms=self.delays_ns[1] / 1e6,
        )

    def close(self) -> None:
        self.stopping.set()
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()
        deadline = time.monotonic() + _JOIN_TIMEOUT_S
        if self._acceptor is not None:
            self._acceptor.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            live = list(self._conns.values())
        for conn in live:
            conn.abort()
        for conn in live:
            for t in list(conn.threads):
                if t.ident is not None:
                    t.join(max(0.0, deadline - time.monotonic()))


def _direction_counters(conn: _Conn) -> tuple[int, ...]:
    u, d = conn.up, conn.down
    return (u.bytes_in, d.bytes_in, u.chunks_in, d.chunks_in, u.chunks_out, d.chunks_out,
            u.late_sum_ns, d.late_sum_ns)


def _ms_to_ns(ms: float) -> int:
    return round(ms * 1_000_000)


def _tune_process() -> None:
    """Best effort: exact timers and quick GIL hand-over between the proxy's threads."""
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    sys.setswitchinterval(0.0005)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK = 1 ns, inherited by threads


def child_main(ctrl: Connection, listen_port: int, target: tuple[str, int], up_ms: float,
                down_ms: float) -> None:
    """Entry point of the proxy process: serve until told to stop or the parent goes away."""
    _tune_process()
    server = _ProxyServer(listen_port, target, up_ms, down_ms)
    try:
        port = server.bind()
    except OSError as exc:
        ctrl.send(("error", exc.errno, str(exc)))
        return
    server.start()
    ctrl.send(("ready", port))
    try:
        while True:
            try:
                msg = ctrl.recv()
            except (EOFError, OSError):
                break  # parent gone
            op = msg[0]
            if op == "set_delay":
                server.set_delay(msg[1], msg[2])
                ctrl.send(("ok",))
            elif op == "stats":
                ctrl.send(("ok", server.stats()))
            elif op == "stop":
                break
            else:
                ctrl.send(("error", None, f"unknown command {op!r}"))
    finally:
        server.close()
        with contextlib.suppress(Exception):
            ctrl.send(("stopped", server.stats()))
        with contextlib.suppress(Exception):
            ctrl.close()
