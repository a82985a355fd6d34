"""Pulsar driver on pulsar-client (the C++ client's Python binding).

Client-library facts this driver is built around (pulsar-client's API docs, measured here):

* **Defaults.** pulsar-client's Python defaults differ from OMB's Java driver (batching
  off, ``block_if_queue_full`` off, 1000 pending messages, 30 s send timeout, receiver
  queue 1000, Exclusive subscription), so every producer and consumer setting is passed
  explicitly from the driver YAML (:mod:`.pulsar_config`).
* **Callbacks run on C++ threads and need the GIL.** The send callback only stamps
  ``time.monotonic_ns()`` and appends to a deque; :meth:`_PulsarProducer.service`, on the
  sending thread, hands each ack to the engine with ``latency_ns`` = callback time −
  the header's actual send time. So publish latency is measured to the callback, and the
  engine's single-threaded counters are never touched from a C++ thread.
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

import collections
import contextlib
import dataclasses
import json
import secrets
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.driver import (
    AckCallback,
    BrokerBacklog,
    ErrorCallback,
    QueueFull,
)
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.engine import header
from pytest_brokerperf.errors import ConfigError, DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig

__all__ = ["PulsarAdmin", "PulsarDriver", "admin_ssl_context", "auth_token"]

_mono = time.monotonic_ns
_get_ident = threading.get_ident
_unpack = header.unpack

#: Results that mean "no room in the client's queue" (retry later, not a send error).
_FULL_RESULTS = ("ProducerQueueIsFull", "MemoryBufferIsFull")

# -- one pulsar.Client per process and driver (OMB: one PulsarClient per worker) ---------

_CLIENTS: dict[str, list[Any]] = {}  # driver key -> [client, users]
_CLIENTS_LOCK = threading.Lock()


def _enum(kind: str, name: str) -> Any:
    import pulsar

    if kind == "consumer_type":
        return getattr(pulsar.ConsumerType, name.replace("_", ""))
    if kind == "compression_type":
        return {"NONE": pulsar.CompressionType.NONE, "LZ4": pulsar.CompressionType.LZ4,
                "ZLIB": pulsar.CompressionType.ZLib, "ZSTD": pulsar.CompressionType.ZSTD,
                "SNAPPY": pulsar.CompressionType.SNAPPY}[name]
    if kind == "initial_position":
        return getattr(pulsar.InitialPosition, name)
    if kind == "message_routing_mode":
        return getattr(pulsar.PartitionsRoutingMode, name)
    if kind == "batching_type":
        return getattr(pulsar.BatchingType, name)
    raise KeyError(kind)


_ENUM_KWARGS = ("consumer_type", "compression_type", "initial_position", "message_routing_mode",
                "batching_type")


def _with_enums(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turn the config's enum names into pulsar-client enums."""
    return {k: (_enum(k, v) if k in _ENUM_KWARGS and isinstance(v, str) else v)
            for k, v in kwargs.items()}


def _read_token(text: str) -> str:
    token = text.removeprefix("token:")
    if token.startswith("file:"):
        path = token[5:].removeprefix("//")
        with open(path, encoding="utf-8") as fh:
            token = fh.read().strip()
    return token


def auth_token(plugin: str | None, secret: str | None) -> str | None:
    """The bearer token of token authentication (``token:...`` or ``file:...``), else None."""
    if plugin and plugin.rsplit(".", 1)[-1] in ("AuthenticationToken", "token") and secret:
        return _read_token(secret)
    return None


def admin_ssl_context(admin_url: str, trust_file: str | None,
                      insecure: bool) -> ssl.SSLContext | None:
    """The TLS context of an ``https://`` admin URL (None for plain http)."""
    if not admin_url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=trust_file or None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _authentication(plugin: str | None, data: str | None) -> Any:
    """A pulsar-client Authentication for OMB's ``authentication{plugin, data}``."""
    if not plugin:
        return None
    import pulsar

    short = plugin.rsplit(".", 1)[-1]
    text = data or ""
    if short in ("AuthenticationToken", "token"):
        return pulsar.AuthenticationToken(_read_token(text))
    if short in ("AuthenticationTls", "AuthenticationTLS", "tls"):
        params = dict(p.split(":", 1) for p in text.split(",") if ":" in p)
        return pulsar.AuthenticationTLS(params.get("tlsCertFile", ""),
                                        params.get("tlsKeyFile", ""))
    if short in ("AuthenticationOAuth2", "AuthenticationOauth2", "oauth2"):
        return pulsar.AuthenticationOauth2(text)
    return pulsar.Authentication(plugin, text)


