"""Which CPUs a local broker gets and which the load generator keeps.

Brokers and load generators share one machine; pinning the broker to its own CPU keeps
the generator's pacing from competing with the broker for a core, and the split is
recorded with every result so a reader sees it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CpuAffinity", "allowed_cpus", "broker_cpus", "check_cpus_allowed", "cpu_layout",
           "default_broker_cpus", "pinned_coordinator"]

#: The CPUs this process was allowed when the plugin loaded, before a load session
#: narrows the pytest process to the generator's CPUs (:func:`pinned_coordinator`).
_ALLOWED: frozenset[int] = frozenset(os.sched_getaffinity(0))


def allowed_cpus() -> set[int]:
    """The CPUs brokers, generators and the coordinator are laid out on: this process's
    affinity as it was before any pinning (re-read when the process was not pinned by
    us, e.g. ``taskset`` around pytest, so a narrowed start is respected)."""
    if _PINNED:
        return set(_ALLOWED)
    return set(os.sched_getaffinity(0))


_PINNED: list[frozenset[int]] = []  # the stack of active coordinator pins


@contextmanager
def pinned_coordinator(cpus: Collection[int] | None) -> Iterator[tuple[int, ...] | None]:
    """Pin every thread of this (pytest) process — the coordinator and the broker-metrics
    sampler — to ``cpus`` for a load session, off the broker's CPUs; restore after.

    ``sched_setaffinity`` acts per thread, so each of ``/proc/self/task`` is pinned
    (threads created meanwhile inherit from their creator). Yields the CPUs pinned to
    (None: not pinned: no CPUs given, or the kernel refused).
    """
    want = frozenset(cpus or ())
    if not want:
        yield None
        return
    before: dict[int, set[int]] = {}
    try:
        for tid in _threads():
            with suppress(OSError):
                before[tid] = set(os.sched_getaffinity(tid))
                os.sched_setaffinity(tid, want)
    except OSError:
        _restore(before)
        yield None
        return
    _PINNED.append(want)
    try:
        yield tuple(sorted(want))
    finally:
        _PINNED.pop()
        _restore(before)
        # threads started during the session inherited the pin: widen them too
        for tid in _threads():
            if tid not in before:
                with suppress(OSError):
                    os.sched_setaffinity(tid, _ALLOWED)


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def _restore(before: Mapping[int, set[int]]) -> None:
    for tid, mask in before.items():
        with suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, mask)


def default_broker_cpus(available: set[int] | None = None) -> set[int] | None:
    """The last allowed CPU when there are several (the generator gets the rest), else None."""
    cpus = set(available) if available is not None else allowed_cpus()
    if len(cpus) < 2:
        return None
    return {max(cpus)}


def broker_cpus(requested: Collection[int] | None) -> set[int] | None:
    """A provisioner's ``cpus=`` argument resolved: None = the default split, empty = no pinning."""
    if requested is None:
        return default_broker_cpus()
    return set(requested) or None


def check_cpus_allowed(cpus: Collection[int] | None) -> None:
    """Refuse pinning to CPUs this process may not use (a broker's ``cpus=`` argument)."""
    if cpus:
        allowed = allowed_cpus()
        if not set(cpus) <= allowed:
            from pytest_brokerperf.core.errors import ConfigError

            raise ConfigError(
                f"cpus={sorted(cpus)} is not a subset of the CPUs this process may "
                f"use ({sorted(allowed)})"
            )


@dataclass(frozen=True)
class CpuAffinity:
    """The CPU split of a local broker: what it was pinned to, and each node's mask as read back."""

    broker_cpus: tuple[int, ...] | None  # None: not pinned
    generator_cpus: tuple[int, ...]
    #: node name -> the CPUs the kernel reports for its process (None: could not be read)
    nodes: Mapping[str, tuple[int, ...] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, pinned: set[int] | None,
           nodes: Mapping[str, set[int] | None]) -> CpuAffinity:
        """The split for brokers pinned to ``pinned``; the generator keeps the other CPUs."""
        available = allowed_cpus()
        return cls(
            broker_cpus=tuple(sorted(pinned)) if pinned else None,
            generator_cpus=tuple(sorted(available - pinned if pinned else available)),
            nodes={k: tuple(sorted(v)) if v is not None else None for k, v in nodes.items()},
        )

    def as_info(self) -> dict[str, Any]:
        """The ``endpoint.info["cpu_affinity"]`` mapping (lists, JSON-ready)."""
        return {
            "broker_cpus": list(self.broker_cpus) if self.broker_cpus is not None else None,
            "generator_cpus": list(self.generator_cpus),
            "nodes": {k: list(v) if v is not None else None for k, v in self.nodes.items()},
        }


def cpu_layout(broker: Collection[int] | None, generator: Collection[int] | None,
               coordinator: Collection[int] | None = None) -> dict[str, Any]:
    """Who ran on which CPUs during a run, and whether the split was clean.

    ``broker``: the local broker's pinned CPUs (None: not pinned, or remote);
    ``generator``: the worker processes' CPUs (None: not pinned); ``coordinator``: the
    pytest process's CPUs, where the coordinator and the broker-metrics sampler run
    (default: this process's affinity). A clean split gives each its own CPUs; a machine
    with too few cores shares them, and ``note`` says which share with which.
    """
    mine = sorted(coordinator if coordinator is not None else allowed_cpus())
    b = sorted(broker) if broker else None
    g = sorted(generator) if generator else None
    shared: list[str] = []
    if b is None:
        shared.append("the broker is not pinned (remote, or pinning off)")
    elif g is not None and set(b) & set(g):
        shared.append(f"broker and generator share CPUs {sorted(set(b) & set(g))}")
    if g is None:
        shared.append("the generator workers are not pinned")
    for name, cpus in (("generator", g), ("broker", b)):
        if cpus is not None and set(mine) & set(cpus):
            shared.append("the coordinator and metrics sampler (the pytest process"
                          + (", pinned" if coordinator is not None else ", not pinned")
                          + f") share CPUs {sorted(set(mine) & set(cpus))} with the {name}")
    clean = not shared
    return {
        "broker_cpus": b, "generator_cpus": g, "coordinator_cpus": mine,
        "clean_split": clean,
        "note": None if clean else (
            f"no clean CPU split on {len(allowed_cpus())} CPUs: "
            + "; ".join(shared)
            + ". Latency figures include that contention; a machine with a CPU each for "
            "the broker, the generator and the coordinator gives a clean split"),
    }
