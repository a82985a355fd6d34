"""RabbitMQ consumer: one ``BlockingConnection`` per consumer thread, ``basic.qos``
prefetch, manual acks per received batch; declares and binds classic and quorum
subscription queues as OMB does. A consumer whose node goes away (a fault, a restart)
consumes again through the cluster's other nodes: pika itself never reconnects, and a
subscription nobody reads would look like lost messages.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

from pytest_brokerperf.brokers.rabbitmq.config import (
    QueueSpec,
    RabbitMQDriverConfig,
)
from pytest_brokerperf.brokers.rabbitmq.connection import CONNECT_TIMEOUT_S, node_address
from pytest_brokerperf.brokers.rabbitmq.deliveries import DeliveryReader
from pytest_brokerperf.core.errors import DriverError


class _RabbitConsumer:
    """One consumer thread's ``BlockingConnection``: prefetch, manual multiple acks."""

    def __init__(
        self,
        params: Any,
        exchange: str,
        queues: list[QueueSpec],
        cfg: RabbitMQDriverConfig,
        declare: bool,
        failover: Sequence[Any] = (),
    ) -> None:
        import pika

        self._nodes = [params, *failover]
        self._exchange = exchange
        self._cfg = cfg
        self.reconnects = 0
        self.failed_over_to: list[str] = []
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
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError) as exc:
                self._close_conn()
                if isinstance(exc, pika.exceptions.ProbableAuthenticationError) or (
                    time.monotonic() > deadline
                ):
                    raise DriverError(
                        f"RabbitMQ consumer on {[q.name for q in queues]}: {exc!r}"
                    ) from exc
                time.sleep(0.5)

    def _setup(
        self,
        pika: Any,
        params: Any,
        exchange: str,
        queues: list[QueueSpec],
        cfg: RabbitMQDriverConfig,
        declare: bool,
    ) -> None:
        self._partition.clear()
        self._conn = pika.BlockingConnection(params)
        ch = self._conn.channel()
        self._ch = ch
        if DeliveryReader.available(self._conn):
            # deliveries straight into the buffer, not through pika's frame objects
            DeliveryReader(self._conn, ch.channel_number, self._takes, self._on_delivery
                           ).install()
        ch.basic_qos(prefetch_count=cfg.prefetch_count, global_qos=False)
        if declare:
            args = cfg.queue_declare_arguments()
            for q in queues:
                ch.queue_declare(
                    q.name, durable=True, exclusive=cfg.exclusive, auto_delete=False, arguments=args
                )
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
            # the tag is known before the first delivery can arrive, so the delivery
            # reader takes every one of them (none is left queued inside pika)
            tag = f"ctag.{uuid.uuid4().hex}"
            self._partition[tag] = q.partition
            self._ch.basic_consume(q.name, self._on_message, auto_ack=self._auto_ack,
                                   arguments=self._consume_args, consumer_tag=tag)

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
            self._paused = False
            self._consume()

    def _on_message(self, ch: Any, method: Any, props: Any, body: bytes) -> None:
        self._buf.append((body, self._partition.get(method.consumer_tag, 0), method.delivery_tag))

    def _takes(self, consumer_tag: str) -> bool:
        """The delivery reader keeps this consumer's deliveries (a paused consumer's
        go through pika, which settles them as its cancel does)."""
        return not self._paused and consumer_tag in self._partition

    def _on_delivery(self, consumer_tag: str, delivery_tag: int, body: bytes) -> None:
        self._buf.append((body, self._partition.get(consumer_tag, 0), delivery_tag))

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        import pika

        buf = self._buf
        if not buf:
            try:
                self._conn.process_data_events(time_limit=timeout_s)  # heartbeats too
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError):
                self._reconnect(pika)
                return []
            if not buf:
                return []
        out: list[tuple[bytes, int]] = []
        last = 0
        pop = buf.popleft
        for _ in range(min(max_messages, len(buf))):
            body, part, last = pop()
            out.append((body, part))
        if not self._auto_ack:
            try:
                self._ch.basic_ack(last, multiple=True)
            except (pika.exceptions.AMQPConnectionError, pika.exceptions.AMQPChannelError):
                # handed out all the same: the broker delivers them again (duplicates,
                # counted as such), which is what an at-least-once consumer sees
                self._reconnect(pika)
        return out

    def _reconnect(self, pika: Any) -> None:
        """Consume again through the next node that answers, within the window."""
        from pytest_brokerperf.brokers.rabbitmq.producer import (
            RECONNECT_PAUSE_S,
            RECONNECT_WINDOW_S,
        )

        self._close_conn()
        self._buf.clear()  # delivered, never acknowledged: the broker delivers them again
        began = time.monotonic()
        attempt = 1
        while True:
            params = self._nodes[attempt % len(self._nodes)]
            try:
                self._setup(pika, params, self._exchange, self._queues, self._cfg,
                            declare=False)
                self.reconnects += 1
                self.failed_over_to.append(node_address(params))
                return
            except (pika.exceptions.AMQPConnectionError,
                    pika.exceptions.AMQPChannelError) as exc:
                self._close_conn()
                if time.monotonic() - began > RECONNECT_WINDOW_S:
                    raise DriverError(
                        f"RabbitMQ consumer on {[q.name for q in self._queues]}: connection "
                        f"lost and no node accepted a new one within "
                        f"{RECONNECT_WINDOW_S:.0f} s ({exc!r})") from exc
            attempt += 1
            time.sleep(RECONNECT_PAUSE_S)

    def close(self) -> None:
        self._close_conn()
        # the client-stats artefact says where the consumer read and whether it failed over
        import json

        from pytest_brokerperf.brokers.rabbitmq.producer import _CLIENT_STATS

        if len(_CLIENT_STATS) < 10_000:
            _CLIENT_STATS.append(json.dumps({"rabbitmq_consumer": {
                "queues": [q.name for q in self._queues],
                "home_node": node_address(self._nodes[0]), "reconnects": self.reconnects,
                "failed_over_to": self.failed_over_to}}))

    def _close_conn(self) -> None:
        conn = getattr(self, "_conn", None)
        with contextlib.suppress(Exception):
            if conn is not None and conn.is_open:
                conn.close()
