"""Kafka driver on confluent-kafka (librdkafka).

Client-library facts this driver is built around (confluent-kafka's and librdkafka's docs):

* delivery callbacks run only inside ``poll()``; the engine calls ``service()`` after
  every burst, and publish latency comes from ``Message.latency()`` (librdkafka's own
  produce()→ack time), so a late ``poll()`` never inflates it;
* librdkafka queues up to 100 000 messages locally: ``BufferError`` is reported as
  :class:`QueueFull` (broker back-pressure) and rates are judged by *acked* messages;
* one consumer group per subscription, asynchronous offset commits after every
  non-empty poll (OMB's ``commitAsync``);
* client statistics (``statistics.interval.ms``) are kept for the results.

Imports of confluent_kafka happen inside methods so ``pytest --help`` stays light.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.driver import (
    AckCallback,
    BrokerBacklog,
    ErrorCallback,
    QueueFull,
    batch_ack,
)
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.client_log import client_logger, take_log_doc
from pytest_brokerperf.core.errors import ConfigError, DriverError
from pytest_brokerperf.core.redaction import SecretDict, redact

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

__all__ = ["KafkaDriver"]

#: Topic and broker configs read back into the results (durability and retention).
READ_BACK_TOPIC_KEYS = (
    "min.insync.replicas",
    "flush.messages",
    "flush.ms",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "cleanup.policy",
    "compression.type",
    "message.timestamp.type",
    "unclean.leader.election.enable",
)
READ_BACK_BROKER_KEYS = (
    "num.network.threads",
    "num.io.threads",
    "num.replica.fetchers",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "default.replication.factor",
    "min.insync.replicas",
    "message.max.bytes",
    "group.initial.rebalance.delay.ms",
)

_CLIENT_STATS: list[str] = []  # per process; filled by stats callbacks


def _collect_stats(doc: str) -> None:
    if len(_CLIENT_STATS) < 10_000:
        _CLIENT_STATS.append(doc)


#: Fewest acknowledgements handed to the engine as one batch (``batch_ack``); fewer go
#: one by one, because one numpy pass costs more than a few single calls.
ACK_BATCH_MIN = 16


def latency_ns(latency_s: float | None) -> int | None:
    """``Message.latency()`` (seconds, from librdkafka's whole microseconds) in ns.

    Rounded to the microsecond it was counted in: ``int(s * 1e9)`` truncates 0.001235
    to 1234999 ns, one microsecond short once the engine divides by 1000.
    """
    return None if latency_s is None else round(latency_s * 1e6) * 1000


def latencies_ns(latencies_s: Any) -> Any:
    """:func:`latency_ns` over a sequence as one int64 array; ``None`` becomes -1."""
    import numpy as np

    lat = np.array(latencies_s, dtype=np.float64)  # None -> nan
    out = np.rint(lat * 1e6)
    out[np.isnan(out)] = -1.0
    return out.astype(np.int64) * 1000


class _KafkaProducer:
    """One confluent-kafka producer whose delivery reports are served promptly.

    librdkafka builds a delivery report — and ``Message.latency()``, its produce→ack
    time — only inside ``poll()``, so an ack read from the pacer's ``poll(0)`` carried the
    wait for the next poll (bursts of sends, GIL hand-offs, the period snapshot). A
    dedicated thread blocks in ``poll(timeout)`` instead and queues each report the moment
    it is built; :meth:`service`, on the sending thread, hands them to the engine (the
    engine's counters and buffers have one writer).

    The delivery callback does the least it can while holding the GIL (value, latency
    and the clock into a tuple); the conversion to nanoseconds and the engine's
    accounting happen in :meth:`service`, as one batch (``batch_ack``) once 16 or more
    are queued. Each acknowledgement carries its own times: acked when the report was
    built, sent when ``produce()`` took the message (``Message.latency()`` before that),
    so a message produced late in a ``send_many`` batch is not billed the batch's
    packing and earlier produce() calls.
    """

    __slots__ = ("_done", "_failed", "_on_ack", "_on_acks", "_on_error", "_p", "_poller",
                 "_produce", "_stop", "_topic")

    POLL_S = 0.05

    def __init__(self, settings: dict[str, Any], topic: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> None:
        from confluent_kafka import Producer

        # one flat list, three items per report: the poll thread adds a report in one
        # extend(), the sender takes reports with a slice and a del (each one C call,
        # atomic under the GIL), and the columns come out as strided slices
        done: list[Any] = []
        failed: deque[tuple[bytes, str]] = deque()
        extend, mono = done.extend, time.monotonic_ns

        def delivered(err: Any, msg: Any) -> None:
            # latency() is librdkafka's clock now minus its produce() time: read it and
            # ours together, so the report says when produce() ran and when the ack came
            if err is None:
                extend((msg.value(), msg.latency(), mono()))
            else:
                failed.append((msg.value(), str(err)))

        conf = SecretDict(settings)
        conf["on_delivery"] = delivered
        conf["stats_cb"] = _collect_stats
        conf["logger"] = client_logger()
        self._p = Producer(conf)
        self._produce = self._p.produce
        self._topic = topic
        self._on_ack, self._on_error = on_ack, on_error
        self._on_acks = batch_ack(on_ack)
        self._done, self._failed = done, failed
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll_loop, daemon=True,
                                        name=f"brokerperf-kafka-poll-{topic}")
        self._poller.start()

    def _poll_loop(self) -> None:
        poll, stop = self._p.poll, self._stop
        while not stop.is_set():
            poll(self.POLL_S)  # blocks without the GIL; callbacks run here, at once

    def send(self, value: bytes, key: bytes | None) -> None:
        try:
            self._produce(self._topic, value, key)
        except BufferError as exc:
            raise QueueFull(str(exc)) from None

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        """:meth:`send` for a batch, in order: how many librdkafka took before its queue
        was full (``BufferError``); the rest are the engine's to hand again."""
        produce, topic = self._produce, self._topic
        i = 0
        try:
            if keys is None:
                for i, value in enumerate(values):  # noqa: B007 - i is the count taken
                    produce(topic, value)
            else:
                for i, (value, key) in enumerate(zip(values, keys, strict=True)):  # noqa: B007
                    produce(topic, value, key)
        except BufferError:
            return i
        return len(values)

    def service(self) -> None:
        done = self._done
        k = len(done)  # a multiple of 3: the poll thread adds whole reports
        if k:
            taken = done[:k]
            del done[:k]  # only what was taken: the poll thread may have added more
            values, lats, nows = taken[0::3], taken[1::3], taken[2::3]
            if k >= 3 * ACK_BATCH_MIN and self._on_acks is not None:
                self._acks(values, lats, nows)
            else:
                on_ack = self._on_ack
                for value, latency_s, now in zip(values, lats, nows, strict=True):
                    lat = latency_ns(latency_s)
                    if lat is None:
                        on_ack(value, None)
                    else:
                        on_ack(value, lat, now - lat)
        failed = self._failed
        while failed:
            value, why = failed.popleft()
            self._on_error(value, why)

    def _acks(self, values: list[bytes], latencies_s: list[float | None],
              nows: list[int]) -> None:
        """One batch to the engine: acknowledged when the report was built, sent when
        librdkafka's produce() took it (the report's time minus its latency). A report
        without a latency (librdkafka had no enqueue time) goes one by one, and the
        engine stamps its ack itself."""
        import numpy as np

        assert self._on_acks is not None
        lat = latencies_ns(latencies_s)
        ack = np.array(nows, dtype=np.int64)
        if (lat < 0).any():
            keep = lat >= 0
            for value, ok in zip(values, keep.tolist(), strict=True):
                if not ok:
                    self._on_ack(value, None)
            values = [v for v, ok in zip(values, keep.tolist(), strict=True) if ok]
            lat, ack = lat[keep], ack[keep]
            if not values:
                return
        self._on_acks(values, ack, sent_ns=ack - lat)

    def queue_depth(self) -> int:
        """Messages librdkafka holds plus acks not yet handed to the engine."""
        return len(self._p) + len(self._done) // 3 + len(self._failed)

    def flush(self, timeout_s: float) -> int:
        return int(self._p.flush(timeout_s)) + len(self._done) // 3 + len(self._failed)

    def close(self) -> None:
        self._stop.set()
        self._poller.join(5.0)
        self._p.flush(5.0)


class _KafkaConsumer:
    """One member of a consumer group.

    Pausing (catch-up runs) uses librdkafka's ``pause()`` of the assigned partitions:
    it stops fetching and drops what was prefetched, so no backlog hides in client
    memory, while ``receive()`` keeps calling ``poll()`` — the group membership stays
    (``max.poll.interval.ms``) and no rebalance happens. Partitions assigned while paused
    are paused at the next ``receive()``. ``resume()`` continues from the last consumed
    offset (confluent-kafka's ``Consumer.pause``/``resume`` docs).
    """

    __slots__ = ("_auto_commit", "_c", "_consume", "_paused", "_paused_parts", "_poll")

    def __init__(self, settings: dict[str, Any], topic: str) -> None:
        from confluent_kafka import Consumer

        conf = dict(settings)
        conf["stats_cb"] = _collect_stats
        conf["logger"] = client_logger()
        self._auto_commit = str(conf.get("enable.auto.commit", "false")).lower() == "true"
        self._c = Consumer(conf)
        self._c.subscribe([topic])
        self._consume = self._c.consume
        self._poll = self._c.poll
        self._paused = False
        self._paused_parts: set[tuple[str, int]] = set()

    def _pause_assigned(self) -> None:
        parts = self._c.assignment()
        new = [tp for tp in parts if (tp.topic, tp.partition) not in self._paused_parts]
        if new:
            self._c.pause(new)
            self._paused_parts.update((tp.topic, tp.partition) for tp in new)

    def pause(self) -> None:
        """Pause every assigned partition, then commit what was consumed (synchronously,
        so the group's committed offsets equal the messages counted)."""
        self._paused = True
        self._pause_assigned()
        if not self._auto_commit:
            with contextlib.suppress(Exception):  # _NO_OFFSET: nothing new consumed
                self._c.commit(asynchronous=False)

    def resume(self) -> None:
        self._paused = False
        parts = self._c.assignment()
        if parts:
            self._c.resume(parts)
        self._paused_parts.clear()

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        if self._paused:
            self._pause_assigned()  # a partition assigned since the pause
        # consume(n, timeout) blocks until n messages OR the timeout: at low rates that
        # would add up to `timeout` of harness-made e2e latency. Wait for the first
        # message only, then take whatever else is already fetched without waiting.
        first = self._poll(timeout_s)
        if first is None:
            return []
        msgs = [first]
        if max_messages > 1:
            msgs += self._consume(max_messages - 1, 0)
        out: list[tuple[bytes, int]] = []
        for m in msgs:
            err = m.error()
            if err is None:
                out.append((m.value(), m.partition()))  # type: ignore[arg-type]
            elif err.fatal():
                raise DriverError(f"Kafka consumer fatal error: {err}")
        if out and not self._auto_commit:
            with contextlib.suppress(Exception):
                self._c.commit(asynchronous=True)
        return out

    def close(self) -> None:
        self._c.close()


def _source_name(source: Any) -> str:
    """``DYNAMIC_TOPIC_CONFIG`` rather than ``1``: where the broker took a setting from."""
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


class _KafkaAdmin:
    def __init__(self, driver: KafkaDriver) -> None:
        from confluent_kafka.admin import AdminClient

        self._driver = driver
        conf = SecretDict(driver.config.admin_settings(driver.endpoint.bootstrap))
        conf.update(driver.endpoint.client_config)
        self._admin = AdminClient(conf)

    def broker_count(self) -> int:
        md = self._admin.list_topics(timeout=30)
        return len(md.brokers)

    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        from confluent_kafka.admin import NewTopic

        cfg = self._driver.config
        rf = int(cfg.replication_factor)
        brokers = self.broker_count()
        if rf > brokers:
            raise ConfigError(
                f"replicationFactor {rf} (driver {cfg.source}) cannot be satisfied by a "
                f"cluster of {brokers} broker(s) at {self._driver.endpoint.bootstrap}; it is "
                "never lowered silently because that changes the durability level. Fix: "
                f"start {rf} nodes (--brokerperf-nodes={rf}) or use a driver file with "
                "replicationFactor: 1 (e.g. the shipped kafka-local.yaml)."
            )
        topic_cfg = cfg.topic_settings()
        new = [
            NewTopic(n, num_partitions=p, replication_factor=rf, config=dict(topic_cfg))
            for n, p in zip(names, partitions, strict=True)
        ]
        futures = self._admin.create_topics(new, operation_timeout=60, request_timeout=60)
        for name, fut in futures.items():
            try:
                fut.result(timeout=90)
            except Exception as exc:
                raise DriverError(f"creating Kafka topic {name!r} failed: {exc}") from exc
        # Wait until every partition has a leader, so the readiness probe does not race.
        deadline = time.monotonic() + 60
        want = dict(zip(names, partitions, strict=True))
        while True:
            md = self._admin.list_topics(timeout=10)
            ready = all(
                n in md.topics
                and md.topics[n].error is None
                and len(md.topics[n].partitions) == p
                and all(pm.leader >= 0 for pm in md.topics[n].partitions.values())
                for n, p in want.items()
            )
            if ready:
                return
            if time.monotonic() > deadline:
                raise DriverError(f"Kafka topics {names} have no leader after 60 s")
            time.sleep(0.2)

    def delete_topics(self, names: list[str]) -> None:
        if not names:
            return
        futures = self._admin.delete_topics(names, operation_timeout=60, request_timeout=60)
        errors = []
        for name, fut in futures.items():
            try:
                fut.result(timeout=90)
            except Exception as exc:
                errors.append(f"{name}: {exc}")
        if errors:
            raise DriverError("deleting Kafka topics failed: " + "; ".join(errors))

    def delete_groups(self, groups: list[str]) -> None:
        if not groups:
            return
        futures = self._admin.delete_consumer_groups(groups, request_timeout=30)
        for fut in futures.values():
            with contextlib.suppress(Exception):
                fut.result(timeout=60)

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]
                             ) -> list[BrokerBacklog]:
        """Each group's backlog: its topic's end offsets minus the group's committed
        offsets (a partition without a commit counts from its earliest offset)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        md = self._admin.list_topics(timeout=10)
        out: list[BrokerBacklog] = []
        for topic, groups in subscriptions.items():
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                raise DriverError(f"reading the backlog of Kafka topic {topic!r}: no metadata "
                                  f"({tmd.error if tmd is not None else 'unknown topic'})")
            parts = [TopicPartition(topic, p) for p in sorted(tmd.partitions)]
            ends = self._offsets(parts, OffsetSpec.latest())
            starts = self._offsets(parts, OffsetSpec.earliest())
            for group in groups:
                fut = self._admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, parts)], request_timeout=30)[group]
                committed = {tp.partition: tp.offset
                             for tp in fut.result(timeout=60).topic_partitions
                             if tp.error is None}
                pos = {p: committed[p] if committed.get(p, -1) >= 0 else starts[p]
                       for p in ends}
                end_sum, pos_sum = sum(ends.values()), sum(pos.values())
                out.append(BrokerBacklog(subscription=group, messages=end_sum - pos_sum,
                                         end=end_sum, position=pos_sum,
                                         how="end offsets - committed offsets"))
        return out

    def _offsets(self, parts: list[Any], spec: Any) -> dict[int, int]:
        futures = self._admin.list_offsets({tp: spec for tp in parts}, request_timeout=30)
        return {tp.partition: int(f.result(timeout=60).offset) for tp, f in futures.items()}

    def read_back(self, names: list[str]) -> dict[str, Any]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        out: dict[str, Any] = {"topics": {}, "brokers": {}}
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        md = self._admin.list_topics(timeout=10)
        broker_ids = sorted(md.brokers)
        resources += [ConfigResource(ResourceType.BROKER, str(b)) for b in broker_ids[:1]]
        for res, fut in self._admin.describe_configs(resources, request_timeout=30).items():
            bucket = "topics" if res.restype == ResourceType.TOPIC else "brokers"
            try:
                entries = fut.result(timeout=60)
            except Exception as exc:
                if self._driver.kind == "kafka":
                    raise
                # A Kafka-protocol flavour without (all of) DescribeConfigs: say so.
                out[bucket][res.name] = {"unsupported": f"{self._driver.kind}: "
                                         f"DescribeConfigs failed: {exc}"}
                continue
            keys = READ_BACK_TOPIC_KEYS if res.restype == ResourceType.TOPIC else (
                READ_BACK_BROKER_KEYS)
            values: dict[str, Any] = {
                k: {"value": entries[k].value, "source": _source_name(entries[k].source)}
                for k in keys
                if k in entries
            }
            if not values and self._driver.kind != "kafka":
                values = {"unsupported": f"{self._driver.kind} returned none of these configs"}
            out[bucket][res.name] = values
        for n in names:
            t = md.topics.get(n)
            if t is not None:
                out["topics"].setdefault(n, {})["replicas"] = {
                    str(pid): list(pm.replicas) for pid, pm in sorted(t.partitions.items())
                }
                out["topics"][n]["isr"] = {
                    str(pid): list(pm.isrs) for pid, pm in sorted(t.partitions.items())
                }
        out["cluster"] = {"brokers": len(md.brokers), "cluster_id": md.cluster_id}
        if self._driver.kind == "tansu":
            out["storage"] = self._driver.endpoint.storage_note or "memory"
        return out

    def close(self) -> None:
        pass


@dataclass
class KafkaDriver:
    """Picklable factory of confluent-kafka clients for one endpoint and driver config."""

    endpoint: BrokerEndpoint
    config: KafkaDriverConfig
    stats_interval_ms: int = 5000
    extra: dict[str, str] = field(default_factory=dict)
    kind: str = "kafka"
    CONSUMER_PAUSE_MISSING: ClassVar[str] = ""
    CONSUMER_PAUSE: ClassVar[str | None] = (
        "librdkafka pause() of the assigned partitions while poll() goes on: the group "
        "keeps its members (no rebalance) and prefetched messages are dropped")

    @property
    def name(self) -> str:
        return str(self.config.name)

    def _with_endpoint(self, settings: dict[str, str]) -> dict[str, Any]:
        conf = SecretDict(self.endpoint.client_config)  # its repr masks secrets
        conf.update(settings)
        conf.update(self.extra)
        if self.stats_interval_ms > 0:
            conf.setdefault("statistics.interval.ms", self.stats_interval_ms)
        return conf

    def admin(self) -> _KafkaAdmin:
        return _KafkaAdmin(self)

    def producer(self, topic: str, client_id: str, on_ack: AckCallback,
                 on_error: ErrorCallback) -> _KafkaProducer:
        conf = self._with_endpoint(self.config.producer_settings(self.endpoint.bootstrap))
        conf["client.id"] = client_id
        return _KafkaProducer(conf, topic, on_ack, on_error)

    def consumer(self, topic: str, subscription: str, client_id: str, *, member: int = 0,
                 members: int = 1) -> _KafkaConsumer:
        """A member of consumer group ``subscription`` (the group splits partitions)."""
        conf = self._with_endpoint(
            self.config.consumer_settings(self.endpoint.bootstrap, subscription)
        )
        conf["client.id"] = client_id
        conf.update({k: v for k, v in self.flavour_consumer_defaults().items() if k not in conf})
        return _KafkaConsumer(conf, topic)

    @property
    def source(self) -> str:
        return self.config.source

    def topic_settings(self) -> dict[str, str]:
        return self.config.topic_settings()

    def replication_factor(self) -> int | None:
        rf = self.config.replication_factor
        return rf if rf > 0 else None

    def resets_cluster(self) -> bool:
        return bool(self.config.reset)

    def with_retention(self, settings: Mapping[str, str], reason: str) -> KafkaDriver:
        return dataclasses.replace(
            self, config=self.config.with_overrides(topic=dict(settings), reason=reason))

    def client_stats(self) -> list[str]:
        docs = list(_CLIENT_STATS)
        _CLIENT_STATS.clear()
        log = take_log_doc()
        return [*docs, log] if log is not None else docs

    def flavour_consumer_defaults(self) -> dict[str, Any]:
        """Consumer settings a Kafka-protocol flavour needs unless the driver file sets them.

        Tansu answers a new member's JoinGroup only after about half of
        ``session.timeout.ms`` (librdkafka's default 45 s); 6 s keeps the join near 3 s.
        """
        if self.kind == "tansu":
            return {"session.timeout.ms": 6000}
        return {}

    def _flavour_notes(self) -> list[str]:
        if self.kind == "kafka":
            return []
        notes = [f"broker flavour {self.kind}: a Kafka-protocol broker driven by the Kafka "
                 "driver; admin calls it lacks are recorded as unsupported"]
        storage = self.endpoint.storage_note
        if storage:
            notes.append(f"{self.kind}: {storage}")
        flavour = self.endpoint.flavour_note
        if flavour:
            notes.append(flavour)
        return notes

    def describe(self) -> dict[str, Any]:
        import confluent_kafka

        return {
            "driver": self.name,
            "client": "confluent-kafka",
            "client_version": confluent_kafka.version()[0],
            "librdkafka_version": confluent_kafka.libversion()[0],
            "producer": redact(self._with_endpoint(
                self.config.producer_settings(self.endpoint.bootstrap))),
            "consumer": redact({
                **self.flavour_consumer_defaults(),
                **self._with_endpoint(
                    self.config.consumer_settings(self.endpoint.bootstrap, "<subscription>"))}),
            "topic": dict(self.config.topic_settings()),
            "replication_factor": int(self.config.replication_factor),
            "notes": list(getattr(self.config, "notes", ()) or ()) + self._flavour_notes(),
            "omb_driver_yaml": self.driver_yaml(),
        }

    def driver_yaml(self) -> dict[str, Any]:
        return dict(self.config.to_omb_dict())
