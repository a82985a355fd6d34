"""The package's import graph has no cycles, and the plugin's import path stays light.

Imports are counted at any depth: a function-level import is still a dependency, and so
is one under ``if TYPE_CHECKING:`` (a type a module names is a module it knows; the
layer contract counts it too).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest_brokerperf

PACKAGE = Path(pytest_brokerperf.__file__).parent
ROOT = "pytest_brokerperf"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    out: set[str] = set()

    def add(name: str) -> None:
        while name and name not in known:  # ``from a.b import c``: c may be a module
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith(ROOT):
                        add(alias.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module if is_package else module.rpartition(".")[0]
                    for _ in range(child.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                if base.startswith(ROOT):
                    for alias in child.names:
                        full = f"{base}.{alias.name}"
                        add(full if full in known else base)
            visit(child)

    visit(tree)
    return out


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: _imports(ast.parse(path.read_text(encoding="utf-8")), name,
                           path.name == "__init__.py", known)
            for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def strong(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_walker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_only_and_function_level_imports_count() -> None:
    known = {"pytest_brokerperf.a", "pytest_brokerperf.b", "pytest_brokerperf.c"}
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n"
                     "    from pytest_brokerperf.b import B\n"
                     "def f():\n"
                     "    from pytest_brokerperf import c\n")
    assert _imports(tree, "pytest_brokerperf.a", False, known) == {
        "pytest_brokerperf.b", "pytest_brokerperf.c"}


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "pytest_brokerperf.plugin.hooks" in graph
    assert cycles(graph) == []


def _contract_layers() -> list[str]:
    import tomllib

    cfg = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    contracts = cfg["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == "layers")["layers"]


def test_every_top_level_package_has_its_layer() -> None:
    """The layer contract (pyproject.toml, checked by ``lint-imports`` in CI) names every
    package at the top of pytest_brokerperf: a new one must be given its place."""
    packages = sorted(p.name for p in PACKAGE.iterdir()
                      if (p / "__init__.py").is_file())
    assert sorted(_contract_layers()) == packages
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert modules == [], "the top of the package holds packages only"


def test_loading_the_plugin_imports_no_client_library_or_numpy() -> None:
    code = ("import sys, pytest_brokerperf.plugin.hooks, pytest_brokerperf.plugin.fixtures; "
            "heavy = [m for m in ('confluent_kafka', 'pulsar', 'pika', 'numpy', 'hdrh', "
            "'pyspark', 'pydantic') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_file_classes_import_pydantic_only_when_a_file_is_checked() -> None:
    code = ("import sys, pytest_brokerperf.workload.model, pytest_brokerperf.judge.slo, "
            "pytest_brokerperf.brokers.kafka.config, pytest_brokerperf.brokers.pulsar.config, "
            "pytest_brokerperf.brokers.rabbitmq.config as r; before = 'pydantic' in sys.modules; "
            "r.RabbitMQDriverConfig(); print(before, 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["False", "True"]


def test_the_public_api_names_no_broker_kind() -> None:
    """``from pytest_brokerperf import X`` gives what scenarios and users' tests share; a
    broker's own types (``KafkaDriverConfig``...) stay in its package."""
    from pytest_brokerperf import _EXPORTS, brokers

    kinds = {f"{ROOT}.brokers.{k}" for k in brokers.BUILTIN}
    assert sorted(name for name, module in _EXPORTS.items()
                  if any(module == k or module.startswith(f"{k}.") for k in kinds)) == []
