"""Brokers read the session's settings through a narrow typed view
(``brokers.base.BrokerSettings``), never the configuration layer itself."""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_brokerperf.brokers.base import BrokerSettings
from pytest_brokerperf.config.settings import Settings

BROKERS = Path(__file__).resolve().parents[2] / "pytest_brokerperf" / "brokers"

#: the layers above brokers/ (docs/explanation/architecture.md)
FORBIDDEN = ("pytest_brokerperf.config.settings", "pytest_brokerperf.scenario_library",
             "pytest_brokerperf.report", "pytest_brokerperf.config.options",
             "pytest_brokerperf.config.parsers")


def _imports(path: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.lineno, node.module)]
            if node.module == "pytest_brokerperf":
                out += [(node.lineno, f"pytest_brokerperf.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def test_no_broker_module_imports_config_scenarios_or_the_report() -> None:
    found = [f"{p.relative_to(BROKERS.parent)}:{line}: {mod}"
             for p in sorted(BROKERS.rglob("*.py")) for line, mod in _imports(p)
             if mod.startswith(FORBIDDEN)]
    assert found == []


def test_the_plugins_settings_give_every_field_of_the_view() -> None:
    members = {n for n in vars(BrokerSettings) if not n.startswith("_")}
    assert {"nodes", "provision_effective", "kafka_bootstrap", "image_for",
            "sources"} <= members
    settings = Settings()
    assert [m for m in sorted(members) if not hasattr(settings, m)] == []
