"""Latency histograms: HdrHistogram in microseconds, 3 significant digits, batched recording.

Why a wrapper around ``hdrh`` (HdrHistogram_py) rather than the library itself:

* ``HdrHistogram.record_value`` is pure Python (0.7-2.7 µs per call) and silently returns
  ``False`` for values out of range.  :meth:`LatencyHistogram.record_batch`
  computes the counts indexes of a whole numpy array at once and adds a ``bincount`` into
  the wrapped histogram's counts array, keeping ``hdrh``'s own bookkeeping (``total_count``,
  raw ``min_value``/``max_value``) exactly as ``record_value`` would have left it.  Values
  above the range are clamped and counted, zeros are recorded as 1 µs and counted,
  negatives are counted and not recorded: nothing disappears silently.
* Queries (percentiles, mean) are vectorised over the counts array and return exactly
  what ``hdrh`` returns for the same counts (tested), but in microseconds instead of
  milliseconds of pure-Python scanning.
* ``hdrh``'s ``add`` loses the minimum when the other histogram is empty; ours does not.
* A percentile is ``None`` ("n/a") when the histogram holds too few samples to resolve it
  (q needs ``n >= 10 / (1 - q/100)``, docs/explanation/measurement.md);
  ``allow_undersampled=True`` gives
  HdrHistogram's value anyway, for formats that have no n/a (OMB JSON).

Percentile semantics follow HdrHistogram_py (rank ``int(q/100*n + 0.5)``); Java
HdrHistogram (OMB) rounds the rank up instead, so a Java and a Python percentile of the
same counts can differ by one rank - one bucket at most.
"""

from __future__ import annotations

import array
import math
import sys
import zlib
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

from pytest_brokerperf.metrics.hdr_layout import (
    LOWEST_US,
    MAX_HIGHEST,
    SIGNIFICANT_DIGITS,
    highest_for,
    java_double_str,
    layout_of,
    midpoint_at_index,
    min_samples_for,
    value_at_index,
)

__all__ = ["LatencyHistogram"]


_INT_TYPECODES = frozenset("bBhHiIlLqQ")

# Values are binned in chunks of 256k (2 MiB temporaries). numpy's inner loops release the
# GIL, and in a worker whose pacer thread never sleeps (an overdriven generator) each
# release costs a full switch interval (5 ms) to win the GIL back. With 8k chunks a
# snapshot of an overdriven period binned ~20k values/s: it took longer than the period,
# the next period's buffers grew, and the worker missed the coordinator's 60 s deadline.
# Large chunks make that handful of handoffs per batch; alone they cost ~1.5x the
# arithmetic of cache-sized chunks (2M values: 23 ms instead of 15 ms).
_CHUNK = 1 << 18


def _as_int64(values: Any) -> npt.NDArray[np.int64]:
    """View or convert a batch of integer microsecond values as an int64 array."""
    if isinstance(values, np.ndarray):
        arr = values
    elif isinstance(values, array.array):
        if values.typecode == "q":
            return np.frombuffer(values, dtype=np.int64)
        if values.typecode not in _INT_TYPECODES:
            raise TypeError(f"latency values must be integers (µs), got array('{values.typecode}')")
        arr = np.asarray(values)
    else:
        arr = np.asarray(values)
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype == np.int64:
        return arr.ravel()
    if arr.dtype.kind not in "iu":
        raise TypeError(f"latency values must be integers (µs), got dtype {arr.dtype}")
    return arr.astype(np.int64).ravel()


