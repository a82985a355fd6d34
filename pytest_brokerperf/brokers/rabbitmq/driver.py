"""RabbitMQ driver on pika, with *asynchronous* publisher confirms.

Client-library facts this driver is built around (pika's and RabbitMQ's docs):

* ``BlockingChannel.confirm_delivery()`` makes every publish wait for its confirm — one
  message in flight, a closed loop that open-loop pacing cannot survive. Producers here
  use a ``SelectConnection`` whose IO loop runs in a dedicated thread per producer.
  ``send()`` only appends to a deque and, when no wake-up is pending, asks the IO loop
  to drain it (``add_callback_threadsafe``): the pacer thread never blocks on the
  network and never touches pika, which is not thread-safe.
* The IO thread publishes, keeps a delivery-tag → (message, send time) map
  (:class:`ConfirmTracker`) and settles ``Basic.Ack``/``Basic.Nack`` with
  ``multiple=True`` (every tag up to the given one). Publish latency is stamped when the
  confirm frame is processed, so it is measured to the confirm, and handed to the
  engine through a deque that ``service()`` drains on the pacer thread.
* A nack becomes ``on_error``; ``connection.blocked`` (memory or disk alarm) and a full
  window of ``maxPendingConfirms`` unconfirmed messages raise :class:`QueueFull`, which
  the verdict reports as broker back-pressure; blocked events and time are kept in the
  client statistics.
* Consumers: one ``BlockingConnection`` per consumer thread, ``basic.qos`` prefetch per
  consumer, manual acks (one ``multiple=True`` ack per received batch); streams need
  exactly that. Classic and quorum subscription queues are declared and bound by their
  consumers, as OMB does; streams belong to the topic and are created by ``admin()``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.driver import AckCallback, BrokerBacklog, ErrorCallback, QueueFull
from pytest_brokerperf.brokers.rabbitmq.config import (
    QueueSpec,
    RabbitMQDriverConfig,
    durability_of,
    owned_queue_prefix,
    subscription_queues,
    topic_queues,
)
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable, DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess

__all__ = ["ConfirmTracker", "RabbitMQDriver"]

_mono = time.monotonic_ns
CONNECT_TIMEOUT_S = 30.0
_CLIENT_STATS: list[str] = []  # per process; one JSON document per closed producer


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

    def settle(self, tag: int, multiple: bool) -> list[tuple[bytes, int]]:
        """The (message, send time) pairs an ack or nack of ``tag`` settles."""
        slots = self._slots
        out: list[tuple[bytes, int]] = []
        if multiple:
            n = len(slots) if tag == 0 else min(tag - self._first + 1, len(slots))
            if n <= 0:
                return out
            pop = slots.popleft
            for _ in range(n):
                item = pop()
                if item is not None:
                    out.append(item)
            self._first += n
        else:
            idx = tag - self._first
            if idx < 0 or idx >= len(slots):
                return out
            item = slots[idx]
            if item is None:
                return out
            out.append(item)
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


def _params(uri: str, client_config: dict[str, str], name: str) -> Any:
    import pika

    params = pika.URLParameters(uri)
    user = client_config.get("username")
    if user:
        params.credentials = pika.PlainCredentials(user, client_config.get("password", ""))
    params.client_properties = {"connection_name": name, "product": "pytest-brokerperf"}
    # A blocked connection is broker back-pressure to be measured, not an error.
    params.blocked_connection_timeout = None
    params.socket_timeout = 10
    params.stack_timeout = CONNECT_TIMEOUT_S
    return params


class _RabbitProducer:
    """Async-confirm publisher: pacer-side ``send``/``service``, pika in its own thread."""

    def __init__(self, params: Any, exchange: str, routing_keys: list[str], persistent: bool,
                 on_ack: AckCallback, on_error: ErrorCallback, max_pending: int,
                 name: str) -> None:
        import pika

        self._params = params
        self._exchange = exchange
        self._keys = routing_keys
        self._nkeys = len(routing_keys)
        self._rr = 0
        self._props = pika.BasicProperties(delivery_mode=2 if persistent else 1)
        self._on_ack = on_ack
        self._on_error = on_error
        self._max_pending = max_pending
        self.name = name
        # pacer -> IO thread
        self._out: deque[tuple[bytes, str, int]] = deque()
        self._wake_pending = False
        # IO thread -> pacer: (value, latency_ns, error or None)
        self._done: deque[tuple[bytes, int, str | None]] = deque()
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
            "producer": name, "exchange": exchange, "routing_keys": len(routing_keys),
            "published": 0, "acked": 0, "nacked": 0, "ack_frames": 0, "multiple_acks": 0,
            "blocked_events": 0, "blocked_s": 0.0, "blocked_reasons": [],
            "max_in_flight": 0, "queue_full": 0, "errors": 0, "confirm_mode": "async",
        }
        self._blocked_since = 0.0
        self._thread = threading.Thread(target=self._run, name=f"pika-io-{name}", daemon=True)
        self._thread.start()
        if not self._ready.wait(CONNECT_TIMEOUT_S + 5):
            self._request_stop()
            raise DriverError(f"RabbitMQ producer {name}: no channel in confirm mode after "
                              f"{CONNECT_TIMEOUT_S:.0f} s ({params.host}:{params.port})")
        if self._failed is not None:
            self._thread.join(5)
            raise DriverError(f"RabbitMQ producer {name} could not connect to "
                              f"{params.host}:{params.port}: {self._failed}")

    # -- pacer thread ----------------------------------------------------------------
    def send(self, value: bytes, key: bytes | None) -> None:
        if self._blocked or self._in_flight >= self._max_pending:
            self.stats["queue_full"] += 1
            raise QueueFull("RabbitMQ connection blocked (resource alarm)" if self._blocked
                            else f"{self._in_flight} messages await a publisher confirm")
        rk = self._keys[self._rr]
        self._rr = self._rr + 1 if self._rr + 1 < self._nkeys else 0
        self._in_flight += 1
        if self._failed is not None:
            self._done.append((value, 0, self._failed))
            return
        self._out.append((value, rk, _mono()))
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._conn.ioloop.add_callback_threadsafe(self._drain)
            except Exception as exc:  # IO loop already gone
                self._wake_pending = False
                self._failed = self._failed or f"connection unusable: {exc}"

    def service(self) -> None:
        done = self._done
        if not done:
            if self._failed is not None and self._out:
                self._fail_queued()
            return
        ack, err = self._on_ack, self._on_error
        n = 0
        pop = done.popleft
        while done:
            value, latency, error = pop()
            n += 1
            if error is None:
                ack(value, latency)
            else:
                err(value, error)
        self._in_flight -= n

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
        if len(_CLIENT_STATS) < 10_000:
            _CLIENT_STATS.append(json.dumps({"rabbitmq_producer": stats}))

    def _fail_queued(self) -> None:
        reason = self._failed or "connection closed"
        while self._out:
            value, _, _ = self._out.popleft()
            self._done.append((value, 0, reason))

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

        try:
            self._conn = pika.SelectConnection(
                self._params, on_open_callback=self._on_open,
                on_open_error_callback=self._on_open_error, on_close_callback=self._on_closed)
            self._conn.add_on_connection_blocked_callback(self._on_blocked)
            self._conn.add_on_connection_unblocked_callback(self._on_unblocked)
            self._conn.ioloop.start()
        except Exception as exc:
            self._failed = self._failed or f"IO loop crashed: {exc!r}"
            self._fail_outstanding()
        finally:
            self._stopped.set()
            self._ready.set()

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_open_error(self, conn: Any, err: Any) -> None:
        self._failed = str(err) or type(err).__name__
        self._ready.set()
        conn.ioloop.stop()

    def _on_channel(self, ch: Any) -> None:
        self._channel = ch
        ch.add_on_close_callback(self._on_channel_closed)
        ch.confirm_delivery(ack_nack_callback=self._on_confirm,
                            callback=lambda _frame: self._ready.set())

    def _on_channel_closed(self, ch: Any, reason: Any) -> None:
        if not self._closing:
            self._failed = self._failed or f"channel closed by the broker: {reason}"
            self._fail_outstanding()
        conn = self._conn
        if conn is not None and conn.is_open:
            conn.close()

    def _on_closed(self, conn: Any, reason: Any) -> None:
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
        for value, _ in lost:
            done.append((value, 0, reason))
        self.stats["errors"] += len(lost) + len(self._out)
        self._fail_queued()

    def _drain(self) -> None:
        self._wake_pending = False  # before draining: a later send() wakes us again
        out = self._out
        if not out:
            return
        ch = self._channel
        if ch is None or not ch.is_open:
            self._failed = self._failed or "channel not open"
            self._fail_outstanding()
            return
        publish = ch.basic_publish
        add = self._tracker.add
        exchange, props = self._exchange, self._props
        n = 0
        # pika hands each frame (method, header, body: three per message) to its
        # transport separately and the transport sends each with its own send(2).
        # Collect the frames of the whole burst and hand them over as one write: the
        # same bytes on the wire, one system call instead of 3 per message.
        conn = self._conn
        emit = getattr(conn, "_adapter_emit_data", None)
        chunks: list[bytes] = []
        if emit is not None:
            conn._adapter_emit_data = chunks.append
        try:
            while out:
                value, rk, sent = out.popleft()
                add(value, sent)
                publish(exchange, rk, value, props)
                n += 1
        finally:
            if emit is not None:
                del conn._adapter_emit_data
                if chunks:
                    emit(b"".join(chunks))
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
        done = self._done
        if method.NAME == "Basic.Ack":
            st["acked"] += len(items)
            for value, sent in items:
                done.append((value, now - sent, None))
        else:
            st["nacked"] += len(items)
            for value, _ in items:
                done.append((value, 0, "nacked by the broker (basic.nack)"))

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


class _RabbitConsumer:
    """One consumer thread's ``BlockingConnection``: prefetch, manual multiple acks."""

    def __init__(self, params: Any, exchange: str, queues: list[QueueSpec],
                 cfg: RabbitMQDriverConfig, declare: bool) -> None:
        import pika

        self._auto_ack = cfg.auto_ack
        self._buf: deque[tuple[bytes, int, int]] = deque()
        self._partition: dict[str, int] = {}
        self._queues = queues
        self._consume_args: dict[str, Any] | None = None
        self._paused = False
        # Consumers of one subscription declare its quorum queues concurrently; RabbitMQ
        # 3.10 can answer declare-ok before the queue's Raft member runs, and the
        # basic.consume that follows then kills the connection (INTERNAL_ERROR, noproc).
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                self._setup(pika, params, exchange, queues, cfg, declare)
                return
            except (pika.exceptions.AMQPConnectionError,
                    pika.exceptions.AMQPChannelError) as exc:
                self.close()
                if isinstance(exc, pika.exceptions.ProbableAuthenticationError) or (
                        time.monotonic() > deadline):
                    raise DriverError(f"RabbitMQ consumer on {[q.name for q in queues]}: "
                                      f"{exc!r}") from exc
                time.sleep(0.5)

    def _setup(self, pika: Any, params: Any, exchange: str, queues: list[QueueSpec],
               cfg: RabbitMQDriverConfig, declare: bool) -> None:
        self._partition.clear()
        self._conn = pika.BlockingConnection(params)
        ch = self._conn.channel()
        self._ch = ch
        ch.basic_qos(prefetch_count=cfg.prefetch_count, global_qos=False)
        if declare:
            args = cfg.queue_declare_arguments()
            for q in queues:
                ch.queue_declare(q.name, durable=True, exclusive=cfg.exclusive,
                                 auto_delete=False, arguments=args)
                ch.queue_bind(q.name, exchange, routing_key=q.routing_key)
            if cfg.queue_type == "QUORUM":
                # A passive declare asks the queue for its counts: it answers only once
                # the queue's Raft member runs (else the channel closes and we retry).
                for q in queues:
                    ch.queue_declare(q.name, passive=True)
        if cfg.is_stream:
            off = cfg.stream_offset
            self._consume_args = {"x-stream-offset": int(off) if off.isdigit() else off}
        self._consume()

    def _consume(self) -> None:
        for q in self._queues:
            tag = self._ch.basic_consume(q.name, self._on_message, auto_ack=self._auto_ack,
                                         arguments=self._consume_args)
            self._partition[tag] = q.partition

    def pause(self) -> None:
        """AMQP 0-9-1 has no pause: cancel the consumers (pika nacks, with requeue,
        whatever the broker pushed after the cancel) and requeue the delivered messages
        not yet handed out, so the backlog is all in the queues. With auto-ack the
        delivered messages are the broker's no more: they are handed out as usual."""
        if self._paused:
            return
        self._paused = True
        for tag in list(self._partition):
            for _, method, _, body in self._ch.basic_cancel(tag) or ():
                self._buf.append((body, self._partition.get(tag, 0), method.delivery_tag))
        if not self._auto_ack and self._buf:
            self._ch.basic_nack(self._buf[-1][2], multiple=True, requeue=True)
            self._buf.clear()

    def resume(self) -> None:
        """Consume the queues again (a classic or quorum queue keeps its messages)."""
        if self._paused:
            self._partition.clear()
            self._consume()
            self._paused = False

    def _on_message(self, ch: Any, method: Any, props: Any, body: bytes) -> None:
        self._buf.append((body, self._partition.get(method.consumer_tag, 0),
                          method.delivery_tag))

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        buf = self._buf
        if not buf:
            self._conn.process_data_events(time_limit=timeout_s)  # heartbeats too
            if not buf:
                return []
        out: list[tuple[bytes, int]] = []
        last = 0
        pop = buf.popleft
        for _ in range(min(max_messages, len(buf))):
            body, part, last = pop()
            out.append((body, part))
        if not self._auto_ack:
            self._ch.basic_ack(last, multiple=True)
        return out

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        with contextlib.suppress(Exception):
            if conn is not None and conn.is_open:
                conn.close()


