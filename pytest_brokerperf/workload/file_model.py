"""The OMB workload file's keys and types, declared (OMB main's ``Workload.java`` plus
AutoMQ's and Confluent's extensions; docs/reference/workload.md).

The model is built from the field table in :mod:`pytest_brokerperf.workload.fields`
(one row per key: attribute, OMB key, kind, example), so each key is written once. It takes
the values as OMB's Jackson would (``1.0`` for an int, a number for a string) and refuses
the rest with the key's example as the fix. Checks across keys (one entry per topic, a
backlog needs a subscription, ...) stay with :class:`~pytest_brokerperf.workload.model.Workload`,
which knows the derived numbers.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, create_model

from pytest_brokerperf.core.files import closest, problem, type_name
from pytest_brokerperf.workload.fields import (
    FIELDS,
    JAVA_INT_MAX,
    JAVA_LONG_MAX,
    KeyDistributor,
    WorkloadField,
)

__all__ = ["workload_model"]

_BY_ATTR = {f.attr: f for f in FIELDS}


def _field(info: ValidationInfo) -> WorkloadField:
    return _BY_ATTR[str(info.field_name)]


def _whole(value: Any, f: WorkloadField, limit: int = JAVA_INT_MAX) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not value.is_integer())
    ):
        raise problem(
            f"expected a whole number, got {type_name(value)}",
            f"write a number without quotes, e.g. `{f.key}: {f.example}`",
        )
    if abs(int(value)) > limit:
        raise problem(
            f"out of range for OMB (Java int, at most {limit})", "use a smaller value"
        )
    return int(value)


def _number(value: Any, f: WorkloadField) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise problem(
            f"expected a number, got {type_name(value)}",
            f"write a number without quotes, e.g. `{f.key}: {f.example}`",
        )
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _text(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # Jackson coerces scalars to String
    if value is not None and not isinstance(value, str):
        f = _field(info)
        raise problem(f"expected text, got {type_name(value)}", f"quote it, e.g. `{f.key}: "
                      f"{f.example}`")
    return value


def _int(value: Any, info: ValidationInfo) -> int:
    f = _field(info)
    number = _whole(value, f)
    if f.maximum is not None and number > f.maximum:
        raise problem(f"more than the {f.maximum:,} a run can use ({f.why_max})",
                      f"write `{f.key}: {f.maximum}` or less")
    return number


def _num(value: Any, info: ValidationInfo) -> int | float:
    f = _field(info)
    number = _number(value, f)
    if f.attr == "consumer_backlog_size_gb" and isinstance(number, int):
        return _whole(number, f, limit=JAVA_LONG_MAX)  # a Java long in OMB
    return number


def _ratio(value: Any, info: ValidationInfo) -> float:
    return float(_number(value, _field(info)))


def _bool(value: Any, info: ValidationInfo) -> bool:
    if not isinstance(value, bool):
        f = _field(info)
        raise problem(f"expected true or false, got {type_name(value)}",
                      f"write `{f.key}: {f.example}` without quotes")
    return value


def _enum(value: Any, info: ValidationInfo) -> KeyDistributor:
    if isinstance(value, KeyDistributor):
        return value
    if not isinstance(value, str) or value not in KeyDistributor.__members__:
        f = _field(info)
        names = list(KeyDistributor.__members__)
        near = closest(str(value), names)
        hint = f" (did you mean {near}?)" if near else ""
        raise problem(f"not a key distributor{hint}; OMB accepts {', '.join(names)}",
                      f"write `{f.key}: {near or names[0]}`")
    return KeyDistributor(value)


def _int_list(value: Any, info: ValidationInfo) -> Any:
    if value is not None and not isinstance(value, list | tuple):
        f = _field(info)
        raise problem(
            f"expected a list with one whole number per topic, got {type_name(value)}",
            f"write `{f.key}: {f.example}`",
        )
    return value


def _rate_list(value: Any, info: ValidationInfo) -> Any:
    if value is not None and (
        not isinstance(value, list | tuple) or not all(isinstance(e, list | tuple) for e in value)
    ):
        f = _field(info)
        raise problem(
            "expected a list of [minutesFromStart, rate] or [hour, minute, rate] entries",
            f"write `{f.key}: {f.example}`",
        )
    return value


_Int = Annotated[int, BeforeValidator(_int)]
_Num = Annotated[int | float, BeforeValidator(_num)]

#: Field kind -> declared type (validators run first and do Jackson's coercions).
KINDS: dict[str, Any] = {
    "str": Annotated[str | None, BeforeValidator(_text)],
    "int": _Int,
    "num": _Num,
    "ratio": Annotated[float, BeforeValidator(_ratio)],
    "bool": Annotated[bool, BeforeValidator(_bool)],
    "enum": Annotated[KeyDistributor, BeforeValidator(_enum)],
    "int_list": Annotated[tuple[_Int, ...] | None, BeforeValidator(_int_list)],
    "rate_list": Annotated[tuple[tuple[_Num, ...], ...] | None, BeforeValidator(_rate_list)],
}


@cache
def workload_model() -> type[BaseModel]:
    """The declared model of a workload file: one field per row of the field table, named
    by attribute, aliased by OMB key. Every value is required: the Workload class passes
    all of them (its own defaults are OMB's)."""
    fields: dict[str, Any] = {
        f.attr: (KINDS[f.kind], Field(alias=f.key, json_schema_extra={"fix": f"write `{f.key}: "
                                                                        f"{f.example}`"}))
        for f in FIELDS
    }
    return create_model(
        "WorkloadFile",
        __config__=ConfigDict(extra="forbid", frozen=True),
        **fields,
    )
