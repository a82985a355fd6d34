"""``when`` selectors: which runs (broker, scenario, env, params) an SLO applies to."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from pytest_brokerperf.judge.slo.vocabulary import EXPR_SOURCE, _err


def _matches(want: Any, have: Any) -> bool:
    """Equal, equal as text (YAML ``4`` vs a parameter ``"4"``), or a glob match."""
    if have is None:
        return False
    if want == have or str(want) == str(have):
        return True
    if isinstance(have, bool) or isinstance(want, bool):
        return str(want).lower() == str(have).lower()
    return isinstance(want, str) and fnmatchcase(str(have), want)


@dataclass(frozen=True)
class Selector:
    """When an SLO applies. Each given field must match; a list means any of; strings
    may be globs (``kafka*``). ``params`` entries must be present in the test's
    parameters and equal. An empty selector applies everywhere."""

    broker: tuple[str, ...] | None = None
    scenario: tuple[str, ...] | None = None
    params: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    env: tuple[str, ...] | None = None

    @classmethod
    def from_mapping(
        cls,
        when: Any,
        *,
        source: str = EXPR_SOURCE,
        key: str = "when",
        where: Callable[..., str] | None = None,
    ) -> Selector:
        """Build from ``{broker: kafka, scenario: tailread, params: {...}, env: ci}``.

        ``environment`` and ``parameters`` are accepted for ``env`` and ``params``.
        ``where(*keys)`` gives the source (``file:line``) of a nested key, so an error
        names the exact line; without it every error cites ``source``.
        """

        def at(*keys: str) -> str:
            return where(*keys) if where is not None else source

        if when is None:
            return cls()
        if isinstance(when, Selector):
            return when
        if not isinstance(when, Mapping):
            raise _err(
                source,
                key,
                when,
                "expected a mapping",
                f"write `{key}: {{broker: kafka, scenario: tailread}}`",
            )
        allowed = ("broker", "scenario", "params", "env")
        kwargs: dict[str, Any] = {}
        for written, value in when.items():
            name = _SELECTOR_ALIASES.get(written, written)
            if name in kwargs:
                raise _err(
                    at(str(written)),
                    f"{key}.{written}",
                    value,
                    f"selector {name!r} is given twice",
                    "keep one (a list matches any of several values)",
                )
            if name not in allowed:
                near = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise _err(
                    at(str(written)),
                    f"{key}.{name}",
                    value,
                    f"unknown selector{hint}; selectors are {', '.join(allowed)}",
                    "use one of those keys",
                )
            if name == "params":
                if not isinstance(value, Mapping):
                    raise _err(
                        at(str(written)),
                        f"{key}.params",
                        value,
                        "expected a mapping of parameter name to value",
                        f"write `{key}: {{params: {{partitions: 4}}}}`",
                    )
                kwargs["params"] = tuple(
                    (str(p), _as_choices(v, at(str(written), str(p)), f"{key}.params.{p}"))
                    for p, v in value.items()
                )
            else:
                choices = _as_choices(value, at(str(written)), f"{key}.{name}")
                kwargs[name] = tuple(str(v) for v in choices)
        return cls(**kwargs)

    def matches(
        self,
        broker: str | None,
        scenario: str | None,
        params: Mapping[str, Any] | None = None,
        env: str | None = None,
    ) -> bool:
        for wanted, have in ((self.broker, broker), (self.scenario, scenario), (self.env, env)):
            if wanted is not None and not any(_matches(w, have) for w in wanted):
                return False
        params = params or {}
        for name, choices in self.params:
            if name not in params or not any(_matches(c, params[name]) for c in choices):
                return False
        return True

    def describe(self) -> str:
        """``broker=kafka scenario=tailread partitions=4`` (empty when unconditional)."""
        parts: list[str] = []
        for label, values in (("broker", self.broker), ("scenario", self.scenario)):
            if values is not None:
                parts.append(f"{label}={'|'.join(values)}")
        parts.extend(f"{p}={'|'.join(str(c) for c in cs)}" for p, cs in self.params)
        if self.env is not None:
            parts.append(f"env={'|'.join(self.env)}")
        return " ".join(parts)


_SELECTOR_ALIASES = {"environment": "env", "parameters": "params"}
_CHOICE_EXAMPLES = {"broker": "kafka", "scenario": "tailread", "env": "ci"}


def _as_choices(value: Any, source: str, key: str) -> tuple[Any, ...]:
    values = list(value) if isinstance(value, list | tuple) else [value]
    if not values:
        raise _err(source, key, value, "an empty list matches nothing", "give at least one value")
    for v in values:
        if v is None or isinstance(v, Mapping | list | tuple):
            leaf = key.rsplit(".", 1)[-1]
            example = _CHOICE_EXAMPLES.get(leaf, "4")
            raise _err(
                source,
                key,
                value,
                "expected a value or a list of values",
                f"write e.g. `{leaf}: {example}` or `{leaf}: [{example}, ...]`",
            )
    return tuple(values)