class _RabbitAdmin:
    """Exchanges, streams and policies; read-back through ``rabbitmqctl`` when local."""

    def __init__(self, driver: RabbitMQDriver) -> None:
        import pika

        self._driver = driver
        params = _params(driver.uris[0], driver.endpoint.client_config, "brokerperf-admin")
        # Idle from topic creation to deletion (the whole run): no heartbeats, or the
        # broker would drop it before the topics are deleted.
        params.heartbeat = 0
        self._params = params
        self._conn = pika.BlockingConnection(params)
        self._ch = self._conn.channel()
        self._ctl = driver.ctl()
        self._created: dict[str, int] = {}
        self._policies: list[str] = []

    def _channel(self) -> Any:
        import pika

        if not self._conn.is_open:
            self._conn = pika.BlockingConnection(self._params)
            self._ch = self._conn.channel()
        elif not self._ch.is_open:
            self._ch = self._conn.channel()
        return self._ch

    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        import pika

        d = self._driver
        cfg = d.config
        for p in set(partitions):
            cfg.check_partitions(p)
        if cfg.ha_policy:
            self._check_mirroring()
        args = cfg.queue_declare_arguments()
        for name, p in zip(names, partitions, strict=True):
            ch = self._channel()
            try:
                ch.exchange_declare(name, exchange_type=cfg.exchange_type.lower(), durable=True)
                for q in topic_queues(name, p, cfg):
                    ch.queue_declare(q.name, durable=True, auto_delete=False, arguments=args)
                    ch.queue_bind(q.name, name, routing_key=q.routing_key)
            except pika.exceptions.AMQPError as exc:
                raise DriverError(f"creating RabbitMQ topic {name!r} failed: {exc!r}") from exc
            if cfg.ha_policy:
                policy = f"{name}-ha"
                assert self._ctl is not None
                self._ctl.check("rabbitmqctl", "set_policy", "--apply-to", "queues",
                                policy, "^" + _regex_escape(owned_queue_prefix(name)),
                                json.dumps(dict(cfg.ha_policy)))
                self._policies.append(policy)
            d.topic_partitions[name] = p
            self._created[name] = p

    def _check_mirroring(self) -> None:
        version = self._driver.endpoint.version
        major = int(version.split(".", 1)[0]) if version[:1].isdigit() else 0
        if major >= 4:
            raise BrokerUnavailable(
                f"classic mirrored queues (haPolicy) were removed in RabbitMQ 4.0; this "
                f"broker is {version}. Use queueType: QUORUM instead")
        if self._ctl is None:
            raise BrokerUnavailable(
                "classic mirroring (haPolicy) is set by policy, which needs rabbitmqctl "
                "access to the broker (local process mode); the remote endpoint has none")

    def delete_topics(self, names: list[str]) -> None:
        import pika

        cfg = self._driver.config
        errors: list[str] = []
        for name in names:
            p = self._created.get(name) or self._driver.topic_partitions.get(name, 1)
            try:
                ch = self._channel()
                for q in topic_queues(name, p, cfg):
                    ch.queue_delete(q.name)
                ch.exchange_delete(name)
            except pika.exceptions.AMQPError as exc:
                errors.append(f"{name}: {exc!r}")
        for policy in list(self._policies):
            if self._ctl is not None and policy.removesuffix("-ha") in names:
                self._ctl.run("rabbitmqctl", "clear_policy", policy)
                self._policies.remove(policy)
        # Subscription queues the engine never named (e.g. a crashed run): sweep by prefix.
        if self._ctl is not None:
            for row in self._queues():
                qname = str(row.get("name", ""))
                if any(qname.startswith(owned_queue_prefix(n)) for n in names):
                    with contextlib.suppress(pika.exceptions.AMQPError):
                        self._channel().queue_delete(qname)
        if errors:
            raise DriverError("deleting RabbitMQ topics failed: " + "; ".join(errors))

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]
                             ) -> list[BrokerBacklog]:
        """Ready messages of each subscription's queues (a passive declare's
        ``message_count``); empty for streams, which keep no per-consumer count."""
        cfg = self._driver.config
        if cfg.is_stream:
            return []
        out: list[BrokerBacklog] = []
        for topic, subs in subscriptions.items():
            p = self._created.get(topic, 0)
            for sub in subs:
                ready = sum(int(self._channel().queue_declare(q.name, passive=True)
                                .method.message_count)
                            for q in subscription_queues(topic, sub, p, cfg))
                out.append(BrokerBacklog(subscription=sub, messages=ready,
                                         how="messages ready in the subscription's queues"))
        return out

    def delete_groups(self, subscriptions: list[str]) -> None:
        """Delete the subscription queues (classic/quorum) of the topics created here."""
        import pika

        cfg = self._driver.config
        if cfg.is_stream:
            return
        for topic, p in self._created.items():
            for sub in subscriptions:
                if not sub.startswith(topic):
                    continue
                for q in subscription_queues(topic, sub, p, cfg):
                    with contextlib.suppress(pika.exceptions.AMQPError):
                        self._channel().queue_delete(q.name)

    def _queues(self) -> list[dict[str, Any]]:
        if self._ctl is None:
            return []
        rows = self._ctl.json("rabbitmqctl", "list_queues", "-q", "name", "type", "durable",
                              "exclusive", "auto_delete", "arguments", "policy",
                              "messages_ready")
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    def read_back(self, names: list[str]) -> dict[str, Any]:
        """Exchanges and queues as the broker reports them, plus alarms and durability."""
        d = self._driver
        cfg = d.config
        out: dict[str, Any] = {"topics": {}, "broker": {"version": d.endpoint.version}}
        for name in names:
            p = self._created.get(name) or d.topic_partitions.get(name, 1)
            out["topics"][name] = {
                "exchange": name, "exchange_type": cfg.exchange_type.lower(),
                "partitions": p, "routing_keys": cfg.routing_keys(p), "queues": {},
                "declare_arguments": cfg.queue_declare_arguments(),
                "message_persistence": cfg.message_persistence,
            }
        out["durability"] = durability_of(cfg, d.endpoint.nodes)
        if self._ctl is None:
            out["note"] = ("queue types and arguments are read with rabbitmqctl on local "
                           "brokers; this endpoint has no CLI access, so only the declared "
                           "arguments are recorded")
            return out
        from pytest_brokerperf.brokers.rabbitmq.process import read_alarms

        for q in self._queues():
            qname = str(q.get("name", ""))
            for name in names:
                if qname.startswith(owned_queue_prefix(name)):
                    row = {k: q.get(k) for k in ("type", "durable", "exclusive",
                                                 "auto_delete", "policy")}
                    row["arguments"] = _ctl_table(q.get("arguments"))
                    out["topics"][name]["queues"][qname] = row
        exchanges = self._ctl.json("rabbitmqctl", "list_exchanges", "-q", "name", "type",
                                   "durable")
        for x in exchanges if isinstance(exchanges, list) else []:
            if isinstance(x, dict) and x.get("name") in out["topics"]:
                out["topics"][x["name"]]["exchange_read_back"] = x
        out["broker"]["alarms"] = read_alarms(self._ctl)
        policies = self._ctl.json("rabbitmqctl", "list_policies", "-q")
        out["broker"]["policies"] = policies if isinstance(policies, list) else []
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._conn.is_open:
                self._conn.close()


