"""What a fault is: an action on one broker node (or, for a power cut, every node at
once) into the measured window.

Grammar (one fault per test; a comma-separated option gives one test per fault)::

    ACTION@AT[:DURATION][/TARGET]

    kill-broker@10s            SIGKILL the node at 10 s; restarted 10 s later
    kill-broker@10s:30s        ... restarted 30 s later
    pause-broker@10s:5s        SIGSTOP at 10 s, SIGCONT 5 s later (default 5 s)
    restart-broker@10s/node-2  SIGTERM (graceful stop), started again at once
    power-cut@10s              SIGKILL the node and drop every write it never fsynced
                               (its data directory is on the power-cut filesystem,
                               --brokerperf-powercut-fs); restarted 10 s later
    power-cut@10s:5s/all       every node's power cut at the same instant (a whole
                               cluster losing its page caches); all restarted 5 s later

``AT`` counts from the start of the measured window (after the warm-up); ``TARGET`` is
``leader`` (the node leading the run's first topic or queue, the default), ``node-N``,
or ``all`` (power-cut only). A killed node is always started again, so the session's
broker is whole for the next test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_brokerperf.core.errors import ConfigError

__all__ = ["ALL_NODES", "FAULT_ACTIONS", "WHOLE_CLUSTER_ACTIONS", "FaultSpec", "fault_ids",
           "fault_problem", "parse_fault", "parse_faults"]

#: action -> (short id used in test ids, default duration in s or None)
FAULT_ACTIONS: dict[str, tuple[str, float | None]] = {
    "kill-broker": ("kill", 10.0),
    "pause-broker": ("pause", 5.0),
    "restart-broker": ("restart", None),
    "power-cut": ("powercut", 10.0),
}

_SPEC = re.compile(
    r"^(?P<action>[a-z-]+)@(?P<at>[0-9.]+)(?P<at_unit>s|ms)?"
    r"(?::(?P<dur>[0-9.]+)(?P<dur_unit>s|ms)?)?"
    r"(?:/(?P<target>[A-Za-z0-9_-]+))?$")
_TARGET = re.compile(r"^(leader|all|node-[1-9][0-9]*)$")
#: The target that strikes every node at once, and the actions that take it.
ALL_NODES = "all"
WHOLE_CLUSTER_ACTIONS = ("power-cut",)
_EXAMPLES = ("kill-broker@10s, pause-broker@10s:5s, restart-broker@10s/node-2, "
             "power-cut@10s:5s, power-cut@10s:5s/all")


@dataclass(frozen=True)
class FaultSpec:
    """One fault: ``action`` on ``target`` at ``at_s`` into the measured window."""

    action: str
    at_s: float
    duration_s: float | None = None  # how long a killed node stays down / a pause lasts
    target: str = "leader"

    @property
    def whole_cluster(self) -> bool:
        """Whether the fault strikes every node at the same instant (``/all``)."""
        return self.target == ALL_NODES

    @property
    def short(self) -> str:
        """The test-id part: ``kill``, ``pause``, ``restart``, ``powercut``;
        ``powercut-all`` for a whole-cluster power cut."""
        short = FAULT_ACTIONS[self.action][0]
        return f"{short}-all" if self.whole_cluster else short

    @property
    def node_index(self) -> int | None:
        """N of a ``node-N`` target (1-based); None for ``leader`` and ``all``."""
        return int(self.target.split("-", 1)[1]) if self.target.startswith("node-") else None

    def text(self) -> str:
        """The canonical spelling (what the record's ``params.fault`` holds)."""
        dur = f":{self.duration_s:g}s" if self.duration_s is not None else ""
        return f"{self.action}@{self.at_s:g}s{dur}/{self.target}"

    def __str__(self) -> str:
        return self.text()


#: Stats periods the measured window must hold before the fault (the sound window).
MIN_PERIODS_BEFORE = 2


def timing_problem(fault: FaultSpec, period_s: float, measure_s: float) -> str | None:
    """Why ``fault`` cannot strike where it is asked in a measured window of ``measure_s``
    with stats periods of ``period_s``, or None. Checked before any broker starts (the
    flag's faults, against the session's window) and again when the scenario's own window
    is known."""
    at_s = fault.at_s
    if at_s < MIN_PERIODS_BEFORE * period_s:
        return (f"fault {fault}: it strikes {at_s:g} s into the measured window, before "
                f"{MIN_PERIODS_BEFORE} stats periods of {period_s:g} s showed the run sound. "
                f"Fix: AT >= {MIN_PERIODS_BEFORE * period_s:g}s")
    if at_s >= measure_s - period_s:
        return (f"fault {fault}: it strikes {at_s:g} s into a measured window of "
                f"{measure_s:g} s, leaving less than one period of {period_s:g} s to see its "
                f"effect. Fix: an earlier AT, or --brokerperf-duration >= "
                f"{at_s + 5 * period_s:g}")
    return None


def _seconds(number: str, unit: str | None) -> float:
    value = float(number)
    return value / 1000 if unit == "ms" else value


def fault_problem(text: str) -> FaultSpec | str:
    """The fault ``text`` names, or what is wrong with it and how to fix it."""
    raw = text.strip()
    m = _SPEC.match(raw)
    if m is None:
        return (f"fault {raw!r} is not ACTION@AT[:DURATION][/TARGET]. Fix: write e.g. "
                f"{_EXAMPLES}")
    action = m["action"]
    if action not in FAULT_ACTIONS:
        return (f"unknown fault action {action!r} in {raw!r}. Fix: one of "
                f"{', '.join(FAULT_ACTIONS)}")
    try:
        at = _seconds(m["at"], m["at_unit"])
        dur = _seconds(m["dur"], m["dur_unit"]) if m["dur"] is not None else None
    except ValueError:
        return f"fault {raw!r}: times must be numbers of seconds (e.g. {_EXAMPLES})"
    if action == "restart-broker" and dur is not None:
        return (f"fault {raw!r}: restart-broker takes no duration (the node starts again as "
                f"soon as it stopped). Fix: drop ':{m['dur']}{m['dur_unit'] or ''}', or use "
                "kill-broker@AT:DOWN")
    if dur is not None and dur <= 0:
        return f"fault {raw!r}: the duration must be > 0 s"
    target = m["target"] or "leader"
    if not _TARGET.match(target):
        return (f"fault {raw!r}: target {target!r} is not 'leader', 'all' or node-N "
                "(1-based). Fix: e.g. /leader, /node-2 or (power-cut only) /all")
    if target == ALL_NODES and action not in WHOLE_CLUSTER_ACTIONS:
        return (f"fault {raw!r}: only {', '.join(WHOLE_CLUSTER_ACTIONS)} strikes every node "
                f"at once (/all); {action} strikes one node. Fix: /leader or /node-N, or "
                f"power-cut@{m['at']}{m['at_unit'] or 's'}/all")
    default = FAULT_ACTIONS[action][1]
    return FaultSpec(action=action, at_s=at, duration_s=dur if dur is not None else default,
                     target=target)


def parse_fault(text: str, source: str) -> FaultSpec:
    """One fault spec; ConfigError naming ``source`` (flag, marker), the value and the fix."""
    got = fault_problem(text)
    if isinstance(got, str):
        raise ConfigError(f"{source}: {got}")
    return got


def parse_faults(text: str, source: str) -> tuple[FaultSpec, ...]:
    """A comma-separated list of faults (one test each); empty text gives none."""
    return tuple(parse_fault(part, source) for part in text.split(",") if part.strip())


def fault_ids(specs: tuple[FaultSpec, ...]) -> list[str]:
    """Test ids: ``kill``, ``pause``, ``restart``, ``powercut``, ``powercut-all``;
    ``kill-10s-leader`` and so on when two faults would share an id."""
    shorts = [s.short for s in specs]
    return [s.short if shorts.count(s.short) == 1
            else f"{s.short}-{s.at_s:g}s" + ("" if s.whole_cluster else f"-{s.target}")
            for s in specs]