# -- producer ----------------------------------------------------------------------------


class _PulsarProducer:
    """One pulsar-client producer; acks handed to the engine from :meth:`service`."""

    def __init__(self, driver: PulsarDriver, topic: str, client_id: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> None:
        import _pulsar

        self._driver = driver
        self._on_ack = on_ack
        self._on_error = on_error
        self._client = driver._acquire_client()
        full = driver.full_topic(topic)
        cfg = driver.config
        try:
            self._p = self._client.create_producer(
                full, **_with_enums(cfg.producer_kwargs(producer_name=None)))
            partitions = len(self._client.get_topic_partitions(full))
        except Exception as exc:
            driver._release_client()
            raise DriverError(f"creating a Pulsar producer on {full} failed: {exc}") from exc
        self.client_id = client_id
        self.partitions = partitions
        self._limit = cfg.max_outstanding(partitions)
        self._mem_limit = 0 if cfg.synchronous else cfg.memory_limit_bytes()
        raw = getattr(self._p, "_producer", None)
        builder = getattr(_pulsar, "MessageBuilder", None)
        # The wrapper's send_async type-checks ten optional arguments per call; the
        # binding underneath takes a built message directly (~2 µs less per message).
        self._raw_send = raw.send_async if raw is not None and builder is not None else None
        self._builder: Any = builder
        self._done: collections.deque[tuple[bytes, int]] = collections.deque()
        self._failed: collections.deque[tuple[bytes, str]] = collections.deque()
        self._sent = 0
        self._completed = 0
        self._bytes = 0
        self._send_tid = 0
        self._rejected = ""
        self._closed = False

    def _callback(self, value: bytes) -> Any:
        done = self._done

        def delivered(res: Any, _msg_id: Any, _v: bytes = value) -> None:
            if int(res) == 0:
                done.append((_v, _mono()))
            else:
                self._fail(_v, res)

        return delivered

    def _fail(self, value: bytes, res: Any) -> None:
        text = str(res).rsplit(".", 1)[-1]
        if text in _FULL_RESULTS and _get_ident() == self._send_tid:
            self._rejected = text  # refused synchronously inside send_async
        else:
            self._failed.append((value, text))

    def send(self, value: bytes, key: bytes | None) -> None:
        outstanding = self._sent - self._completed
        if self._limit and outstanding >= self._limit:
            raise QueueFull(f"{outstanding} messages unacknowledged (limit {self._limit})")
        if self._mem_limit and outstanding and self._bytes + len(value) > self._mem_limit:
            raise QueueFull(f"{self._bytes} bytes pending (clientMemoryLimitMB)")
        self._send_tid = _get_ident()
        cb = self._callback(value)
        if self._raw_send is not None:
            mb = self._builder().content(value)
            if key is not None:
                mb.partition_key(key.decode("utf-8", "replace"))
            self._raw_send(mb.build(), cb)
        else:
            self._p.send_async(value, cb, partition_key=None if key is None else
                               key.decode("utf-8", "replace"))
        if self._rejected:
            why, self._rejected = self._rejected, ""
            raise QueueFull(f"pulsar-client refused the message: {why}")
        self._sent += 1
        self._bytes += len(value)

    def service(self) -> None:
        done = self._done
        if done:
            on_ack = self._on_ack
            pop = done.popleft
            n = 0
            nbytes = 0
            while done:
                value, ack_ns = pop()
                on_ack(value, ack_ns - _unpack(value)[6])
                n += 1
                nbytes += len(value)
            self._completed += n
            self._bytes -= nbytes
        failed = self._failed
        while failed:
            value, why = failed.popleft()
            self._completed += 1
            self._bytes -= len(value)
            self._on_error(value, f"Pulsar send failed: {why}")

    def queue_depth(self) -> int:
        return self._sent - self._completed

    def flush(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            self.service()
            depth = self.queue_depth()
            if depth == 0 or time.monotonic() >= deadline:
                return depth
            time.sleep(0.001)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(5.0)
            self._p.close()
        finally:
            self._driver._release_client()


# -- consumer ----------------------------------------------------------------------------


class _PulsarConsumer:
    """One pulsar-client consumer on the (partitioned) topic of one subscription."""

    def __init__(self, driver: PulsarDriver, topic: str, subscription: str,
                 client_id: str) -> None:
        import _pulsar

        self._driver = driver
        self._client = driver._acquire_client()
        self._full, self._subscription, self._client_id = (
            driver.full_topic(topic), subscription, client_id)
        try:
            self._subscribe()
        except DriverError:
            driver._release_client()
            raise
        self._cumulative = driver.config.cumulative_acks
        self._timeout = _pulsar.Timeout
        self._partition_of: dict[str, int] = {}
        self._closed = False
        self._paused = False

    def _subscribe(self) -> None:
        try:
            self._c = self._client.subscribe(
                self._full, self._subscription,
                **_with_enums(self._driver.config.subscribe_kwargs(
                    consumer_name=self._client_id)))
        except Exception as exc:
            raise DriverError(f"subscribing {self._subscription!r} to Pulsar topic "
                              f"{self._full} failed: {exc}") from exc
        raw = getattr(self._c, "_consumer", self._c)
        self._recv = raw.receive
        self._ack_cumulative = raw.acknowledge_cumulative
        self._ack = raw.acknowledge
        self._wrapped = raw is self._c  # public API only: messages are pulsar.Message

    def pause(self) -> None:
        """Close the consumer (its pending acknowledgements are flushed): the durable
        subscription keeps its cursor, and what was prefetched into the receiver queue
        but not acknowledged goes back to the broker's backlog. pulsar-client's
        ``pause_message_listener()`` would keep filling the receiver queue instead."""
        if not self._paused:
            self._paused = True
            self._c.close()

    def resume(self) -> None:
        """Subscribe again: reading continues at the subscription's cursor."""
        if self._paused:
            self._subscribe()
            self._paused = False

    def _partition(self, topic_name: str) -> int:
        p = self._partition_of.get(topic_name)
        if p is None:
            _, sep, tail = topic_name.rpartition("-partition-")
            p = int(tail) if sep and tail.isdigit() else 0
            self._partition_of[topic_name] = p
        return p

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        if self._paused:
            time.sleep(timeout_s)
            return []
        recv = self._recv
        timeout = self._timeout
        try:
            first = recv(max(1, int(timeout_s * 1000)))
        except timeout:
            return []
        msgs = [first]
        while len(msgs) < max_messages:
            try:
                msgs.append(recv(0))
            except timeout:
                break
        partition = self._partition
        out: list[tuple[bytes, int]] = []
        last: dict[int, Any] = {}
        for m in msgs:
            p = partition(m.topic_name())
            out.append((m.data(), p))
            last[p] = m
        try:
            if self._cumulative:
                for m in last.values():
                    self._ack_cumulative(m)
            else:
                for m in msgs:
                    self._ack(m)
        except Exception as exc:  # an ack lost on a reconnect is redelivered: legal
            if "AlreadyClosed" in str(exc):
                raise DriverError(f"Pulsar consumer closed: {exc}") from exc
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self._paused:
                self._c.close()
        finally:
            self._driver._release_client()


# -- admin (REST v2) --------------------------------------------------------------------


class _Rest:
    """Tiny JSON client of the Pulsar admin REST API (urllib; no extra dependency)."""

    def __init__(self, base_url: str, *, token: str | None = None,
                 context: ssl.SSLContext | None = None, timeout: float = 30.0) -> None:
        self.base = base_url.rstrip("/")
        self.token = token
        self.context = context
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None,
             ok: tuple[int, ...] = (200, 204)) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as r:
                status, text = int(r.status), r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, text = int(e.code), e.read().decode("utf-8", "replace")
        except (OSError, urllib.error.URLError) as e:
            raise DriverError(f"Pulsar admin {method} {self.base}{path} failed: {e}") from e
        if status not in ok:
            raise DriverError(
                f"Pulsar admin {method} {self.base}{path} -> HTTP {status}: {text[:500]}")
        try:
            return status, json.loads(text) if text.strip() else None
        except ValueError:
            return status, text

    def get(self, path: str, ok: tuple[int, ...] = (200,)) -> Any:
        return self.call("GET", path, ok=ok)[1]


class PulsarAdmin:
    """Creates the run's namespace (with its policies) and topics; reads them back.

    The namespace ``<tenant>/<prefix>-<random>`` is the driver's and lives for one run:
    :meth:`close` deletes it once every topic created here has been deleted.
    """

    def __init__(self, driver: PulsarDriver) -> None:
        self._driver = driver
        self.rest = driver._rest()
        self.namespace = driver.namespace
        self._created: dict[str, int] = {}  # topic name -> partitions (0 = non-partitioned)
        self._namespace_created = False
        self.notes: list[str] = []

    # -- helpers ------------------------------------------------------------------------
    def _topic_path(self, name: str) -> str:
        kind = self._driver.config.client.topic_type
        return f"/admin/v2/{kind}/{self.namespace}/{urllib.parse.quote(name)}"

    def clusters(self) -> list[str]:
        got = self.rest.get("/admin/v2/clusters")
        return [str(c) for c in got] if isinstance(got, list) else []

    def bookies(self) -> int | None:
        """Bookies registered with the cluster, None if the API does not say."""
        try:
            got = self.rest.get("/admin/v2/bookies/all")
        except DriverError:
            return None
        if isinstance(got, dict) and isinstance(got.get("bookies"), list):
            return len(got["bookies"])
        return None

    def _ensure_tenant(self) -> None:
        tenant = self._driver.config.tenant
        status, _ = self.rest.call("GET", f"/admin/v2/tenants/{tenant}", ok=(200, 404))
        if status == 200:
            return
        ep = self._driver.endpoint
        if ep.mode == "remote" and not ep.info.get("allow_cluster_changes"):
            raise DriverError(
                f"tenant {tenant!r} (client.namespacePrefix of the driver file) does not exist "
                f"on the remote cluster at {self._driver.admin_url}; creating a tenant is a "
                "cluster-wide change: use an existing tenant in client.namespacePrefix, or "
                "pass --brokerperf-allow-cluster-changes")
        wanted = self._driver.config.client.cluster_name
        clusters = self.clusters()
        allowed = [wanted] if wanted in clusters else clusters
        if wanted and wanted not in clusters:
            self.notes.append(f"clusterName {wanted!r} is not a cluster of this broker "
                              f"({clusters}); tenant {tenant!r} allowed on {allowed}")
        self.rest.call("PUT", f"/admin/v2/tenants/{tenant}",
                       {"adminRoles": [], "allowedClusters": allowed}, ok=(200, 204, 409))

    def _create_namespace(self) -> None:
        ns = self.namespace
        self.rest.call("PUT", f"/admin/v2/namespaces/{ns}", ok=(200, 204))
        self._namespace_created = True
        pol = self._driver.config.namespace_policies()
        base = f"/admin/v2/namespaces/{ns}"
        self.rest.call("POST", f"{base}/persistence", pol["persistence"])
        self.rest.call("POST", f"{base}/backlogQuota?backlogQuotaType=destination_storage",
                       pol["backlogQuota"])
        self.rest.call("POST", f"{base}/retention", pol["retention"])
        self.rest.call("POST", f"{base}/deduplication", pol["deduplication"])

    # -- AdminClient protocol -----------------------------------------------------------
    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        cfg = self._driver.config
        bookies = self.bookies()
        if bookies is not None:
            cfg.check_bookies(bookies, self._driver.endpoint.admin_url or "the cluster")
        self._ensure_tenant()
        if not self._namespace_created:
            self._create_namespace()
        for name, n in zip(names, partitions, strict=True):
            path = self._topic_path(name)
            if n > 1:
                self.rest.call("PUT", f"{path}/partitions", n)
                self._created[name] = n
            else:  # OMB creates a partitioned topic only for partitions > 1
                self.rest.call("PUT", path)
                self._created[name] = 0

    def delete_groups(self, groups: list[str]) -> None:
        """Subscriptions go with their topics (deleted with force)."""

    def delete_topics(self, names: list[str]) -> None:
        errors: list[str] = []
        for name in names:
            path = self._topic_path(name)
            partitioned = self._created.get(name, 1) > 0
            try:
                if partitioned:
                    self.rest.call("DELETE", f"{path}/partitions?force=true", ok=(200, 204, 404))
                else:
                    self.rest.call("DELETE", f"{path}?force=true", ok=(200, 204, 404))
                self._created.pop(name, None)
            except DriverError as exc:
                errors.append(str(exc))
        if errors:
            raise DriverError("deleting Pulsar topics failed: " + "; ".join(errors))

    def topic_partitions(self, name: str) -> int:
        got = self.rest.get(f"{self._topic_path(name)}/partitions")
        return int(got.get("partitions", 0)) if isinstance(got, dict) else 0

    def backlog(self, names: list[str]) -> dict[str, int]:
        """Broker-side ``msgBacklog`` per subscription, summed over partitions."""
        out: dict[str, int] = {}
        for name in names:
            path = self._topic_path(name)
            stats = self.rest.get(f"{path}/partitioned-stats" if self._created.get(name, 1)
                                  else f"{path}/stats")
            for sub, s in (stats or {}).get("subscriptions", {}).items():
                out[sub] = out.get(sub, 0) + int(s.get("msgBacklog", 0))
        return out

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]
                             ) -> list[BrokerBacklog]:
        """Each subscription's ``msgBacklog`` from the topic's (partitioned) stats."""
        got = self.backlog(list(subscriptions))
        return [BrokerBacklog(subscription=sub, messages=got.get(sub, 0),
                              how="msgBacklog of the (partitioned) topic stats")
                for subs in subscriptions.values() for sub in subs]

    def read_back(self, names: list[str]) -> dict[str, Any]:
        ns = self.namespace
        base = f"/admin/v2/namespaces/{ns}"
        out: dict[str, Any] = {
            "namespace": ns,
            "persistence": self.rest.get(f"{base}/persistence"),
            "retention": self.rest.get(f"{base}/retention"),
            "backlogQuota": self.rest.get(f"{base}/backlogQuotaMap"),
            "deduplication": self.rest.get(f"{base}/deduplication", ok=(200, 204)),
            "topics": {n: {"partitions": self.topic_partitions(n)} for n in names},
        }
        clusters = self.clusters()
        brokers: list[str] = []
        for cl in clusters:
            got = self.rest.get(f"/admin/v2/brokers/{cl}", ok=(200, 404))
            if isinstance(got, list):
                brokers += [str(b) for b in got]
        out["cluster"] = {"clusters": clusters, "brokers": len(brokers),
                          "broker_ids": brokers, "bookies": self.bookies()}
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def close(self) -> None:
        if not self._namespace_created or self._created:
            return  # topics kept (--brokerperf-keep-topics): keep their namespace too
        for attempt in range(5):
            try:
                self.rest.call("DELETE", f"/admin/v2/namespaces/{self.namespace}",
                               ok=(200, 204, 404))
                self._namespace_created = False
                return
            except DriverError:
                if attempt == 4:
                    return  # a local broker is wiped anyway; a remote run reports it
                time.sleep(0.5 * (attempt + 1))


