"""Warnings issued by pytest-brokerperf.

``BrokerPerfWarning`` derives from :class:`UserWarning`, not ``pytest.PytestWarning``,
because the modules that issue it (workload and driver loading, SLO parsing) are used
outside pytest (the ``brokerperf`` CLI, Spark executors) and must not import pytest.
Filter it with ``-W error::pytest_brokerperf.core.warnings.BrokerPerfWarning`` or
``filterwarnings`` in pytest.
"""

from __future__ import annotations

__all__ = ["BrokerPerfWarning"]


class BrokerPerfWarning(UserWarning):
    """Something pytest-brokerperf ignored or changed that the user should know about.

    Examples: an unknown key in a workload YAML (OMB ignores it silently), a fork-only
    key that is not implemented, a setting that has no effect.
    """
