"""SLO files: ``slos:`` lists of expressions or fields with ``when`` selectors, loaded
with errors that name the file, line and key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_brokerperf.core.errors import SLOSyntaxError
from pytest_brokerperf.core.files import load_yaml as _load_yaml
from pytest_brokerperf.core.files import validate
from pytest_brokerperf.judge.slo.expression import (
    SLO,
    _apply_multiplier,
    _normalize_unit,
    _validate,
)
from pytest_brokerperf.judge.slo.selector import Selector
from pytest_brokerperf.judge.slo.vocabulary import _VALUE_RE, METRICS, OPERATORS, _err


def load_slo_file(path: str | Path) -> list[SLO]:
    """Read an SLO file (``slos:`` list of ``expr``/``metric,op,value[,unit]`` entries with
    optional ``when`` selectors); errors name the file, line and key."""
    path = Path(path)
    doc = _load_yaml(path, SLOSyntaxError, "SLO")
    data = doc.data

    def where(*keys: str | int) -> str:
        line = doc.line(*keys)
        return f"{path}:{line}" if line else str(path)

    if data is None:
        raise SLOSyntaxError(
            f"{path}: the SLO file is empty, so nothing would be judged (an empty file is "
            'more often a mistake than a wish). Fix: write `slos:` then `  - expr: '
            '"e2e_response.p99 < 50 ms"`, or drop --brokerperf-slo.')
    if isinstance(data, Mapping):
        from pytest_brokerperf.judge.slo.file_model import SLOFile

        validate(SLOFile, data, source=str(path), line_of=doc.line, error=SLOSyntaxError)
        entries = data.get("slos")
        prefix: tuple[str, ...] = ("slos",)
    else:
        entries, prefix = data, ()
    if entries is None or entries == []:
        raise _err(
            where(*prefix), "slos", entries, "the SLO file lists no SLO, so nothing would "
            "be judged", 'write `slos:` then `  - expr: "e2e_response.p99 < 50 ms"`')
    if not isinstance(entries, list):
        raise _err(
            where(*prefix),
            "slos",
            entries,
            "expected a list of SLO entries",
            'write `slos:` then `  - expr: "e2e_response.p99 < 50 ms"`',
        )
    slos: list[SLO] = []
    for i, entry in enumerate(entries):
        # YAML keeps the last of two equal keys silently: a second `when:` would widen or
        # narrow an SLO without a word.
        for keys in ((), ("when",), ("when", "params")):
            for dup, line in doc.duplicate_keys(*prefix, i, *keys):
                label = ".".join((f"slos[{i}]", *keys, dup))
                raise _err(
                    f"{path}:{line}",
                    label,
                    dup,
                    "this key appears twice in one mapping (YAML keeps only the last)",
                    "remove one of them",
                )
        slos.append(_load_entry(entry, i, prefix, where, str(path), doc.line))
    return slos


def _load_entry(
    entry: Any,
    i: int,
    prefix: tuple[str, ...],
    where: Callable[..., str],
    source: str,
    line_of: Callable[..., int | None],
) -> SLO:
    label = f"slos[{i}]"
    if isinstance(entry, str):
        return SLO.parse(entry, source=where(*prefix, i), key=label)
    if not isinstance(entry, Mapping):
        raise _err(
            where(*prefix, i),
            label,
            entry,
            "expected an SLO entry (a mapping with `expr` or `metric`/`op`/`value`)",
            '`- expr: "e2e_response.p99 < 50 ms"`',
        )
    # The entry's keys and form (pytest_brokerperf/judge/slo/file_model.py); the grammar is below.
    from pytest_brokerperf.judge.slo.file_model import SLOEntry

    validate(
        SLOEntry,
        entry,
        source=source,
        line_of=line_of,
        error=SLOSyntaxError,
        prefix=(*prefix, i),
        label_prefix=label,
    )
    when_src = where(*prefix, i, "when")
    when = Selector.from_mapping(
        entry.get("when"),
        source=when_src,
        key=f"{label}.when",
        where=lambda *keys: where(*prefix, i, "when", *keys),
    )
    raw_description = entry.get("description")
    description = None if raw_description is None else str(raw_description)
    if "expr" in entry:
        src = where(*prefix, i, "expr")
        slo = SLO.parse(entry["expr"], source=src, key=f"{label}.expr", description=description)
        return _with_when(slo, when)
    metric, op, value = entry["metric"], entry["op"], entry["value"]
    unit = entry.get("unit", "")
    src = where(*prefix, i, "metric")
    if not isinstance(op, str) or op not in OPERATORS:
        raise _err(
            where(*prefix, i, "op"),
            f"{label}.op",
            op,
            "unknown operator",
            f'quote one of {" ".join(OPERATORS)}, e.g. `op: "<="`',
        )
    value_src = where(*prefix, i, "value")
    if isinstance(value, str):
        m = _VALUE_RE.match(value)
        if m is None:
            raise _err(
                value_src,
                f"{label}.value",
                value,
                "expected a number with an optional unit",
                "write e.g. `value: 50 ms` or `value: 50` with `unit: ms`",
            )
        if m["unit"] and "unit" in entry:
            raise _err(
                value_src,
                f"{label}.value",
                value,
                "the unit is given twice (in `value` and in `unit`)",
                "remove one",
            )
        number: Any = float(m["number"])
        unit = _normalize_unit(m["unit"]) if m["unit"] else unit
        if isinstance(metric, str):
            number, unit = _apply_multiplier(metric, number, unit)
    else:
        number = value
    if not isinstance(unit, str):
        raise _err(
            where(*prefix, i, "unit"), f"{label}.unit", unit, "expected a unit name", "e.g. ms"
        )
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise _err(value_src, f"{label}.value", value, "expected a number", "e.g. `value: 0`")
    text = f"{metric} {op} {value}{' ' + unit if unit and not isinstance(value, str) else ''}"
    err_src, err_key = src, f"{label}.metric"
    if metric in METRICS:  # a unit or value problem is reported at the value (or unit) line
        unit_key = "unit" if "unit" in entry else "value"
        err_src, err_key = where(*prefix, i, unit_key), f"{label}.{unit_key}"
    _validate(metric, op, float(number), _normalize_unit(unit), err_src, err_key, text)
    return SLO(
        metric=metric,
        op=op,
        value=float(number),
        unit=_normalize_unit(unit),
        when=when,
        source=src,
        description=description,
    )


def _with_when(slo: SLO, when: Selector) -> SLO:
    return SLO(slo.metric, slo.op, slo.value, slo.unit, when, slo.source, slo.description)
