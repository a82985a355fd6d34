"""After a power cut: which acknowledged messages the broker still holds.

Delivery accounting counts a message lost when no consumer received it; in a tail read
the consumers have every message within milliseconds, long before a power cut erases it
from the broker's disk. So after a ``power-cut`` fault the run reads every partition of
its topics again from the earliest position (each broker its own way: the
``read_back`` capability of :mod:`pytest_brokerperf.brokers.capabilities`) and compares
the (producer, sequence) pairs it finds with those acknowledged: acknowledged and
absent = lost to the power cut, named by sequence number. This module holds the
broker-neutral part: the comparison and the bitmaps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.core.header import HEADER_SIZE, KIND_DATA, MAGIC, unpack
from pytest_brokerperf.engine.delivery import LOST_RANGES_KEPT, seq_ranges

__all__ = ["READ_BACK_TIMEOUT_S", "SETTLE_S", "ReadBack", "SeqBitmaps", "compare"]

#: Bound on the read-back (a smoke run's topics hold tens of thousands of messages).
READ_BACK_TIMEOUT_S = 60.0
#: After every partition reported its end, how long the read goes on without a new
#: message before it stops: a restarted leader serves up to its high watermark, which
#: catches up with its log only once the followers fetch again (end-of-partition is
#: relative to it), so the first end seen may not be the log's.
SETTLE_S = 3.0


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


@dataclass
class SeqBitmaps:
    """The (producer, sequence) pairs of the harness messages read back."""

    bitmaps: dict[int, bytearray] = field(default_factory=dict)
    read: int = 0  # data messages read (duplicates included)

    def add(self, value: bytes | None) -> bool:
        """Count ``value`` if it is a harness data message; whether it was."""
        if value is None or len(value) < HEADER_SIZE:
            return False
        magic, _version, kind, pid, seq, _intended, _sent = unpack(value)
        if magic != MAGIC or kind != KIND_DATA or seq < 0:
            return False
        bm = self.bitmaps.setdefault(pid, bytearray())
        if seq >> 3 >= len(bm):
            bm.extend(bytes((seq >> 3) + 1 - len(bm)))
        bm[seq >> 3] |= 1 << (seq & 7)
        self.read += 1
        return True

    def present(self) -> dict[int, int]:
        """Producer id -> sequence bitmap as an integer (what :func:`compare` takes)."""
        return {pid: int.from_bytes(bm, "little") for pid, bm in self.bitmaps.items()}
