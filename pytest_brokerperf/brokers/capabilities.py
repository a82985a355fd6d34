"""What a scenario or a fault may need from a broker beyond a driver, declared per kind.

A scenario never asks which broker it runs on: it asks :class:`Capabilities` for the
provider it needs (an :class:`EarliestReader` for the mixed scenario's catch-up reader,
a :class:`PartitionMover` for the reassign scenario, a :class:`MessageReadBack` for a
power cut's judge). A kind without one says why (``lacks``), and the plugin deselects
the tests that need it at collection with that reason, before any broker starts
(docs/explanation/architecture.md, "Adding a broker").

Standard library only: providers import their client libraries when they are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

if TYPE_CHECKING:
    import threading

    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = ["CAPABILITY_NAMES", "LABELS", "Capabilities", "CapabilityName", "EarliestReader",
           "MessageReadBack", "MoveState", "PartitionMove", "PartitionMover"]

#: the capabilities a scenario or fault can declare it needs (``Scenario.needs``)
CapabilityName = Literal["earliest_reader", "partition_mover", "read_back"]
CAPABILITY_NAMES: tuple[CapabilityName, ...] = get_args(CapabilityName)

#: how each capability reads in a reason
LABELS: dict[CapabilityName, str] = {
    "earliest_reader": "earliest-position reader",
    "partition_mover": "partition mover",
    "read_back": "read-back after a restart",
}


class EarliestReader(Protocol):
    """Makes a driver whose new subscriptions start at the earliest retained message."""

    def earliest(self, driver: Driver) -> tuple[Driver, str]:
        """The reader's driver and how its subscription starts (for the record's notes);
        ``BrokerUnavailable`` where this driver cannot, ``ConfigError`` for a driver file
        that forbids it."""
        ...


@dataclass(frozen=True)
class MoveState:
    """One reading of the moved partition: in the in-progress list or not, its replicas
    and in-sync replicas (broker ids), and when (seconds since the request)."""

    t_s: float
    in_progress: bool
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class PartitionMove(Protocol):
    """One partition's move, requested by :meth:`start` and watched in a thread."""

    done: threading.Event
    target: list[int]
    states: list[MoveState]
    requested_at: str
    duration_s: float | None
    error: BaseException | None

    def read(self, t_s: float = 0.0) -> MoveState: ...
    def brokers(self) -> list[int]:
        """The cluster's broker ids."""
        ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def cancel(self) -> bool: ...
    def close(self) -> None: ...
    def throttled(self, source: Sequence[int], target: Sequence[int],
                  bytes_s: int | None, info: dict[str, Any]) -> AbstractContextManager[None]:
        """The replication throttle around the move (none when ``bytes_s`` is None),
        removed afterwards; what was left behind goes to ``info``."""
        ...


class PartitionMover(Protocol):
    """Moves a partition with its data to other brokers while the load goes on."""

    def movable(self, driver: Driver, *, ask_broker: bool = True) -> Driver:
        """The run's driver made fit for a move (single-replica topics), or
        ``BrokerUnavailable`` (a skip) where this cluster cannot move one (a single
        broker); ``ask_broker=False`` (a dry run) asks the broker nothing."""
        ...

    def mover(self, driver: Driver, topic: str, partition: int,
              timeout_s: float) -> PartitionMove: ...


class MessageReadBack(Protocol):
    """After a power cut and the restart: every harness message the broker still holds."""

    def read_back(self, endpoint: BrokerEndpoint, topics: Sequence[str]
                  ) -> tuple[dict[int, int], int, bool] | None:
        """Producer id -> sequence bitmap, messages read, whether every partition was read
        to its end; None when there is nothing to read again (a queue deleted what was
        consumed: delivery accounting then tells what the cut took)."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """The providers one broker kind offers; None where it has none (``lacks`` says why)."""

    earliest_reader: EarliestReader | None = None
    partition_mover: PartitionMover | None = None
    read_back: MessageReadBack | None = None
    #: the kind IS the harness (no broker): its driver's ceiling is the harness's own
    harness_only: bool = False
    #: why a capability is missing, in the kind's words
    lacks: Mapping[CapabilityName, str] = field(default_factory=dict)

    def provider(self, name: CapabilityName) -> object | None:
        provider: object | None = getattr(self, name)
        return provider

    def missing(self, name: CapabilityName) -> str | None:
        """Why this kind has no ``name`` provider, in its own words (None: it has one)."""
        if self.provider(name) is not None:
            return None
        return self.lacks.get(name) or f"it declares no {LABELS[name]}"

    def refusal(self, needs: Sequence[CapabilityName], broker: str, what: str) -> str | None:
        """Why ``what`` (``the reassign scenario``) does not apply to ``broker``, from the
        first capability in ``needs`` it lacks; None: it has every one."""
        for name in needs:
            why = self.missing(name)
            if why is not None:
                return f"{what} does not apply to {broker}: {why} (missing: {LABELS[name]})"
        return None
