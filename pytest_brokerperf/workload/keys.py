"""The keys of an OMB workload file: each one honoured or refused.

A workload file's mapping is split here into the keys the :class:`~pytest_brokerperf.
workload.Workload` takes (OMB main's, AutoMQ's and Confluent's: the field table in
:mod:`pytest_brokerperf.workload.fields`) and the rest, which are refused with
file:line, key, value, the problem and the fix:

* keys of other OMB forks and older OMB versions that the engine does not implement
  (:data:`FOREIGN_KEYS`), with what they would have done;
* unknown keys (``messageSzie``), with the closest known key.

OMB itself (Jackson with ``FAIL_ON_UNKNOWN_PROPERTIES`` off) ignores unknown keys
silently, so a typo runs a different test. ``--brokerperf-lenient`` (``lenient=True``)
turns those refusals into warnings for files written for a newer OMB; the keys left out
are returned so the record can list them (``workload.ignored_keys``). Pre-existing topic
lists stay refused even then: they would test other topics than the file says.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from pytest_brokerperf.core.errors import WorkloadError
from pytest_brokerperf.core.files import PYTHON_SOURCE, closest, joined, parse_label, type_name
from pytest_brokerperf.core.warnings import BrokerPerfWarning
from pytest_brokerperf.workload.fields import FIELDS

__all__ = ["BY_ATTR", "BY_KEY", "FOREIGN_KEYS", "Problem", "read_keys", "warn_at"]

BY_ATTR = {f.attr: f for f in FIELDS}
BY_KEY = {f.key: f for f in FIELDS}

#: Keys of OMB forks and older OMB versions that are known but not implemented.
FOREIGN_KEYS: dict[str, str] = {
    "existingTopicList": "Redpanda fork: pre-existing topics",
    "existingProduceTopicList": "Redpanda fork: pre-existing topics",
    "existingConsumeTopicList": "Redpanda fork: pre-existing topics",
    "sampleRateMillis": "Redpanda fork: use logIntervalMillis instead",
    "drainProducerRate": "Redpanda fork: producer rate during backlog drain",
    "nameFormat": "OMB workload *template* key (WorkloadGenerationTool), not a workload key",
    "messageRateReceivedForSubscription": "old OMB fork key",
    "producerStartRate": "old OMB fork key (rate discovery start)",
    "acceptableBacklog": "old OMB fork key (rate discovery)",
    "producerIncrementRate": "old OMB fork key",
    "producerIncrementSeconds": "old OMB fork key",
    "producerPauseBeforeDrain": "old OMB fork key",
    "producerPauseDuringDrain": "old OMB fork key",
}

LENIENT_FIX = "or pass --brokerperf-lenient to ignore keys this version does not know"


class Problem(Exception):
    """One validation failure, rendered into a :class:`WorkloadError` with the source."""

    def __init__(self, attr: str, value: Any, problem: str, fix: str, key: str | None = None):
        super().__init__(problem)
        self.attr, self.value, self.problem, self.fix = attr, value, problem, fix
        self.key = key or BY_ATTR[attr].key

    def render(self, source: str, line_of: Callable[..., int | None] | None) -> str:
        line = line_of(*parse_label(self.key)) if line_of else None
        where = f"{source}:{line}" if line else source
        key = self.key
        if source == PYTHON_SOURCE and self.attr != self.key:
            key = f"{self.key} (Python: {self.attr})"
        unset = " (not in the file: OMB's default)" if line_of and line is None else ""
        return f"{where}: {key} = {self.value!r}{unset}: {self.problem}. Fix: {self.fix}."


def warn_at(warning: Warning, source: str, line: int | None) -> None:
    """Warn with the user's file and line as the warning's location (pytest's warnings
    summary names it), not the harness's code that read the file."""
    if source.startswith("<"):  # built in Python: no file to point at
        warnings.warn(warning, stacklevel=3)
        return
    warnings.warn_explicit(warning, type(warning), filename=source, lineno=line or 1,
                           module=source)


def read_keys(data: Any, source: str, line_of: Callable[[str], int | None] | None, *,
              lenient: bool = False, refused: list[str] | None = None
              ) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The Workload's keyword arguments from an OMB mapping, and the keys left out.

    Refuses (:class:`WorkloadError`) every key that is not honoured, all named at once,
    unless ``lenient``: then every such key is left out with a :class:`BrokerPerfWarning`
    and returned. Given ``refused``, the refusals are appended there instead of raised
    (so the caller reports them with the file's other problems). ``null`` values leave
    OMB's default in place (as Jackson does).
    """
    if not isinstance(data, Mapping):
        raise WorkloadError(
            f"{source}: a workload must be a mapping of OMB keys, got {type_name(data)}. "
            "Fix: write `key: value` lines such as `topics: 1`."
        )
    kwargs: dict[str, Any] = {}
    ignored: list[str] = []
    problems: list[str] = []
    known = [f.key for f in FIELDS]
    for key, value in data.items():
        f = BY_KEY.get(key) if isinstance(key, str) else None
        if f is not None:
            if value is not None:
                kwargs[f.attr] = value
            continue
        line = line_of(key) if line_of and isinstance(key, str) else None
        where = f"{source}:{line}" if line else source
        foreign = FOREIGN_KEYS.get(key) if isinstance(key, str) else None
        if foreign is not None and key.startswith("existing") and value:
            problems.append(
                f"{where}: {key} = {value!r}: pre-existing topic lists ({foreign}) are not "
                "supported; the harness creates and deletes its own topics. "
                "Fix: remove the key and set `topics:`."
            )
            continue
        if foreign is not None:
            problem = f"{foreign}; pytest-brokerperf does not implement it"
            fix = f"remove the key, {LENIENT_FIX}"
        else:
            near = closest(str(key), known)
            problem = (f"unknown workload key{f' (did you mean {near!r}?)' if near else ''}; "
                       "OMB would ignore it silently and run another test than the file says")
            fix = (f"rename it to `{near}`" if near else "remove it") + f", {LENIENT_FIX}"
        if not lenient:
            problems.append(f"{where}: {key} = {value!r}: {problem}. Fix: {fix}.")
            continue
        ignored.append(str(key))
        warn_at(BrokerPerfWarning(
            f"{where}: {key} = {value!r}: {problem}; ignored (--brokerperf-lenient)."),
            source, line)
    if refused is not None:
        refused.extend(problems)
    elif problems:
        raise WorkloadError(joined(problems, source))
    return kwargs, tuple(ignored)
