"""Partition reassignment on Kafka and Kafka-protocol brokers: the admin calls the
reassign scenario makes (kafka-python's admin client, since confluent-kafka has no
reassignment API), the move's state as the broker reports it, and the replication
throttle set around the move and removed afterwards, even on failure.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.capabilities import MoveState

__all__ = ["POLL_S", "THROTTLE_BROKER_KEYS", "THROTTLE_TOPIC_KEYS", "KafkaPartitionMover",
           "MoveState", "Mover", "kafka_python_config", "movable", "move_complete",
           "throttle_resources", "throttled"]

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver


#: metadata and in-progress reassignments are read this often during the move
POLL_S = 0.1


THROTTLE_BROKER_KEYS = ("leader.replication.throttled.rate",
                        "follower.replication.throttled.rate")


THROTTLE_TOPIC_KEYS = ("leader.replication.throttled.replicas",
                       "follower.replication.throttled.replicas")


def move_complete(state: MoveState, target: Sequence[int]) -> bool:
    """The move is done: no longer in progress, replicas equal ``target`` (as a set of
    brokers: the controller may list them in another order), and every new replica in
    the ISR (a target broker that was already a replica need not be, since it was
    not moved)."""
    want = set(target)
    return (not state.in_progress and len(state.replicas) == len(want)
            and set(state.replicas) == want and want <= set(state.isr))


def movable(driver: Driver, *, ask_broker: bool = True) -> KafkaDriver:
    """The run's driver with single-replica topics, or ``BrokerUnavailable`` (a skip)
    where partitions cannot be moved: not a Kafka-protocol driver, a single broker,
    kafka-python missing. ``ask_broker=False`` (a dry run) leaves out the broker count,
    the one question that needs a broker."""
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.core.errors import BrokerUnavailable

    if not isinstance(driver, KafkaDriver):
        raise BrokerUnavailable(
            f"reassign on {driver.kind}: partition reassignment is a Kafka-protocol "
            "operation (AlterPartitionReassignments); this broker has no partitions to move")
    if driver.kind == "tansu":
        raise BrokerUnavailable("reassign on tansu: a single stateless broker without "
                                "replication or partition reassignment")
    try:
        import kafka  # noqa: F401
    except ImportError as e:
        raise BrokerUnavailable(
            "reassign needs kafka-python (its admin client has the reassignment API "
            "confluent-kafka lacks): pip install 'pytest-brokerperf[reassign]'") from e
    single = replace(driver, config=driver.config.with_overrides(
        replication_factor=1, topic={"min.insync.replicas": "1"},
        reason="reassign: the moved topic has one replica (AutoMQ's study)"))
    if not ask_broker:
        return single
    admin = single.admin()
    try:
        n = admin.broker_count()
    finally:
        admin.close()
    if n < 2:
        raise BrokerUnavailable(
            f"reassign on {driver.kind} at {driver.endpoint.bootstrap}: the cluster has "
            f"{n} broker; moving a partition needs a broker without a replica of it "
            "(start a local cluster with --brokerperf-nodes=3, or point at one with 2+)")
    return single


_KAFKA_PYTHON_KEYS = {
    "security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism", "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password", "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile", "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


def kafka_python_config(bootstrap: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """``KafkaAdminClient`` arguments from the endpoint's librdkafka client settings
    (connection and security only; others are client tuning the admin does not need)."""
    out: dict[str, Any] = {"bootstrap_servers": bootstrap.split(","),
                           "client_id": "brokerperf-reassign"}
    for k, v in client_config.items():
        if k in _KAFKA_PYTHON_KEYS:
            out[_KAFKA_PYTHON_KEYS[k]] = str(v).upper() if k in (
                "security.protocol", "sasl.mechanism", "sasl.mechanisms") else v
    return out


class Mover:
    """Requests the move and watches it in a thread of its own (every ``POLL_S``)."""

    def __init__(self, driver: KafkaDriver, topic: str, partition: int, target: list[int],
                 timeout_s: float) -> None:
        from confluent_kafka.admin import AdminClient
        from kafka import KafkaAdminClient

        from pytest_brokerperf.core.redaction import SecretDict

        ep = driver.endpoint
        conf = SecretDict(driver.config.admin_settings(ep.bootstrap))
        conf.update(ep.client_config)
        self.admin = AdminClient(conf)
        self.kadmin = KafkaAdminClient(**kafka_python_config(ep.bootstrap, ep.client_config))
        self.topic, self.partition, self.target = topic, partition, target
        self.timeout_s = timeout_s
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.states: list[MoveState] = []
        self.t0 = 0.0
        self.requested_at = ""
        self.duration_s: float | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def read(self, t_s: float = 0.0) -> MoveState:
        from kafka import TopicPartition

        md = self.admin.list_topics(self.topic, timeout=10)
        pm = md.topics[self.topic].partitions[self.partition]
        pending = self.kadmin.list_partition_reassignments(
            [TopicPartition(self.topic, self.partition)], timeout_ms=10_000)
        return MoveState(t_s=t_s, in_progress=any(
            tp.topic == self.topic and tp.partition == self.partition for tp in pending),
            replicas=tuple(pm.replicas), isr=tuple(pm.isrs))

    def start(self) -> None:
        """Request the move (the phase's clock has started) and watch it."""
        from datetime import datetime

        from kafka import TopicPartition

        from pytest_brokerperf.core.errors import DriverError

        self.requested_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self.t0 = time.monotonic()
        result = self.kadmin.alter_partition_reassignments(
            {TopicPartition(self.topic, self.partition): list(self.target)},
            timeout_ms=30_000)
        errors = {str(tp): err for tp, err in result.items() if err is not None}
        if errors:
            raise DriverError(f"the reassignment of {self.topic}-{self.partition} to brokers "
                              f"{self.target} was refused: {errors}")
        self._thread = threading.Thread(target=self._watch, name="brokerperf-reassign",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        deadline = self.t0 + self.timeout_s
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                s = self.read(time.monotonic() - self.t0)
                self.states.append(s)
                if move_complete(s, self.target):
                    self.duration_s = s.t_s
                    return
                self._stop.wait(POLL_S)
        except BaseException as e:  # said by the run, not swallowed
            self.error = e
        finally:
            self.done.set()

    def cancel(self) -> bool:
        """Cancel the reassignment if it is still in progress (a move that did not
        complete in time is not left running); True when a cancellation was accepted."""
        from kafka import TopicPartition

        tp = TopicPartition(self.topic, self.partition)
        if tp not in self.kadmin.list_partition_reassignments([tp], timeout_ms=10_000):
            return False
        result = self.kadmin.alter_partition_reassignments({tp: None}, timeout_ms=30_000)
        return all(err is None for err in result.values())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def brokers(self) -> list[int]:
        """The cluster's broker ids, sorted."""
        return sorted(self.admin.list_topics(timeout=10).brokers)

    def throttled(self, source: Sequence[int], target: Sequence[int], bytes_s: int | None,
                  info: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
        """:func:`throttled` on this move's partition."""
        return throttled(self.admin, self.topic, self.partition, source, target, bytes_s,
                         info)

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(Exception):
            self.kadmin.close()


def _alter(admin: Any, resources: list[Any], what: str) -> None:
    from pytest_brokerperf.core.errors import DriverError

    # one resource per request: a broker resource is sent to that broker, so the
    # client allows only one of them per call
    for one in resources:
        for res, fut in admin.incremental_alter_configs([one]).items():
            try:
                fut.result(timeout=30)
            except Exception as e:
                raise DriverError(f"{what} on {res} failed: {e}") from e


def throttle_resources(topic: str, partition: int, source: Sequence[int],
                       target: Sequence[int], rate: int | None, *, remove: bool = False
                       ) -> list[Any]:
    """The config changes of a throttled move (or their removal): the throttle rates on
    every broker taking part, the topic's throttled replicas (leaders: the current
    replicas; followers: the new ones)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    op = AlterConfigOpType.DELETE if remove else AlterConfigOpType.SET
    out = []
    for b in sorted(set(source) | set(target)):
        out.append(ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
            ConfigEntry(k, None if remove else str(rate), incremental_operation=op)
            for k in THROTTLE_BROKER_KEYS]))
    new = [b for b in target if b not in source]
    values = (",".join(f"{partition}:{b}" for b in source),
              ",".join(f"{partition}:{b}" for b in new))
    out.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, None if remove else v, incremental_operation=op)
        for k, v in zip(THROTTLE_TOPIC_KEYS, values, strict=True)]))
    return out


@contextlib.contextmanager
def throttled(admin: Any, topic: str, partition: int, source: Sequence[int],
              target: Sequence[int], rate: int | None, state: dict[str, Any]
              ) -> Iterator[None]:
    """Throttle the move's replication for the ``with`` block (nothing when ``rate`` is
    None), and delete every throttle config afterwards — also when setting them or the
    block failed. ``state["throttle_removed"]``: whether every deletion succeeded
    (``state["throttle_errors"]``: why not)."""
    if not rate:
        yield
        return
    try:
        _alter(admin, throttle_resources(topic, partition, source, target, rate),
               "setting the replication throttle")
        yield
    finally:
        errors: list[str] = []
        for res in throttle_resources(topic, partition, source, target, None, remove=True):
            try:  # each resource on its own: one failure leaves no other config behind
                _alter(admin, [res], "removing the replication throttle")
            except Exception as e:
                errors.append(str(e))
        state["throttle_removed"] = not errors
        if errors:
            state["throttle_errors"] = errors


class KafkaPartitionMover:
    """The partition mover of Kafka-protocol brokers (``Capabilities.partition_mover``):
    :func:`movable` and a :class:`Mover` per move."""

    def movable(self, driver: Driver, *, ask_broker: bool = True) -> KafkaDriver:
        return movable(driver, ask_broker=ask_broker)

    def mover(self, driver: Driver, topic: str, partition: int, timeout_s: float) -> Mover:
        from pytest_brokerperf.brokers.kafka.driver import KafkaDriver

        assert isinstance(driver, KafkaDriver), "movable() gives a KafkaDriver"
        return Mover(driver, topic, partition, [], timeout_s)
