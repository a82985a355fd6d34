"""The small protocol every broker driver implements (httpx-transport style).

A *driver* is a picklable factory built in the pytest process and shipped to worker
processes, where it creates the real clients. The engine only speaks this protocol,
so a scenario never knows which client library it drives.

Hot-path contract: ``ProducerClient.send`` is called once per message and must not
block; acknowledgements come back through the ``on_ack(value, latency_ns)`` callback
given at creation, run from ``service()`` on the sending thread. ``latency_ns`` is the
client library's own send→ack time when it measures one (librdkafka does), else None
and the engine stamps the ack time itself. A driver that knows when the message really
left for the broker (pika: the burst's socket write on its IO thread) passes that as
``sent_ns`` with ``latency_ns`` counted from it: the hand-off to the client's IO thread
is then publish delay (client side), not publish latency (billed to the broker).

Batch path (optional, for drivers where one call per message is the cost that matters,
like the in-process loopback): a producer client may also offer
``send_many(values, keys) -> int``, which queues ``values`` in order and returns how
many it took before its queue was full; the engine then hands it each batch of due
messages in one call (16 or more due; fewer go through ``send``). Any driver may hand
acknowledgements over as a batch through :func:`batch_ack` (``on_acks``, below), with
one acknowledgement time for the batch or one time or latency per message, when the
engine's callback offers it; a batch costs one numpy pass instead of one Python call
per message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AckBatchCallback",
    "AckCallback",
    "AdminClient",
    "BacklogReader",
    "BrokerBacklog",
    "ConsumerClient",
    "Driver",
    "ErrorCallback",
    "ProducerClient",
    "QueueFull",
    "batch_ack",
    "consumer_pause",
]



class AckCallback(Protocol):
    """``on_ack(value, latency_ns, sent_ns=None)``: see the module docstring."""

    def __call__(self, value: bytes, latency_ns: int | None,
                 sent_ns: int | None = None) -> None: ...

ErrorCallback = Callable[[bytes, str], None]
class AckBatchCallback(Protocol):
    """``on_acks(values, ack_ns=None, *, latency_ns=None, sent_ns=None)``: every value in
    ``values`` acknowledged, in the order sent. Times are CLOCK_MONOTONIC nanoseconds:
    ``ack_ns`` one moment for the whole batch or one per message (a sequence or int64
    array); or ``latency_ns``, one per message, the client's own send->ack time (as
    ``on_ack``'s ``latency_ns``); ``sent_ns``, one per message, when the driver knows
    when each message really left (as ``on_ack``'s ``sent_ns``)."""

    def __call__(self, values: list[bytes], ack_ns: Any = None, *, latency_ns: Any = None,
                 sent_ns: Any = None) -> None: ...


def batch_ack(on_ack: AckCallback) -> AckBatchCallback | None:
    """The batch form of the engine's ack callback (its ``many`` attribute), or None
    when it has none: a driver then calls ``on_ack`` once per message."""
    many = getattr(on_ack, "many", None)
    return many if callable(many) else None


class QueueFull(Exception):
    """The client library's local queue is full: the broker is not keeping up.

    This is broker back-pressure, a broker result, not a generator limit.
    """


@runtime_checkable
class ProducerClient(Protocol):
    def send(self, value: bytes, key: bytes | None) -> None:
        """Queue one message; raise QueueFull when the client cannot take more."""

    def service(self) -> None:
        """Run pending callbacks without blocking."""

    def queue_depth(self) -> int:
        """Messages queued in the client and not yet acknowledged."""

    def flush(self, timeout_s: float) -> int:
        """Wait for outstanding acks; return how many are still outstanding."""

    def close(self) -> None: ...


@runtime_checkable
class ConsumerClient(Protocol):
    """One subscription member.

    ``pause()``/``resume()`` serve catch-up runs: a consumer stops reading without
    leaving its subscription. While paused, ``receive()`` keeps being called (Kafka needs
    its ``poll()`` to stay in the group) and returns nothing new; nothing may stay
    buffered in the client, so the backlog built meanwhile is all on the broker.
    ``pause()`` returns once every message it returned so far is committed
    (acknowledged) to the broker. A driver whose consumers cannot do this says so in
    :attr:`Driver.CONSUMER_PAUSE` (None) and :attr:`Driver.CONSUMER_PAUSE_MISSING`.
    """

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        """Return up to ``max_messages`` (value, partition) pairs, waiting at most timeout."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def close(self) -> None: ...


def consumer_pause(driver: Driver | type[Driver]) -> str | None:
    """How ``driver``'s consumers pause (its ``CONSUMER_PAUSE``), None when they cannot."""
    how = driver.CONSUMER_PAUSE
    return how if isinstance(how, str) and how else None


@dataclass(frozen=True)
class BrokerBacklog:
    """One subscription's backlog as the broker reports it, beside the engine's counters."""

    subscription: str
    messages: int  # what the broker still holds for the subscription
    end: int | None = None  # Kafka: sum of the partitions' end offsets
    position: int | None = None  # Kafka: sum of the group's committed offsets
    how: str = ""  # how it was read ("end offsets - committed offsets")


@runtime_checkable
class BacklogReader(Protocol):
    """An admin client that reads subscriptions' backlogs from the broker (optional)."""

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]
                             ) -> list[BrokerBacklog]:
        """Backlog of each subscription in ``{topic: [subscription, ...]}``."""


