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

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from pytest_brokerperf.brokers.driver import AckCallback, ErrorCallback
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.rabbitmq.admin import _RabbitAdmin
from pytest_brokerperf.brokers.rabbitmq.config import (
    RabbitMQDriverConfig,
    durability_of,
    subscription_queues,
)
from pytest_brokerperf.brokers.rabbitmq.connection import _params
from pytest_brokerperf.brokers.rabbitmq.consumer import _RabbitConsumer
from pytest_brokerperf.brokers.rabbitmq.producer import (
    _CLIENT_STATS,
    ConfirmTracker,
    _RabbitProducer,
)
from pytest_brokerperf.core.errors import DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess


__all__ = ["ConfirmTracker", "RabbitMQDriver"]

#: the engine's client ids end in -p<N> (producer N) or -c<N> (consumer N)
_CLIENT_INDEX = re.compile(r"-([pc])([0-9]+)$")


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
        "x-stream-offset; stream offset tracking is not implemented yet"
    )

    @property
    def name(self) -> str:
        return str(self.config.name)

    @property
    def CONSUMER_PAUSE(self) -> str | None:
        """How catch-up runs pause consumers: AMQP 0-9-1 has no pause, so the consumer
        is cancelled (prefetched messages requeued) and consumes again; None on streams."""
        if self.config.is_stream:
            return None
        return (
            "basic.cancel, delivered messages requeued (AMQP has no pause), then "
            "basic.consume again: the backlog stays in the queues"
        )

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
        from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess

        ctl = self.endpoint.control
        return ctl if isinstance(ctl, CtlAccess) else None

    def _uris_for(self, client_id: str) -> list[str]:
        """Every node's URI, this client's own first, then the others in turn: where it
        fails over when its node goes away.

        Producers 0, 1, 2 … start on nodes 1, 2, 3 … and consumers 0, 1, 2 … on nodes
        2, 3, 1 … (round robin): one workload lands on the same nodes in every run, and
        one producer with one consumer use two nodes. A client id without the engine's
        ``-p<N>``/``-c<N>`` ending is placed by a hash of the id.
        """
        uris = self.uris
        m = _CLIENT_INDEX.search(client_id)
        if m is None:
            first = zlib.crc32(client_id.encode()) % len(uris)
        else:
            first = (int(m[2]) + (m[1] == "c")) % len(uris)
        return uris[first:] + uris[:first]

    def admin(self) -> _RabbitAdmin:
        return _RabbitAdmin(self)

    def _partitions(self, topic: str) -> int:
        p = self.topic_partitions.get(topic)
        if p is None:
            raise DriverError(
                f"RabbitMQ topic {topic!r} was not created through this driver's admin(), so "
                "its partitions (routing keys) are unknown"
            )
        return p

    def producer(
        self, topic: str, client_id: str, on_ack: AckCallback, on_error: ErrorCallback
    ) -> _RabbitProducer:
        cfg = self.config
        keys = cfg.routing_keys(self._partitions(topic))
        first, *others = self._uris_for(client_id)
        cc = self.endpoint.client_config
        return _RabbitProducer(
            _params(first, cc, client_id, self.endpoint.tls),
            topic,
            keys,
            cfg.message_persistence,
            on_ack,
            on_error,
            cfg.max_pending_confirms,
            client_id,
            failover=[_params(u, cc, client_id, self.endpoint.tls) for u in others],
        )

    def consumer(
        self, topic: str, subscription: str, client_id: str, *, member: int = 0, members: int = 1
    ) -> _RabbitConsumer:
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
        first, *others = self._uris_for(client_id)
        cc = self.endpoint.client_config
        tls = self.endpoint.tls
        return _RabbitConsumer(_params(first, cc, client_id, tls), topic, queues, cfg,
                               declare=not cfg.is_stream,
                               failover=[_params(u, cc, client_id, tls) for u in others])

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
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
