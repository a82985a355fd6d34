"""pytest-brokerperf: scenario-based message-broker performance tests for pytest.

The public API, imported lazily so that loading the pytest plugin (which imports this
package) never pulls in broker clients, numpy or YAML::

    from pytest_brokerperf import TailRead, Workload, BrokerEndpoint
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from pytest_brokerperf.versions import __version__

_EXPORTS = {
    "BrokerEndpoint": "pytest_brokerperf.endpoint",
    "BrokerPerf": "pytest_brokerperf.runner",
    "ScenarioResult": "pytest_brokerperf.scenario_library.base",
    "PreparedRun": "pytest_brokerperf.engine.prepared",
    "Scenario": "pytest_brokerperf.scenario_library.base",
    "RunContext": "pytest_brokerperf.scenario_library.context",
    "TailRead": "pytest_brokerperf.scenario_library.tailread",
    "CatchUp": "pytest_brokerperf.scenario_library.catchup",
    "Mixed": "pytest_brokerperf.scenario_library.mixed",
    "Reassign": "pytest_brokerperf.scenario_library.reassign",
    "Soak": "pytest_brokerperf.scenario_library.soak",
    "Throughput": "pytest_brokerperf.scenario_library.throughput",
    "Workload": "pytest_brokerperf.workload",
    "StudyCase": "pytest_brokerperf.study_cases",
    "ProducerTweak": "pytest_brokerperf.brokers.producer_tweak",
    "KafkaDriverConfig": "pytest_brokerperf.brokers.kafka.config",
    "LatencyHistogram": "pytest_brokerperf.metrics.histogram",
    "Settings": "pytest_brokerperf.config",
    "BrokerPerfWarning": "pytest_brokerperf.warnings",
    "BrokerPerfError": "pytest_brokerperf.errors",
    "ConfigError": "pytest_brokerperf.errors",
    "WorkloadError": "pytest_brokerperf.errors",
    "SLOSyntaxError": "pytest_brokerperf.errors",
    "ProvisionError": "pytest_brokerperf.errors",
    "BrokerUnavailable": "pytest_brokerperf.errors",
    "DriverError": "pytest_brokerperf.errors",
    "MeasurementError": "pytest_brokerperf.errors",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_brokerperf' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return __all__