@runtime_checkable
class AdminClient(Protocol):
    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        """Create topics and wait until every partition has a leader."""

    def delete_topics(self, names: list[str]) -> None: ...

    def delete_groups(self, groups: list[str]) -> None:
        """Delete the run's subscriptions / consumer groups (a no-op where the broker has
        none left once the topics are gone)."""

    def read_back(self, names: list[str]) -> dict[str, Any]:
        """The settings the broker actually applied to these topics (and itself)."""

    def close(self) -> None: ...


class Driver(Protocol):
    """Picklable factory of clients for one broker endpoint and driver configuration."""

    @property
    def CONSUMER_PAUSE(self) -> str | None:
        """How this driver's consumers pause for a catch-up run (shown in its record);
        None when they cannot pause without a rebalance or a client-side backlog."""

    @property
    def CONSUMER_PAUSE_MISSING(self) -> str:
        """Why they cannot, when ``CONSUMER_PAUSE`` is None (else "")."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...

    def admin(self) -> AdminClient: ...

    def producer(
        self, topic: str, client_id: str, on_ack: AckCallback, on_error: ErrorCallback
    ) -> ProducerClient: ...

    def consumer(self, topic: str, subscription: str, client_id: str, *, member: int = 0,
                 members: int = 1) -> ConsumerClient:
        """Consumer ``member`` of the ``members`` consumers of ``subscription``; drivers
        whose subscriptions share work by themselves (consumer groups, shared queues)
        ignore the two, those that would deliver everything to each (RabbitMQ streams)
        split the topic between members."""

    def client_stats(self) -> list[str]:
        """Client statistics JSON documents collected in this process (may be empty)."""

    def describe(self) -> dict[str, Any]:
        """Effective client settings, secrets redacted, for the results."""

    def driver_yaml(self) -> dict[str, Any]:
        """The effective OMB-style driver YAML document."""

    # -- what the remote-safety plan needs (nothing is contacted) ----------------------
    @property
    def source(self) -> str:
        """Where the driver configuration came from (a file path, or ``<python>``)."""

    def topic_settings(self) -> dict[str, str]:
        """What every topic (queue, namespace) of the run gets, flat, for plans."""

    def replication_factor(self) -> int | None:
        """Replicas of each topic's data, when the driver file sets it (None: the
        broker's policy decides)."""

    def resets_cluster(self) -> bool:
        """OMB's ``reset: true``: the driver would delete every topic of the cluster."""

    def with_retention(self, settings: Mapping[str, str], reason: str) -> Driver | None:
        """This driver with bounded retention (Kafka-named ``retention.ms``,
        ``retention.bytes``, ``segment.ms``) on the run's topics, each change recorded
        with ``reason``; None when the broker has no per-run retention to set."""
