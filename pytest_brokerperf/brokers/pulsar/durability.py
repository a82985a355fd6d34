"""Durability levels 1-4 on Pulsar: ack quorum per namespace, journal per bookie.

The ack quorum is a namespace policy (a majority of the write quorum, or 1) set by the
driver (:meth:`~pytest_brokerperf.brokers.pulsar.config.PulsarDriverConfig.with_durability`);
the bookie journal (``journalSyncData`` true or false) is **bookie-wide**
(:func:`~pytest_brokerperf.brokers.pulsar.process.journal_settings`), so a local
standalone is started per level and broker fixtures are keyed by it; on a remote cluster
the level is the user's declaration. See docs/reference/durability.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.durability import LEVELS, SYNC_MIN_REPLICAS, check_level
from pytest_brokerperf.core.errors import BrokerUnavailable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig

__all__ = ["JOURNAL_KEYS", "PERSISTENCE_KEYS", "apply_pulsar", "driver_settings",
           "level_settings", "pulsar_settings", "read_back_view"]

PERSISTENCE_KEYS = ("bookkeeperEnsemble", "bookkeeperWriteQuorum", "bookkeeperAckQuorum")
JOURNAL_KEYS = ("journalWriteData", "journalSyncData", "journalPageCacheFlushIntervalMSec")


def pulsar_settings(level: int, ensemble: int, write_quorum: int) -> dict[str, Any]:
    """Namespace persistence (ensemble, write and ack quorum) and bookie journal of ``level``.

    Raises BrokerUnavailable for levels 1 and 2 when entries go to fewer than two bookies.
    """
    from pytest_brokerperf.brokers.pulsar.config import durability_ack_quorum
    from pytest_brokerperf.brokers.pulsar.process import journal_settings

    lv = LEVELS[check_level(level)]
    if lv.replication == "sync" and write_quorum < SYNC_MIN_REPLICAS:
        raise BrokerUnavailable(
            f"Pulsar durability level {level} ({lv.replication} replication) needs entries "
            f"written to at least {SYNC_MIN_REPLICAS} bookies; this driver writes each "
            f"entry to {write_quorum} (ensemble {ensemble}, write quorum {write_quorum}), "
            "so the ack quorum would be the one bookie (level 3 or 4). Fix: "
            "--brokerperf-nodes=3 (three bookies, OMB's 3/3/2 pulsar.yaml)."
        )
    return {
        "bookkeeperEnsemble": int(ensemble),
        "bookkeeperWriteQuorum": int(write_quorum),
        "bookkeeperAckQuorum": durability_ack_quorum(level, write_quorum),
        **journal_settings(level),
    }


def apply_pulsar(cfg: PulsarDriverConfig, level: int) -> PulsarDriverConfig:
    """``cfg`` with the ack quorum of ``level`` (the namespace half; the journal half is
    the broker process's)."""
    p = cfg.client.persistence
    pulsar_settings(level, p.ensemble_size, p.write_quorum)  # refuses what is not offered
    return cfg.with_durability(level)


def level_settings(level: int, nodes: int, ensemble: int | None,
                   write_quorum: int | None) -> dict[str, Any]:
    """Scope, settings and why of ``level`` (quorums default to the shipped driver
    files': 3/3/2 from three nodes, else 1/1/1)."""
    lv = LEVELS[check_level(level)]
    default = 3 if nodes >= 3 else 1
    qw = write_quorum if write_quorum is not None else default
    e = ensemble if ensemble is not None else max(qw, default)
    return {
        "scope": "namespace (ack quorum) and bookie-wide (journal): one broker process "
                 "per level",
        "settings": pulsar_settings(level, e, qw),
        "why": ("a majority of the write quorum acknowledges" if lv.replication == "sync"
                else "the first bookie acknowledges")
        + (", after fsyncing its journal" if lv.local == "fsync"
           else "; journals reach disk every second (journalSyncData=false)"),
    }


def _journal(endpoint: BrokerEndpoint) -> Mapping[str, Any] | None:
    return endpoint.journal


def driver_settings(desc: Mapping[str, Any], endpoint: BrokerEndpoint) -> dict[str, Any]:
    """The durability-relevant settings a Pulsar driver ran with, plus the journal of
    the standalone this session started."""
    pers = (desc.get("namespace_policies") or {}).get("persistence") or {}
    out = {k: pers.get(k) for k in PERSISTENCE_KEYS}
    journal = _journal(endpoint)
    if journal is not None:
        out.update({k: journal[k] for k in JOURNAL_KEYS if k in journal})
    return out


def read_back_view(read_back: Mapping[str, Any], endpoint: BrokerEndpoint) -> dict[str, Any]:
    """The durability part of what the Pulsar admin API reported."""
    out: dict[str, Any] = {"source": "admin REST /admin/v2/namespaces/<ns>/persistence",
                           "namespace": read_back.get("namespace"),
                           "persistence": read_back.get("persistence"),
                           "bookies": (read_back.get("cluster") or {}).get("bookies")}
    journal = _journal(endpoint)
    if journal is not None:
        out["journal"] = dict(journal)
        out["journal_source"] = "standalone.conf this session wrote (bookie-wide)"
    else:
        out["journal_source"] = ("not visible through Pulsar's admin API: the level is the "
                                 "user's declaration")
    return out
