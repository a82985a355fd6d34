"""The project's own test settings, kept to the project's tests.

Provisioning: the tests run local processes unless they ask for another mode (below).

Warnings are errors here (a warning in the plugin is a bug to fix), but only for the
tests under ``tests/``: set in ``pyproject.toml`` they would also apply to
``pytest scenarios ...`` run from a checkout — the shipped suite users run — where a
typo'd workload key must warn, and ``--brokerperf-inconclusive=warn`` must stay a
warning, exactly as they do outside a checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent

# The project's tests say which provisioning mode they measure: `auto` means local
# processes here, and tests of containers ask for them (--brokerperf-provision=container).
# Left to the machine, `auto` would move every process-mode test into containers on an
# engine holding the images (as in CI). Children (pytester subprocesses) inherit it.
os.environ.setdefault("BROKERPERF_AUTO_PROVISION", "process")

#: One mark, its filters applied in order: every warning is an error, then
#: confluent-kafka's own deprecation warnings (not ours to fix) are ignored.
STRICT_WARNINGS = pytest.mark.filterwarnings(
    "error", "ignore::DeprecationWarning:confluent_kafka.*")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(STRICT_WARNINGS)
