"""Durability levels 1-4 and what each one means on every broker: the one place to look.

StreamNative's 2020 report ("Benchmarking Pulsar and Kafka", table 6) splits a
broker's durability guarantee into *replication* (is a write acknowledged only after a
majority of replicas has it?) and *local* durability (is it fsynced before the
acknowledgement, or only in the page cache?), which gives four levels, strongest first:

======  ===========  ==========  ===================================================
level   replication  local       the client's acknowledgement means
======  ===========  ==========  ===================================================
1       sync         fsync       a majority of replicas has it, each one fsynced it
2       sync         page cache  a majority of replicas has it, nobody promised fsync
3       async        fsync       one replica fsynced it; replication may lag
4       async        page cache  one replica has it in memory; nothing else promised
======  ===========  ==========  ===================================================

Comparing brokers means nothing unless both run at the same level, so a
level is a scenario parameter (``--brokerperf-durability=1,2``,
``@pytest.mark.durability(1)``) and each broker maps it to its own settings here:

Each broker kind maps a level to its own settings in its package
(``brokers/<kind>/durability.py``) through its
:class:`~pytest_brokerperf.brokers.base.BrokerType`; what they are, broker by broker, is
in docs/reference/durability.md. Kafka and RabbitMQ set a level per topic or queue, so
one broker process serves every level; Pulsar's bookie journal is broker-wide, so a
local standalone runs per level; Tansu keeps everything in memory (no level); Redpanda
and AutoMQ are not mapped.

What "sync replication" means with one replica: nothing. ``acks=all`` on RF 1, a
quorum queue of one, or ack quorum 1 of write quorum 1 all acknowledge after one copy,
which is level 3 or 4. Calling that level 1 or 2 would make an unequal comparison look
equal, so levels 1 and 2 need at least two replicas (in practice three nodes,
``--brokerperf-nodes=3``) and skip with that reason otherwise.

A level a broker cannot offer raises :class:`~pytest_brokerperf.core.errors.BrokerUnavailable`
(the test skips with the reason); a level outside 1-4 raises
:class:`~pytest_brokerperf.core.errors.ConfigError`. Results record :func:`result_block`:
the level, the settings applied and the settings read back from the broker.

This module holds what a level *is*; :func:`describe` and :func:`result_block` ask the
broker kind what it *means* there: the caller hands the kind in (a
:class:`LevelMapping`, which every ``BrokerType`` is), so this module never looks a broker
up. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from pytest_brokerperf.core.errors import BrokerPerfError, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = [
    "DRIVER_DEFINED",
    "LEVELS",
    "SYNC_MIN_REPLICAS",
    "Level",
    "LevelMapping",
    "check_level",
    "describe",
    "level_id",
    "result_block",
]


@dataclass(frozen=True)
class Level:
    """One row of StreamNative's table 6."""

    number: int
    replication: str  # "sync" | "async"
    local: str  # "fsync" | "page cache"
    meaning: str

    @property
    def label(self) -> str:
        """``level 2: sync replication + page cache``."""
        return f"level {self.number}: {self.replication} replication + {self.local}"


LEVELS: Final[Mapping[int, Level]] = {
    1: Level(1, "sync", "fsync", "acknowledged once a majority of replicas has the write "
             "and every one of them has fsynced it"),
    2: Level(2, "sync", "page cache", "acknowledged once a majority of replicas has the "
             "write; no replica promises it reached disk"),
    3: Level(3, "async", "fsync", "acknowledged once one replica has fsynced the write; "
             "replication to others is not waited for"),
    4: Level(4, "async", "page cache", "acknowledged once one replica has the write in "
             "memory; neither replication nor fsync is promised"),
}

#: What results say when no level was asked for: the driver file's settings as they are.
DRIVER_DEFINED: Final = "driver-defined"

#: Replicas a level with sync replication needs: one replica acknowledging is no
#: replication, so it would be level 3 or 4 in disguise.
SYNC_MIN_REPLICAS: Final = 2