# -- the driver --------------------------------------------------------------------------


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
        "keep filling it)")

    def __post_init__(self) -> None:
        if not self.namespace:
            tenant, prefix = self.config.client.namespace_prefix.split("/", 1)
            self.namespace = f"{tenant}/{prefix}-{secrets.token_hex(4)}"
        if not self._key:
            self._key = f"{self.namespace}@{id(self)}"
        if not self.endpoint.dry_run and not self.service_url.startswith(
                ("pulsar://", "pulsar+ssl://")):
            raise ConfigError(
                f"Pulsar service URL {self.service_url!r} must start with pulsar:// or "
                "pulsar+ssl://")

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
                "service, e.g. http://broker:8080) or set client.httpUrl in the driver YAML")
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
            self, config=self.config.with_overrides(topic=dict(settings), reason=reason))

    def full_topic(self, name: str) -> str:
        return f"{self.config.client.topic_type}://{self.namespace}/{name}"

    # -- clients (worker processes) -------------------------------------------------------
    def client_kwargs(self) -> dict[str, Any]:
        """``pulsar.Client`` settings: the driver YAML's, then the endpoint's TLS settings
        (``--pulsar-config``), which win."""
        kwargs = self.config.client_kwargs(self.service_url)
        ep = self.endpoint.client_config
        if ep.get("tls_trust_certs_file_path"):
            kwargs["tls_trust_certs_file_path"] = ep["tls_trust_certs_file_path"]
        for key in ("tls_allow_insecure_connection", "tls_validate_hostname"):
            if key in ep:
                kwargs[key] = str(ep[key]).lower() == "true"
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
        insecure = str(ep.get("tls_allow_insecure_connection",
                              self.config.client.tls_allow_insecure_connection)).lower()
        context = admin_ssl_context(
            self.admin_url,
            ep.get("tls_trust_certs_file_path") or self.config.client.tls_trust_certs_file_path,
            insecure == "true")
        return _Rest(self.admin_url, token=auth_token(*self._auth()), context=context)

    # -- Driver protocol ---------------------------------------------------------------
    def admin(self) -> PulsarAdmin:
        return PulsarAdmin(self)

    def producer(self, topic: str, client_id: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> _PulsarProducer:
        return _PulsarProducer(self, topic, client_id, on_ack, on_error)

    def consumer(self, topic: str, subscription: str, client_id: str, *, member: int = 0,
                 members: int = 1) -> _PulsarConsumer:
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
            "consumer_model": "one partitioned-topic consumer per engine consumer (the C++ "
                              "client keeps one internal consumer per partition)",
            "acks": "cumulative per partition per batch" if self.config.cumulative_acks
                    else "individual",
            "notes": self.config.notes,
            "omb_driver_yaml": self.driver_yaml(),
        }

    def driver_yaml(self) -> dict[str, Any]:
        doc = self.config.to_omb_dict()
        if doc["client"]["authentication"]["data"]:
            doc["client"]["authentication"]["data"] = "***"
        return doc