class LatencyHistogram:
    """One latency view (µs) as an HdrHistogram with explicit out-of-range accounting.

    ``clamped`` counts values above ``highest_us`` (recorded as ``highest_us``),
    ``below_one`` counts zeros (recorded as 1 µs), ``negative`` counts values below zero
    (not recorded: the caller decides whether that is fatal, e.g. an e2e <= 0 on one
    clock is a bug).  All three are carried through ``add``, ``copy``, pickling and
    ``reset``; they are not part of ``encode()`` (OMB's format has no room for them).
    """

    __slots__ = ("_cache", "_counts", "_h", "_layout", "below_one", "clamped", "negative")

    #: Fixed-layout bucket values, also reachable from the class (Spark-side helpers).
    value_at_index = staticmethod(value_at_index)
    midpoint_at_index = staticmethod(midpoint_at_index)

    def __init__(self, highest_us: int, significant_digits: int = SIGNIFICANT_DIGITS) -> None:
        highest_us = int(highest_us)
        if not 2 <= highest_us <= MAX_HIGHEST:
            raise ValueError(f"highest_us must be within 2..2**53-1, got {highest_us}")
        self._attach(HdrHistogram(LOWEST_US, highest_us, significant_digits))
        self.clamped = 0
        self.below_one = 0
        self.negative = 0

    def _attach(self, hdr: HdrHistogram) -> None:
        self._h = hdr
        # zero-copy numpy view of hdrh's ctypes counts array (c_ulonglong, native order)
        self._counts: npt.NDArray[np.uint64] = np.ctypeslib.as_array(hdr.counts)
        self._layout = layout_of(
            hdr.lowest_trackable_value, hdr.highest_trackable_value, hdr.significant_figures
        )
        self._cache: tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]] | None = None

    @classmethod
    def for_metric(cls, metric: str) -> LatencyHistogram:
        """Empty histogram with the range of ``metric`` (see :func:`highest_for`)."""
        return cls(highest_for(metric))

    # ------------------------------------------------------------------ properties

    @property
    def highest_us(self) -> int:
        return int(self._h.highest_trackable_value)

    @property
    def significant_digits(self) -> int:
        return int(self._h.significant_figures)

    @property
    def total_count(self) -> int:
        return int(self._h.total_count)

    @property
    def hdr(self) -> HdrHistogram:
        """The wrapped ``hdrh`` histogram, read-only by convention (writers, dumps)."""
        return self._h

    def __len__(self) -> int:
        return self.total_count

    def __repr__(self) -> str:
        return (
            f"LatencyHistogram(highest_us={self.highest_us}, n={self.total_count}, "
            f"clamped={self.clamped}, below_one={self.below_one}, negative={self.negative})"
        )

    # ------------------------------------------------------------------ recording

    def record_batch(self, values_us: Any) -> None:
        """Record a batch of integer µs values (numpy int array, ``array('q')`` or list).

        Vectorised: one bit-length pass, one ``bincount``, one add into the counts array.
        """
        v = _as_int64(values_us)
        if v.size == 0:
            return
        lo = int(v.min())
        hi = int(v.max())
        if lo < 1:
            negatives = int(np.count_nonzero(v < 0))
            if negatives:
                self.negative += negatives
                v = v[v >= 0]
                if v.size == 0:
                    return
            zeros = int(np.count_nonzero(v == 0))
            if zeros:
                self.below_one += zeros
                v = np.maximum(v, 1)
            lo = int(v.min())
            hi = int(v.max())
        highest = self.highest_us
        if hi > highest:
            self.clamped += int(np.count_nonzero(v > highest))
            v = np.minimum(v, highest)
            hi = highest
        counts = self._counts
        for start in range(0, v.size, _CHUNK):
            binned = self._bin(v[start : start + _CHUNK])
            counts[: binned.size] += binned.view(np.uint64)
        h = self._h
        h.total_count += int(v.size)
        h.min_value = min(h.min_value, lo)
        h.max_value = max(h.max_value, hi)
        self._cache = None

    def _bin(self, v: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Counts per counts-index of in-range values (hdrh's index arithmetic, vectorised)."""
        layout = self._layout
        # bit length of (v | mask) is the float64 exponent; exact since v < 2**53
        bits = np.frexp((v | layout.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
        shift = bits - (layout.half_count_magnitude + 1)  # bucket index + unit magnitude
        # ((bucket + 1) << half_mag) + (v >> shift) - half_count
        #   == ((shift - unit) << half_mag) + (v >> shift)
        index = ((shift - layout.unit_magnitude) << layout.half_count_magnitude) + (v >> shift)
        return np.bincount(index)

    def record(self, value_us: int, count: int = 1) -> None:
        """Record one value ``count`` times, with the same clamping as ``record_batch``."""
        value = int(value_us)
        count = int(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if count == 0:
            return
        if value < 0:
            self.negative += count
            return
        if value == 0:
            self.below_one += count
            value = 1
        if value > self.highest_us:
            self.clamped += count
            value = self.highest_us
        if not self._h.record_value(value, count):  # cannot happen after clamping
            raise AssertionError(f"hdrh refused {value}")
        self._cache = None

    # ------------------------------------------------------------------ queries

    def _cumulative(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        """Non-empty counts indexes and their cumulative counts (cached until next change)."""
        if self._cache is None:
            nz = np.flatnonzero(self._counts)
            cum = np.cumsum(self._counts[nz].astype(np.int64))
            self._cache = (nz, cum)
        return self._cache

    def _value_at(self, q: float, nz: npt.NDArray[np.intp], cum: npt.NDArray[np.int64]) -> int:
        # hdrh.get_value_at_percentile, same float expression for the target rank
        total = self.total_count
        target = max(int((min(q, 100.0) * total / 100) + 0.5), 1)
        pos = int(np.searchsorted(cum, target, side="left"))
        index = int(nz[min(pos, nz.size - 1)])
        return int(self._layout.highest[index] if q else self._layout.lowest[index])

    def percentile(self, q: float, *, allow_undersampled: bool = False) -> float | None:
        """Value (µs) at percentile ``q`` (0..100), or ``None`` when empty or undersampled."""
        if not 0 <= q <= 100:
            raise ValueError(f"percentile must be within 0..100, got {q!r}")
        n = self.total_count
        if n == 0 or (not allow_undersampled and n < min_samples_for(q)):
            return None
        nz, cum = self._cumulative()
        return float(self._value_at(q, nz, cum))

    def percentiles(
        self, qs: Iterable[float], *, allow_undersampled: bool = False
    ) -> dict[float, float | None]:
        """Several percentiles from one cumulative pass (``None`` where n/a)."""
        qs = list(qs)
        for q in qs:
            if not 0 <= q <= 100:
                raise ValueError(f"percentile must be within 0..100, got {q!r}")
        n = self.total_count
        if n == 0:
            return {q: None for q in qs}
        nz, cum = self._cumulative()
        out: dict[float, float | None] = {}
        for q in qs:
            if not allow_undersampled and n < min_samples_for(q):
                out[q] = None
            else:
                out[q] = float(self._value_at(q, nz, cum))
        return out

    def min(self) -> float | None:
        """Lowest equivalent value of the smallest recorded value, ``None`` when empty."""
        if self.total_count == 0:
            return None
        return float(self._h.get_min_value())

    def max(self) -> float | None:
        """Highest equivalent value of the largest recorded value, ``None`` when empty."""
        if self.total_count == 0:
            return None
        return float(self._h.get_max_value())

    def mean(self) -> float | None:
        """Mean over bucket midpoints (as HdrHistogram computes it), ``None`` when empty."""
        n = self.total_count
        if n == 0:
            return None
        nz, _ = self._cumulative()
        counts = self._counts[nz].astype(np.int64)
        mids = self._layout.median[nz]
        if n * int(mids[-1]) < 2**63:
            total = int(np.dot(counts, mids))
        else:  # exact integer sum beyond int64
            total = sum(c * m for c, m in zip(counts.tolist(), mids.tolist(), strict=True))
        return float(total) / n

    # ------------------------------------------------------------------ merging

    def _same_geometry(self, other: LatencyHistogram) -> bool:
        a, b = self._layout, other._layout
        return (a.unit_magnitude, a.half_count_magnitude) == (
            b.unit_magnitude,
            b.half_count_magnitude,
        )

    def add(self, other: LatencyHistogram) -> None:
        """Add ``other`` into this histogram: exact by addition, counters included.

        Histograms of the same precision merge bucket by bucket whatever their ranges;
        buckets of ``other`` above this range are clamped (and counted).  A histogram of
        another precision is re-recorded bucket by bucket at its lowest equivalent value,
        as HdrHistogram does.
        """
        self.clamped += other.clamped
        self.below_one += other.below_one
        self.negative += other.negative
        n = other.total_count
        if n == 0:
            return
        onz, _ = other._cumulative()
        ocounts = other._counts[onz]
        h = self._h
        if self._same_geometry(other) and int(onz[-1]) < self._layout.counts_len:
            top = int(onz[-1]) + 1
            self._counts[:top] += other._counts[:top]
            h.total_count += n
            h.min_value = min(h.min_value, other._h.min_value)
            h.max_value = max(h.max_value, other._h.max_value)
            self._cache = None
            return
        values = other._layout.lowest[onz]
        for value, count in zip(values.tolist(), ocounts.tolist(), strict=True):
            if value > self.highest_us:
                self.clamped += int(count)
                value = self.highest_us
            self._h.record_value(max(int(value), 1), int(count))
        self._cache = None

    def __iadd__(self, other: LatencyHistogram) -> LatencyHistogram:
        self.add(other)
        return self

    def _blank_hdr(self) -> HdrHistogram:
        h = self._h
        return HdrHistogram(
            h.lowest_trackable_value, h.highest_trackable_value, h.significant_figures
        )

    def copy(self) -> LatencyHistogram:
        """Independent copy (counts, bookkeeping and counters)."""
        new = LatencyHistogram.__new__(LatencyHistogram)
        new._attach(self._blank_hdr())
        new._counts[:] = self._counts
        new._h.total_count = self._h.total_count
        new._h.min_value = self._h.min_value
        new._h.max_value = self._h.max_value
        new.clamped, new.below_one, new.negative = self.clamped, self.below_one, self.negative
        return new

    def reset(self) -> None:
        """Empty the histogram and its counters (warm-up end, period roll-over)."""
        self._counts[:] = 0
        h = self._h
        h.total_count = 0
        h.min_value = sys.maxsize
        h.max_value = 0
        self.clamped = self.below_one = self.negative = 0
        self._cache = None

    # ------------------------------------------------------------------ serialisation

    def encode(self) -> str:
        """HdrHistogram V2 compressed, base64 ("HISTFAAA..."): what OMB/Java read and write."""
        blob = self._h.encode()
        return blob.decode("ascii") if isinstance(blob, bytes) else str(blob)

    @classmethod
    def decode(cls, blob: str | bytes, highest_us: int | None = None) -> LatencyHistogram:
        """Decode a V2 base64 blob (ours, Java's or C's).

        With ``highest_us`` the result has that range and the blob's precision (values
        above it are clamped and counted); otherwise the blob's own range.
        """
        hdr = HdrHistogram.decode(blob.encode("ascii") if isinstance(blob, str) else blob)
        decoded = cls.__new__(cls)
        decoded._attach(hdr)
        decoded.clamped = decoded.below_one = decoded.negative = 0
        if highest_us is None or int(highest_us) == decoded.highest_us:
            return decoded
        target = cls(int(highest_us), decoded.significant_digits)
        target.add(decoded)
        return target

    def sparse(self) -> list[tuple[int, int]]:
        """Non-empty buckets as ``(counts index, count)`` pairs (Spark merges these by sum)."""
        nz, _ = self._cumulative()
        return list(zip(nz.tolist(), self._counts[nz].tolist(), strict=True))

    @classmethod
    def from_sparse(cls, pairs: Iterable[tuple[int, int]], highest_us: int) -> LatencyHistogram:
        """Rebuild a fixed-layout histogram from ``(index, count)`` pairs (duplicates add)."""
        new = cls(highest_us)
        items = list(pairs)
        if not items:
            return new
        idx = np.fromiter((int(i) for i, _ in items), dtype=np.int64, count=len(items))
        cnt = np.fromiter((int(c) for _, c in items), dtype=np.int64, count=len(items))
        if idx.min() < 0 or idx.max() >= new._layout.counts_len:
            raise ValueError(
                f"sparse index outside 0..{new._layout.counts_len - 1} for highest_us={highest_us}"
            )
        if cnt.min() < 0:
            raise ValueError("sparse counts must be >= 0")
        np.add.at(new._counts, idx, cnt.astype(np.uint64))
        new._set_tracking_from_counts()
        return new

    def _set_tracking_from_counts(self) -> None:
        """Bookkeeping from counts alone, as hdrh sets it after decoding a blob."""
        self._cache = None
        nz, cum = self._cumulative()
        h = self._h
        if nz.size == 0:
            h.total_count, h.min_value, h.max_value = 0, sys.maxsize, 0
            return
        h.total_count = int(cum[-1])
        h.min_value = int(self._layout.lowest[nz[0]])
        h.max_value = int(self._layout.highest[nz[-1]])

    def omb_quantiles(self, scale: float = 1.0) -> dict[str, float]:
        """OMB's ``aggregated*Quantiles``: Java ``histogram.percentiles(100)`` iteration.

        Keys are the cumulative percentile actually reached (Java ``Double.toString``),
        values the bucket's highest equivalent value times ``scale`` (1/1000 for ms).
        Follows Java's PercentileIterator, whose ticks double per half-distance to 100 %
        (HdrHistogram_py's iterator does not truncate the exponent and yields other keys).
        """
        n = self.total_count
        if n == 0:
            return {}
        nz, cum = self._cumulative()
        highest = self._layout.highest
        out: dict[float, float] = {}
        level = 0.0
        ticks = 100  # OMB: percentiles(100)
        # 13471 / 1000.0 prints 13.471 where 13471 * 0.001 prints 13.471000000000002
        divisor = 1.0 / scale if 0 < scale < 1 else None
        for index, reached in zip(nz.tolist(), cum.tolist(), strict=True):
            pct = (100.0 * reached) / n
            value = int(highest[index]) / divisor if divisor else int(highest[index]) * scale
            while pct >= level:
                out[pct] = value
                gap = 100.0 - level
                if gap <= 0:
                    break
                exponent = int(math.log(100.0 / gap) / math.log(2))
                level += 100.0 / (ticks * int(math.pow(2, exponent + 1)))
                if reached >= n:
                    break
            if reached >= n:
                out[pct] = value  # Java's extra final step to 100 %
                break
        return {java_double_str(k): v for k, v in sorted(out.items())}

    # ------------------------------------------------------------------ pickling

    def __getstate__(self) -> dict[str, Any]:
        nz, _ = self._cumulative()
        return {
            "lowest": int(self._h.lowest_trackable_value),
            "highest_us": self.highest_us,
            "digits": self.significant_digits,
            # ascending indexes delta-encode to small numbers; zlib makes the state compact
            "index": zlib.compress(np.diff(nz, prepend=0).astype(np.int32).tobytes(), 1),
            "counts": zlib.compress(self._counts[nz].tobytes(), 1),
            "min_value": int(self._h.min_value),
            "max_value": int(self._h.max_value),
            "clamped": self.clamped,
            "below_one": self.below_one,
            "negative": self.negative,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._attach(HdrHistogram(state["lowest"], state["highest_us"], state["digits"]))
        idx = np.cumsum(np.frombuffer(zlib.decompress(state["index"]), dtype=np.int32))
        counts = np.frombuffer(zlib.decompress(state["counts"]), dtype=np.uint64)
        self._counts[idx] = counts
        h = self._h
        h.total_count = int(counts.sum(dtype=np.uint64))
        h.min_value = state["min_value"]
        h.max_value = state["max_value"]
        self.clamped = state["clamped"]
        self.below_one = state["below_one"]
        self.negative = state["negative"]