def check_level(level: object, where: str = "durability level") -> int:
    """``level`` as an int 1-4, or ConfigError naming it, where it came from and the fix."""
    if isinstance(level, int) and not isinstance(level, bool) and level in LEVELS:
        return level
    raise ConfigError(
        f"{where}: {level!r} is not a durability level; expected 1, 2, 3 or 4 "
        f"({'; '.join(lv.label for lv in LEVELS.values())}; StreamNative's table 6)."
    )


def level_id(level: int | None) -> str:
    """The test-id part of a level: ``d2`` (``test_x[kafka-d2]``)."""
    return f"d{level}" if level is not None else DRIVER_DEFINED


class LevelMapping(Protocol):
    """What a broker kind says about the levels (every ``BrokerType`` is one)."""

    @property
    def broker_wide_durability(self) -> bool: ...

    def level_settings(self, level: int, *, nodes: int = 1,
                       shape: Mapping[str, int | None] | None = None) -> dict[str, Any]: ...

    def durability_settings(self, description: Mapping[str, Any],
                            endpoint: BrokerEndpoint) -> dict[str, Any]: ...

    def durability_read_back(self, read_back: Mapping[str, Any],
                             endpoint: BrokerEndpoint) -> dict[str, Any]: ...

    def no_level_label(self) -> str | None: ...


def describe(broker: LevelMapping, level: int, *, nodes: int = 1,
             replication_factor: int | None = None, ensemble: int | None = None,
             write_quorum: int | None = None) -> dict[str, Any]:
    """What ``level`` means on ``broker``: table 6's row, the settings and where they live.

    ``replication_factor`` (Kafka) and ``ensemble``/``write_quorum`` (Pulsar) default to
    the shipped driver files on ``nodes`` nodes (RF 3 and 3/3/2 from three nodes, else 1
    and 1/1/1). Raises BrokerUnavailable when the broker cannot offer the level.
    """
    lv = LEVELS[check_level(level)]
    shape = {"replicationFactor": replication_factor, "bookkeeperEnsemble": ensemble,
             "bookkeeperWriteQuorum": write_quorum}
    return {"level": lv.number, "label": lv.label, "replication": lv.replication,
            "local": lv.local, "meaning": lv.meaning,
            **broker.level_settings(level, nodes=nodes, shape=shape)}


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def result_block(broker: LevelMapping, endpoint: BrokerEndpoint,
                 driver_description: Mapping[str, Any],
                 read_back: Mapping[str, Any]) -> dict[str, Any]:
    """The record's ``durability`` field on ``broker`` (the endpoint's kind): level (None =
    driver-defined), the settings the clients ran with (the level's mapping, or the driver
    file's own) and the read-back."""
    level = endpoint.durability if endpoint.durability in LEVELS else None
    block: dict[str, Any] = {
        "level": level,
        "label": LEVELS[level].label if level is not None else DRIVER_DEFINED,
        "settings": broker.durability_settings(driver_description, endpoint),
        "read_back": broker.durability_read_back(read_back, endpoint),
    }
    if level is not None:
        settings = block["settings"]
        try:  # the level's row and scope; its settings are what the clients ran with
            meaning = describe(
                broker, level, nodes=endpoint.nodes,
                replication_factor=_int_or_none(settings.get("replicationFactor")),
                ensemble=_int_or_none(settings.get("bookkeeperEnsemble")),
                write_quorum=_int_or_none(settings.get("bookkeeperWriteQuorum")))
        except BrokerPerfError as exc:  # cannot happen after create_driver applied it
            meaning = {"error": str(exc)}
        block.update({k: v for k, v in meaning.items()
                      if k in ("replication", "local", "meaning", "scope", "why", "error")})
        if broker.broker_wide_durability and endpoint.mode == "remote":
            block["declared"] = True  # the bookie journal is not visible remotely
    elif broker.no_level_label() is not None:
        block["label"] = broker.no_level_label()
    return block
