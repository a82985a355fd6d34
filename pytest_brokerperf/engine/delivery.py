"""Delivery accounting: acknowledged versus received, per subscription.

Why and how: docs/explanation/measurement.md.

Producers record which (producer, sequence) pairs were acknowledged; consumers
record which they received. Both are bitmaps indexed by sequence, so the merge across
worker processes is exact and cheap (Python big-int bit operations run in C):

* lost        = acknowledged and received by no consumer of the subscription, once the
                drain window passed with nothing more arriving;
* unconfirmed = acknowledged and not yet received when the drain window closed while
                messages were still arriving (or the drain was cut short): neither
                delivered nor shown lost;
* duplicates  = received more than once within a subscription (legal at-least-once);
* reordered   = a sequence lower than an earlier one on the same (producer, partition);
  order across partitions is undefined, so it is never checked.

A verdict of "zero loss" only covers the faults the run injected; with none, it
says the harness and broker agree, not that the data would survive a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["AckLedger", "DeliveryReport", "ReceiveLedger", "reconcile"]


def _grow(bitmap: bytearray, max_seq: int) -> None:
    """Room for bit ``max_seq`` (at least doubling, as the one-message paths do)."""
    byte = max_seq >> 3
    if byte >= len(bitmap):
        bitmap.extend(b"\0" * max(byte + 1 - len(bitmap), len(bitmap)))


def _set_bits(bitmap: bytearray, seqs: Any) -> Any:
    """Set the bits ``seqs`` (an int64 array, in arrival order); return the mask of the
    ones that are new: not set before and not an earlier element of ``seqs`` itself.
    The same answers as calling :func:`_set_bit` on each in turn, in one numpy pass."""
    _grow(bitmap, int(seqs.max()))
    view = np.frombuffer(bitmap, dtype=np.uint8)
    idx = seqs >> 3
    mask = (np.uint8(1) << (seqs & 7).astype(np.uint8))
    new = (view[idx] & mask) == 0
    if len(seqs) > 1 and not (seqs[1:] > seqs[:-1]).all():
        # interleaved (several partitions' acks): set the bits in sorted order, where the
        # rising path applies (setting a bit twice changes nothing); a sort is cheaper
        # than np.unique, which is needed only when a sequence is in the batch twice
        ordered = np.sort(seqs)
        if (ordered[1:] == ordered[:-1]).any():  # only a sequence's first one is new
            _, first = np.unique(seqs, return_index=True)
            once = np.zeros(len(seqs), dtype=bool)
            once[first] = True
            new &= once
        _or_rising(view, ordered >> 3, np.uint8(1) << (ordered & 7).astype(np.uint8))
    else:
        _or_rising(view, idx[new], mask[new])
    del view  # the bytearray may grow again later: no export may outlive this call
    return new


def _or_rising(view: Any, idx: Any, mask: Any) -> None:
    """OR ``mask`` into ``view[idx]`` for non-decreasing ``idx``: each byte's bits are
    neighbours, so OR them per byte, then one store per distinct byte (a fancy ``|=``
    with repeated indexes would keep only one bit)."""
    if len(idx):
        starts = np.flatnonzero(np.concatenate(([True], idx[1:] != idx[:-1])))
        view[idx[starts]] |= np.bitwise_or.reduceat(mask, starts)


def _distinct(values: Any) -> list[int]:
    """The distinct values of an int array, as Python ints (one, without a sort, in the
    common case of a batch from one producer or partition)."""
    if not len(values):
        return []
    first = int(values[0])
    if int(values.min()) == first == int(values.max()):
        return [first]
    return [int(v) for v in np.unique(values).tolist()]


def _set_bit(bitmap: bytearray, seq: int) -> bool:
    """Set bit ``seq``; return True when it was already set."""
    byte = seq >> 3
    if byte >= len(bitmap):
        bitmap.extend(b"\0" * max(byte + 1 - len(bitmap), len(bitmap)))
    mask = 1 << (seq & 7)
    was = bitmap[byte] & mask
    bitmap[byte] |= mask
    return bool(was)


class AckLedger:
    """Acknowledged sequences of the producers owned by one worker."""

    def __init__(self) -> None:
        self.bitmaps: dict[int, bytearray] = {}
        self.duplicate_acks = 0

    def ack(self, producer: int, seq: int) -> None:
        bm = self.bitmaps.get(producer)
        if bm is None:
            bm = self.bitmaps[producer] = bytearray(1024)
        byte = seq >> 3  # _set_bit, inlined: once per acknowledged message
        if byte >= len(bm):
            bm.extend(b"\0" * max(byte + 1 - len(bm), len(bm)))
        mask = 1 << (seq & 7)
        if bm[byte] & mask:
            self.duplicate_acks += 1
        else:
            bm[byte] |= mask

    def ack_many(self, producers: Any, seqs: Any) -> None:
        """:meth:`ack` for a batch (int arrays of equal length, in acknowledgement order)."""
        for pid in _distinct(producers):
            sel = producers == pid
            mine = seqs if sel.all() else seqs[sel]
            bm = self.bitmaps.get(pid)
            if bm is None:
                bm = self.bitmaps[pid] = bytearray(1024)
            new = _set_bits(bm, mine)
            self.duplicate_acks += int(len(mine) - new.sum())

    def export(self) -> dict[int, bytes]:
        return {p: bytes(b) for p, b in self.bitmaps.items()}


class ReceiveLedger:
    """What the consumers of one worker thread received, per subscription."""

    def __init__(self) -> None:
        self.bitmaps: dict[tuple[str, int], bytearray] = {}
        self.duplicates: dict[str, int] = {}
        self.reordered: dict[str, int] = {}
        self._last: dict[tuple[str, int, int], int] = {}

    def receive(self, subscription: str, producer: int, seq: int, partition: int) -> bool:
        """Record one delivery; False when this ledger saw the message before."""
        key = (subscription, producer)
        bm = self.bitmaps.get(key)
        if bm is None:
            bm = self.bitmaps[key] = bytearray(1024)
        byte = seq >> 3  # _set_bit, inlined: once per received message
        if byte >= len(bm):
            bm.extend(b"\0" * max(byte + 1 - len(bm), len(bm)))
        mask = 1 << (seq & 7)
        if bm[byte] & mask:
            self.duplicates[subscription] = self.duplicates.get(subscription, 0) + 1
            return False
        bm[byte] |= mask
        okey = (subscription, producer, partition)
        last = self._last.get(okey, -1)
        if seq < last:
            self.reordered[subscription] = self.reordered.get(subscription, 0) + 1
        else:
            self._last[okey] = seq
        return True

    def receive_many(self, subscription: str, producers: Any, seqs: Any,
                     partitions: Any) -> int:
        """:meth:`receive` for a batch (int arrays of equal length, in delivery order);
        how many of them were new to this ledger. Duplicates and reordering are counted
        exactly as one :meth:`receive` call per message would count them."""
        new_total = 0
        for pid in _distinct(producers):
            sel = producers == pid
            whole = bool(sel.all())
            mine = seqs if whole else seqs[sel]
            parts = partitions if whole else partitions[sel]
            key = (subscription, pid)
            bm = self.bitmaps.get(key)
            if bm is None:
                bm = self.bitmaps[key] = bytearray(1024)
            new = _set_bits(bm, mine)
            n_new = int(new.sum())
            if n_new < len(mine):
                self.duplicates[subscription] = (self.duplicates.get(subscription, 0)
                                                 + len(mine) - n_new)
                mine, parts = mine[new], parts[new]
            new_total += n_new
            for part in _distinct(parts):
                on = parts == part
                s = mine if on.all() else mine[on]
                okey = (subscription, pid, part)
                last = self._last.get(okey, -1)
                # a sequence below the highest one seen before it on this partition
                before = np.maximum.accumulate(np.concatenate(([last], s[:-1])))
                late = int((s < before).sum())
                if late:
                    self.reordered[subscription] = self.reordered.get(subscription, 0) + late
                self._last[okey] = max(last, int(s.max()))
        return new_total

    def export(self) -> dict[str, object]:
        return {
            "bitmaps": {k: bytes(v) for k, v in self.bitmaps.items()},
            "duplicates": dict(self.duplicates),
            "reordered": dict(self.reordered),
        }


@dataclass
class SubscriptionDelivery:
    subscription: str
    acknowledged: int
    received: int  # distinct acknowledged-or-not messages received
    lost: int
    duplicates: int
    unconfirmed: int
    reordered: int
    unacked_received: int  # received although never acknowledged (send timed out, etc.)
    #: which acknowledged messages were lost: runs of sequence numbers per producer,
    #: ``{"producer": id, "first": seq, "last": seq}``, at most LOST_RANGES_KEPT of them
    lost_ranges: list[dict[str, int]] = field(default_factory=list)


@dataclass
class DeliveryReport:
    acknowledged: int
    subscriptions: list[SubscriptionDelivery] = field(default_factory=list)
    duplicate_acks: int = 0
    #: producer id -> bitmap of its acknowledged sequences (bit n = sequence n); kept for
    #: a read-back after a power cut, never written to the record
    acked_bits: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.subscriptions)

    @property
    def unconfirmed(self) -> int:
        return sum(s.unconfirmed for s in self.subscriptions)

    @property
    def duplicates(self) -> int:
        return sum(s.duplicates for s in self.subscriptions)

    @property
    def reordered(self) -> int:
        return sum(s.reordered for s in self.subscriptions)

    @property
    def received(self) -> int:
        return sum(s.received for s in self.subscriptions)

    def as_dict(self) -> dict[str, object]:
        return {
            "acknowledged": self.acknowledged,
            "received": self.received,
            "lost": self.lost,
            "unconfirmed": self.unconfirmed,
            "duplicates": self.duplicates,
            "reordered": self.reordered,
            "duplicate_acks": self.duplicate_acks,
            "subscriptions": [vars(s) for s in self.subscriptions],
            "fault_covered": "none (no fault injected): broker and harness agree on delivery",
        }


#: Runs of lost sequence numbers kept per subscription (the count stays exact beyond).
LOST_RANGES_KEPT = 100


def seq_ranges(bits: int, limit: int = LOST_RANGES_KEPT) -> list[tuple[int, int]]:
    """The runs of set bits of ``bits`` as (first, last) sequence numbers, lowest first,
    at most ``limit`` of them."""
    out: list[tuple[int, int]] = []
    pos = 0
    while bits and len(out) < limit:
        skip = (bits & -bits).bit_length() - 1  # trailing zeros
        bits >>= skip
        pos += skip
        run = (~bits & (bits + 1)).bit_length() - 1  # trailing ones
        out.append((pos, pos + run - 1))
        bits >>= run
        pos += run
    return out


def reconcile(
    acks: list[dict[int, bytes]],
    receipts: list[dict[str, object]],
    subscriptions_of_producer: dict[int, list[str]],
    duplicate_acks: int = 0,
    settled: bool = True,
) -> DeliveryReport:
    """Merge worker ledgers into one report.

    ``subscriptions_of_producer`` maps every producer id to the subscriptions of its
    topic: each of them must receive every acknowledged message of that producer.
    ``settled`` is False when the drain window closed while messages were still
    arriving: what is missing then is *unconfirmed*, not *lost*.
    """
    acked: dict[int, int] = {}
    for ack_part in acks:
        for pid, bm in ack_part.items():
            acked[pid] = acked.get(pid, 0) | int.from_bytes(bm, "little")
    received: dict[tuple[str, int], int] = {}
    dups: dict[str, int] = {}
    reord: dict[str, int] = {}
    for part in receipts:
        bitmaps = part["bitmaps"]
        assert isinstance(bitmaps, dict)
        for key, bm in bitmaps.items():
            value = int.from_bytes(bm, "little")
            prev = received.get(key, 0)
            overlap = (prev & value).bit_count()  # same message on two workers
            if overlap:
                dups[key[0]] = dups.get(key[0], 0) + overlap
            received[key] = prev | value
        for field_name, store in (("duplicates", dups), ("reordered", reord)):
            per_sub = part[field_name]
            assert isinstance(per_sub, dict)
            for sub_name, n in per_sub.items():
                store[sub_name] = store.get(sub_name, 0) + n
    subs = sorted({s for ss in subscriptions_of_producer.values() for s in ss})
    report = DeliveryReport(
        acknowledged=sum(v.bit_count() for v in acked.values()), duplicate_acks=duplicate_acks,
        acked_bits=acked,
    )
    for sub in subs:
        n_acked = n_recv = n_lost = n_unacked = 0
        ranges: list[dict[str, int]] = []
        for pid, sub_list in subscriptions_of_producer.items():
            if sub not in sub_list:
                continue
            a = acked.get(pid, 0)
            r = received.get((sub, pid), 0)
            n_acked += a.bit_count()
            n_recv += r.bit_count()
            missing = a & ~r
            n_lost += missing.bit_count()
            ranges += [{"producer": pid, "first": lo, "last": hi}
                       for lo, hi in seq_ranges(missing, LOST_RANGES_KEPT - len(ranges))]
            n_unacked += (r & ~a).bit_count()
        report.subscriptions.append(
            SubscriptionDelivery(
                subscription=sub,
                acknowledged=n_acked,
                received=n_recv,
                lost=n_lost if settled else 0,
                unconfirmed=0 if settled else n_lost,
                duplicates=dups.get(sub, 0),
                reordered=reord.get(sub, 0),
                unacked_received=n_unacked,
                lost_ranges=ranges if settled else [],
            )
        )
    return report
