"""Java ``.properties`` text (OMB's Kafka driver files hold client settings that way),
parsed like ``java.util.Properties``: ``k=v``, ``k: v``, ``k v``, ``#``/``!`` comments,
backslash continuations and escapes, insertion order kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_brokerperf.core.errors import ConfigError

PYTHON_SOURCE = "<python>"
# --------------------------------------------------------------------------------------
# Java properties
# --------------------------------------------------------------------------------------


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first physical line number, logical line) with backslash continuations joined."""
    pending: str | None = None
    start = 0
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = n, ""
        pending += line
        trailing = len(pending) - len(pending.rstrip("\\"))
        if trailing % 2 == 1:  # odd number of backslashes: line continues
            pending = pending[:-1]
            continue
        yield start, pending
        pending = None
    if pending is not None:
        yield start, pending


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest.rstrip())


def _to_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class JavaProperties(Mapping[str, str]):
    """An immutable, ordered, hashable and picklable ``str -> str`` mapping.

    Immutable so :class:`KafkaDriverConfig` can be a frozen dataclass that is safe to
    send to worker processes; ordered so effective settings print in the user's order.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        merged: dict[str, str] = {}
        for k, v in pairs:
            merged[str(k)] = _to_str(v)
        self._items: tuple[tuple[str, str], ...] = tuple(merged.items())

    @classmethod
    def parse(cls, text: str, *, source: str = PYTHON_SOURCE, key: str = "") -> JavaProperties:
        """Parse a Java properties string; the last of duplicate keys wins (as in Java)."""
        pairs: list[tuple[str, str]] = []
        for n, line in _logical_lines(text):
            name, value = _split_property(line)
            if not name:
                where = f"{key}, property line {n}" if key else f"property line {n}"
                raise ConfigError(
                    f"{source}: {where} = {line!r}: the property has no name. "
                    "Fix: write `name=value`, e.g. `linger.ms=1`."
                )
            pairs.append((name, value))
        return cls(pairs)

    def to_text(self) -> str:
        """``k=v`` lines that :meth:`parse` (and Java) read back to the same mapping."""

        def esc(s: str, is_key: bool) -> str:
            s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
            if is_key:
                s = re.sub(r"([=: ])", r"\\\1", s)
            elif s.startswith(" "):
                s = "\\" + s
            return s

        return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in self._items)

    def merged(self, *others: Mapping[str, Any]) -> JavaProperties:
        """A copy with ``others`` applied in order; a ``None`` value removes the key."""
        result = dict(self._items)
        for other in others:
            for k, v in other.items():
                if v is None:
                    result.pop(k, None)
                else:
                    result[k] = _to_str(v)
        return JavaProperties(result)

    def __getitem__(self, key: str) -> str:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"JavaProperties({dict(self._items)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (JavaProperties, (self._items,))
