"""An in-process loopback "broker" for measuring the harness's own cost.

Producers hand messages straight to the consumers of the same topic in the same
worker process and are acknowledged at the next ``service()``. Nothing is persisted or
sent over a network, so a run on this driver measures exactly what pytest-brokerperf
adds per message (pacing, header, recording, delivery accounting): its latency floor
and its per-process ceiling. It is never a stand-in for a broker in broker tests.
Every producer and consumer of a topic must live in one worker: the driver says so
(``TOPIC_IN_ONE_WORKER``) and the engine then gives each worker whole topics, so a run
with ``workers=N`` and N or more topics measures N processes side by side.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import cycle, islice, repeat
from typing import Any, ClassVar

from pytest_brokerperf.brokers.driver import AckCallback, ErrorCallback, QueueFull, batch_ack

__all__ = ["LoopbackDriver"]

_TOPICS: dict[str, list[deque[tuple[bytes, int]]]] = {}  # topic -> one queue per subscription
_SUBS: dict[tuple[str, str], deque[tuple[bytes, int]]] = {}
_LOCK = threading.Lock()


def _queue(topic: str, subscription: str) -> deque[tuple[bytes, int]]:
    with _LOCK:
        q = _SUBS.get((topic, subscription))
        if q is None:
            q = _SUBS[(topic, subscription)] = deque()
            _TOPICS.setdefault(topic, []).append(q)
        return q


class _Producer:
    def __init__(self, topic: str, partitions: int, on_ack: AckCallback, max_queue: int) -> None:
        self.topic = topic
        self.partitions = max(1, partitions)
        self.on_ack = on_ack
        self.on_acks = batch_ack(on_ack)
        self.pending: list[bytes] = []
        self.acking = 0  # messages of the batch service() is acknowledging right now
        self.max_queue = max_queue
        self.n = 0
        # the topic's subscription queues (the list grows as subscriptions appear)
        self.queues = _TOPICS.setdefault(topic, [])

    def send(self, value: bytes, key: bytes | None) -> None:
        pending = self.pending
        if len(pending) >= self.max_queue:
            raise QueueFull("loopback queue full")
        n = self.n
        self.n = n + 1
        item = (value, n % self.partitions)
        for q in self.queues:
            q.append(item)
        pending.append(value)

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        """:meth:`send` for a batch, in order; how many were taken before the queue was
        full (the rest are the caller's to hand again)."""
        pending = self.pending
        room = self.max_queue - len(pending)
        if room <= 0:
            return 0
        if len(values) > room:
            values = values[:room]
        n, parts = self.n, self.partitions
        # (value, partition) pairs built by zip in C: partition n % parts, as send() does
        items = list(zip(values, repeat(0) if parts == 1 else
                         islice(cycle(range(parts)), n % parts, None), strict=False))
        self.n = n + len(values)
        for q in self.queues:
            q.extend(items)
        pending.extend(values)
        return len(values)

    def service(self) -> None:
        """Acknowledge everything sent so far, at one moment (the batch path) or one by
        one when the engine gave no batch callback."""
        pending = self.pending
        if not pending:
            return
        # still outstanding until every ack below is counted: set before ``pending`` is
        # swapped, so queue_depth() read from another thread never sees both at 0
        self.acking = len(pending)
        self.pending = []
        try:
            if self.on_acks is not None and len(pending) >= 16:
                self.on_acks(pending, time.monotonic_ns())
                return
            ack = self.on_ack
            for v in pending:
                ack(v, None)
        finally:
            self.acking = 0

    def queue_depth(self) -> int:
        """Messages sent and not yet acknowledged, counting those being acknowledged."""
        return len(self.pending) + self.acking

    def flush(self, timeout_s: float) -> int:
        self.service()
        return 0

    def close(self) -> None:
        self.service()


class _Consumer:
    def __init__(self, topic: str, subscription: str) -> None:
        self.q = _queue(topic, subscription)
        self.event = threading.Event()
        self.paused = False

    def pause(self) -> None:
        """Stop reading; messages keep queueing in the subscription's queue (the 'broker')."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        if self.paused:
            self.event.wait(timeout_s)
            return []
        q = self.q
        if not q:
            self.event.wait(min(timeout_s, 0.001))
            if not q:
                return []
        popleft = q.popleft
        # only this consumer takes from q, so len(q) can only grow meanwhile
        return [popleft() for _ in range(min(max_messages, len(q)))]

    def close(self) -> None:
        pass


class _Admin:
    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        pass

    def delete_groups(self, groups: list[str]) -> None:
        pass

    def delete_topics(self, names: list[str]) -> None:
        pass

    def read_back(self, names: list[str]) -> dict[str, Any]:
        return {"topics": {n: {} for n in names}, "note": "in-process loopback, no broker"}

    def close(self) -> None:
        pass


@dataclass
class LoopbackDriver:
    """Factory of loopback clients (picklable)."""

    partitions: int = 1
    max_queue: int = 100_000
    kind: str = "loopback"
    name: str = "loopback"
    #: a paused consumer stops reading; its subscription's queue keeps filling
    CONSUMER_PAUSE_MISSING: ClassVar[str] = ""
    CONSUMER_PAUSE: ClassVar[str | None] = "stops reading; the subscription's queue keeps filling"
    #: a topic's messages never leave its worker process: keep its clients together
    TOPIC_IN_ONE_WORKER: ClassVar[bool] = True

    def admin(self) -> _Admin:
        return _Admin()

    def producer(self, topic: str, client_id: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> _Producer:
        return _Producer(topic, self.partitions, on_ack, self.max_queue)

    def consumer(self, topic: str, subscription: str, client_id: str, *, member: int = 0,
                 members: int = 1) -> _Consumer:
        return _Consumer(topic, subscription)

    def client_stats(self) -> list[str]:
        return []

    def describe(self) -> dict[str, Any]:
        return {"driver": self.name, "client": "in-process loopback"}

    def driver_yaml(self) -> dict[str, Any]:
        return {"name": self.name}

    @property
    def source(self) -> str:
        return "<loopback>"

    def topic_settings(self) -> dict[str, str]:
        return {}

    def replication_factor(self) -> int | None:
        return None

    def resets_cluster(self) -> bool:
        return False

    def with_retention(self, settings: Mapping[str, str], reason: str) -> None:
        return None
