"""Every package of the source tree is shipped: the wheel lists packages explicitly."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest_brokerperf

PACKAGE = Path(pytest_brokerperf.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PACKAGE.parent).parts)
             for p in PACKAGE.rglob("__init__.py")}
    missing = sorted(found - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_test_modules_have_unique_names() -> None:
    """The test directories have no __init__.py, so pytest imports each test module by
    its basename: two with one name stop the whole collection ("import file mismatch")."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
