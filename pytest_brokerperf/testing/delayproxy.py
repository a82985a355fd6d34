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
import contextlib
import math
import multiprocessing
import sys
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

from pytest_brokerperf.core.errors import ProvisionError
from pytest_brokerperf.testing.delayproxy_server import LOOPBACK, ProxyStats, child_main

__all__ = ["DelayProxy", "DelayProxyError", "ProxyStats", "main"]




class DelayProxyError(ProvisionError):
    """The delay proxy process could not be started, controlled or stopped."""


# --------------------------------------------------------------------------- child side


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
            target=child_main,
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
