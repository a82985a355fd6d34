"""Pulsar consumer: subscribes with the driver YAML's settings, receives in batches and
acknowledges what it hands to the engine.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.pulsar.client import _with_enums
from pytest_brokerperf.core.errors import DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.pulsar.client import ClientSource


class _PulsarConsumer:
    """One pulsar-client consumer on the (partitioned) topic of one subscription."""

    def __init__(self, driver: ClientSource, topic: str, subscription: str, client_id: str) -> None:
        import _pulsar

        self._driver = driver
        self._client = driver._acquire_client()
        self._full, self._subscription, self._client_id = (
            driver.full_topic(topic),
            subscription,
            client_id,
        )
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
                self._full,
                self._subscription,
                **_with_enums(self._driver.config.subscribe_kwargs(consumer_name=self._client_id)),
            )
        except Exception as exc:
            raise DriverError(
                f"subscribing {self._subscription!r} to Pulsar topic {self._full} failed: {exc}"
            ) from exc
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
