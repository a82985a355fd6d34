"""HdrHistogram's bucket layout at the plugin's fixed precision, as plain numbers.

The precision every recorded histogram uses, each metric's trackable range, the counts
index ↔ value mapping (shared by the recorder and the Spark report, which computes
percentiles from sparse (index, count) pairs) and the smallest sample count that
resolves a percentile. Java's double formatting for OMB's quantile keys lives here too:
it names the same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram

__all__ = [
    "E2E_HIGHEST_US",
    "LOWEST_US",
    "MAX_HIGHEST",
    "PUBLISH_HIGHEST_US",
    "SIGNIFICANT_DIGITS",
    "Layout",
    "fixed_layout",
    "highest_for",
    "java_double_str",
    "layout_of",
    "midpoint_at_index",
    "min_samples_for",
    "value_at_index",
]

#: Fixed precision of every histogram the plugin writes (recorded in results).
SIGNIFICANT_DIGITS = 3


#: Lowest discernible value, µs (OMB's default as well).
LOWEST_US = 1


#: Range of publish latency, delay and response histograms: 60 s (OMB's value).
PUBLISH_HIGHEST_US = 60_000_000


#: Range of end-to-end and catch-up age histograms: 12 h (OMB's e2e value).
E2E_HIGHEST_US = 43_200_000_000


# Above 2**53 a float64 no longer holds every integer, and the vectorised bit length
# below relies on exact conversion.  Nothing we measure comes near (2**53 µs = 285 years).
MAX_HIGHEST = 2**53 - 1


def highest_for(metric: str) -> int:
    """Trackable range of a metric: end-to-end and catch-up age views get 12 h."""
    if metric.startswith("e2e_") or metric == "catchup_age":
        return E2E_HIGHEST_US
    return PUBLISH_HIGHEST_US


@lru_cache(maxsize=64)
def min_samples_for(q: float) -> int:
    """Smallest sample count that resolves percentile ``q`` (docs/explanation/measurement.md).

    ``n >= 10 / (1 - q/100)``, computed with exact decimal arithmetic so that p99.99 needs
    exactly 100,000 samples (float arithmetic would ask for 100,000.00000001).  p100 (the
    maximum) needs one sample.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q!r}")
    if q == 100:
        return 1
    gap = 100 - Fraction(repr(float(q)))  # 100 - q, exact for the decimal literal q
    return math.ceil(Fraction(1000) / gap)


@dataclass(frozen=True)
class Layout:
    """Bucket geometry of one (lowest, highest, digits) configuration, with per-index values."""

    unit_magnitude: int
    half_count_magnitude: int
    half_count: int
    sub_bucket_mask: int
    counts_len: int
    lowest: npt.NDArray[np.int64]  # lowest equivalent value of each counts index
    highest: npt.NDArray[np.int64]  # highest equivalent value (what percentiles report)
    median: npt.NDArray[np.int64]  # median equivalent value (what means use)


@lru_cache(maxsize=32)
def layout_of(lowest: int, highest: int, digits: int) -> Layout:
    ref = HdrHistogram(lowest, highest, digits)
    unit = ref.unit_magnitude
    half_mag = ref.sub_bucket_half_count_magnitude
    half = ref.sub_bucket_half_count
    idx = np.arange(ref.counts_len, dtype=np.int64)
    bucket = (idx >> half_mag) - 1
    sub = (idx & (half - 1)) + half
    first = bucket < 0
    sub[first] -= half
    bucket[first] = 0
    low = sub << (bucket + unit)
    size = np.left_shift(np.int64(1), bucket + unit)
    high = low + size - 1
    med = low + (size >> 1)
    for arr in (low, high, med):  # shared by every histogram of this layout
        arr.setflags(write=False)
    return Layout(unit, half_mag, half, ref.sub_bucket_mask, ref.counts_len, low, high, med)


def fixed_layout() -> Layout:
    # Index geometry depends on lowest and digits only; the highest value just sets the
    # array length, so the 12 h layout covers every index any fixed-layout histogram uses.
    return layout_of(LOWEST_US, E2E_HIGHEST_US, SIGNIFICANT_DIGITS)


def value_at_index(index: int) -> int:
    """Value a percentile reports for a counts index of the fixed layout (3 digits, lowest 1).

    This is the bucket's highest equivalent value, the same number ``percentile()``
    returns, so Spark can compute percentiles from sparse ``(index, count)`` pairs with a
    cumulative sum.  Closed form for SQL (3 digits: half-count magnitude 10):
    ``b = max((i >> 10) - 1, 0)``, ``s = i < 2048 ? i : (i & 1023) + 1024``,
    ``value = (s << b) + (1 << b) - 1``.
    """
    layout = fixed_layout()
    if not 0 <= index < layout.counts_len:
        raise ValueError(f"counts index {index} outside the fixed layout")
    return int(layout.highest[index])


def midpoint_at_index(index: int) -> int:
    """Median equivalent value of a counts index of the fixed layout: what means use."""
    layout = fixed_layout()
    if not 0 <= index < layout.counts_len:
        raise ValueError(f"counts index {index} outside the fixed layout")
    return int(layout.median[index])


def java_double_str(x: float) -> str:
    """Format a float like Java's ``Double.toString`` (OMB quantile-map keys are these).

    Plain notation in [1e-3, 1e7) (always with a fraction: ``100.0``), otherwise
    ``d.dddE-n``.  Digits are Python's shortest round-trip repr; Java before 19 sometimes
    printed one more digit, which parses back to the same double.
    """
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {x!r}")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    exact = Decimal(repr(x)).normalize()
    if 1e-3 <= abs(x) < 1e7:
        text = format(exact, "f")
        return text if "." in text else text + ".0"
    sign, digit_tuple, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    exp10 = len(digits) - 1 + exponent
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp10}"
