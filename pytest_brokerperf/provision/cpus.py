"""Which CPUs a local broker gets and which the load generator keeps.

Brokers and load generators share one machine; pinning the broker to its own CPU keeps
the generator's pacing from competing with the broker for a core, and the split is
recorded with every result so a reader sees it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CpuAffinity", "broker_cpus", "check_cpus_allowed", "default_broker_cpus"]


def default_broker_cpus(available: set[int] | None = None) -> set[int] | None:
    """The last allowed CPU when there are several (the generator gets the rest), else None."""
    cpus = set(available) if available is not None else set(os.sched_getaffinity(0))
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
        allowed = os.sched_getaffinity(0)
        if not set(cpus) <= allowed:
            from pytest_brokerperf.errors import ConfigError

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
        available = set(os.sched_getaffinity(0))
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
