"""The SLO file (docs/reference/slo.md), declared: the top level and each entry's keys.

An entry is either ``expr: "<metric> <op> <number> [unit]"`` or ``metric``/``op``/``value``
(and ``unit``), with an optional ``when`` selector and ``description``. The model checks the
keys and their shape; the SLO grammar itself (metrics, operators, units, numbers) stays in
:mod:`pytest_brokerperf.judge.slo`, which also reads SLOs given on the command line.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_brokerperf.core.files import problem, type_name

__all__ = ["SLOEntry", "SLOFile"]

_FORM_FIX = 'give `expr: "lost == 0"` or all of `metric`, `op` and `value`'


class SLOFile(BaseModel):
    """The top level: one key, ``slos``, a list of entries (or nothing)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "unknown": "unknown top-level key; an SLO file has one key, `slos`",
            "unknown_fix": "put every SLO under `slos:`",
        },
    )

    slos: list[Any] | None = Field(
        None,
        json_schema_extra={
            "fix": 'write `slos:` then `  - expr: "e2e_response.p99 < 50 ms"`',
        },
    )


class SLOEntry(BaseModel):
    """One entry of ``slos:`` written as a mapping."""

    model_config = ConfigDict(extra="forbid")

    expr: Any = None
    metric: Any = Field(None, json_schema_extra={"fix": "e.g. `metric: lost`"})
    op: Any = None
    value: Any = None
    unit: Any = Field(None, json_schema_extra={"fix": "e.g. `unit: ms`"})
    when: Any = None
    description: Any = None

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise problem(f"expected a metric name, got {type_name(value)}", "e.g. `lost`")
        return value

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise problem(f"expected a unit name, got {type_name(value)}", "e.g. ms")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> SLOEntry:
        given = self.model_fields_set
        parts = [k for k in ("metric", "op", "value", "unit") if k in given]
        if "expr" in given:
            if parts:
                raise problem(
                    "an entry has either `expr` or `metric`/`op`/`value`, not both",
                    "keep one form",
                    key=parts[0],
                )
            return self
        missing = [k for k in ("metric", "op", "value") if k not in given]
        if missing:
            raise problem(f"missing {', '.join(missing)}", _FORM_FIX, key=missing[0], value=None)
        return self
