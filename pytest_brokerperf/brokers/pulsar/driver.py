"""Pulsar driver on pulsar-client (the C++ client's Python binding).

Client-library facts this driver is built around (pulsar-client's API docs, measured here):

* **Defaults.** pulsar-client's Python defaults differ from OMB's Java driver (batching
  off, ``block_if_queue_full`` off, 1000 pending messages, 30 s send timeout, receiver
  queue 1000, Exclusive subscription), so every producer and consumer setting is passed
  explicitly from the driver YAML (:mod:`.pulsar_config`).
* **Callbacks run on C++ threads and need the GIL.** The send callback only stamps
  ``time.monotonic_ns()`` and appends (message, send stamp, ack stamp) to a deque;
  :meth:`_PulsarProducer.service`, on the sending thread, hands the acks to the engine:
  16 or more at once as one batch with each message's own times (the engine's
  ``on_ack.many``, one numpy pass), fewer one call each. The send time is the driver's
  stamp just before the hand-off to the client (``sent_ns``), so a message waiting
  behind the rest of its ``send_many`` batch counts as publish delay. Publish latency is
  measured to the callback either way, and the engine's single-threaded counters are
  never touched from a C++ thread.
* **Batches of due messages.** ``send_many`` takes the engine's batch of due messages in
  one call (a ``MessageBuilder`` and ``send_async`` each, no per-call keyword checks) and
  stops at the first message the driver's limits or the client refuse.
* **Full queues.** The driver keeps its own count of unacknowledged messages and bytes and
  raises :class:`QueueFull` *before* the client would block (``blockIfQueueFull``) or
  refuse (``ProducerQueueIsFull``, reported synchronously from ``send_async``): the engine
  then waits for space, stamps the real send time when it sends, and counts the wait as
  broker back-pressure. ``pendingQueueSize: 0`` means no count limit (as the Java client
  since it has a memory limit); ``clientMemoryLimitMB``, which the Python client cannot
  set, is enforced here on pending payload bytes.
* **Synchronous producers** (``sendMode: sync``, pulsar-perf ``--max-outstanding 1``):
  one message outstanding; a due message waits for the previous ack.
* **Consumers.** One pulsar-client consumer per engine consumer on the *partitioned*
  topic: the C++ client's partitioned consumer holds one internal consumer, with its own
  receiver queue of ``receiverQueueSize``, per partition, which is what OMB PR #213 built
  by hand in Java (there the multi-topic consumer capped per-partition queues by
  ``maxTotalReceiverQueueSizeAcrossPartitions / partitions``; here that total is
  2^31-1 so the cap never binds). Measured on the project's 2-core VM: polling one
  partitioned consumer cost 4.8 µs CPU per message against 24.5 µs for one consumer per
  partition with message listeners (each listener call takes the GIL from a C++ thread).
  Messages are polled with ``receive(timeout)`` (the GIL is released while waiting), then
  drained with ``receive(0)``; Exclusive/Failover subscriptions ack cumulatively once per
  partition per batch, Shared/Key_Shared ack every message.

pulsar-client is imported inside methods so ``pytest --help`` stays light. The admin
side uses the REST API v2 over ``urllib`` (no extra dependency).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.driver import (
    AckCallback,
    ErrorCallback,
)
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.pulsar.admin import PulsarAdmin, _Rest
from pytest_brokerperf.brokers.pulsar.client import (
    _CLIENTS,
    _CLIENTS_LOCK,
    _authentication,
    admin_ssl_context,
    auth_token,
    tls_client_kwargs,
)
from pytest_brokerperf.brokers.pulsar.consumer import _PulsarConsumer
from pytest_brokerperf.brokers.pulsar.producer import _PulsarProducer
from pytest_brokerperf.brokers.pulsar.slice_producer import _PulsarSliceProducer
from pytest_brokerperf.core.errors import ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig


__all__ = ["PulsarAdmin", "PulsarDriver", "admin_ssl_context", "auth_token"]


@dataclass
class PulsarDriver:
    """Picklable factory of pulsar-client producers/consumers and the REST admin.

    ``namespace`` is chosen once, here, so the pytest process (admin) and every worker
    process (clients) agree on it: ``<tenant>/<prefix>-<8 hex>``.
    """

    endpoint: BrokerEndpoint
    config: PulsarDriverConfig
    namespace: str = ""
    kind: str = "pulsar"
    _key: str = field(default="", repr=False)
    #: how catch-up runs pause consumers (scenario_library/catchup.py)
    CONSUMER_PAUSE_MISSING: ClassVar[str] = ""
    CONSUMER_PAUSE: ClassVar[str | None] = (
        "the consumer closes and subscribes again: the durable subscription keeps its "
        "cursor and nothing waits in a receiver queue (pause_message_listener() would "
        "keep filling it)"
    )

    def __post_init__(self) -> None:
        if not self.namespace:
            tenant, prefix = self.config.client.namespace_prefix.split("/", 1)
            self.namespace = f"{tenant}/{prefix}-{secrets.token_hex(4)}"
        if not self._key:
            self._key = f"{self.namespace}@{id(self)}"
        if not self.endpoint.dry_run and not self.service_url.startswith(
            ("pulsar://", "pulsar+ssl://")
        ):
            raise ConfigError(
                f"Pulsar service URL {self.service_url!r} must start with pulsar:// or "
                "pulsar+ssl://"
            )

    @property
    def name(self) -> str:
        return str(self.config.name)

    @property
    def service_url(self) -> str:
        """The YAML's ``serviceUrl`` for remote clusters; a broker we started wins."""
        if self.endpoint.mode != "process" and self.config.client.service_url:
            return self.config.client.service_url
        return self.endpoint.bootstrap

    @property
    def admin_url(self) -> str:
        if self.endpoint.mode != "process" and self.config.client.http_url:
            return self.config.client.http_url
        if not self.endpoint.admin_url:
            raise ConfigError(
                "the Pulsar endpoint has no admin URL: pass --pulsar-admin-url (the web "
                "service, e.g. http://broker:8080) or set client.httpUrl in the driver YAML"
            )
        return self.endpoint.admin_url

    @property
    def source(self) -> str:
        return self.config.source

    def topic_settings(self) -> dict[str, str]:
        return self.config.topic_settings()

    def replication_factor(self) -> int | None:
        """None: replication is the namespace's persistence policy (ensemble, write and
        ack quorum), which :meth:`topic_settings` shows."""
        return None

    def resets_cluster(self) -> bool:
        return False

    def with_retention(self, settings: Mapping[str, str], reason: str) -> PulsarDriver:
        """Namespace retention from the Kafka-named settings (see
        :meth:`PulsarDriverConfig.with_overrides`); the namespace name is kept."""
        return dataclasses.replace(
            self, config=self.config.with_overrides(topic=dict(settings), reason=reason)
        )

    def full_topic(self, name: str) -> str:
        return f"{self.config.client.topic_type}://{self.namespace}/{name}"

    # -- clients (worker processes) -------------------------------------------------------
    def client_kwargs(self) -> dict[str, Any]:
        """``pulsar.Client`` settings: the driver YAML's, then the endpoint's TLS settings
        (``--pulsar-config``), which win."""
        kwargs = self.config.client_kwargs(self.service_url)
        kwargs.update(tls_client_kwargs(self.endpoint.client_config))
        return kwargs

    def _auth(self) -> tuple[str | None, str | None]:
        """(plugin, secret): the endpoint's (``--pulsar-config``) over the driver YAML's."""
        ep = self.endpoint.client_config
        if ep.get("auth_plugin"):
            return ep["auth_plugin"], ep.get("auth_secret")
        c = self.config.client
        return c.authentication_plugin, c.authentication_data

    def _acquire_client(self) -> Any:
        import pulsar

        with _CLIENTS_LOCK:
            entry = _CLIENTS.get(self._key)
            if entry is None:
                kwargs = self.client_kwargs()
                auth = _authentication(*self._auth())
                if auth is not None:
                    kwargs["authentication"] = auth
                kwargs["logger"] = pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
                entry = [pulsar.Client(**kwargs), 0]
                _CLIENTS[self._key] = entry
            entry[1] += 1
            return entry[0]

    def _release_client(self) -> None:
        with _CLIENTS_LOCK:
            entry = _CLIENTS.get(self._key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del _CLIENTS[self._key]
                with contextlib.suppress(Exception):  # a client that lost its broker
                    entry[0].close()

    def _rest(self) -> _Rest:
        ep = self.endpoint.client_config
        insecure = str(
            ep.get(
                "tls_allow_insecure_connection", self.config.client.tls_allow_insecure_connection
            )
        ).lower()
        context = admin_ssl_context(
            self.admin_url,
            ep.get("tls_trust_certs_file_path") or self.config.client.tls_trust_certs_file_path,
            insecure == "true",
        )
        return _Rest(self.admin_url, token=auth_token(*self._auth()), context=context)

    # -- Driver protocol ---------------------------------------------------------------
    def admin(self) -> PulsarAdmin:
        return PulsarAdmin(self)

    def producer(
        self, topic: str, client_id: str, on_ack: AckCallback, on_error: ErrorCallback
    ) -> _PulsarProducer:
        if self.config.producer.send_callbacks == "perSlice":
            return _PulsarSliceProducer(self, topic, client_id, on_ack, on_error)
        return _PulsarProducer(self, topic, client_id, on_ack, on_error)

    def consumer(
        self, topic: str, subscription: str, client_id: str, *, member: int = 0, members: int = 1
    ) -> _PulsarConsumer:
        """A consumer of ``subscription``; its subscription type shares the partitions."""
        return _PulsarConsumer(self, topic, subscription, client_id)

    def client_stats(self) -> list[str]:
        return []

    def describe(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version

            client_version = version("pulsar-client")
        except Exception:
            client_version = "unknown"
        client = dict(self.client_kwargs())
        client["authentication"] = self._auth()[0]
        client["memory_limit_bytes (enforced by the driver)"] = self.config.memory_limit_bytes()
        return {
            "driver": self.name,
            "client": "pulsar-client",
            "client_version": client_version,
            "service_url": self.service_url,
            "admin_url": self.admin_url,
            "namespace": self.namespace,
            "namespace_policies": self.config.namespace_policies(),
            "client_settings": client,
            "producer": self.config.producer_kwargs(),
            "consumer": self.config.subscribe_kwargs(),
            "send_mode": self.config.producer.send_mode,
            "send_callbacks": self.config.producer.send_callbacks,
            "consumer_model": "one partitioned-topic consumer per engine consumer (the C++ "
            "client keeps one internal consumer per partition)",
            "acks": "cumulative per partition per batch"
            if self.config.cumulative_acks
            else "individual",
            "notes": self.config.notes,
            "omb_driver_yaml": self.driver_yaml(),
        }

    def driver_yaml(self) -> dict[str, Any]:
        doc = self.config.to_omb_dict()
        if doc["client"]["authentication"]["data"]:
            doc["client"]["authentication"]["data"] = "***"
        return doc
