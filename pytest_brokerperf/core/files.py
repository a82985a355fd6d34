"""The user's YAML files, read with line numbers, and their declared models' errors.

Every file pytest-brokerperf reads (OMB workload and driver files, SLO files) goes through
:func:`load_yaml`, which keeps PyYAML's node tree next to the data so an error can name the
line of any key or list item (:meth:`YamlDoc.line`). Files whose keys are declared as
pydantic models (``pytest_brokerperf.models``) are checked by :func:`validate`, which turns
pydantic's first error into the project's :class:`ConfigError`::

    rabbitmq.yaml:4: amqpUris[1] = 'http://x': expected amqp:// or amqps:// URIs. Fix: ...

that is file:line, the key (list items as ``key[i]``, nested keys with dots), the value as
written, the problem and the fix. pydantic is imported only when a file is validated, so
``pytest --help`` does not pay for it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from pytest_brokerperf.core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

    M = TypeVar("M", bound=BaseModel)

__all__ = [
    "JAVA_INT_MAX",
    "LINES",
    "PYTHON_SOURCE",
    "LineOf",
    "YamlDoc",
    "closest",
    "joined",
    "lines",
    "load_yaml",
    "parse_label",
    "problem",
    "render",
    "split_joined",
    "type_name",
    "validate",
    "where",
]

#: Java's ``Integer.MAX_VALUE``: the bound of the Java int keys of OMB's files
JAVA_INT_MAX = 2**31 - 1

#: Bounds of a file the plugin reads (a workload, driver or SLO file is a few KiB): a
#: hostile or broken file is refused in milliseconds, naming file:line, instead of
#: burning CPU and memory before any check ("billion laughs": nested aliases).
MAX_YAML_BYTES = 1024 * 1024
MAX_YAML_ALIASES = 100
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000  # nodes once every alias is expanded


class _Bounds(Exception):
    def __init__(self, line: int | None, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.line, self.problem, self.fix = line, problem, fix


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting aliases and nesting while it composes nodes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0
        self.first_alias_line: int | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self.first_alias_line is None:
                self.first_alias_line = line
            if self._aliases > MAX_YAML_ALIASES:
                raise _Bounds(line,
                              f"more than {MAX_YAML_ALIASES} aliases (*name)",
                              "write the values out instead of repeating anchors")
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Bounds(line,
                              f"nested deeper than {MAX_YAML_DEPTH} levels",
                              "flatten the file; workload, driver and SLO files need a few "
                              "levels")
            node: yaml.Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1


def _expanded_nodes(root: yaml.Node) -> int:
    """Nodes in the document with every alias expanded (memoized: linear in the file)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order without recursion: children are sized before parents
        node, children_done = stack.pop()
        if children_done:
            total = 1 + sum(max(sizes.get(id(c), 1), 1) for c in _children(node))
            sizes[id(node)] = min(total, MAX_YAML_NODES + 1)
            continue
        if id(node) in sizes:
            continue
        sizes[id(node)] = -1  # in progress (a recursive alias counts as one value)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


#: ``line_of(*path)``: the 1-based line of the key or list item at ``path``, or None.
LineOf = Callable[..., "int | None"]


@dataclass(frozen=True)
class YamlDoc:
    """A parsed YAML document plus its node tree, so errors can cite line numbers."""

    data: Any
    root: yaml.Node | None

    def _walk(self, path: tuple[str | int, ...]) -> tuple[yaml.Node | None, int | None]:
        node, line = self.root, None
        for part in path:
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                        node, line = value_node, key_node.start_mark.line + 1
                        break
                else:
                    return None, line
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return None, line
        return node, line

    def line(self, *path: str | int) -> int | None:
        """1-based line of the key (or list item) at ``path``; the nearest parent's if absent."""
        return self._walk(path)[1]

    def duplicate_keys(self, *path: str | int) -> list[tuple[str, int]]:
        """Keys that appear twice in the mapping at ``path`` (PyYAML keeps the last silently)."""
        node = self._walk(path)[0] if path else self.root
        if not isinstance(node, yaml.MappingNode):
            return []
        seen: set[str] = set()
        dups: list[tuple[str, int]] = []
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    dups.append((key_node.value, key_node.start_mark.line + 1))
                seen.add(key_node.value)
        return dups


