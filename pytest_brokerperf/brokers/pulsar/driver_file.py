"""The OMB Pulsar driver file's blocks (OMB's driver-pulsar/*.yaml), declared.

Each block (``client``, ``client.persistence``, ``client.retention``, ``producer``,
``consumer``) is a model built from its key table in
:mod:`pytest_brokerperf.brokers.pulsar.config` (key, attribute, kind, minimum, choices),
so a key is written once; docs/reference/pulsar.md describes the keys.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from pytest_brokerperf.core.files import JAVA_INT_MAX, problem, type_name

__all__ = ["KeySpec", "block_model"]


class KeySpec(Protocol):
    """One row of a Pulsar key table."""

    @property
    def key(self) -> str: ...
    @property
    def attr(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def minimum(self) -> int | None: ...
    @property
    def choices(self) -> tuple[str, ...]: ...
    @property
    def nullable(self) -> bool: ...


def _fold(value: str, choices: tuple[str, ...]) -> str | None:
    """Case- and separator-insensitive match of an enum value (``key_shared``, ``KeyShared``)."""
    norm = value.replace("_", "").replace("-", "").lower()
    for c in choices:
        if c.replace("_", "").replace("-", "").lower() == norm:
            return c
    return None


def _check(spec: KeySpec, value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip() and spec.nullable):
        if spec.nullable:
            return None
        raise problem("must not be empty", "give it a value")
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise problem(f"expected true or false, got {type_name(value)}",
                          f"write `{spec.key}: true` or `{spec.key}: false`")
        return value
    if spec.kind == "int":
        example = max(spec.minimum or 0, 1)
        if isinstance(value, bool) or not isinstance(value, int):
            raise problem(f"expected a whole number, got {type_name(value)}",
                          f"write e.g. `{spec.key}: {example}`")
        if spec.minimum is not None and value < spec.minimum:
            raise problem(f"must be >= {spec.minimum}", f"write e.g. `{spec.key}: {example}`")
        if value > JAVA_INT_MAX:
            raise problem(f"larger than Java's Integer.MAX_VALUE ({JAVA_INT_MAX})",
                          f"use at most {JAVA_INT_MAX}")
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise problem(f"expected text, got {type_name(value)}",
                      f"write a single value, e.g. `{spec.key}: ...` on one line")
    text = str(value).strip()
    if spec.kind == "choice":
        found = _fold(text, spec.choices)
        if found is None:
            raise problem(f"expected one of {', '.join(spec.choices)}",
                          f"write `{spec.key}: {spec.choices[0]}`")
        return found
    return text


@cache
def block_model(name: str, keys: tuple[KeySpec, ...]) -> type[BaseModel]:
    """The model of one block: a field per key (attribute name, OMB key as alias). Absent
    keys stay absent (``model_fields_set``): the config classes hold the defaults."""
    fields: dict[str, Any] = {
        spec.attr: (Annotated[Any, BeforeValidator(partial(_check, spec))],
                    Field(None, alias=spec.key))
        for spec in keys
    }
    return create_model(name, __config__=ConfigDict(extra="ignore", frozen=True), **fields)
