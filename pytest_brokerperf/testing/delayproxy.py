"""A loopback TCP proxy that adds a known one-way delay in each direction.

Used by the fidelity test (a delay ``D`` injected between client and broker must move
the measured publish and end-to-end latency by ``D``) and by users who want to see
"what if my broker were 5 ms away"::

    with DelayProxy(0, ("127.0.0.1", 9092), delay_up_ms=5) as proxy:
        ...  # clients connect to 127.0.0.1:proxy.port
        proxy.set_delay(20, 0)
        print(proxy.stats().bytes_up)

or from a shell: ``python -m pytest_brokerperf.testing.delayproxy --listen 19093
--target 127.0.0.1:9092 --up-ms 5``.

"up" is client → server, "down" is server → client.

How the timing is kept honest:

* The proxy runs in its **own process** (multiprocessing ``spawn``; control over a
  ``Pipe``), so its threads never wait for the GIL of the test or benchmark process.
* Per connection and direction a *reader* thread stamps every chunk it receives with
  ``time.monotonic_ns()`` and a *writer* thread sends it at exactly ``arrival + delay``:
  it sleeps until shortly before the due time (the margin adapts to the measured
  oversleep of ``time.sleep`` on this machine), then yields until the due time. Chunks
  keep their order and are never merged, so the delay is never coalesced away;
  ``TCP_NODELAY`` is set on both sockets. The delay is read when a chunk *arrives*, so
  :meth:`DelayProxy.set_delay` applies to data arriving afterwards (order still wins:
  after a decrease, new chunks wait for the older ones queued before them). At zero
  delay an idle direction sends straight from the reader thread, so "D = 0" carries no
  thread hand-over that a non-zero delay would hide.
* A half-close (EOF) is forwarded as ``shutdown(SHUT_WR)`` after the data before it,
  with the same delay; a reset or send error on either side resets both sides.
* Each direction buffers at most ``_MAX_QUEUED_BYTES``; beyond that the reader stops
  reading, so TCP flow control pushes back on the sender instead of the proxy growing.

It binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import multiprocessing
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

from pytest_brokerperf.errors import ProvisionError

__all__ = ["DelayProxy", "DelayProxyError", "ProxyStats", "main"]

LOOPBACK = "127.0.0.1"

_RECV_BYTES = 256 * 1024
_MAX_QUEUED_BYTES = 32 * 1024 * 1024  # per connection and direction
_CONNECT_TIMEOUT_S = 10.0
_ACCEPT_POLL_S = 0.2
_JOIN_TIMEOUT_S = 3.0  # for all proxy threads together, on stop
_UP, _DOWN = 0, 1


class DelayProxyError(ProvisionError):
    """The delay proxy process could not be started, controlled or stopped."""


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


# --------------------------------------------------------------------------- child side


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


def _child_main(ctrl: Connection, listen_port: int, target: tuple[str, int], up_ms: float,
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


# -------------------------------------------------------------------------- parent side


def _check_delay(name: str, ms: float) -> float:
    ms = float(ms)
    if not math.isfinite(ms) or ms < 0:
        raise ValueError(f"{name} must be a finite number of milliseconds >= 0, got {ms!r}")
    return ms


class DelayProxy:
    """A TCP proxy on ``127.0.0.1:listen_port`` that forwards to ``target`` with delays.

    ``listen_port=0`` picks a free port (see :attr:`port` after :meth:`start`).
    ``delay_up_ms`` applies to client → server bytes, ``delay_down_ms`` to server →
    client bytes. The proxy runs in its own process (``spawn``); this object only
    controls it. As with any ``spawn`` child, a script that starts one needs the usual
    ``if __name__ == "__main__":`` guard.
    """

    def __init__(self, listen_port: int, target: tuple[str, int], delay_up_ms: float = 0.0,
                 delay_down_ms: float = 0.0, *, start_timeout_s: float = 30.0) -> None:
        if not 0 <= int(listen_port) <= 65535:
            raise ValueError(f"listen_port must be 0..65535, got {listen_port!r}")
        self._listen_port = int(listen_port)
        self._target = (str(target[0]), int(target[1]))
        self._up = _check_delay("delay_up_ms", delay_up_ms)
        self._down = _check_delay("delay_down_ms", delay_down_ms)
        self._start_timeout_s = start_timeout_s
        self._proc: BaseProcess | None = None
        self._ctrl: Connection | None = None
        self._port: int | None = None
        self._lock = threading.Lock()
        self.final_stats: ProxyStats | None = None

    # -- properties
    @property
    def port(self) -> int:
        """The port clients connect to (the bound port once started)."""
        return self._port if self._port is not None else self._listen_port

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def target(self) -> tuple[str, int]:
        return self._target

    @property
    def delays_ms(self) -> tuple[float, float]:
        return self._up, self._down

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # -- lifecycle
    def start(self) -> DelayProxy:
        if self._proc is not None:
            raise DelayProxyError("DelayProxy.start() called twice")
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=_child_main,
            args=(child, self._listen_port, self._target, self._up, self._down),
            name=f"delayproxy-{self._listen_port}",
            daemon=True,
        )
        proc.start()
        child.close()
        self._proc, self._ctrl = proc, parent
        try:
            if not parent.poll(self._start_timeout_s):
                raise DelayProxyError(
                    f"the delay proxy process did not report ready within "
                    f"{self._start_timeout_s} s"
                )
            msg = parent.recv()
        except (EOFError, OSError) as exc:
            proc.join(2.0)
            code = proc.exitcode
            self._kill()
            raise DelayProxyError(
                f"the delay proxy process died while starting (exit code {code}); a script "
                "that starts it needs the `if __name__ == '__main__':` guard (spawn)"
            ) from exc
        except DelayProxyError:
            self._kill()
            raise
        if msg[0] == "error":
            self._kill()
            errno_, text = msg[1], msg[2]
            raise OSError(errno_, f"delay proxy cannot listen on {LOOPBACK}:"
                                  f"{self._listen_port}: {text}")
        self._port = int(msg[1])
        return self

    def _request(self, *msg: Any) -> Any:
        with self._lock:
            if self._ctrl is None or self._proc is None:
                raise DelayProxyError("the delay proxy is not running (call start() first)")
            try:
                self._ctrl.send(msg)
                if not self._ctrl.poll(10.0):
                    raise DelayProxyError(f"the delay proxy did not answer {msg[0]!r} in 10 s")
                reply = self._ctrl.recv()
            except (EOFError, OSError) as exc:
                raise DelayProxyError(
                    f"the delay proxy process is gone (exit code {self._proc.exitcode})"
                ) from exc
        if reply[0] != "ok":
            raise DelayProxyError(f"delay proxy refused {msg[0]!r}: {reply}")
        return reply[1] if len(reply) > 1 else None

    def set_delay(self, up_ms: float, down_ms: float) -> None:
        """Change both delays; applies to bytes that arrive at the proxy afterwards."""
        up, down = _check_delay("up_ms", up_ms), _check_delay("down_ms", down_ms)
        self._request("set_delay", up, down)
        self._up, self._down = up, down

    def stats(self) -> ProxyStats:
        """Lifetime counters of the running proxy (bytes, chunks, connections, lateness)."""
        result: ProxyStats = self._request("stats")
        return result

    def stop(self, timeout_s: float = 5.0) -> ProxyStats | None:
        """Close every connection, stop the process and join it (bounded); idempotent.

        Returns the final counters when the proxy could report them.
        """
        with self._lock:
            proc, ctrl = self._proc, self._ctrl
            if proc is None or ctrl is None:
                return self.final_stats
            deadline = time.monotonic() + timeout_s
            try:
                ctrl.send(("stop",))
                while time.monotonic() < deadline and ctrl.poll(
                        max(0.0, deadline - time.monotonic())):
                    reply = ctrl.recv()
                    if reply[0] == "stopped":
                        self.final_stats = reply[1]
                        break
            except (EOFError, OSError):
                pass
            proc.join(max(0.1, deadline - time.monotonic()))
            self._kill_locked()
        return self.final_stats

    def _kill(self) -> None:
        with self._lock:
            self._kill_locked()

    def _kill_locked(self) -> None:
        proc, ctrl = self._proc, self._ctrl
        self._proc = self._ctrl = None
        if proc is not None:
            if proc.is_alive():
                proc.terminate()
                proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
            with contextlib.suppress(ValueError):
                proc.close()
        if ctrl is not None:
            with contextlib.suppress(OSError):
                ctrl.close()

    def __enter__(self) -> DelayProxy:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return (f"DelayProxy({LOOPBACK}:{self.port} -> {self._target[0]}:{self._target[1]}, "
                f"up={self._up} ms, down={self._down} ms, {state})")


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_brokerperf.testing.delayproxy``: run a proxy until Ctrl-C."""
    ap = argparse.ArgumentParser(
        prog="python -m pytest_brokerperf.testing.delayproxy",
        description="Loopback TCP proxy adding a fixed one-way delay in each direction.",
    )
    ap.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1 (0 = any)")
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--up-ms", type=float, default=0.0, help="client → server delay")
    ap.add_argument("--down-ms", type=float, default=0.0, help="server → client delay")
    args = ap.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    if not host or not port.isdigit():
        ap.error(f"--target must be HOST:PORT, got {args.target!r}")
    with DelayProxy(args.listen, (host, int(port)), args.up_ms, args.down_ms) as proxy:
        print(f"{proxy!r}; Ctrl-C to stop", flush=True)
        try:
            while proxy.running:
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass
        stats = proxy.stop()
    if stats is not None:
        print(stats, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
