"""Which broker process a test needs: its kind, the part of its durability level that
needs a process of its own, and a study case's broker or bookie settings.

Tests with one key share one broker process (``fixtures._BrokerProcesses``), and the
collection orders tests by key (``hooks._group_by_broker_process``) so a session
restarts its broker as rarely as the keys allow.
"""

from __future__ import annotations

import sys
from typing import Any

from pytest_brokerperf import brokers

#: (broker kind, ``restart_key`` of the level, a study case's server settings)
ServerSettings = tuple[tuple[str, str], ...]
ProcessKey = tuple[str, int | None, ServerSettings]


def study_server_settings(item: Any) -> ServerSettings:
    """The broker or bookie settings of the test's study case for its broker kind
    (``StudyCase.server_config``); none for any other test. Imports nothing:
    only a test module that imported the study cases can be parametrized with one."""
    cases = sys.modules.get("pytest_brokerperf.scenario_library.study_cases")
    params = getattr(getattr(item, "callspec", None), "params", {})
    if cases is None or "broker_kind" not in params:
        return ()
    for value in params.values():
        if isinstance(value, cases.StudyCase):
            return value.server_config(str(params["broker_kind"]))
    return ()


def process_key(item: Any, *, remote: bool) -> ProcessKey | None:
    """The broker process ``item`` needs (None: no broker test). A remote cluster takes
    no settings from us (the case's run notes them instead)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "broker_kind" not in callspec.params:
        return None
    kind = str(callspec.params["broker_kind"])
    level = brokers.get(kind).restart_key(callspec.params.get("broker_durability"))
    return kind, level, () if remote else study_server_settings(item)
