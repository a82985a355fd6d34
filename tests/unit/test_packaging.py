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
