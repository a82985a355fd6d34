"""After a power cut: which acknowledged messages the broker still holds.

Delivery accounting counts a message lost when no consumer received it; in a tail read
the consumers have every message within milliseconds, long before a power cut erases it
from the broker's disk. So after a ``power-cut`` fault the run reads every partition of
its topics again from the earliest position (each broker its own way: the
``read_back`` capability of :mod:`pytest_brokerperf.brokers.capabilities`) and compares
the (producer, sequence) pairs it finds with those acknowledged: acknowledged and
absent = lost to the power cut, named by sequence number. This module holds what every
broker's reader shares: the bitmaps of what was read and the bounds of the read; the
comparison is :mod:`pytest_brokerperf.faults.readback`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_brokerperf.core.header import HEADER_SIZE, KIND_DATA, MAGIC, unpack

__all__ = ["READ_BACK_TIMEOUT_S", "SETTLE_S", "SeqBitmaps"]

#: Bound on the read-back (a smoke run's topics hold tens of thousands of messages).
READ_BACK_TIMEOUT_S = 60.0
#: After every partition reported its end, how long the read goes on without a new
#: message before it stops: a restarted leader serves up to its high watermark, which
#: catches up with its log only once the followers fetch again (end-of-partition is
#: relative to it), so the first end seen may not be the log's.
SETTLE_S = 3.0


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
