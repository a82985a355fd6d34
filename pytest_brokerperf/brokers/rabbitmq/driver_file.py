"""The OMB RabbitMQ driver file (OMB's driver-rabbitmq/*.yaml and Confluent's fork), declared.

Field names are :class:`~pytest_brokerperf.brokers.rabbitmq.config.RabbitMQDriverConfig`'s
attributes; aliases are the YAML keys. Semantics are documented in docs/reference/rabbitmq.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pytest_brokerperf.brokers.rabbitmq.choices import EXCHANGE_TYPES, QUEUE_TYPES, STREAM_OFFSETS
from pytest_brokerperf.core.files import problem

_URI = re.compile(r"^amqps?://", re.I)


def _text(value: Any) -> Any:
    """Scalars become text, as Jackson reads a YAML number into a String field."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _one_or_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _pairs(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple((str(k), v) for k, v in value.items())
    return value


def _queue_type(value: str) -> str:
    if value.upper() not in QUEUE_TYPES:
        raise problem(f"expected one of {', '.join(QUEUE_TYPES)}", "write `queueType: QUORUM`")
    return value.upper()


def _exchange_type(value: str) -> str:
    if value.upper() not in EXCHANGE_TYPES:
        raise problem(
            "pytest-brokerperf drives FANOUT (OMB main) and DIRECT (Confluent's routing-key "
            "partitions); TOPIC and HEADERS are not supported",
            "write `exchangeType: DIRECT`",
        )
    return value.upper()


def _stream_offset(value: str) -> str:
    if value.lower() not in STREAM_OFFSETS and not re.fullmatch(r"\d+", value):
        raise problem("expected first, last, next or an offset number", "`streamOffset: first`")
    return value.lower()


def _uri(value: str) -> str:
    if not _URI.match(value):
        raise problem("expected amqp:// or amqps:// URIs", "`amqpUris: [amqp://host:5672]`")
    return value


def _prefetch(value: int) -> int:
    if value > 65535:
        raise problem(
            "AMQP's basic.qos prefetch-count is a 16-bit field (max 65535)",
            "write `prefetchCount: 1000` (or at most 65535)",
        )
    return value


def _count(lo: int, example: int, key: str) -> Any:
    fix = f"write a whole number >= {lo} without quotes, e.g. `{key}: {example}`"
    return Field(example, alias=key, ge=lo, strict=True, json_schema_extra={"fix": fix})


def _flag(key: str, default: bool) -> Any:
    fix = f"write `{key}: {str(default).lower()}` (true or false, without quotes)"
    return Field(default, alias=key, strict=True, json_schema_extra={"fix": fix})


Text = Annotated[str, BeforeValidator(_text)]
_HOSTS_FIX = "write a list of strings, e.g. `amqpUris: [amqp://host:5672]`"
_MAPPING_FIX = "write a mapping, e.g. `queueArguments: {x-max-length-bytes: 20000000000}`"


class RabbitMQDriverFile(BaseModel):
    """Every key of a RabbitMQ driver file with its OMB default (null keeps the default)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: Text = Field("RabbitMQ", json_schema_extra={"fix": "write `name: RabbitMQ`"})
    driver_class: Text | None = Field(None, alias="driverClass")
    amqp_uris: Annotated[
        tuple[Annotated[str, AfterValidator(_uri)], ...], BeforeValidator(_one_or_list)
    ] = Field((), alias="amqpUris", json_schema_extra={"fix": _HOSTS_FIX})
    brokers: Annotated[tuple[str, ...], BeforeValidator(_one_or_list)] = Field(
        (), json_schema_extra={"fix": "write a list of hosts, e.g. `brokers: [10.0.0.1]`"}
    )
    message_persistence: bool = _flag("messagePersistence", False)
    queue_type: Annotated[Text, AfterValidator(_queue_type)] = Field("CLASSIC", alias="queueType")
    exchange_type: Annotated[Text, AfterValidator(_exchange_type)] = Field(
        "FANOUT", alias="exchangeType"
    )
    exclusive: bool = _flag("exclusive", False)
    producer_creation_delay: int = _count(0, 100, "producerCreationDelay")
    producer_creation_batch_size: int = _count(1, 5, "producerCreationBatchSize")
    consumer_creation_delay: int = _count(0, 100, "consumerCreationDelay")
    consumer_creation_batch_size: int = _count(1, 5, "consumerCreationBatchSize")
    prefetch_count: Annotated[int, AfterValidator(_prefetch)] = _count(1, 1000, "prefetchCount")
    auto_ack: bool = _flag("autoAck", False)
    max_pending_confirms: int = _count(1, 10_000, "maxPendingConfirms")
    stream_offset: Annotated[Text, AfterValidator(_stream_offset)] = Field(
        "first", alias="streamOffset"
    )
    queue_arguments: Annotated[tuple[tuple[str, Any], ...], BeforeValidator(_pairs)] = Field(
        (), alias="queueArguments", json_schema_extra={"fix": _MAPPING_FIX}
    )
    ha_policy: Annotated[tuple[tuple[str, Any], ...], BeforeValidator(_pairs)] = Field(
        (), alias="haPolicy", json_schema_extra={"fix": "write e.g. `haPolicy: {ha-mode: all}`"}
    )

    @model_validator(mode="before")
    @classmethod
    def _null_keeps_default(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="after")
    def _combinations(self) -> RabbitMQDriverFile:
        if self.queue_type == "STREAM":
            if self.auto_ack:
                raise problem(
                    "streams need manual acknowledgements and a prefetch (RabbitMQ rejects "
                    "auto-ack consumers on a stream)",
                    "`autoAck: false`",
                    key="autoAck",
                )
            if self.exclusive:
                raise problem("a stream cannot be exclusive", "`exclusive: false`",
                              key="exclusive")
        if self.ha_policy and self.queue_type != "CLASSIC":
            raise problem(
                "mirroring applies to classic queues only (quorum queues and streams "
                "replicate by themselves)",
                "remove haPolicy or use queueType: CLASSIC",
                key="haPolicy",
            )
        return self
