"""The project's own test settings, kept to the project's tests.

Warnings are errors here (a warning in the plugin is a bug to fix), but only for the
tests under ``tests/``: set in ``pyproject.toml`` they would also apply to
``pytest scenarios ...`` run from a checkout — the shipped suite users run — where a
typo'd workload key must warn, and ``--brokerperf-inconclusive=warn`` must stay a
warning, exactly as they do outside a checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

#: One mark, its filters applied in order: every warning is an error, then
#: confluent-kafka's own deprecation warnings (not ours to fix) are ignored.
STRICT_WARNINGS = pytest.mark.filterwarnings(
    "error", "ignore::DeprecationWarning:confluent_kafka.*")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(STRICT_WARNINGS)
