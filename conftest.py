"""Repo-root conftest: lets ``pytest scenarios`` work from a checkout.

When the package is installed (``pip install -e .``) its pytest11 entry point loads the
plugin; only when it is not installed does this file load it, so it is never
registered twice.
"""

from importlib.metadata import entry_points

if not any(ep.value == "pytest_brokerperf.plugin.hooks" for ep in entry_points(group="pytest11")):
    pytest_plugins = ["pytest_brokerperf.plugin.hooks"]
