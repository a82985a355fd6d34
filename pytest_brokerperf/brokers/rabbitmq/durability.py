"""Durability levels 1-4 on RabbitMQ: per queue, so one broker serves every level.

Quorum queues fsync before they confirm, streams never fsync, with 3 replicas (levels
1, 2) or one (3, 4) (:data:`~pytest_brokerperf.brokers.rabbitmq.config.DURABILITY`).
Classic queues have no level: a persistent message may be confirmed once consumed,
before it reaches disk. See docs/reference/durability.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.brokers.durability import check_level

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig

__all__ = ["REPLICA_ARGS", "apply_rabbitmq", "driver_settings", "level_settings",
           "rabbitmq_settings", "read_back_view"]

#: The queue arguments that set a replicated queue's replica count.
REPLICA_ARGS: Final = ("x-quorum-initial-group-size", "x-initial-cluster-size")


def apply_rabbitmq(cfg: RabbitMQDriverConfig | None, level: int, nodes: int
                   ) -> RabbitMQDriverConfig:
    """``cfg`` with the queue type and persistence of ``level`` (the shipped DIRECT
    exchange when ``cfg`` is None); BrokerUnavailable when the cluster size does not fit."""
    from pytest_brokerperf.brokers.rabbitmq.config import config_for_durability

    return config_for_durability(check_level(level), nodes, cfg)


def rabbitmq_settings(level: int, nodes: int) -> dict[str, Any]:
    """Queue type, persistence and replica count of ``level`` on a ``nodes``-node broker."""
    cfg = apply_rabbitmq(None, level, nodes)
    args = dict(cfg.queue_arguments)
    return {
        "queueType": cfg.queue_type,
        "messagePersistence": cfg.message_persistence,
        **{k: v for k, v in args.items() if k in REPLICA_ARGS},
    }


def level_settings(level: int, nodes: int) -> dict[str, Any]:
    """Scope, settings and why of ``level`` on ``nodes`` nodes."""
    from pytest_brokerperf.brokers.rabbitmq.config import DURABILITY

    return {"scope": "per queue (queue type, replicas) and message (persistence)",
            "settings": rabbitmq_settings(level, nodes), "why": DURABILITY[level]["why"]}


def driver_settings(desc: Mapping[str, Any]) -> dict[str, Any]:
    """The durability-relevant settings a RabbitMQ driver ran with (its ``describe()``)."""
    args = desc.get("queue_arguments") or {}
    return {
        "queueType": desc.get("queue_type"),
        "messagePersistence": desc.get("message_persistence"),
        **{k: args[k] for k in REPLICA_ARGS if k in args},
    }


def read_back_view(read_back: Mapping[str, Any]) -> dict[str, Any]:
    """The durability part of what the broker reported (``rabbitmqctl list_queues``)."""
    queues: dict[str, Any] = {}
    for t in (read_back.get("topics") or {}).values():
        for qname, q in (t.get("queues") or {}).items():
            queues[qname] = {k: q.get(k) for k in ("type", "durable", "arguments")}
    out: dict[str, Any] = {"source": "rabbitmqctl list_queues", "queues": queues}
    if "note" in read_back:
        out["source"] = "declared arguments only"
        out["note"] = read_back["note"]
    if "durability" in read_back:
        out["configured"] = read_back["durability"]
    return out
