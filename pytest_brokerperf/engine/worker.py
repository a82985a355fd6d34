"""A worker process: runs a share of a scenario's producers and consumers.

Started with the ``spawn`` method (forking a process that already holds client
threads can deadlock, as Python's multiprocessing docs warn) and driven by the
coordinator over a pipe.
Inside, one *pacer* thread owns every producer (open-loop schedule, sends every due
message, services callbacks, then sleeps at most 1 ms — never a busy spin holding
the GIL) and one thread per consumer receives. Latency values go into plain
``array('q')`` buffers and are recorded into HdrHistograms in batches at each stats
snapshot, off the per-message path. A driver with a batch path (``send_many``,
``on_ack.many``: the loopback driver) gets each producer's due messages in one call and
acknowledges them at one moment; acknowledged and received batches are then accounted
as numpy arrays, with the same counts as message by message.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import random
import signal
import threading
import time
import traceback
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_brokerperf.brokers.driver import QueueFull
from pytest_brokerperf.core import header
from pytest_brokerperf.engine.delivery import AckLedger, ReceiveLedger
from pytest_brokerperf.engine.pacing import Schedule

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pytest_brokerperf.brokers.driver import (
        AckCallback,
        ConsumerClient,
        Driver,
        ProducerClient,
    )

__all__ = ["ConsumerSpec", "ProducerSpec", "WorkerAssignment", "set_clock_offset", "worker_main"]

_mono = time.monotonic_ns
#: what set_clock_offset subtracts: the stamps a driver takes itself (ack and send times
#: on its own threads, raw CLOCK_MONOTONIC) are moved by it where the worker receives them
_offset_ns = 0


def set_clock_offset(offset_ns: int) -> None:
    """Stamp on the coordinator's clock from now on: every reading this worker takes
    (send, ack and receive stamps, schedule times, the snapshot's clock) becomes its
    ``CLOCK_MONOTONIC`` minus ``offset_ns`` (engine/clock.py measured it). Set before
    any client exists; 0 (a local worker, a task on the coordinator's clock) reads the
    clock directly, with no extra call on the per-message path."""
    global _mono, _offset_ns
    _offset_ns = int(offset_ns)
    if not offset_ns:
        _mono = time.monotonic_ns
        return
    raw = time.monotonic_ns

    def shifted() -> int:
        return raw() - offset_ns

    _mono = shifted


def _boot_id() -> str | None:
    """This kernel boot's id: CLOCK_MONOTONIC readings compare only within one boot (and
    one time namespace, which the coordinator's bracket check covers)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


BOOT_ID = _boot_id()
MAX_BURST = 2000  # sends between two callback services
MAX_SLEEP_S = 0.001
#: messages packed under one send stamp on a driver's batch path: their stamp precedes
#: the hand-off by at most one chunk's packing (about 128 x 0.2 µs)
SEND_CHUNK = 128
_HDR = header.numpy_dtype()
#: received batches at least this long are accounted as arrays (below, numpy's per-call
#: overhead costs more than the per-message loop)
VECTOR_MIN = 16
#: messages up to this size have their headers read by joining them whole (see _headers)
WHOLE_JOIN_MAX = 128


def _headers(values: Sequence[bytes], lens: list[int]) -> Any:
    """The headers of ``values`` (lengths ``lens``, each at least 32 bytes) as one numpy
    record array. Small values of one size are joined whole (one C-level copy) and read
    as records of that size; larger ones through a 32-byte slice each, which reads one
    cache line of each message instead of all of it (a batch acknowledged or received
    long after it was built is no longer in the CPU cache)."""
    size = lens[0]
    if size > WHOLE_JOIN_MAX or lens.count(size) != len(lens):
        return np.frombuffer(b"".join([v[:header.HEADER_SIZE] for v in values]), dtype=_HDR)
    return np.frombuffer(b"".join(values), dtype=_record(size))["h"]


@functools.lru_cache(maxsize=16)
def _record(size: int) -> Any:
    """A whole message of ``size`` bytes as a numpy record: header ``h``, then the rest."""
    rest = size - header.HEADER_SIZE
    return np.dtype([("h", _HDR)] + ([("rest", f"V{rest}")] if rest else []))


@dataclass(frozen=True)
class ProducerSpec:
    pid: int
    topic: str


@dataclass(frozen=True)
class ConsumerSpec:
    cid: int
    topic: str
    subscription: str
    member: int = 0  # this consumer's index among its subscription's consumers
    members: int = 1


@dataclass
class WorkerAssignment:
    worker_id: int
    driver: Driver
    producers: list[ProducerSpec] = field(default_factory=list)
    consumers: list[ConsumerSpec] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    key_distributor: str = "NO_KEY"
    cpus: tuple[int, ...] | None = None
    client_prefix: str = "brokerperf"
    seed: int = 0


class _Buffers:
    """Latency buffers (µs) shared between one recording thread and the snapshotter.

    Each flush adds the thread's buffer as one more chunk of bytes: extending one growing
    array instead re-copied it at every reallocation (CPython grows an array by about
    1/16), megabytes per period at a few hundred thousand messages a second. A thread
    flushes after every batch, so a period holds tens of thousands of small chunks; the
    snapshotter joins them in one C call (:meth:`values`). Turning each into a numpy
    array and concatenating those held the GIL for tens of milliseconds per period, and
    the pacer, waiting for it, sent late: publish delay p99 of 10-15 ms on the loopback
    driver at 64,000 msg/s, from the harness alone."""

    NAMES = ("publish_latency", "publish_delay", "publish_response", "e2e_latency", "e2e_response")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shared: dict[str, list[bytes]] = {n: [] for n in self.NAMES}

    def flush(self, local: dict[str, array]) -> None:
        with self.lock:
            shared = self.shared
            for n, buf in local.items():
                if buf:
                    shared[n].append(buf.tobytes())
                    del buf[:]

    def take(self) -> dict[str, list[bytes]]:
        """This period's chunks per view (the thread's next flush starts new ones)."""
        with self.lock:
            out = self.shared
            self.shared = {n: [] for n in self.NAMES}
        return out

    @staticmethod
    def values(chunks: list[bytes]) -> Any:
        """The µs values of ``chunks`` in order, as one int64 array (one join, one view)."""
        return np.frombuffer(b"".join(chunks), dtype=np.int64)


def period_histograms(taken: list[dict[str, list[bytes]]]) -> dict[str, Any]:
    """One histogram per latency view from the chunks every thread's buffers gave up
    (:meth:`_Buffers.take`)."""
    from pytest_brokerperf.metrics.histogram import LatencyHistogram

    hists: dict[str, Any] = {}
    for name in _Buffers.NAMES:
        h = LatencyHistogram.for_metric(name)
        chunks = [c for b in taken for c in b[name]]
        if chunks:
            h.record_batch(_Buffers.values(chunks))
        hists[name] = h
    return hists


class _Counters:
    """Lifetime counters of one thread; only that thread writes them."""

    __slots__ = ("acked", "acked_bytes", "attempted", "foreign", "negative_e2e", "probe_acked",
                 "probes", "queue_full", "received", "received_bytes", "redelivered",
                 "send_errors")

    def __init__(self) -> None:
        self.attempted = 0
        self.acked = 0
        self.acked_bytes = 0
        self.send_errors = 0
        self.queue_full = 0
        self.probe_acked = 0
        self.received = 0  # distinct messages: what progress and backlog count
        self.redelivered = 0  # deliveries of a message this thread had already received
        self.received_bytes = 0  # every delivery: consume throughput
        self.foreign = 0
        self.negative_e2e = 0
        self.probes: dict[str, int] = {}


class _KeyGen:
    """OMB key distributors: NO_KEY, KEY_ROUND_ROBIN (10 000 keys), RANDOM_NANO."""

    def __init__(self, kind: str, seed: int) -> None:
        self.kind = kind
        rnd = random.Random(seed)
        alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        self.keys = [bytes(rnd.choice(alphabet) for _ in range(7)) for _ in range(10_000)]
        self._cycle = itertools.cycle(self.keys)

    def next(self) -> bytes | None:
        if self.kind == "KEY_ROUND_ROBIN":
            return next(self._cycle)
        if self.kind == "RANDOM_NANO":
            return self.keys[abs(time.perf_counter_ns()) % 10_000]
        return None


class _ProducerState:
    __slots__ = ("client", "pid", "seq", "topic")

    def __init__(self, pid: int, topic: str, client: ProducerClient) -> None:
        self.pid = pid
        self.topic = topic
        self.client = client
        self.seq = 0


class Worker:
    """The state of one worker process; methods are the coordinator's commands."""

    def __init__(self, a: WorkerAssignment) -> None:
        self.a = a
        self.errors: list[str] = []
        self.stop_event = threading.Event()
        self.producers_stop = threading.Event()
        #: set by the pacer once it saw ``producers_stop`` before a send and then, after a
        #: complete service, found nothing outstanding: no send starts after it, and every
        #: message handed to a client was acknowledged (or failed) and counted
        self.producers_idle = threading.Event()
        self.pub_buffers = _Buffers()
        self.pub_counters = _Counters()
        self.ack_ledger = AckLedger()
        self.schedule: Schedule | None = None
        self.pending_schedule: Schedule | None = None
        #: a rate change (rate, at ns) the pacer applies to its own schedule, so the
        #: slots already due at that moment are carried over, never dropped
        self.pending_rate: tuple[float, int] | None = None
        self.probe_request = threading.Event()
        self.producers: list[_ProducerState] = []
        self.producer_thread: threading.Thread | None = None
        self.consumer_threads: list[threading.Thread] = []
        self.consumer_state: list[tuple[_Counters, _Buffers, ReceiveLedger]] = []
        self.consumers_ready = 0
        self.consumers_stop = threading.Event()
        #: set: consumers pause (catch-up backlog build); each thread applies it to its
        #: client and notes the state it applied in ``consumers_paused_state``
        self.consumers_pause = threading.Event()
        self.consumers_paused_state: list[bool] = []
        self.keys = _KeyGen(a.key_distributor, a.seed)
        tails = [p[header.HEADER_SIZE:] for p in a.payloads] or [b""]
        self.tails = tails
        self._last: dict[str, int] = {}
        self._last_sample: Any = None
        self.done_producing = False

    # -- producers --------------------------------------------------------------------
    def _ack_callback(self) -> AckCallback:
        """The producers' ack callback, with everything it touches bound once: it runs
        once per acknowledged message, on the client's delivery thread. Its ``many``
        attribute takes a whole batch acknowledged at one moment (a driver's batch
        path, see :func:`~pytest_brokerperf.brokers.driver.batch_ack`)."""
        unpack, probe, mono, off = header.unpack, header.KIND_PROBE, _mono, _offset_ns
        c = self.pub_counters
        loc = self._pub_local
        lat, delay, resp = (loc["publish_latency"].append, loc["publish_delay"].append,
                            loc["publish_response"].append)
        ledger_ack = self.ack_ledger.ack

        def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
            _, _, kind, pid, seq, intended, sent = unpack(value)
            if kind == probe:
                c.probe_acked += 1
                return
            if sent_ns is not None:  # when it really left (the driver's IO thread wrote it)
                sent = sent_ns - off
            ack = mono() if latency_ns is None else sent + latency_ns
            lat((ack - sent) // 1000)
            delay((sent - intended) // 1000)
            resp((ack - intended) // 1000)
            c.acked += 1
            c.acked_bytes += len(value)
            ledger_ack(pid, seq)

        ledger_many = self.ack_ledger.ack_many
        bufs = (loc["publish_latency"], loc["publish_delay"], loc["publish_response"])

        def on_acks(values: list[bytes], ack_ns: Any = None, *, latency_ns: Any = None,
                    sent_ns: Any = None) -> None:
            """``on_ack`` for every value in ``values``, computed as arrays.

            ``ack_ns``: one acknowledgement time for the batch, or one per message;
            ``latency_ns`` (one per message, the client's own send->ack time) instead of
            ``ack_ns``; ``sent_ns`` (one per message) overrides the headers' send stamps.
            """
            if not values:
                return
            lens = list(map(len, values))
            h = _headers(values, lens)
            data = h["kind"] != probe
            n = int(data.sum())
            per = [None if a is None or np.ndim(a) == 0 else np.asarray(a, dtype=np.int64)
                   for a in (ack_ns, latency_ns, sent_ns)]
            if n < len(h):
                c.probe_acked += len(h) - n
                if not n:
                    return
                h = h[data]
                per = [None if a is None else a[data] for a in per]
                c.acked_bytes += sum(k for k, d in zip(lens, data.tolist(), strict=True) if d)
            else:
                c.acked_bytes += sum(lens)
            acks, lats, sents = per
            intended = h["intended"]
            sent = h["sent"] if sents is None else sents - off
            if lats is not None:
                ack: Any = sent + lats
            elif acks is not None:
                ack = acks - off
            elif ack_ns is not None:
                ack = int(ack_ns) - off
            else:
                raise TypeError("on_ack.many needs ack_ns or latency_ns")
            for buf, view in zip(bufs, ((ack - sent) // 1000, (sent - intended) // 1000,
                                        (ack - intended) // 1000), strict=True):
                buf.frombytes(np.asarray(view, dtype=np.int64).tobytes())
            c.acked += n
            ledger_many(h["pid"].astype(np.int64), h["seq"])

        on_ack.many = on_acks  # type: ignore[attr-defined]
        return on_ack

    def _on_error(self, value: bytes, reason: str) -> None:
        self.pub_counters.send_errors += 1
        if len(self.errors) < 20:
            self.errors.append(f"send error: {reason}")

    def create_producers(self) -> None:
        a = self.a
        self._pub_local: dict[str, array] = {n: array("q") for n in _Buffers.NAMES}
        on_ack = self._ack_callback()
        for spec in a.producers:
            client = a.driver.producer(
                spec.topic, f"{a.client_prefix}-p{spec.pid}", on_ack, self._on_error
            )
            self.producers.append(_ProducerState(spec.pid, spec.topic, client))
        if self.producers:
            self.producer_thread = threading.Thread(
                target=self._guard(self._pace), name="pacer", daemon=True
            )
            self.producer_thread.start()

    def _guard(self, fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException:
                self.errors.append(traceback.format_exc())
        return run

    def _send_probe(self) -> None:
        for p in self.producers:
            now = _mono()
            value = header.pack(header.MAGIC, header.VERSION, header.KIND_PROBE, p.pid, -1,
                                now, now) + self.tails[0]
            while True:
                try:
                    p.client.send(value, b"key")
                    break
                except QueueFull:
                    p.client.service()
                    time.sleep(0.001)

    def _pace(self) -> None:
        """The open-loop sender: every due message, then callbacks, then ≤ 1 ms sleep."""
        producers = self.producers
        nprod = len(producers)
        tails = self.tails
        ntails = len(tails)
        pack = header.pack
        magic, version, kind = header.MAGIC, header.VERSION, header.KIND_DATA
        keys = self.keys
        no_key = self.a.key_distributor == "NO_KEY"
        c = self.pub_counters
        loc = self._pub_local
        rnd = random.Random(self.a.seed + 7)
        # the driver's batch path: one send_many per producer and chunk of due messages
        batched = all(callable(getattr(p.client, "send_many", None)) for p in producers)
        rr = 0
        while not self.stop_event.is_set():
            if self.probe_request.is_set():
                self.probe_request.clear()
                self._send_probe()
            if self.pending_schedule is not None:
                self.schedule, self.pending_schedule = self.pending_schedule, None
            if self.pending_rate is not None:
                (rate, at_ns), self.pending_rate = self.pending_rate, None
                self.schedule = (self.schedule.rebased(rate, at_ns) if self.schedule is not None
                                 else Schedule(max(rate, 1.0), at_ns))
            sched = self.schedule
            # read once: a stop seen here means nothing is sent in this iteration
            stopping = self.producers_stop.is_set()
            if sched is not None and not stopping:
                now = _mono()
                due = sched.due(now)
                if due > MAX_BURST:
                    due = MAX_BURST
                c.attempted += due
                if batched and due >= VECTOR_MIN:
                    intendeds = sched.take_many(due)
                    for j in range(min(nprod, due)):  # message i goes to producer rr + i
                        self._send_batch(producers[(rr + j) % nprod], intendeds[j::nprod], rnd)
                    rr = (rr + due) % nprod
                    due = 0
                for intended in sched.take_many(due):
                    p = producers[rr]
                    rr = rr + 1 if rr + 1 < nprod else 0
                    seq = p.seq
                    p.seq = seq + 1
                    tail = tails[rnd.randrange(ntails)] if ntails > 1 else tails[0]
                    key = None if no_key else keys.next()
                    while True:
                        sent = _mono()
                        try:
                            p.client.send(pack(magic, version, kind, p.pid, seq, intended,
                                               sent) + tail, key)
                            break
                        except QueueFull:
                            c.queue_full += 1
                            p.client.service()
                            if self.stop_event.is_set() or self.producers_stop.is_set():
                                break
                            time.sleep(0.0002)
            for p in producers:
                p.client.service()
            self.pub_buffers.flush(loc)
            if stopping and not self.producers_idle.is_set() and not any(
                    p.client.queue_depth() for p in producers):
                # on this thread, between two services: no ack is half counted
                self.producers_idle.set()
            if sched is None or stopping:
                time.sleep(MAX_SLEEP_S)
                continue
            wait = (sched.next_ns() - _mono()) / 1e9
            if wait > 0:
                time.sleep(wait if wait < MAX_SLEEP_S else MAX_SLEEP_S)
        self.pub_buffers.flush(loc)

    def _send_batch(self, p: _ProducerState, intendeds: list[int], rnd: random.Random) -> None:
        """Hand ``intendeds`` (due slots, in order) to ``p`` in chunks of SEND_CHUNK, one
        ``send_many`` each; every message still carries its own sequence, intended time
        and a send stamp taken just before its chunk is packed. What the client refuses
        (queue full) is stamped and handed again after a service, as one by one."""
        pack = header.pack
        magic, version, kind, pid = header.MAGIC, header.VERSION, header.KIND_DATA, p.pid
        tails, ntails = self.tails, len(self.tails)
        tail = tails[0]
        keys, no_key = self.keys, self.a.key_distributor == "NO_KEY"
        send_many = p.client.send_many  # type: ignore[attr-defined]
        c = self.pub_counters
        todo = len(intendeds)
        all_keys = None if no_key else [keys.next() for _ in intendeds]
        start = 0
        while start < todo:
            chunk = intendeds[start:start + SEND_CHUNK]
            seq0 = p.seq
            slots = zip(range(seq0, seq0 + len(chunk)), chunk, strict=True)
            sent = _mono()
            if ntails == 1:
                values = [pack(magic, version, kind, pid, seq, intended, sent) + tail
                          for seq, intended in slots]
            else:
                values = [pack(magic, version, kind, pid, seq, intended, sent)
                          + tails[rnd.randrange(ntails)] for seq, intended in slots]
            key_list = None if all_keys is None else all_keys[start:start + len(chunk)]
            taken = send_many(values, key_list)
            p.seq = seq0 + taken
            start += taken
            if taken < len(chunk):
                c.queue_full += 1
                p.client.service()
                if self.stop_event.is_set() or self.producers_stop.is_set():
                    return
                time.sleep(0.0002)

    def stop_producers(self, flush_timeout_s: float) -> dict[str, Any]:
        """Stop sending new messages and wait (bounded) for outstanding acks.

        The pacer itself says when it is done (``producers_idle``): a client's queue depth
        read from this thread can be 0 while the pacer is about to hand over a batch it
        already decided to send, or while a serviced batch's acks are still being counted.
        A drain that starts then sees every acknowledged message received, and the
        consumers are stopped before the rest of that batch arrives: false loss."""
        self.producers_stop.set()
        deadline = time.monotonic() + flush_timeout_s
        t = self.producer_thread
        while t is not None and t.is_alive() and not self.producers_idle.wait(0.01):
            if time.monotonic() >= deadline:
                break
        outstanding = sum(p.client.queue_depth() for p in self.producers)
        stopped = t is None or self.producers_idle.is_set()
        if not stopped and t is not None and t.is_alive():
            why = (f"{outstanding} messages still unacknowledged" if outstanding else
                   "the pacer did not confirm its stop (still handing over a batch)")
            self.errors.append(
                f"worker {self.a.worker_id}: {why} after the {flush_timeout_s:g} s flush "
                "timeout: what is acknowledged after the drain may count as lost")
        return {"outstanding": outstanding, "pacer_stopped": stopped}

    # -- consumers --------------------------------------------------------------------
    def create_consumers(self, timeout_s: float = 100.0) -> None:
        """Start one thread per consumer and return once every client exists (OMB order:
        consumers are created before producers, so nothing published is missed because a
        subscription — a RabbitMQ queue, say — did not exist yet)."""
        up: list[threading.Event] = []
        for k, spec in enumerate(self.a.consumers):
            state = (_Counters(), _Buffers(), ReceiveLedger())
            self.consumer_state.append(state)
            self.consumers_paused_state.append(False)
            ready = threading.Event()
            up.append(ready)
            t = threading.Thread(
                target=self._guard(
                    lambda s=spec, st=state, r=ready, k=k: self._consume(
                        s, st[0], st[1], st[2], r, index=k)),
                name=f"consumer-{spec.cid}",
                daemon=True,
            )
            self.consumer_threads.append(t)
            t.start()
        deadline = time.monotonic() + timeout_s
        for ready, t in zip(up, self.consumer_threads, strict=True):
            while not ready.wait(0.05):
                if not t.is_alive():
                    raise RuntimeError(f"consumer thread {t.name} died while creating its "
                                       "client:\n" + "\n".join(self.errors[-3:]))
                if time.monotonic() > deadline:
                    raise RuntimeError(f"consumer {t.name} not created within {timeout_s:.0f} s")

    def _consume(self, spec: ConsumerSpec, c: _Counters, bufs: _Buffers,
                 ledger: ReceiveLedger, ready: threading.Event | None = None, *,
                 index: int = 0) -> None:
        driver = self.a.driver
        client_id = f"{self.a.client_prefix}-c{spec.cid}"
        client: ConsumerClient = driver.consumer(
            spec.topic, spec.subscription, client_id, member=spec.member, members=spec.members)
        self.consumers_ready += 1
        if ready is not None:
            ready.set()
        unpack = header.unpack
        magic_ok, probe = header.MAGIC, header.KIND_PROBE
        sub = spec.subscription
        loc: dict[str, array] = {"e2e_latency": array("q"), "e2e_response": array("q")}
        e2e_l, e2e_r = loc["e2e_latency"], loc["e2e_response"]
        e2e_l_append, e2e_r_append = e2e_l.append, e2e_r.append
        receive = ledger.receive
        pause_wanted, paused_state = self.consumers_pause, self.consumers_paused_state
        paused = False
        try:
            while not self.consumers_stop.is_set():
                if pause_wanted.is_set() != paused:
                    # between batches: every message a receive() returned is counted
                    paused = not paused
                    (client.pause if paused else client.resume)()
                    paused_state[index] = paused
                batch = client.receive(500, 0.05)
                if not batch:
                    continue
                now = _mono()
                if len(batch) >= VECTOR_MIN:
                    received, redelivered, nbytes = self._consume_batch(
                        batch, now, sub, c, ledger, e2e_l, e2e_r)
                    c.redelivered += redelivered
                    c.received += received
                    c.received_bytes += nbytes
                    bufs.flush(loc)
                    continue
                received = nbytes = 0
                for value, partition in batch:
                    if len(value) < 32:
                        c.foreign += 1
                        continue
                    magic, _, kind, pid, seq, intended, sent = unpack(value)
                    if magic != magic_ok:
                        c.foreign += 1
                        continue
                    if kind == probe:
                        c.probes[sub] = c.probes.get(sub, 0) + 1
                        continue
                    e2e = now - sent
                    if e2e <= 0:
                        c.negative_e2e += 1
                    e2e_l_append(e2e // 1000)
                    e2e_r_append((now - intended) // 1000)
                    if receive(sub, pid, seq, partition):
                        received += 1
                    else:
                        c.redelivered += 1
                    nbytes += len(value)
                # one update per batch: the snapshotter reads these between batches
                c.received += received
                c.received_bytes += nbytes
                bufs.flush(loc)
        finally:
            bufs.flush(loc)
            client.close()

    @staticmethod
    def _consume_batch(batch: list[tuple[bytes, int]], now: int, sub: str, c: _Counters,
                       ledger: ReceiveLedger, e2e_l: array, e2e_r: array
                       ) -> tuple[int, int, int]:
        """The per-message receive accounting of ``_consume`` for a whole batch as arrays
        (same counts, same views); (new messages, redeliveries, bytes)."""
        values, partitions = zip(*batch, strict=True)
        lens = list(map(len, values))
        if min(lens) < header.HEADER_SIZE:  # foreign messages too short for a header
            keep = [k for k, n in enumerate(lens) if n >= header.HEADER_SIZE]
            c.foreign += len(batch) - len(keep)
            if not keep:
                return 0, 0, 0
            values = tuple(values[k] for k in keep)
            partitions = tuple(partitions[k] for k in keep)
            lens = [lens[k] for k in keep]
        h = _headers(values, lens)
        ours = h["magic"] == header.MAGIC
        probes = ours & (h["kind"] == header.KIND_PROBE)
        data = ours & ~probes
        n_data = int(data.sum())
        parts = np.array(partitions, dtype=np.int64)
        if n_data < len(h):
            c.foreign += int(len(h) - ours.sum())
            n_probes = int(probes.sum())
            if n_probes:
                c.probes[sub] = c.probes.get(sub, 0) + n_probes
            if not n_data:
                return 0, 0, 0
            h, parts = h[data], parts[data]
            nbytes = sum(n for n, d in zip(lens, data.tolist(), strict=True) if d)
        else:
            nbytes = sum(lens)
        sent = h["sent"]
        e2e = now - sent
        c.negative_e2e += int((e2e <= 0).sum())
        e2e_l.frombytes((e2e // 1000).astype(np.int64).tobytes())
        e2e_r.frombytes(((now - h["intended"]) // 1000).astype(np.int64).tobytes())
        new = ledger.receive_many(sub, h["pid"].astype(np.int64), h["seq"], parts)
        return new, n_data - new, nbytes

    def pause_consumers(self, pause: bool, timeout_s: float = 30.0) -> dict[str, Any]:
        """Pause (or resume) every consumer and wait (bounded) until each has applied it;
        the lifetime totals at that moment."""
        if pause:
            self.consumers_pause.set()
        else:
            self.consumers_pause.clear()
        deadline = time.monotonic() + timeout_s
        while any(s != pause for s in self.consumers_paused_state):
            dead = [t.name for t in self.consumer_threads if not t.is_alive()]
            if dead:
                raise RuntimeError(f"consumer thread(s) {dead} died while "
                                   f"{'pausing' if pause else 'resuming'}:\n"
                                   + "\n".join(self.errors[-3:]))
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumers not {'paused' if pause else 'resumed'} "
                                   f"within {timeout_s:.0f} s")
            time.sleep(0.005)
        return self.totals()

    # -- stats ------------------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        pc = self.pub_counters
        probes: dict[str, int] = {}
        received = redelivered = received_bytes = foreign = negative = 0
        for c, _, _ in self.consumer_state:
            received += c.received
            redelivered += c.redelivered
            received_bytes += c.received_bytes
            foreign += c.foreign
            negative += c.negative_e2e
            for k, v in c.probes.items():
                probes[k] = probes.get(k, 0) + v
        return {
            "attempted": pc.attempted,
            "acked": pc.acked,
            "acked_bytes": pc.acked_bytes,
            "send_errors": pc.send_errors,
            "queue_full": pc.queue_full,
            "probe_acked": pc.probe_acked,
            "received": received,
            "redelivered": redelivered,
            "received_bytes": received_bytes,
            "foreign": foreign,
            "negative_e2e": negative,
            "probes": probes,
            "consumers_ready": self.consumers_ready,
            "queue_depth": sum(p.client.queue_depth() for p in self.producers),
        }

    def snapshot(self) -> dict[str, Any]:
        """Lifetime counters, this period's latency buffers and resource use."""
        from pytest_brokerperf.metrics.sysstats import ProcessSampler, process_resources

        if self._last_sample is None:
            self._sampler = ProcessSampler()
            self._last_sample = self._sampler.sample()
        hists = period_histograms(
            [self.pub_buffers.take()] + [b.take() for _, b, _ in self.consumer_state])
        cur = self._sampler.sample()
        prev, self._last_sample = self._last_sample, cur
        return {
            "worker": self.a.worker_id,
            "totals": self.totals(),
            "histograms": hists,
            "cpu_s": cur.cpu_s - prev.cpu_s,
            "runq_delay_s": cur.runq_delay_s - prev.runq_delay_s,
            "wall_s": (cur.wall_ns - prev.wall_ns) / 1e9,
            # RSS, open files and threads of this process: a soak's leak check
            "resources": process_resources().as_dict(),
            "errors": self._drain_errors(),
            # the clock its send and receive stamps come from, checked by the coordinator
            "clock": {"boot_id": BOOT_ID, "mono_ns": _mono()},
        }

    def _drain_errors(self) -> list[str]:
        errs, self.errors = self.errors, []
        return errs

    def final(self) -> dict[str, Any]:
        self.consumers_stop.set()
        for t in self.consumer_threads:
            t.join(timeout=30)
        self.stop_event.set()
        if self.producer_thread is not None:
            self.producer_thread.join(timeout=30)
        threads = [*self.consumer_threads,
                   *([self.producer_thread] if self.producer_thread is not None else [])]
        for th in threads:
            if th.is_alive():  # its ledger is read while it may still write
                self.errors.append(f"worker {self.a.worker_id}: thread {th.name} still running "
                                   "30 s after the stop: its last batch may be missing from "
                                   "the delivery ledgers")
        for p in self.producers:
            try:
                p.client.close()
            except Exception as exc:
                self.errors.append(f"closing producer {p.pid}: {exc}")
        return {
            "acks": self.ack_ledger.export(),
            "duplicate_acks": self.ack_ledger.duplicate_acks,
            "receipts": [ledger.export() for _, _, ledger in self.consumer_state],
            "client_stats": self.a.driver.client_stats(),
            "totals": self.totals(),
            "errors": self._drain_errors(),
        }


def worker_main(conn: Connection, assignment: WorkerAssignment) -> None:
    """Entry point of a worker process: answer the coordinator's commands until ``close``.

    Ctrl-C reaches the whole process group; the coordinator handles it and closes its
    workers (the session's watchdog kills them should it die), so a worker ignores
    SIGINT rather than print a traceback from the middle of a pipe read."""
    with contextlib.suppress(ValueError):  # not the main thread (a cluster's task)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_clock_offset(0)  # a reused process (a cluster's Python worker) starts uncorrected
    if assignment.cpus:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, assignment.cpus)
    # Imported now, not at the first snapshot: an import holds the GIL for tens of ms,
    # which would stall the pacer once load runs.
    from pytest_brokerperf.metrics.histogram import LatencyHistogram  # noqa: F401
    from pytest_brokerperf.metrics.sysstats import ProcessSampler  # noqa: F401

    w = Worker(assignment)
    while True:
        try:
            cmd, arg = conn.recv()
        except EOFError:
            break
        try:
            if cmd == "create_consumers":
                w.create_consumers()
                result: Any = None
            elif cmd == "create_producers":
                w.create_producers()
                result = None
            elif cmd == "probe":
                w.probe_request.set()
                result = None
            elif cmd == "totals":
                result = {"totals": w.totals(), "errors": w._drain_errors()}
            elif cmd == "start_load":
                rate, start_ns = arg
                w.pending_schedule = Schedule(rate, start_ns) if rate > 0 else None
                result = None
            elif cmd == "adjust_rate":
                w.pending_rate = (float(arg), _mono())
                result = None
            elif cmd == "clock":  # one NTP-style exchange: this worker's clock, now
                result = _mono()
            elif cmd == "set_clock":
                if w.producers or w.consumer_threads:
                    raise RuntimeError("the clock offset is set before any client exists")
                set_clock_offset(int(arg))
                result = None
            elif cmd == "snapshot":
                result = w.snapshot()
            elif cmd == "pause_consumers":
                result = w.pause_consumers(bool(arg))
            elif cmd == "stop_producers":
                result = w.stop_producers(arg)
            elif cmd == "final":
                result = w.final()
            elif cmd == "close":
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown worker command {cmd!r}")
            conn.send(("ok", result))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    conn.close()
