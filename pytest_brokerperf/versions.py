"""The broker versions the plugin runs when none is asked for: one place, read by the
options (``--kafka-version``, ``--pulsar-version``) and the Maven resolver."""

from __future__ import annotations

__all__ = ["KAFKA_DEFAULT_VERSION", "PULSAR_DEFAULT_VERSION"]

#: Kafka broker (KRaft) started locally; the client side is librdkafka.
KAFKA_DEFAULT_VERSION = "4.3.1"
#: Pulsar standalone started locally (``pulsar-broker`` and BookKeeper jars).
PULSAR_DEFAULT_VERSION = "4.0.7"
