"""The OMB Kafka driver file (OMB's driver-kafka/*.yaml), declared.

Field names are :class:`~pytest_brokerperf.brokers.kafka.config.KafkaDriverConfig`'s
attributes; aliases are OMB's keys. The four properties blocks stay as written (a Java
properties string or a mapping); the config class parses them (docs/reference/kafka.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
)

from pytest_brokerperf.core.files import problem

_RF_FIX = "write `replicationFactor: 3` (or 1 on a single-node broker)"


def _text(value: Any) -> Any:
    """Scalars become text, as Jackson reads a YAML number into a String field."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def _replication_factor(value: int) -> int:
    if not (value == -1 or value >= 1):
        raise problem(
            "must be a whole number >= 1, or -1 for the broker's default.replication.factor",
            _RF_FIX,
        )
    return value


def _properties(value: Any, info: ValidationInfo) -> Any:
    """A properties block: Java properties text, or a mapping of scalar values."""
    key = KafkaDriverFile.model_fields[str(info.field_name)].alias
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for name, v in value.items():
            if isinstance(v, list | dict):
                raise problem("property values must be scalars", "write a single value",
                              key=f"{key}.{name}")
        return value
    raise problem(
        "expected a Java properties block",
        f"write `{key}: |` followed by indented `name=value` lines",
    )


Properties = Annotated[Any, AfterValidator(_properties)]
Text = Annotated[str, BeforeValidator(_text)]


class KafkaDriverFile(BaseModel):
    """Every key of an OMB Kafka driver file with its default (null keeps the default)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: Text = Field("Kafka", json_schema_extra={"fix": "write `name: Kafka`"})
    driver_class: Text | None = Field(
        None, alias="driverClass", json_schema_extra={"fix": "write `driverClass: Kafka`"}
    )
    replication_factor: Annotated[int, AfterValidator(_replication_factor)] = Field(
        -1, alias="replicationFactor", strict=True, json_schema_extra={"fix": _RF_FIX}
    )
    reset: bool = Field(
        False,
        strict=True,
        json_schema_extra={
            "fix": "write `reset: false` (pytest-brokerperf deletes only its own topics)"
        },
    )
    topic_config: Properties = Field("", alias="topicConfig")
    common_config: Properties = Field("", alias="commonConfig")
    producer_config: Properties = Field("", alias="producerConfig")
    consumer_config: Properties = Field("", alias="consumerConfig")
