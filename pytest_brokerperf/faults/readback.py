"""After a power cut: which acknowledged messages the broker still holds.

Delivery accounting counts a message lost when no consumer received it; in a tail read
the consumers have every message within milliseconds, long before a power cut erases it
from the broker's disk. So after a ``power-cut`` fault the run reads every partition of
its topics again from the earliest offset (Kafka: an assigned consumer, no group) and
compares the (producer, sequence) pairs it finds with those acknowledged:
acknowledged and absent = lost to the power cut, named by sequence number.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_brokerperf.engine.delivery import LOST_RANGES_KEPT, seq_ranges
from pytest_brokerperf.engine.header import HEADER_SIZE, KIND_DATA, MAGIC, unpack

__all__ = ["ReadBack", "SeqBitmaps", "compare", "read_back_kafka"]

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


def read_back_kafka(bootstrap: str, topics: Sequence[str],
                    timeout_s: float = READ_BACK_TIMEOUT_S) -> tuple[dict[int, int], int, bool]:
    """Every harness message in ``topics`` from the earliest offset: (producer id ->
    sequence bitmap, messages read, whether every partition was read to its end)."""
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "brokerperf-readback",
                            "enable.auto.commit": False, "enable.partition.eof": True,
                            "log_level": 0})
    seen = SeqBitmaps()
    try:
        parts: list[ck.TopicPartition] = []
        md = consumer.list_topics(timeout=15)
        for t in topics:
            for p in md.topics[t].partitions:
                lo, hi = consumer.get_watermark_offsets(ck.TopicPartition(t, p), timeout=15)
                if hi > lo:
                    parts.append(ck.TopicPartition(t, p, ck.OFFSET_BEGINNING))
        consumer.assign(parts)
        open_parts = {(tp.topic, tp.partition) for tp in parts}
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline and (
                open_parts or time.monotonic() - last_new < SETTLE_S):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    open_parts.discard((msg.topic(), msg.partition()))
                continue
            last_new = time.monotonic()
            seen.add(msg.value())
        return seen.present(), seen.read, not open_parts
    finally:
        consumer.close()
