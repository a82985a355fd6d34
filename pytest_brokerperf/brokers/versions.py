"""Versions, each in one place: the plugin's own (``pytest_brokerperf.__version__``, which
records and calibration caches carry), and the broker versions it runs when none is
asked for, read by the options (``--kafka-version``, ``--pulsar-version``) and the Maven
resolver."""

from __future__ import annotations

__all__ = ["KAFKA_DEFAULT_VERSION", "PULSAR_DEFAULT_VERSION", "__version__"]

#: This plugin's version (pyproject.toml's ``version``).
__version__ = "0.1.0"

#: Kafka broker (KRaft) started locally; the client side is librdkafka.
KAFKA_DEFAULT_VERSION = "4.3.1"
#: Pulsar standalone started locally (``pulsar-broker`` and BookKeeper jars).
PULSAR_DEFAULT_VERSION = "4.0.7"