def load_yaml(path: Path, error: type[ConfigError], what: str) -> YamlDoc:
    """Parse one YAML file, turning every failure into ``error`` with file and line."""
    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise error(
                f"{path}: the {what} file is {path.stat().st_size:,} bytes, more than the "
                f"{MAX_YAML_BYTES:,} a {what} file may have. Fix: check it is the right file.")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(
            f"{path}: {what} file not found (looked in {path.resolve().parent}). "
            f"Fix: check the path; relative paths are taken from the current directory "
            f"{Path.cwd()}."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {what} file: {exc}. Fix: check the file.") from None
    loader = _BoundedLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None and _expanded_nodes(root) > MAX_YAML_NODES:
            raise _Bounds(loader.first_alias_line or root.start_mark.line + 1,
                          f"more than {MAX_YAML_NODES:,} values once its aliases are expanded",
                          "write the values out instead of nesting anchors in anchors")
        data = loader.construct_document(root) if root is not None else None
    except _Bounds as exc:
        raise error(f"{path}:{exc.line}: the {what} file is refused: {exc.problem}. "
                    f"Fix: {exc.fix}.") from None
    except RecursionError:
        raise error(f"{path}: the {what} file is refused: nested too deeply to read. "
                    "Fix: flatten the file.") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        detail = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise error(
            f"{path}{where}: invalid YAML in the {what} file: {detail}. "
            f"Fix: correct the YAML syntax at that line (indentation, quoting, a missing ':')."
        ) from None
    except yaml.YAMLError as exc:
        raise error(
            f"{path}: invalid YAML in the {what} file: {exc}. Fix: correct the YAML syntax."
        ) from None
    finally:
        loader.dispose()
    return YamlDoc(data, root)


def closest(word: str, candidates: list[str]) -> str | None:
    """The closest candidate, also matching snake_case/case variants of camelCase keys."""
    folded = {c.replace("_", "").lower(): c for c in candidates}
    exact = folded.get(word.replace("_", "").replace("-", "").lower())
    if exact is not None:
        return exact
    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


#: ``source`` of values built in Python rather than read from a file.
PYTHON_SOURCE = "<python>"


def type_name(value: Any) -> str:
    """``null`` for None, else the Python type's name (as YAML users read it)."""
    return "null" if value is None else type(value).__name__


def where(source: str, line: int | None) -> str:
    """``file:line``, or the source alone when the line is unknown."""
    return f"{source}:{line}" if line else source


#: Line lookup of the file being loaded, so checks run while a class is built from the
#: file's values (``__post_init__``) can cite lines.
LINES: ContextVar[LineOf | None] = ContextVar("LINES", default=None)


@contextmanager
def lines(line_of: LineOf | None) -> Iterator[None]:
    """Make ``line_of`` the line lookup (:data:`LINES`) inside the block."""
    token = LINES.set(line_of)
    try:
        yield
    finally:
        LINES.reset(token)


# --------------------------------------------------------------------------------------
# pydantic errors -> ConfigError
# --------------------------------------------------------------------------------------

#: pydantic error types -> the problem in the project's words (``{type}``: the value's type).
_PROBLEMS: dict[str, str] = {
    "int_type": "expected a whole number, got {type}",
    "int_parsing": "expected a whole number, got {type}",
    "int_from_float": "expected a whole number, got {type}",
    "float_type": "expected a number, got {type}",
    "float_parsing": "expected a number, got {type}",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false, got {type}",
    "bool_parsing": "expected true or false, got {type}",
    "string_type": "expected text, got {type}",
    "list_type": "expected a list, got {type}",
    "tuple_type": "expected a list, got {type}",
    "dict_type": "expected a mapping, got {type}",
    "model_type": "expected a mapping, got {type}",
    "model_attributes_type": "expected a mapping, got {type}",
    "greater_than_equal": "expected a number >= {ge}",
    "greater_than": "expected a number > {gt}",
    "less_than_equal": "expected a number <= {le}",
    "less_than": "expected a number < {lt}",
    "literal_error": "expected one of {expected}",
}

#: Custom error type raised by the models' own checks (``problem`` and ``fix`` in ctx).
CUSTOM = "brokerperf"


def problem(message: str, fix: str, **ctx: Any) -> Exception:
    """An error for a model validator: ``message`` and ``fix`` reach the user as written.

    ``key=`` (a dotted or ``[i]`` path relative to the model) moves the error to another key,
    for checks across fields (a model validator's own location is the whole mapping).
    """
    from pydantic_core import PydanticCustomError

    return PydanticCustomError(CUSTOM, "{problem}", {"problem": message, "fix": fix, **ctx})


def _label(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_label(label: str) -> tuple[str | int, ...]:
    """``"a.b[2]"`` → ``("a", "b", 2)``: a key as messages name it, as a path for lines."""
    parts: list[str | int] = []
    for dotted in label.split("."):
        name, _, rest = dotted.partition("[")
        if name:
            parts.append(name)
        for index in filter(None, rest.replace("]", "").split("[")):
            parts.append(int(index))
    return tuple(parts)


def validate(
    model: type[M],
    data: Mapping[str, Any],
    *,
    source: str,
    line_of: LineOf | None,
    error: type[ConfigError] = ConfigError,
    prefix: tuple[str | int, ...] = (),
    label_prefix: str = "",
    unset_note: str = "the default",
) -> M:
    """``model.model_validate(data)``; every error becomes one line of ``error``, each with
    file:line (one per key: a union's alternatives would repeat it).

    ``line_of(*path)`` finds lines (``YamlDoc.line``; None for data built in Python).
    ``prefix`` is the path of ``data`` inside the file (for lines), ``label_prefix`` how keys
    are named in messages (``"slos[2]"``). The fix comes from the custom error's ``fix`` or
    from the field's ``json_schema_extra={"fix": ...}``.
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        seen: dict[tuple[Any, ...], str] = {}
        for err in exc.errors():
            seen.setdefault(tuple(err["loc"]), render(
                err, model, data, source=source, line_of=line_of, prefix=prefix,
                label_prefix=label_prefix, unset_note=unset_note))
        raise error(joined(list(seen.values()), source)) from None


def joined(problems: list[str], source: str) -> str:
    """One problem as it is; several under a line that counts them, one per line."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in {source}:\n  " + "\n  ".join(problems)


def split_joined(text: str) -> list[str]:
    """The problems of a message :func:`joined` made (to join them with more)."""
    first, _, rest = text.partition("\n  ")
    if rest and first.endswith(":") and " problems in " in first:
        return rest.split("\n  ")
    return [text]


def render(
    err: Any,
    model: type[BaseModel],
    data: Mapping[str, Any],
    *,
    source: str,
    line_of: LineOf | None,
    prefix: tuple[str | int, ...] = (),
    label_prefix: str = "",
    unset_note: str = "the default",
) -> str:
    """One pydantic error dict as ``file:line: key = value: problem. Fix: fix.``"""
    ctx = err.get("ctx") or {}
    loc: tuple[str | int, ...] = tuple(err["loc"])
    value = err.get("input")
    if "key" in ctx:  # a cross-field check names the key it is about
        loc = parse_label(ctx["key"])
        value = _lookup(data, loc, ctx.get("value", value))
    if err["type"] == CUSTOM:
        text, fix = ctx["problem"], ctx["fix"]
    elif err["type"] == "extra_forbidden":
        text, fix = _unknown(model, str(loc[-1]))
    else:
        text = _PROBLEMS.get(err["type"], err["msg"]).format(type=type_name(value), **ctx)
        fix = _field_fix(model, loc) or "correct the value"
    line = line_of(*prefix, *loc) if line_of is not None else None
    label = _label(loc)
    name = _field_name(model, loc)
    if source == PYTHON_SOURCE and name is not None and name != loc[0]:
        label = f"{label} (Python: {name})"
    if label_prefix:
        label = f"{label_prefix}.{label}" if label else label_prefix
    if line_of is not None and line is None and loc:
        unset = f" (not in the file: {unset_note})"
    else:
        unset = ""
    return f"{where(source, line)}: {label} = {_listed(value)!r}{unset}: {text}. Fix: {fix}."


def _unknown(model: type[BaseModel], key: str) -> tuple[str, str]:
    """Problem and fix for a key the model does not declare (``extra="forbid"``)."""
    extra = model.model_config.get("json_schema_extra")
    if isinstance(extra, dict) and "unknown" in extra:
        return str(extra["unknown"]), str(extra.get("unknown_fix", "remove or rename it"))
    keys = [info.alias or name for name, info in model.model_fields.items()]
    near = difflib.get_close_matches(key, keys, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown key{hint}; keys are {', '.join(keys)}", "remove or rename it"


def _listed(value: Any) -> Any:
    """Tuples shown as YAML lists, as the user wrote them."""
    if isinstance(value, tuple):
        return [_listed(v) for v in value]
    return value


def _field_name(model: type[BaseModel], loc: tuple[str | int, ...]) -> str | None:
    if not loc:
        return None
    for name, info in model.model_fields.items():
        if loc[0] in (name, info.alias):
            return name
    return None


def _lookup(data: Any, loc: tuple[str | int, ...], default: Any) -> Any:
    for part in loc:
        found = (isinstance(data, Mapping) and part in data) or (
            isinstance(data, list | tuple) and isinstance(part, int) and part < len(data)
        )
        if not found:
            return default
        data = data[part]
    return data


def _field_fix(model: type[BaseModel], loc: tuple[str | int, ...]) -> str | None:
    """The ``fix`` of the field a location starts with (by alias or by name)."""
    if not loc:
        return None
    for name, info in model.model_fields.items():
        if loc[0] in (name, info.alias):
            extra = info.json_schema_extra
            fix = extra.get("fix") if isinstance(extra, dict) else None
            return str(fix) if fix is not None else None
    return None
