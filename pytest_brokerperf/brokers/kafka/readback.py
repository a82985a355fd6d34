"""Reading a Kafka-protocol topic again from its earliest offset: the read-back after a
power cut (``Capabilities.read_back``) and the mixed scenario's catch-up reader
(``Capabilities.earliest_reader``).

The read-back assigns every partition to one consumer (no group offsets) and compares
the harness messages it finds with those acknowledged
(:func:`pytest_brokerperf.brokers.readback.compare`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = ["KafkaEarliestReader", "KafkaReadBack", "read_back_kafka"]


class KafkaEarliestReader:
    """A new consumer group with ``auto.offset.reset=earliest``: retention keeps the data."""

    def earliest(self, driver: Driver) -> tuple[Driver, str]:
        from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
        from pytest_brokerperf.core.errors import BrokerUnavailable

        if not isinstance(driver, KafkaDriver):
            raise BrokerUnavailable(
                f"{driver.kind}: the Kafka earliest reader needs the Kafka driver, not "
                f"{type(driver).__name__}")
        reader = dataclasses.replace(driver, extra={**driver.extra,
                                                    "auto.offset.reset": "earliest"})
        return reader, ("new consumer group, auto.offset.reset=earliest (retention keeps "
                        "the topic's data)")


class KafkaReadBack:
    """Every partition of the run's topics read again from its earliest offset."""

    def read_back(self, endpoint: BrokerEndpoint, topics: Sequence[str]
                  ) -> tuple[dict[int, int], int, bool]:
        return read_back_kafka(endpoint.bootstrap, topics,
                               client_config=endpoint.client_config)


def read_back_kafka(bootstrap: str, topics: Sequence[str],
                    timeout_s: float | None = None, *,
                    client_config: Mapping[str, str] | None = None,
                    ) -> tuple[dict[int, int], int, bool]:
    """Every harness message in ``topics`` from the earliest offset: (producer id ->
    sequence bitmap, messages read, whether every partition was read to its end).
    ``timeout_s``: the bound (None: ``READ_BACK_TIMEOUT_S``); ``client_config``: the
    endpoint's security settings (a TLS or SASL listener), as every client of it takes."""
    import confluent_kafka as ck

    from pytest_brokerperf.brokers.readback import READ_BACK_TIMEOUT_S, SETTLE_S, SeqBitmaps

    if timeout_s is None:
        timeout_s = READ_BACK_TIMEOUT_S

    consumer = ck.Consumer({**(client_config or {}), "bootstrap.servers": bootstrap,
                            "group.id": "brokerperf-readback", "enable.auto.commit": False,
                            "enable.partition.eof": True, "log_level": 0})
    seen = SeqBitmaps()
    try:
        parts: list[ck.TopicPartition] = []
        md = consumer.list_topics(timeout=15)
        for t in topics:
            for p in md.topics[t].partitions:
                lo, hi = consumer.get_watermark_offsets(ck.TopicPartition(t, p), timeout=15)
                if hi > lo:
                    parts.append(ck.TopicPartition(t, p, ck.OFFSET_BEGINNING))
        consumer.assign(parts)
        open_parts = {(tp.topic, tp.partition) for tp in parts}
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline and (
                open_parts or time.monotonic() - last_new < SETTLE_S):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    open_parts.discard((msg.topic(), msg.partition()))
                continue
            last_new = time.monotonic()
            seen.add(msg.value())
        return seen.present(), seen.read, not open_parts
    finally:
        consumer.close()
