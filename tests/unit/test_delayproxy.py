"""The delay proxy injects exactly the delay it is told to, and cleans up after itself."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from pytest_brokerperf.testing.delayproxy import DelayProxy, ProxyStats

LOOPBACK = "127.0.0.1"


class EchoServer:
    """Threaded TCP echo server on 127.0.0.1; echoes until EOF, then closes."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(256)
        self.listener.settimeout(0.1)
        self.address: tuple[str, int] = self.listener.getsockname()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self.resets = 0
        self.eofs = 0
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            c.setblocking(True)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            with self._lock:
                self._socks.append(c)
                self._threads.append(t)
            t.start()

    def _serve(self, c: socket.socket) -> None:
        try:
            while True:
                data = c.recv(1 << 16)
                if not data:
                    with self._lock:
                        self.eofs += 1
                    break
                c.sendall(data)
        except OSError:
            with self._lock:
                self.resets += 1
        finally:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(2)
        self.listener.close()
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(2)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[DelayProxy]:
    with DelayProxy(0, echo.address) as p:
        yield p


def _connect(port: int) -> socket.socket:
    s = socket.create_connection((LOOPBACK, port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError(f"EOF after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _rtt_median_ms(s: socket.socket, n: int) -> float:
    msg = b"p" * 64
    samples = []
    for _ in range(n):
        t0 = time.monotonic_ns()
        s.sendall(msg)
        _recv_exactly(s, len(msg))
        samples.append((time.monotonic_ns() - t0) / 1e6)
        time.sleep(0.002)  # an idle gap like a paced producer's, same at every delay
    return statistics.median(samples)


def _wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _rtt_misses(proxy: DelayProxy) -> list[str]:
    """One pass: baseline, three delays, back to zero; what missed the tolerance."""
    s = _connect(proxy.port)
    try:
        _rtt_median_ms(s, 20)  # warm up the path
        base = _rtt_median_ms(s, 150)
        rows = []
        for up, down in [(5.0, 0.0), (20.0, 0.0), (0.0, 10.0)]:
            proxy.set_delay(up, down)
            measured = _rtt_median_ms(s, 100) - base
            rows.append((up, down, measured))
        proxy.set_delay(0, 0)
        again = _rtt_median_ms(s, 100)
    finally:
        s.close()
    misses = []
    for up, down, shift in rows:
        injected = up + down
        tol = max(0.10 * injected, 0.3)
        if abs(shift - injected) > tol:
            misses.append(f"delay up={up} down={down}: RTT shifted {shift:.3f} ms, expected "
                          f"{injected} ± {tol:.3f} ms (baseline {base:.3f} ms); all: {rows}")
    # Going back to zero delay restores the baseline: set_delay really is dynamic.
    if abs(again - base) > 0.3:
        misses.append(f"back at zero delay the RTT is {again:.3f} ms, baseline {base:.3f} ms")
    return misses


def test_rtt_shift_equals_injected_delay(proxy: DelayProxy) -> None:
    # Up to three passes: a pass robbed by the hypervisor (steal time at the harness's
    # host-noise limit) says nothing; a real timing error misses every quiet pass.
    from pytest_brokerperf.judge.verdict import Thresholds
    from pytest_brokerperf.metrics.sysstats import cpu_snapshot, system_cpu_delta

    attempts: list[tuple[float, list[str]]] = []
    for _ in range(3):
        before = cpu_snapshot()
        misses = _rtt_misses(proxy)
        attempts.append((system_cpu_delta(before, cpu_snapshot()).steal_share, misses))
        if not misses:
            return
    if all(steal >= Thresholds().steal_share for steal, _ in attempts):
        pytest.skip("host too noisy: hypervisor steal "
                    + ", ".join(f"{steal:.1%}" for steal, _ in attempts) + " in every pass")
    raise AssertionError("\n".join(f"pass with steal {steal:.1%}: " + "; ".join(m)
                                    for steal, m in attempts))


def test_delay_set_at_construction_and_stats(echo: EchoServer) -> None:
    with DelayProxy(0, echo.address, delay_up_ms=3.0, delay_down_ms=2.0) as p:
        assert p.delays_ms == (3.0, 2.0)
        s = _connect(p.port)
        try:
            t0 = time.monotonic()
            s.sendall(b"x" * 1000)
            _recv_exactly(s, 1000)
            rtt = time.monotonic() - t0
            assert rtt >= 0.005
        finally:
            s.close()
        st = p.stats()
        assert isinstance(st, ProxyStats)
        assert st.bytes_up == 1000
        assert st.bytes_down == 1000
        assert st.connections_total == 1
        assert st.delay_up_ms == 3.0 and st.delay_down_ms == 2.0
        # The proxy's own lateness (send time − arrival − delay) is measured, and never
        # more than the client saw beyond the injected delays (one clock): how small it
        # is depends on the host's load, which a unit test must not bet on (a busy CI
        # minute measured 2.9 ms); test_fidelity prints it beside every run
        assert st.late_mean_us_up >= 0 and st.late_mean_us_down >= 0
        late_s = (st.late_mean_us_up + st.late_mean_us_down) / 1e6
        assert (3.0 + 2.0) / 1e3 + late_s <= rtt, (st, rtt)


def test_many_concurrent_connections(proxy: DelayProxy) -> None:
    proxy.set_delay(2.0, 1.0)
    n_conn, n_msgs = 60, 20
    errors: list[str] = []
    rtts: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(n_conn)

    def client(i: int) -> None:
        try:
            with _connect(proxy.port) as s:
                start.wait(10)
                for j in range(n_msgs):
                    msg = f"conn{i:03d}-msg{j:03d}".encode() * 10
                    t0 = time.monotonic()
                    s.sendall(msg)
                    got = _recv_exactly(s, len(msg))
                    dt = time.monotonic() - t0
                    if got != msg:
                        errors.append(f"conn {i} msg {j}: wrong bytes")
                    with lock:
                        rtts.append(dt)
        except Exception as exc:
            errors.append(f"conn {i}: {exc!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_conn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    assert len(rtts) == n_conn * n_msgs
    assert min(rtts) >= 0.003  # no message skipped the delay
    assert _wait_for(lambda: proxy.stats().connections_open == 0)
    st = proxy.stats()
    assert st.connections_total == n_conn
    assert st.bytes_up == st.bytes_down == sum(
        len(f"conn{i:03d}-msg{j:03d}".encode() * 10) for i in range(n_conn) for j in range(n_msgs)
    )


def test_large_payload_keeps_byte_order(proxy: DelayProxy) -> None:
    proxy.set_delay(1.0, 1.0)
    payload = os.urandom(24 * 1024 * 1024)  # far above the socket buffers and queue budget
    received = bytearray()

    with _connect(proxy.port) as s:

        def reader() -> None:
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return
                received.extend(chunk)

        t = threading.Thread(target=reader)
        t.start()
        view = memoryview(payload)
        for off in range(0, len(payload), 100_003):  # odd sizes: chunk boundaries move
            s.sendall(view[off:off + 100_003])
        s.shutdown(socket.SHUT_WR)  # half-close: the echo server echoes the rest, then EOF
        t.join(60)
        assert not t.is_alive()
    assert len(received) == len(payload)
    assert received == payload


def test_half_close_is_forwarded_after_the_data(proxy: DelayProxy) -> None:
    proxy.set_delay(5.0, 0.0)
    with _connect(proxy.port) as s:
        s.sendall(b"last words")
        t0 = time.monotonic()
        s.shutdown(socket.SHUT_WR)
        assert _recv_exactly(s, 10) == b"last words"
        assert s.recv(10) == b""  # the server's EOF came back through the proxy
        assert time.monotonic() - t0 >= 0.004
    assert _wait_for(lambda: proxy.stats().connections_open == 0)


def test_client_reset_is_handled(proxy: DelayProxy, echo: EchoServer) -> None:
    for _ in range(5):
        s = _connect(proxy.port)
        s.sendall(b"hello")
        _recv_exactly(s, 5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    assert _wait_for(lambda: proxy.stats().connections_open == 0)
    # The proxy still works afterwards.
    with _connect(proxy.port) as s:
        s.sendall(b"still here")
        assert _recv_exactly(s, 10) == b"still here"


def test_server_reset_reaches_client(echo: EchoServer) -> None:
    # A server that accepts, reads a little and resets the connection.
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind((LOOPBACK, 0))
    ls.listen(4)

    def rude() -> None:
        c, _ = ls.accept()
        c.recv(10)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()

    t = threading.Thread(target=rude)
    t.start()
    try:
        with DelayProxy(0, ls.getsockname()) as p, _connect(p.port) as s:
            s.sendall(b"hi")
            s.settimeout(10)
            try:
                data = s.recv(10)
            except ConnectionResetError:
                data = b""
            assert data == b""
            assert _wait_for(lambda: p.stats().connections_open == 0)
    finally:
        t.join(10)
        ls.close()


def test_unreachable_target_closes_client() -> None:
    # bound and never listening for the whole test: connections to it are refused, and
    # no other process can take the port meanwhile (a closed port could be reused)
    with socket.socket() as tmp:
        tmp.bind((LOOPBACK, 0))
        dead_port = tmp.getsockname()[1]
        with DelayProxy(0, (LOOPBACK, dead_port)) as p:
            # On loopback the proxy can accept and reset the connection before connect()
            # returns to Python: connect() then fails with EPIPE/ECONNRESET. Either way the
            # client was closed, which is what this test is about.
            try:
                s = _connect(p.port)
            except (BrokenPipeError, ConnectionResetError):
                pass
            else:
                with s:
                    s.settimeout(10)
                    with contextlib.suppress(ConnectionResetError):
                        assert s.recv(10) == b""
            assert _wait_for(lambda: p.stats().connections_open == 0)
            assert _wait_for(lambda: p.stats().connections_total >= 1)


def test_stop_leaves_no_threads_or_processes(echo: EchoServer) -> None:
    before = {t.ident for t in threading.enumerate()}
    p = DelayProxy(0, echo.address, delay_up_ms=50.0).start()
    pid = p.pid
    port = p.port
    assert pid is not None and p.running
    open_socks = [_connect(port) for _ in range(10)]
    try:
        for s in open_socks:
            s.sendall(b"in flight")  # still queued in the proxy when it stops
        assert _wait_for(lambda: p.stats().bytes_up == 10 * len(b"in flight"))
        t0 = time.monotonic()
        final = p.stop()
        assert time.monotonic() - t0 < 5.0
        assert final is not None and final.connections_total == 10
        assert not p.running
        assert p.stop() is final  # idempotent
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert multiprocessing.active_children() == []
        assert {t.ident for t in threading.enumerate()} <= before
        for s in open_socks:  # every client sees its connection end
            s.settimeout(5)
            try:
                while s.recv(1 << 16):
                    pass
            except ConnectionResetError:
                pass
        with pytest.raises(OSError), socket.create_connection((LOOPBACK, port), timeout=2):
            pass
    finally:
        for s in open_socks:
            s.close()


def test_invalid_arguments_and_busy_port(echo: EchoServer) -> None:
    with pytest.raises(ValueError):
        DelayProxy(0, echo.address, delay_up_ms=-1)
    with pytest.raises(ValueError):
        DelayProxy(0, echo.address, delay_down_ms=float("nan"))
    with DelayProxy(0, echo.address) as p:
        with pytest.raises(ValueError):
            p.set_delay(1.0, -2.0)
        with pytest.raises(OSError):
            DelayProxy(p.port, echo.address).start()
    assert multiprocessing.active_children() == []
