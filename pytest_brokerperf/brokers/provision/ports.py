"""Free loopback TCP ports for locally started brokers.

Ports are picked *below* the kernel's ephemeral range when possible: a port taken
from the ephemeral range with ``bind(0)`` can be grabbed by any outgoing client
connection (the benchmark opens many) between the moment we pick it and the moment
the broker binds it. Ports handed out by this process are remembered for a while so
two brokers started back to back never get the same port even before either binds.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable

__all__ = [
    "LOOPBACK",
    "ephemeral_port_range",
    "free_port",
    "free_ports",
    "port_open",
    "wait_for_port",
]

LOOPBACK = "127.0.0.1"

_LOW_PORT = 20000  # well above common service ports, below Linux' default 32768
_REMEMBER_S = 600.0  # how long a handed-out port stays reserved in this process
_lock = threading.Lock()
_handed_out: dict[int, float] = {}


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's ephemeral (client-side) port range, ``(32768, 60999)`` if unknown."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            lo, hi = (int(x) for x in fh.read().split()[:2])
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _can_bind(port: int, host: str) -> bool:
    """True if nothing listens on or is bound to ``host:port`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _os_assigned_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port(host: str = LOOPBACK, *, exclude: set[int] | frozenset[int] = frozenset()) -> int:
    """Return a TCP port on ``host`` that is free now and not handed out recently.

    There is always a window between this check and the server's ``bind``; callers
    that start a server should be ready to retry with a new port on "address in use".
    """
    now = time.monotonic()
    lo, _hi = ephemeral_port_range()
    top = min(lo, 65536)
    with _lock:
        for p, t in list(_handed_out.items()):
            if now - t > _REMEMBER_S:
                del _handed_out[p]
        taken = set(_handed_out) | set(exclude)
        rng = random.Random()
        if top - _LOW_PORT >= 1000:
            for _ in range(200):
                port = rng.randrange(_LOW_PORT, top)
                if port not in taken and _can_bind(port, host):
                    _handed_out[port] = now
                    return port
        for _ in range(50):  # fall back to what the kernel hands out
            port = _os_assigned_port(host)
            if port not in taken:
                _handed_out[port] = now
                return port
    raise OSError(f"no free TCP port found on {host}")


def free_ports(
    n: int, host: str = LOOPBACK, *, exclude: set[int] | frozenset[int] = frozenset()
) -> list[int]:
    """Return ``n`` distinct free ports on ``host``, none of them in ``exclude``."""
    ports: list[int] = []
    for _ in range(n):
        ports.append(free_port(host, exclude=set(exclude) | set(ports)))
    return ports


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a TCP connect to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(
    host: str,
    port: int,
    timeout: float,
    *,
    interval: float = 0.2,
    alive: Callable[[], bool] | None = None,
) -> bool:
    """Poll until ``host:port`` accepts connections; False on timeout or when ``alive()`` is False.

    ``alive`` lets the caller stop waiting as soon as the server process has died,
    instead of burning the whole timeout.
    """
    deadline = time.monotonic() + timeout
    while True:
        if port_open(host, port, timeout=min(1.0, max(0.05, deadline - time.monotonic()))):
            return True
        if alive is not None and not alive():
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
