"""Power cuts of local broker nodes: each node's durable directories on a power-cut
filesystem, and the cut itself (SIGKILL, then every unsynced write dropped).

Shared by every local-process cluster that offers the ``power-cut`` fault (Kafka,
RabbitMQ); what is the broker's own is only *which* directories hold what must survive
(the cluster's ``_powercut_dirs`` hook: Kafka's log directory, a RabbitMQ node's data
directory with its quorum-queue WAL and segments). See docs/reference/faults.md
(``power-cut``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_brokerperf.brokers.provision.powercut import PowerCutMount
from pytest_brokerperf.core.errors import ConfigError

__all__ = ["PowerCutNodes", "merge_reports"]


def merge_reports(reports: Sequence[Mapping[str, Any]], prefix: str = "") -> dict[str, Any]:
    """One cut report of several filesystems (a node with more than one durable
    directory, or a whole cluster): bytes summed, paths prefixed with ``prefix``."""
    return {
        "bytes_dropped": sum(int(r.get("bytes_dropped") or 0) for r in reports),
        "removed": [f"{prefix}{p}" for r in reports for p in r.get("removed", [])],
        "restored": [f"{prefix}{p}" for r in reports for p in r.get("restored", [])],
    }


@dataclass
class PowerCutNodes:
    """The power-cut filesystems of one cluster, by 1-based node index. ``owner`` names
    the cluster in errors (``Kafka node 2 has no …``), ``fix`` says how to get them."""

    owner: str
    fix: str
    mounts: dict[int, list[PowerCutMount]] = field(default_factory=dict)

    def mount(self, backing: Path, dirs: Mapping[int, Sequence[Path]]) -> None:
        """Serve each node's ``dirs`` through a power-cut filesystem whose backing data
        lives in ``backing/node-N/…`` (the caller removes ``backing`` with the data)."""
        for index, paths in dirs.items():
            for k, path in enumerate(paths):
                where = backing / f"node-{index}"
                if len(paths) > 1:
                    where = where / f"dir-{k + 1}"
                self.mounts.setdefault(index, []).append(PowerCutMount(
                    backing=where / "data", mount=path, state=where / "state").start())

    def _of(self, indices: Sequence[int]) -> list[list[PowerCutMount]]:
        missing = [i for i in indices if i not in self.mounts]
        if missing:
            raise ConfigError(
                f"{self.owner} node(s) {missing} have no power-cut filesystem: the cluster "
                f"was started without it. Fix: {self.fix}")
        return [self.mounts[i] for i in indices]

    def cut(self, index: int, kill: Callable[[int], int]) -> dict[str, Any]:
        """Node ``index``'s power cut: ``kill`` it (SIGKILL), then every filesystem of it
        rolled back to its last fsync and remounted; the report plus the killed pid."""
        (mounts,) = self._of([index])
        pid = kill(index)
        return {"pid": pid, **merge_reports([m.cut() for m in mounts])}

    def cut_all(self, indices: Sequence[int],
                kill_all: Callable[[Sequence[int]], list[int]]) -> dict[str, Any]:
        """Every listed node's power cut at one instant: all killed before any rollback.
        Per node (``nodes``: index -> its report and pid) and summed (``bytes_dropped``;
        paths prefixed with ``node-N``)."""
        mounts = self._of(indices)
        pids = kill_all(indices)
        per_node: dict[int, dict[str, Any]] = {
            i: {"pid": pid, **merge_reports([m.cut() for m in ms])}
            for i, pid, ms in zip(indices, pids, mounts, strict=True)}
        summed = [merge_reports([r], f"node-{i}") for i, r in per_node.items()]
        return {"pids": pids, "nodes": per_node, **merge_reports(summed)}

    def write_back(self) -> None:
        """Everything the nodes wrote so far counts as on disk (see
        :meth:`PowerCutMount.write_back`)."""
        for mounts in self.mounts.values():
            for m in mounts:
                m.write_back()

    def stop(self) -> None:
        """Unmount every filesystem (call once the nodes have stopped)."""
        for mounts in self.mounts.values():
            for m in mounts:
                m.stop()
        self.mounts = {}
