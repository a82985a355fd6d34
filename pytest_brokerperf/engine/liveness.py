"""Is the remote cluster still there? Mid-run loss detection for ``--brokerperf-provision=remote``.

A local broker's death is seen as its process exiting (``process.check_watched``) or,
in container mode, as its container no longer running (``container_watch``). A remote
cluster runs nowhere near: when it goes away (crash, network cut), the clients retry
quietly and the run would go on measuring 0 msg/s to its end. The coordinator asks
:meth:`RemoteWatch.check` twice a second (off the clients' hot path: no per-message
cost) with the clients' lifetime counters. While messages are acknowledged or received
the cluster is evidently there and nothing else happens. Once they stop moving, a
background thread opens a TCP connection to each of the cluster's addresses every
:data:`PROBE_INTERVAL_S` (short timeout, closed at once: nothing is sent) until they
move again. So a healthy run opens no probe connection at all: brokers log every
connection (Pulsar's ``New connection from``, RabbitMQ's connection events), and a
probe a second would fill a production cluster's logs. The run stops with
:class:`ClusterLost` only when

* **every** address failed to answer, continuously, for at least :data:`REMOTE_LOSS_S`
  (a blip shorter than that, or one node of several down, never stops a run), and
* no message was acknowledged or received in that time either (the clients' own
  counters, read from the workers once the probes say "down").

The decision is :class:`LossTracker`, a plain value with the clock passed in, so the
rules are tested without sockets or waiting.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pytest_brokerperf.core.errors import ClusterLost

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = [
    "PROBE_INTERVAL_S",
    "PROBE_TIMEOUT_S",
    "REMOTE_LOSS_S",
    "Address",
    "LossTracker",
    "RemoteWatch",
    "probe_addresses",
    "tcp_probe",
]

#: How long every address of a remote cluster must stay unreachable, with no message
#: acknowledged or received meanwhile, before the run stops as failed (seconds).
REMOTE_LOSS_S = 5.0
#: How often each address is probed (seconds); each probe waits at most
#: :data:`PROBE_TIMEOUT_S` for the TCP handshake.
PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 1.0

#: The port a URL's scheme implies when it names none.
_DEFAULT_PORTS = {"pulsar": 6650, "pulsar+ssl": 6651, "amqp": 5672, "amqps": 5671,
                  "http": 80, "https": 443}

#: (host, port)
Address = tuple[str, int]
#: probe(address, timeout_s) -> None when it answered, else why not
Probe = Callable[[Address, float], str | None]


def _host_port(text: str, scheme: str | None) -> Address | None:
    """``host:port`` (or ``[v6]:port``) → ``(host, port)``; the scheme's default port
    when none is given; None when no port can be known."""
    text = text.strip().rsplit("@", 1)[-1].split("/", 1)[0]
    if not text:
        return None
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    if port and port.isdigit():
        return host, int(port)
    default = _DEFAULT_PORTS.get(scheme or "")
    return (host, default) if default is not None else None


def probe_addresses(endpoint: BrokerEndpoint) -> tuple[Address, ...]:
    """Every address the run's clients may connect to: the client address string
    (Kafka ``host:port`` list, Pulsar service URL with one or several hosts, AMQP URI
    list) and, for Kafka, the brokers the cluster advertised when it was reached
    (``info.brokers``: clients talk to those after the bootstrap). Order kept, no
    duplicates."""
    out: list[Address] = []
    scheme: str | None = None
    for item in endpoint.bootstrap.split(","):
        if "://" in item:
            parts = urlsplit(item.strip())
            scheme = parts.scheme.lower()
            item = parts.netloc
        addr = _host_port(item, scheme)
        if addr is not None and addr not in out:
            out.append(addr)
    for broker in endpoint.info.get("brokers") or ():
        addr = _host_port(str(broker).partition("@")[2], None)
        if addr is not None and addr not in out:
            out.append(addr)
    return tuple(out)


def tcp_probe(address: Address, timeout_s: float) -> str | None:
    """Open and close a TCP connection to ``address``: None when it answered, else the
    error (``ConnectionRefusedError: [Errno 111] Connection refused``, ``TimeoutError``)."""
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _fmt(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class LossTracker:
    """The rules, on times passed in (seconds on one monotonic clock).

    :meth:`observe` takes one round of probe results; :meth:`decide` is asked between
    stats periods with a way to read the clients' lifetime counters, and says whether
    the cluster is lost. The counters are read only while every address is down.
    """

    kind: str
    bootstrap: str
    bound_s: float = REMOTE_LOSS_S
    #: when the current "every address down" streak began (None: something answers)
    down_since: float | None = None
    #: the latest error of each address during the streak
    errors: dict[str, str] = field(default_factory=dict)
    #: (acked, received) and when they were read, during the streak
    _counts: tuple[int, int] | None = None
    _counted_at: float = 0.0

    def observe(self, at_s: float, results: Mapping[Address, str | None]) -> None:
        """One probe round: any address that answered ends a streak."""
        if not results or any(err is None for err in results.values()):
            self.down_since, self._counts = None, None
            self.errors.clear()
            return
        if self.down_since is None:
            self.down_since = at_s
        self.errors.update({_fmt(a): str(err) for a, err in results.items()})

    def decide(self, now_s: float, counts: Callable[[], Mapping[str, int]]) -> ClusterLost | None:
        """The error to stop the run with, or None: every address down for ``bound_s``
        and no acknowledgement or receive in the last ``bound_s`` of that."""
        if self.down_since is None:
            return None
        if self._counts is None:  # the streak's first look: the counters now
            self._counts, self._counted_at = self._read(counts), now_s
            return None
        if now_s - max(self.down_since, self._counted_at) < self.bound_s:
            return None
        current = self._read(counts)
        if current != self._counts:  # messages still move: the probes are not the story
            self._counts, self._counted_at = current, now_s
            return None
        return self._error(now_s)

    @staticmethod
    def _read(counts: Callable[[], Mapping[str, int]]) -> tuple[int, int]:
        c = counts()
        return int(c.get("acked", 0)), int(c.get("received", 0))

    def _error(self, now_s: float) -> ClusterLost:
        assert self.down_since is not None
        down = now_s - self.down_since
        tried = "; ".join(f"{a}: {e}" for a, e in self.errors.items())
        acked, received = self._counts or (0, 0)
        return ClusterLost(
            f"the remote {self.kind} cluster at {self.bootstrap} stopped answering during "
            f"the run: none of its {len(self.errors)} address(es) accepted a TCP connection "
            f"for {down:.1f} s ({tried}), and no message was acknowledged or received in "
            f"the last {self.bound_s:g} s (lifetime totals: {acked} acknowledged, "
            f"{received} received); the run stopped after {self.bound_s:g} s without the "
            "cluster (REMOTE_LOSS_S, docs/how-to/remote.md). Check that the cluster is up "
            "and the network path to it, then run again")


class RemoteWatch:
    """Probes a remote cluster's addresses from a background thread; :meth:`check`
    raises :class:`ClusterLost` when :class:`LossTracker` says so. ``probe`` and
    ``clock`` are replaceable for tests (:meth:`probe_once` runs a round in the caller)."""

    def __init__(self, endpoint: BrokerEndpoint, *, probe: Probe = tcp_probe,
                 clock: Callable[[], float] = time.monotonic,
                 interval_s: float = PROBE_INTERVAL_S, timeout_s: float = PROBE_TIMEOUT_S,
                 bound_s: float = REMOTE_LOSS_S) -> None:
        self.addresses = probe_addresses(endpoint)
        self.tracker = LossTracker(endpoint.kind, endpoint.bootstrap, bound_s=bound_s)
        self._probe, self._clock = probe, clock
        self._interval_s, self._timeout_s = interval_s, timeout_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: set while the clients' counters stand still: only then are addresses probed
        self.stalled = threading.Event()
        self._moved: tuple[int, int] | None = None
        self.probes = 0  # probe connections opened (the record of how quiet it stayed)
        self._thread: threading.Thread | None = None

    @classmethod
    def for_endpoint(cls, endpoint: BrokerEndpoint | None) -> RemoteWatch | None:
        """A watch for a remote endpoint with addresses to probe; None otherwise (local
        brokers are watched through their processes)."""
        if endpoint is None or endpoint.mode != "remote" or endpoint.dry_run:
            return None
        watch = cls(endpoint, interval_s=PROBE_INTERVAL_S, timeout_s=PROBE_TIMEOUT_S,
                    bound_s=REMOTE_LOSS_S)
        return watch if watch.addresses else None

    def probe_once(self) -> None:
        """Probe every address once and hand the round to the tracker."""
        results = {a: self._probe(a, self._timeout_s) for a in self.addresses}
        with self._lock:
            self.probes += len(results)
            self.tracker.observe(self._clock(), results)

    def start(self) -> RemoteWatch:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="brokerperf-remote-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """End the probe thread (bounded by one probe round); idempotent."""
        self._stop.set()
        self.stalled.set()  # wakes the thread
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self._timeout_s * len(self.addresses) + self._interval_s + 1)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.stalled.wait(self._interval_s) or self._stop.is_set():
                continue
            self.probe_once()
            self._stop.wait(self._interval_s)

    def check(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Raise :class:`ClusterLost` once the cluster counts as lost. Counters that
        moved since the last check end any probing (and any streak of failed probes);
        counters standing still start it."""
        now = LossTracker._read(counts)
        moved, self._moved = now != self._moved, now
        with self._lock:
            if moved:
                self.stalled.clear()
                self.tracker.observe(self._clock(), {})  # something answered: no streak
                return
            self.stalled.set()
            lost = self.tracker.decide(self._clock(), lambda: {"acked": now[0],
                                                               "received": now[1]})
        if lost is not None:
            raise lost