def _ctl_table(value: Any) -> Any:
    """rabbitmqctl's AMQP table ``[[key, type, value], ...]`` as ``{key: value}``."""
    if isinstance(value, list) and all(isinstance(x, list) and len(x) == 3 for x in value):
        return {str(k): v for k, _, v in value}
    return value


def _regex_escape(text: str) -> str:
    """Escape a queue-name prefix for a policy pattern (Erlang re, PCRE-like)."""
    import re

    return re.escape(text)


@dataclass
class RabbitMQDriver:
    """Picklable factory of pika clients for one endpoint and driver config.

    ``topic_partitions`` is filled by ``admin().create_topics`` in the coordinator and
    travels to the worker processes with the driver, so producers know the topic's
    routing keys.
    """

    endpoint: BrokerEndpoint
    config: RabbitMQDriverConfig
    topic_partitions: dict[str, int] = field(default_factory=dict)
    kind: str = "rabbitmq"
    #: why catch-up runs skip on RabbitMQ streams (scenario_library/catchup.py)
    CONSUMER_PAUSE_MISSING: ClassVar[str] = (
        "a stream consumer that cancels and consumes again restarts at its "
        "x-stream-offset; stream offset tracking is not implemented yet")

    @property
    def name(self) -> str:
        return str(self.config.name)

    @property
    def CONSUMER_PAUSE(self) -> str | None:
        """How catch-up runs pause consumers: AMQP 0-9-1 has no pause, so the consumer
        is cancelled (prefetched messages requeued) and consumes again; None on streams."""
        if self.config.is_stream:
            return None
        return ("basic.cancel, delivered messages requeued (AMQP has no pause), then "
                "basic.consume again: the backlog stays in the queues")

    @property
    def uris(self) -> list[str]:
        """The endpoint's AMQP URIs (the YAML's ``amqpUris`` only without an endpoint)."""
        uris = [u.strip() for u in self.endpoint.bootstrap.split(",") if u.strip()]
        return uris or list(self.config.amqp_uris)

    @property
    def source(self) -> str:
        return self.config.source

    def topic_settings(self) -> dict[str, str]:
        return self.config.topic_settings()

    def replication_factor(self) -> int | None:
        return None  # the queue type's replicas: topic_settings() shows them

    def resets_cluster(self) -> bool:
        return False

    def with_retention(self, settings: Mapping[str, str], reason: str) -> None:
        """None: queues hold what consumers have not taken; the run's queues are deleted
        afterwards, and byte caps bound what it sends."""
        return None

    def ctl(self) -> CtlAccess | None:
        info = self.endpoint.info.get("ctl")
        if not isinstance(info, dict):
            return None
        from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess

        return CtlAccess.from_info(info)

    def _uri_for(self, client_id: str) -> str:
        uris = self.uris
        return uris[zlib.crc32(client_id.encode()) % len(uris)]

    def admin(self) -> _RabbitAdmin:
        return _RabbitAdmin(self)

    def _partitions(self, topic: str) -> int:
        p = self.topic_partitions.get(topic)
        if p is None:
            raise DriverError(
                f"RabbitMQ topic {topic!r} was not created through this driver's admin(), so "
                "its partitions (routing keys) are unknown")
        return p

    def producer(self, topic: str, client_id: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> _RabbitProducer:
        cfg = self.config
        keys = cfg.routing_keys(self._partitions(topic))
        params = _params(self._uri_for(client_id), self.endpoint.client_config, client_id)
        return _RabbitProducer(params, topic, keys, cfg.message_persistence, on_ack, on_error,
                               cfg.max_pending_confirms, client_id)

    def consumer(self, topic: str, subscription: str, client_id: str, *, member: int = 0,
                 members: int = 1) -> _RabbitConsumer:
        """``member`` of ``members`` consumers of ``subscription``.

        Classic and quorum queues are shared by all consumers of a subscription
        (competing consumers); a stream is read in full by every consumer, so the
        consumers of a subscription split the topic's partition streams (consumer k
        reads partitions j with j % members == k) instead of each reading a copy.
        """
        cfg = self.config
        p = self._partitions(topic)
        queues = subscription_queues(topic, subscription, p, cfg)
        if cfg.is_stream and members > 1:
            queues = [q for q in queues if q.partition % members == member]
        params = _params(self._uri_for(client_id), self.endpoint.client_config, client_id)
        return _RabbitConsumer(params, topic, queues, cfg, declare=not cfg.is_stream)

    def client_stats(self) -> list[str]:
        docs = list(_CLIENT_STATS)
        _CLIENT_STATS.clear()
        return docs

    def describe(self) -> dict[str, Any]:
        import pika

        cfg = self.config
        return {
            "driver": self.name,
            "client": "pika",
            "client_version": pika.__version__,
            "connection": "SelectConnection per producer (IO thread), BlockingConnection per "
                          "consumer thread",
            "publisher_confirms": "asynchronous (delivery-tag map, multiple acks)",
            "amqp_uris": [_redact_uri(u) for u in self.uris],
            "exchange_type": cfg.exchange_type,
            "queue_type": cfg.queue_type,
            "message_persistence": cfg.message_persistence,
            "delivery_mode": 2 if cfg.message_persistence else 1,
            "prefetch_count": cfg.prefetch_count,
            "auto_ack": cfg.auto_ack,
            "max_pending_confirms": cfg.max_pending_confirms,
            "stream_offset": cfg.stream_offset if cfg.is_stream else None,
            "queue_arguments": cfg.queue_declare_arguments(),
            "ha_policy": dict(cfg.ha_policy) or None,
            "durability": durability_of(cfg, self.endpoint.nodes),
            "notes": cfg.notes(),
            "omb_driver_yaml": self.driver_yaml(),
        }

    def driver_yaml(self) -> dict[str, Any]:
        doc = self.config.to_omb_dict()
        doc["amqpUris"] = [_redact_uri(u) for u in self.uris]
        return doc


def _redact_uri(uri: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
