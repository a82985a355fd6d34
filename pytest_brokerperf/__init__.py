"""pytest-brokerperf: scenario-based message-broker performance tests for pytest.

The public API, imported lazily so that loading the pytest plugin (which imports this
package) never pulls in broker clients, numpy or YAML. It names no broker kind: a
broker's own types live in its package (``pytest_brokerperf.brokers.kafka.config``)::

    from pytest_brokerperf import TailRead, Workload, BrokerEndpoint
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from pytest_brokerperf.brokers.versions import __version__

_EXPORTS = {
    "BrokerEndpoint": "pytest_brokerperf.brokers.endpoint",
    "BrokerPerf": "pytest_brokerperf.plugin.runner",
    "ScenarioResult": "pytest_brokerperf.scenario_library.base",
    "PreparedRun": "pytest_brokerperf.results.prepared",
    "Scenario": "pytest_brokerperf.scenario_library.base",
    "RunContext": "pytest_brokerperf.scenario_library.context",
    "TailRead": "pytest_brokerperf.scenario_library.tailread",
    "CatchUp": "pytest_brokerperf.scenario_library.catchup",
    "Mixed": "pytest_brokerperf.scenario_library.mixed",
    "Reassign": "pytest_brokerperf.scenario_library.reassign",
    "Soak": "pytest_brokerperf.scenario_library.soak",
    "Throughput": "pytest_brokerperf.scenario_library.throughput",
    "Workload": "pytest_brokerperf.workload.model",
    "StudyCase": "pytest_brokerperf.scenario_library.study_cases",
    "ProducerTweak": "pytest_brokerperf.brokers.producer_tweak",
    "LatencyHistogram": "pytest_brokerperf.metrics.histogram",
    "Settings": "pytest_brokerperf.config.settings",
    "BrokerPerfWarning": "pytest_brokerperf.core.warnings",
    "BrokerPerfError": "pytest_brokerperf.core.errors",
    "ConfigError": "pytest_brokerperf.core.errors",
    "WorkloadError": "pytest_brokerperf.core.errors",
    "SLOSyntaxError": "pytest_brokerperf.core.errors",
    "ProvisionError": "pytest_brokerperf.core.errors",
    "BrokerUnavailable": "pytest_brokerperf.core.errors",
    "DriverError": "pytest_brokerperf.core.errors",
    "MeasurementError": "pytest_brokerperf.core.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_brokerperf' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
