"""After a power cut: the acknowledged messages the broker no longer holds.

Each broker reads its topics back its own way (the ``read_back`` capability, into
:class:`pytest_brokerperf.brokers.readback.SeqBitmaps`); this module compares what was
read with what was acknowledged: acknowledged and absent = lost to the power cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.engine.delivery import LOST_RANGES_KEPT, seq_ranges

__all__ = ["ReadBack", "compare"]


@dataclass
class ReadBack:
    """The broker's contents after the power cut against what was acknowledged."""

    read: int  # data messages read back (duplicates included)
    acknowledged: int
    missing: int  # acknowledged, not on the broker after the restart
    missing_ranges: list[dict[str, int]] = field(default_factory=list)
    complete: bool = True  # every partition read to its end within the bound
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"read": self.read, "acknowledged": self.acknowledged,
                "missing": self.missing, "missing_ranges": self.missing_ranges,
                "complete": self.complete, "error": self.error}


def compare(acked: Mapping[int, int], present: Mapping[int, int], read: int,
            complete: bool = True) -> ReadBack:
    """Acknowledged bits absent from ``present`` (both producer id -> sequence bitmap)."""
    missing = 0
    ranges: list[dict[str, int]] = []
    for pid in sorted(acked):
        gone = acked[pid] & ~present.get(pid, 0)
        missing += gone.bit_count()
        ranges += [{"producer": pid, "first": lo, "last": hi}
                   for lo, hi in seq_ranges(gone, LOST_RANGES_KEPT - len(ranges))]
    return ReadBack(read=read, acknowledged=sum(v.bit_count() for v in acked.values()),
                    missing=missing, missing_ranges=ranges, complete=complete)
