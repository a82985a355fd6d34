"""RabbitMQ producer on a ``SelectConnection`` with asynchronous publisher confirms: the
IO-loop thread, the delivery-tag ledger (:class:`ConfirmTracker`) and blocked-connection
back-pressure (see :mod:`pytest_brokerperf.brokers.rabbitmq.driver` for the design).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Sequence
from itertools import islice, repeat
from typing import Any, cast

from hdrh.histogram import HdrHistogram

from pytest_brokerperf.brokers.driver import AckCallback, ErrorCallback, QueueFull, batch_ack
from pytest_brokerperf.brokers.rabbitmq.connection import CONNECT_TIMEOUT_S, _mono, node_address
from pytest_brokerperf.brokers.rabbitmq.frames import PublishFrames
from pytest_brokerperf.core.errors import DriverError

_CLIENT_STATS: list[str] = []  # per process; one JSON document per closed producer


__all__ = ["RECONNECT_WINDOW_S", "ConfirmTracker"]


def _percentiles(h: HdrHistogram) -> dict[str, float | int]:
    """Count, p50, p99, p99.9 and max of a microsecond histogram (client statistics)."""
    return {"count": h.get_total_count(), "p50": h.get_value_at_percentile(50),
            "p99": h.get_value_at_percentile(99), "p99_9": h.get_value_at_percentile(99.9),
            "max": h.get_max_value()}

#: How long a client whose node went away (a fault, a restart) tries the cluster's
#: nodes in turn before it gives up; pika itself never reconnects.
RECONNECT_WINDOW_S = 60.0
RECONNECT_PAUSE_S = 0.5
#: acks handed to the engine as one batch from this many on (fewer: one by one, which
#: is cheaper than numpy's per-call cost for a handful)
BATCH_MIN = 16


class ConfirmTracker:
    """Publisher-confirm bookkeeping: delivery tag → (message, send time in ns).

    Delivery tags on a confirm-mode channel count 1, 2, 3 … in publish order, so the
    outstanding messages are a deque indexed by ``tag - first``. ``settle(tag,
    multiple=True)`` pops every tag up to ``tag``; a single settle marks one slot and
    pops the settled prefix. Tag 0 with ``multiple`` settles everything outstanding
    (AMQP 0-9-1). Settling a tag twice, or a tag never published, returns nothing.
    """

    __slots__ = ("_first", "_next", "_pending", "_slots")

    def __init__(self) -> None:
        self._first = 1  # tag of _slots[0]
        self._next = 1  # tag the next publish gets
        self._slots: deque[tuple[bytes, int] | None] = deque()
        self._pending = 0

    def add(self, value: bytes, sent_ns: int) -> int:
        """Record a publish; returns its delivery tag."""
        tag = self._next
        self._next = tag + 1
        self._slots.append((value, sent_ns))
        self._pending += 1
        return tag

    def add_many(self, values: list[bytes], sent_ns: int) -> None:
        """Record a burst published in order at one moment (tags ``next_tag`` onwards)."""
        self._next += len(values)
        self._slots.extend(zip(values, repeat(sent_ns)))
        self._pending += len(values)

    def settle(self, tag: int, multiple: bool) -> list[tuple[bytes, int]]:
        """The (message, send time) pairs an ack or nack of ``tag`` settles."""
        slots = self._slots
        out: list[tuple[bytes, int]]
        if multiple:
            n = len(slots) if tag == 0 else min(tag - self._first + 1, len(slots))
            if n <= 0:
                return []
            if n == len(slots):
                got = list(slots)
                slots.clear()
            else:
                got = list(islice(slots, n))
                for _ in range(n):
                    slots.popleft()
            # slots a single settle already took are None
            out = ([x for x in got if x is not None] if None in got
                   else cast("list[tuple[bytes, int]]", got))
            self._first += n
        else:
            idx = tag - self._first
            if idx < 0 or idx >= len(slots):
                return []
            item = slots[idx]
            if item is None:
                return []
            out = [item]
            slots[idx] = None
            while slots and slots[0] is None:
                slots.popleft()
                self._first += 1
        self._pending -= len(out)
        return out

    def settle_all(self) -> list[tuple[bytes, int]]:
        """Everything outstanding (the channel is gone); the tracker is empty afterwards."""
        out = [x for x in self._slots if x is not None]
        self._first += len(self._slots)
        self._slots.clear()
        self._pending = 0
        return out

    @property
    def next_tag(self) -> int:
        return self._next

    def __len__(self) -> int:
        return self._pending


class _RabbitProducer:
    """Async-confirm publisher: pacer-side ``send``/``service``, pika in its own thread."""

    def __init__(
        self,
        params: Any,
        exchange: str,
        routing_keys: list[str],
        persistent: bool,
        on_ack: AckCallback,
        on_error: ErrorCallback,
        max_pending: int,
        name: str,
        failover: Sequence[Any] = (),
    ) -> None:
        import pika

        self._params = params
        #: this client's node first, then the cluster's other nodes, tried in turn
        #: when a connection that was up is lost
        self._nodes = [params, *failover]
        self._node = params  # the node of the current (or last) connection
        self._connected_once = False
        self._reconnecting = False  # written by the IO thread, read by the pacer
        self._lost_at = 0.0
        self._exchange = exchange
        self._keys = routing_keys
        self._nkeys = len(routing_keys)
        self._rr = 0
        self._props = pika.BasicProperties(delivery_mode=2 if persistent else 1)
        self._on_ack = on_ack
        self._on_acks = batch_ack(on_ack)
        self._on_error = on_error
        self._max_pending = max_pending
        self.name = name
        # pacer -> IO thread: bursts of (values, routing keys, queued at ns)
        self._out: deque[tuple[list[bytes], list[str], int]] = deque()
        self._wake_pending = False
        # IO thread -> pacer: settled messages as (value, wire send ns) pairs, the
        # confirm's arrival ns, and None (acked) or the error
        self._done: deque[tuple[list[tuple[bytes, int]], int, str | None]] = deque()
        self._frames: PublishFrames | None = None  # IO-thread-owned, per channel
        self._in_flight = 0  # pacer-owned: sent and not yet reported back
        self._tracker = ConfirmTracker()  # IO-thread-owned
        self._blocked = False
        self._failed: str | None = None
        self._closing = False
        self._conn: Any = None
        self._channel: Any = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self.stats: dict[str, Any] = {
            "producer": name,
            "exchange": exchange,
            "routing_keys": len(routing_keys),
            "published": 0,
            "acked": 0,
            "nacked": 0,
            "ack_frames": 0,
            "multiple_acks": 0,
            "blocked_events": 0,
            "blocked_s": 0.0,
            "blocked_reasons": [],
            "max_in_flight": 0,
            "queue_full": 0,
            "errors": 0,
            "unconfirmed_at_connection_loss": 0,
            "home_node": node_address(params),
            "reconnects": 0,
            "reconnect_s": 0.0,
            "failed_over_to": [],
            "confirm_mode": "async",
        }
        self._blocked_since = 0.0
        #: send() -> the burst's write to the socket, per message (IO thread): the
        #: hand-off that publish latency no longer bills to the broker
        self._handoff = HdrHistogram(1, 60_000_000, 2)
        self._thread = threading.Thread(target=self._run, name=f"pika-io-{name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(CONNECT_TIMEOUT_S + 5):
            self._request_stop()
            raise DriverError(
                f"RabbitMQ producer {name}: no channel in confirm mode after "
                f"{CONNECT_TIMEOUT_S:.0f} s ({params.host}:{params.port})"
            )
        if self._failed is not None:
            self._thread.join(5)
            raise DriverError(
                f"RabbitMQ producer {name} could not connect to "
                f"{params.host}:{params.port}: {self._failed}"
            )

    # -- pacer thread ----------------------------------------------------------------
    def send(self, value: bytes, key: bytes | None) -> None:
        if self._blocked or self._in_flight >= self._max_pending:
            raise self._full()
        rk = self._keys[self._rr]
        self._rr = self._rr + 1 if self._rr + 1 < self._nkeys else 0
        self._in_flight += 1
        if self._failed is not None:
            self._done.append(([(value, 0)], 0, self._failed))
            return
        self._out.append(([value], [rk], _mono()))
        self._wake()

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        """:meth:`send` for a burst, in order, with one hand-off to the IO thread; how
        many were taken before the window of unconfirmed messages was full (the rest
        are the caller's to hand again). Routing keys go round-robin as in ``send``."""
        if self._blocked:
            self.stats["queue_full"] += 1
            return 0
        room = self._max_pending - self._in_flight
        if room <= 0:
            self.stats["queue_full"] += 1
            return 0
        if len(values) > room:
            values = values[:room]
        n = len(values)
        nkeys, rr = self._nkeys, self._rr
        if nkeys == 1:
            rks = [self._keys[0]] * n
        else:
            ks = self._keys
            rks = [ks[(rr + i) % nkeys] for i in range(n)]
            self._rr = (rr + n) % nkeys
        self._in_flight += n
        if self._failed is not None:
            self._done.append(([(v, 0) for v in values], 0, self._failed))
            return n
        self._out.append((values, rks, _mono()))
        self._wake()
        return n

    def _full(self) -> QueueFull:
        self.stats["queue_full"] += 1
        return QueueFull(
            "RabbitMQ connection blocked (resource alarm)"
            if self._blocked
            else f"{self._in_flight} messages await a publisher confirm"
        )

    def _wake(self) -> None:
        """Ask the IO loop to drain the queue, once per drain."""
        if not self._wake_pending and not self._reconnecting:
            # (while reconnecting, sends wait in the queue: the new channel drains it)
            self._wake_pending = True
            try:
                self._conn.ioloop.add_callback_threadsafe(self._drain)
            except Exception as exc:  # IO loop already gone
                self._wake_pending = False
                if not self._reconnecting:
                    self._failed = self._failed or f"connection unusable: {exc}"

    def service(self) -> None:
        """Hand the settled messages to the engine: acks of 16 or more at once through
        its batch callback (one ack time per confirm frame, each message's own send
        time), fewer one by one, errors one by one."""
        done = self._done
        if not done:
            if self._failed is not None and self._out:
                self._fail_queued()
            return
        ack, err, acks = self._on_ack, self._on_error, self._on_acks
        values: list[bytes] = []
        sents: list[int] = []
        ack_times: list[int] = []
        n = 0
        pop = done.popleft
        while done:
            items, at, error = pop()
            n += len(items)
            if error is not None:
                for value, _ in items:
                    err(value, error)
            elif len(items) == 1:
                value, sent = items[0]
                values.append(value)
                sents.append(sent)
                ack_times.append(at)
            else:
                vs, ss = zip(*items, strict=True)
                values += vs
                sents += ss
                ack_times += [at] * len(items)
        self._in_flight -= n
        if acks is not None and len(values) >= BATCH_MIN:
            acks(values, ack_times, sent_ns=sents)
        else:
            for value, sent, at in zip(values, sents, ack_times, strict=True):
                ack(value, at - sent, sent)

    def queue_depth(self) -> int:
        return self._in_flight

    def flush(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            self.service()
            if self._in_flight <= 0 or time.monotonic() >= deadline:
                return max(0, self._in_flight)
            time.sleep(0.001)

    def close(self) -> None:
        self.flush(5.0)
        self._request_stop()
        self._thread.join(10)
        self.service()
        stats = dict(self.stats)
        stats["unconfirmed_at_close"] = self._in_flight
        stats["send_handoff_us"] = _percentiles(self._handoff)
        if len(_CLIENT_STATS) < 10_000:
            _CLIENT_STATS.append(json.dumps({"rabbitmq_producer": stats}))

    def _fail_queued(self) -> None:
        reason = self._failed or "connection closed"
        while self._out:
            values, _, _ = self._out.popleft()
            self._done.append(([(v, 0) for v in values], 0, reason))

    def _request_stop(self) -> None:
        self._closing = True
        conn = self._conn
        if conn is None or self._stopped.is_set():
            return
        with contextlib.suppress(Exception):
            conn.ioloop.add_callback_threadsafe(self._close_conn)

    # -- IO thread -------------------------------------------------------------------
    def _run(self) -> None:
        import pika

        attempt = 0
        try:
            while True:
                self._node = self._nodes[attempt % len(self._nodes)]
                self._conn = pika.SelectConnection(
                    self._node,
                    on_open_callback=self._on_open,
                    on_open_error_callback=self._on_open_error,
                    on_close_callback=self._on_closed,
                )
                self._conn.add_on_connection_blocked_callback(self._on_blocked)
                self._conn.add_on_connection_unblocked_callback(self._on_unblocked)
                self._conn.ioloop.start()
                with contextlib.suppress(Exception):  # its poller and wake-up socket pair
                    self._conn.ioloop.close()
                # the loop stopped: a stop was asked, the first connection failed, or a
                # connection that was up went away (then the next node is tried)
                if self._closing or self._failed is not None or not self._reconnecting:
                    break
                if time.monotonic() - self._lost_at > RECONNECT_WINDOW_S:
                    self._failed = (f"connection lost and no node of the cluster accepted "
                                    f"a new one within {RECONNECT_WINDOW_S:.0f} s")
                    self._fail_outstanding()
                    break
                attempt += 1
                time.sleep(RECONNECT_PAUSE_S)
        except Exception as exc:
            self._failed = self._failed or f"IO loop crashed: {exc!r}"
            self._fail_outstanding()
        finally:
            self._stopped.set()
            self._ready.set()

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_open_error(self, conn: Any, err: Any) -> None:
        if not self._reconnecting:
            self._failed = str(err) or type(err).__name__
            self._ready.set()
        conn.ioloop.stop()

    def _on_channel(self, ch: Any) -> None:
        self._channel = ch
        ch.add_on_close_callback(self._on_channel_closed)
        ch.confirm_delivery(ack_nack_callback=self._on_confirm, callback=self._on_confirming)

    def _on_confirming(self, _frame: Any) -> None:
        """The channel is in confirm mode: first connection, or back after a loss."""
        if self._reconnecting:
            st = self.stats
            st["reconnects"] += 1
            st["failed_over_to"].append(node_address(self._node))
            st["reconnect_s"] = round(st["reconnect_s"] + time.monotonic() - self._lost_at, 3)
            self._reconnecting = False
            self._drain()  # what the pacer queued meanwhile, with its intended times
        self._connected_once = True
        self._ready.set()

    def _on_channel_closed(self, ch: Any, reason: Any) -> None:
        import pika

        if self._closing:
            pass
        elif isinstance(reason, pika.exceptions.ChannelClosedByBroker):
            self._failed = self._failed or f"channel closed by the broker: {reason}"
            self._fail_outstanding()
        else:
            return  # the connection went away: _on_closed decides
        conn = self._conn
        if conn is not None and conn.is_open:
            conn.close()

    def _on_closed(self, conn: Any, reason: Any) -> None:
        if not self._closing and self._failed is None and self._connected_once:
            # the node went away (a fault, a restart): what awaited a confirm may or may
            # not have been stored — a send error, never an acknowledgement; what the
            # pacer queues meanwhile waits for the next node
            if not self._reconnecting:
                self._reconnecting = True
                self._lost_at = time.monotonic()
            self._channel = None
            unconfirmed = self._tracker.settle_all()
            self.stats["unconfirmed_at_connection_loss"] += len(unconfirmed)
            self.stats["errors"] += len(unconfirmed)
            if unconfirmed:
                self._done.append((unconfirmed, 0,
                                   f"connection lost before the confirm: {reason}"))
            self._tracker = ConfirmTracker()  # a new channel numbers from 1
            conn.ioloop.stop()
            return
        if not self._closing:
            self._failed = self._failed or f"connection closed: {reason}"
        self._fail_outstanding()
        conn.ioloop.stop()

    def _close_conn(self) -> None:
        conn = self._conn
        if conn is not None and (conn.is_open or conn.is_opening):
            conn.close()
        elif conn is not None:
            conn.ioloop.stop()

    def _fail_outstanding(self) -> None:
        reason = self._failed or "connection closed before the confirm arrived"
        done = self._done
        lost = self._tracker.settle_all()
        if lost:
            done.append((lost, 0, reason))
        self.stats["errors"] += len(lost) + sum(len(b[0]) for b in self._out)
        self._fail_queued()

    def _drain(self) -> None:
        self._wake_pending = False  # before draining: a later send() wakes us again
        out = self._out
        if not out:
            return
        ch = self._channel
        if self._reconnecting:
            return  # the new channel drains the queue
        if ch is None or not ch.is_open:
            self._failed = self._failed or "channel not open"
            self._fail_outstanding()
            return
        frames = self._frames
        if frames is None or frames.channel is not ch:
            frames = self._frames = (
                PublishFrames(self._conn, ch, self._exchange, self._props)
                if PublishFrames.available(self._conn, ch) else None)
        # the whole queue as one burst, one write: the send time is that write, not the
        # queue append (the hand-off to this thread is the client's, recorded apart)
        pop = out.popleft
        bursts = [pop() for _ in range(len(out))]  # the pacer may append meanwhile
        values: list[bytes] = []
        rks: list[str] = []
        for vs, ks, _ in bursts:
            values += vs
            rks += ks
        n = len(values)
        if frames is not None:
            data, nframes = frames.encode(values, rks)
            wire = _mono()
            self._tracker.add_many(values, wire)
            frames.emit(data, nframes)
        else:  # one basic_publish per message, each written as pika writes it
            publish, add = ch.basic_publish, self._tracker.add
            exchange, props = self._exchange, self._props
            for value, rk in zip(values, rks, strict=True):
                add(value, _mono())
                publish(exchange, rk, value, props)
            wire = _mono()
        record = self._handoff.record_value
        for vs, _, queued in bursts:
            record(max(1, (wire - queued) // 1000), len(vs))
        st = self.stats
        st["published"] += n
        if len(self._tracker) > st["max_in_flight"]:
            st["max_in_flight"] = len(self._tracker)

    def _on_confirm(self, frame: Any) -> None:
        now = _mono()
        method = frame.method
        items = self._tracker.settle(method.delivery_tag, bool(method.multiple))
        st = self.stats
        st["ack_frames"] += 1
        if method.multiple:
            st["multiple_acks"] += 1
        if method.NAME == "Basic.Ack":
            st["acked"] += len(items)
            self._done.append((items, now, None))
        else:
            st["nacked"] += len(items)
            self._done.append((items, 0, "nacked by the broker (basic.nack)"))

    def _on_blocked(self, conn: Any, frame: Any) -> None:
        self._blocked = True
        self._blocked_since = time.monotonic()
        st = self.stats
        st["blocked_events"] += 1
        reason = str(getattr(frame.method, "reason", ""))
        if reason and len(st["blocked_reasons"]) < 20:
            st["blocked_reasons"].append(reason)

    def _on_unblocked(self, conn: Any, frame: Any) -> None:
        if self._blocked:
            self.stats["blocked_s"] += time.monotonic() - self._blocked_since
        self._blocked = False
