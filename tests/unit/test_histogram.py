"""LatencyHistogram must be hdrh, exactly, only faster - and never lose a value silently."""

from __future__ import annotations

import array
import math
import pickle

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from pytest_brokerperf.metrics.hdr_layout import (
    E2E_HIGHEST_US,
    PUBLISH_HIGHEST_US,
    highest_for,
    java_double_str,
    midpoint_at_index,
    min_samples_for,
    value_at_index,
)
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.hlog import HlogWriter, write_period_hlogs
from pytest_brokerperf.metrics.stats import PeriodStats

QS = [0, 0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 99.999, 100]


def _reference(values: np.ndarray, highest: int) -> HdrHistogram:
    ref = HdrHistogram(1, highest, 3)
    for v in values.tolist():
        assert ref.record_value(v)
    return ref


def _assert_same(h: LatencyHistogram, ref: HdrHistogram) -> None:
    assert h.total_count == ref.get_total_count()
    for q in QS:
        assert h.percentile(q, allow_undersampled=True) == ref.get_value_at_percentile(q), q
    assert h.min() == ref.get_min_value()
    assert h.max() == ref.get_max_value()
    assert h.mean() == ref.get_mean_value()
    assert h.encode() == ref.encode().decode("ascii")
    # hdrh's own bookkeeping is left exactly as record_value leaves it
    assert (h.hdr.min_value, h.hdr.max_value) == (ref.min_value, ref.max_value)


def _samples(kind: str, n: int, highest: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "lognormal":
        v = rng.lognormal(8, 2, n)
    elif kind == "small":  # first bucket only (< 2048: unit resolution)
        v = rng.integers(1, 2048, n)
    elif kind == "wide":  # every magnitude up to the top of the range
        v = np.exp(rng.uniform(0, math.log(highest), n))
    else:
        raise AssertionError(kind)
    return np.clip(np.asarray(v, dtype=np.int64), 1, highest)


@pytest.mark.parametrize("highest", [PUBLISH_HIGHEST_US, E2E_HIGHEST_US])
@pytest.mark.parametrize("kind", ["lognormal", "small", "wide"])
def test_batch_identical_to_hdrh_record_value(kind: str, highest: int) -> None:
    values = _samples(kind, 20_000, highest)
    h = LatencyHistogram(highest)
    for chunk in np.array_split(values, 7):  # several batches, as a worker records them
        h.record_batch(chunk)
    ref = _reference(values, highest)
    _assert_same(h, ref)
    whole = LatencyHistogram(highest)
    whole.record_batch(values)  # one call, binned in several internal chunks
    _assert_same(whole, ref)


def test_input_types_list_array_and_narrow_ints() -> None:
    values = _samples("lognormal", 5_000, PUBLISH_HIGHEST_US)
    ref = _reference(values, PUBLISH_HIGHEST_US)
    for batch in (
        values.tolist(),
        array.array("q", values.tolist()),
        array.array("l", values.tolist()),
        values.astype(np.int32),
        values.astype(np.uint64),
    ):
        h = LatencyHistogram(PUBLISH_HIGHEST_US)
        h.record_batch(batch)
        _assert_same(h, ref)


def test_rejects_float_values() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    with pytest.raises(TypeError):
        h.record_batch(np.array([1.5, 2.0]))
    with pytest.raises(TypeError):
        h.record_batch(array.array("d", [1.0]))
    h.record_batch([])
    h.record_batch(np.empty(0, dtype=np.int64))
    assert h.total_count == 0


def test_scalar_record_matches_batch() -> None:
    a, b = LatencyHistogram(PUBLISH_HIGHEST_US), LatencyHistogram(PUBLISH_HIGHEST_US)
    a.record(1234, 5)
    a.record(0)
    a.record(-3, 2)
    a.record(PUBLISH_HIGHEST_US + 1, 4)
    b.record_batch([1234] * 5 + [0, -3, -3] + [PUBLISH_HIGHEST_US + 1] * 4)
    assert a.encode() == b.encode()
    assert (a.clamped, a.below_one, a.negative) == (b.clamped, b.below_one, b.negative) == (4, 1, 2)


def test_clamping_is_counted_and_recorded_at_highest() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch(np.array([10, 20, PUBLISH_HIGHEST_US, PUBLISH_HIGHEST_US + 1, 10**12]))
    assert h.clamped == 2  # highest itself is in range
    assert h.total_count == 5
    ref = _reference(
        np.array([10, 20, PUBLISH_HIGHEST_US, PUBLISH_HIGHEST_US, PUBLISH_HIGHEST_US]),
        PUBLISH_HIGHEST_US,
    )
    _assert_same(h, ref)
    # hdrh itself would have dropped 10**12 silently: that is what we guard against
    assert HdrHistogram(1, PUBLISH_HIGHEST_US, 3).record_value(10**12) is False


def test_negatives_counted_not_recorded_and_zero_recorded_as_one() -> None:
    h = LatencyHistogram(E2E_HIGHEST_US)
    h.record_batch(np.array([-5, -1, 0, 0, 7]))
    assert (h.negative, h.below_one, h.total_count) == (2, 2, 3)
    assert h.min() == 1.0
    _assert_same(h, _reference(np.array([1, 1, 7]), E2E_HIGHEST_US))
    only_negative = LatencyHistogram(E2E_HIGHEST_US)
    only_negative.record_batch([-1, -2])
    assert only_negative.negative == 2 and only_negative.total_count == 0


def test_empty_histogram_reports_none() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    assert h.percentile(50) is None
    assert h.percentile(100, allow_undersampled=True) is None
    assert h.percentiles([50, 99]) == {50: None, 99: None}
    assert (h.min(), h.max(), h.mean()) == (None, None, None)
    assert h.sparse() == []
    assert h.omb_quantiles() == {}


@pytest.mark.parametrize(
    ("q", "needed"),
    [(99.99, 100_000), (99.9, 10_000), (99, 1_000), (95, 200), (50, 20), (0, 10), (100, 1)],
)
def test_undersampled_thresholds(q: float, needed: int) -> None:
    assert min_samples_for(q) == needed
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    if needed > 1:
        h.record(500, needed - 1)
        assert h.percentile(q) is None
        assert h.percentiles([q])[q] is None
        assert h.percentile(q, allow_undersampled=True) is not None
    h.record(500)
    assert h.percentile(q) == pytest.approx(500, rel=1e-3)


def test_percentiles_one_pass_equals_single_queries() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch(_samples("lognormal", 3_000, PUBLISH_HIGHEST_US))
    many = h.percentiles(QS)
    assert many == {q: h.percentile(q) for q in QS}
    assert many[99.9] is None and many[99] is not None  # 3,000 samples
    with pytest.raises(ValueError):
        h.percentile(101)
    with pytest.raises(ValueError):
        h.percentiles([-1])


def test_add_equals_feeding_all_values() -> None:
    values = _samples("wide", 30_000, PUBLISH_HIGHEST_US, seed=11)
    parts = np.array_split(values, 3)
    merged = LatencyHistogram(PUBLISH_HIGHEST_US)
    merged.add(LatencyHistogram(PUBLISH_HIGHEST_US))  # empty first: hdrh would lose the min here
    for part in parts:
        h = LatencyHistogram(PUBLISH_HIGHEST_US)
        h.record_batch(part)
        merged.add(h)
    merged.add(LatencyHistogram(PUBLISH_HIGHEST_US))  # and empty last
    _assert_same(merged, _reference(values, PUBLISH_HIGHEST_US))


def test_add_merges_counters_and_ranges() -> None:
    publish = LatencyHistogram.for_metric("publish_latency")
    publish.record_batch([5, -1, 0, PUBLISH_HIGHEST_US * 2])
    e2e = LatencyHistogram.for_metric("e2e_latency")
    e2e.add(publish)  # 60 s into 12 h: same geometry, bucket by bucket
    assert (e2e.clamped, e2e.below_one, e2e.negative, e2e.total_count) == (1, 1, 1, 3)
    assert e2e.max() == publish.max()
    big = LatencyHistogram(E2E_HIGHEST_US)
    big.record_batch([10, 3_600_000_000])
    small = LatencyHistogram(PUBLISH_HIGHEST_US)
    small += big  # 12 h into 60 s: the hour is clamped and counted
    assert small.clamped == 1 and small.total_count == 2
    assert small.max() == LatencyHistogram(PUBLISH_HIGHEST_US).hdr.get_highest_equivalent_value(
        PUBLISH_HIGHEST_US
    )


def test_add_of_other_precision_rerecords() -> None:
    five = LatencyHistogram(PUBLISH_HIGHEST_US, significant_digits=5)
    five.record_batch([100, 12_345, 999_999])
    three = LatencyHistogram(PUBLISH_HIGHEST_US)
    three.add(five)
    assert three.total_count == 3
    assert three.percentile(100, allow_undersampled=True) == pytest.approx(999_999, rel=1e-3)


def test_copy_is_independent_and_reset_empties() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch([1, 2, 3, -1, PUBLISH_HIGHEST_US + 5])
    c = h.copy()
    assert c.encode() == h.encode()
    assert (c.clamped, c.negative) == (1, 1)
    c.record(1000)
    assert c.total_count == h.total_count + 1
    h.reset()
    assert (h.total_count, h.clamped, h.negative, h.below_one) == (0, 0, 0, 0)
    assert h.max() is None
    h.record_batch([42])
    _assert_same(h, _reference(np.array([42]), PUBLISH_HIGHEST_US))


def test_encode_decode_round_trip() -> None:
    h = LatencyHistogram(E2E_HIGHEST_US)
    h.record_batch(_samples("wide", 10_000, E2E_HIGHEST_US))
    blob = h.encode()
    assert isinstance(blob, str) and blob.startswith("HISTFAAA")
    d = LatencyHistogram.decode(blob)
    assert d.highest_us == E2E_HIGHEST_US
    assert d.encode() == blob
    assert d.percentiles(QS, allow_undersampled=True) == h.percentiles(QS, allow_undersampled=True)
    assert (d.min(), d.max(), d.mean()) == (h.min(), h.max(), h.mean())
    assert d.sparse() == h.sparse()
    narrowed = LatencyHistogram.decode(blob, highest_us=PUBLISH_HIGHEST_US)
    assert narrowed.highest_us == PUBLISH_HIGHEST_US
    assert narrowed.total_count == h.total_count
    # re-recorded at each bucket's lowest value: buckets starting above 60 s are clamped
    above = sum(c for i, c in h.sparse() if h.hdr.get_value_from_index(i) > PUBLISH_HIGHEST_US)
    assert narrowed.clamped == above > 0
    assert narrowed.max() == narrowed.hdr.get_highest_equivalent_value(PUBLISH_HIGHEST_US)


# Two interval histograms written by Java HdrHistogram (jHiccup 2.0.7), from
# HdrHistogram/HdrHistogram src/test/resources/org/HdrHistogram/jHiccup-2.0.7S.logV2.hlog
# (HdrHistogram is public domain, CC0 / BSD-2-Clause).  Lines: start, length, max (ms), blob.
JAVA_HLOG_LINES = [
    "0.126,1.007,1.933,HISTFAAAAEB42pNpmSzMwMAgywABTBDKT4GBgdnNYMcCBvsPEBEjDT0FMTUxMT05LgEhPqmIeWxt"
    "TAKMTNxM6xmZmAAjcgjc",
    "7.134,1.515,960.496,HISTFAAAAJV42pNpmSzMwMDUwAABTBDKT4GBgdnNYMcCBvsPEBEWLi4eNkY2PiYOPhYOLgGOLuZ"
    "jTGLrGZnKgTCYyZrJEoh1mWSZpMFQFkpyM/GCMTKJzOdkYoVCZjgLmc1MhDwzEyMQggl0SH1BbEJIgIUJC2AhUoxchSwsLGw"
    "sMIBgYRUkQyFBaQ4g4EIl0PlcpKtB4wMAh5wT+Q==",
]


@pytest.mark.parametrize("line", JAVA_HLOG_LINES)
def test_decode_java_encoded_blob(line: str) -> None:
    _, _, interval_max_ms, blob = line.split(",", 3)
    ours = LatencyHistogram.decode(blob)
    ref = HdrHistogram.decode(blob)
    assert ours.total_count == ref.get_total_count() > 0
    assert ours.max() == ref.get_max_value()
    assert ours.percentile(99, allow_undersampled=True) == ref.get_value_at_percentile(99)
    # jHiccup logs nanoseconds and prints the max in ms, truncated to 3 decimals
    assert ours.max() / 1e6 == pytest.approx(float(interval_max_ms), abs=1e-3, rel=1e-3)
    again = LatencyHistogram.decode(ours.encode())
    assert again.sparse() == ours.sparse()
    assert ours.copy().encode() == ours.encode() == pickle.loads(pickle.dumps(ours)).encode()
    # batched recording into another layout (lowest 20,000 ns: unit magnitude 14, 2 digits)
    extra = _samples("wide", 5_000, 10**12)
    ours.record_batch(extra)
    for v in extra.tolist():
        assert ref.record_value(v)
    assert ours.encode() == ref.encode().decode("ascii")
    assert ours.percentile(50) == ref.get_value_at_percentile(50)


def test_sparse_round_trip_and_percentiles_from_pairs() -> None:
    h = LatencyHistogram(E2E_HIGHEST_US)
    h.record_batch(_samples("lognormal", 50_000, E2E_HIGHEST_US))
    pairs = h.sparse()
    assert all(c > 0 for _, c in pairs) and pairs == sorted(pairs)
    back = LatencyHistogram.from_sparse(pairs, E2E_HIGHEST_US)
    assert back.encode() == h.encode()
    assert back.percentiles(QS) == h.percentiles(QS)
    assert (back.min(), back.max(), back.mean()) == (h.min(), h.max(), h.mean())
    # what Spark does: cumulative counts over (index, count), hdrh's rank rule, value_at_index
    idx = np.array([i for i, _ in pairs])
    cum = np.cumsum([c for _, c in pairs])
    n = int(cum[-1])
    for q in [50, 90, 99, 99.9]:
        rank = max(int(q * n / 100 + 0.5), 1)
        assert value_at_index(int(idx[np.searchsorted(cum, rank)])) == h.percentile(q)
    mean = sum(c * midpoint_at_index(i) for i, c in pairs) / n
    assert mean == h.mean()
    # duplicates add (Spark may hand over unmerged pairs)
    doubled = LatencyHistogram.from_sparse(pairs + pairs, E2E_HIGHEST_US)
    assert doubled.total_count == 2 * n
    with pytest.raises(ValueError):
        LatencyHistogram.from_sparse([(10**9, 1)], PUBLISH_HIGHEST_US)


def test_value_at_index_matches_hdrh_for_every_index() -> None:
    ref = HdrHistogram(1, E2E_HIGHEST_US, 3)
    for i in range(ref.counts_len):
        low = ref.get_value_from_index(i)
        assert value_at_index(i) == ref.get_highest_equivalent_value(low), i
        assert midpoint_at_index(i) == ref._hdr_median_equiv_value(low), i
        # the closed form documented for Spark SQL
        b = max((i >> 10) - 1, 0)
        s = i if i < 2048 else (i & 1023) + 1024
        assert value_at_index(i) == (s << b) + (1 << b) - 1, i
    with pytest.raises(ValueError):
        value_at_index(ref.counts_len)


def test_pickle_round_trip_is_exact_and_compact() -> None:
    h = LatencyHistogram(E2E_HIGHEST_US)
    h.record_batch(_samples("wide", 100_000, E2E_HIGHEST_US))
    h.record_batch([-1, 0])
    blob = pickle.dumps(h)
    back = pickle.loads(blob)
    assert back.encode() == h.encode()
    assert (back.hdr.min_value, back.hdr.max_value) == (h.hdr.min_value, h.hdr.max_value)
    assert (back.clamped, back.below_one, back.negative) == (h.clamped, h.below_one, h.negative)
    assert len(blob) < 8 * len(h.sparse()) + 1024  # a dense pickle would be 27,648 * 8 bytes
    back.record(5)
    assert back.total_count == h.total_count + 1
    empty = pickle.loads(pickle.dumps(LatencyHistogram(PUBLISH_HIGHEST_US)))
    assert empty.total_count == 0 and empty.max() is None


def _java_percentile_iteration(hdr: HdrHistogram, ticks: int = 100) -> dict[float, int]:
    """Literal port of Java HdrHistogram's PercentileIterator + AbstractHistogramIterator."""
    total = hdr.get_total_count()
    out: dict[float, int] = {}
    index, cum, fresh, level, reached_last = 0, 0, True, 0.0, False
    while True:
        if cum >= total:  # hasNext(): one extra step to 100 %
            if reached_last or total == 0:
                return out
            level, reached_last = 100.0, True
        while index < hdr.counts_len:  # next()
            count = hdr.get_count_at_index(index)
            if fresh:
                cum += count
                fresh = False
            if count != 0 and (100.0 * cum) / total >= level:
                out[(100.0 * cum) / total] = hdr.get_highest_equivalent_value(
                    hdr.get_value_from_index(index)
                )
                if level >= 100.0:
                    level = math.inf
                else:
                    exponent = int(math.log(100.0 / (100.0 - level)) / math.log(2))
                    level += 100.0 / (ticks * int(math.pow(2, exponent + 1)))
                break
            index += 1
            fresh = True
        else:
            raise AssertionError("iterator ran off the counts array")


@pytest.mark.parametrize("kind", ["lognormal", "small"])
def test_omb_quantiles_follow_java_percentile_iterator(kind: str) -> None:
    values = _samples(kind, 20_000, PUBLISH_HIGHEST_US, seed=5)
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch(values)
    java = _java_percentile_iteration(h.hdr)
    expected = {java_double_str(k): v / 1000.0 for k, v in sorted(java.items())}
    assert h.omb_quantiles(scale=1 / 1000) == expected
    assert list(expected)[-1] == "100.0"
    assert h.omb_quantiles() == {
        k: float(v) for k, v in ((java_double_str(k), v) for k, v in sorted(java.items()))
    }


def test_omb_quantile_keys_use_java_notation() -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record(1)
    h.record(5000, 1_000_000)
    keys = list(h.omb_quantiles())
    assert keys[0].endswith("E-5") and float(keys[0]) == pytest.approx(100 / 1_000_001)
    assert keys[-1] == "100.0"


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (2.6357704466400003e-06, "2.6357704466400003E-6"),
        (0.5003272177220981, "0.5003272177220981"),
        (100.0, "100.0"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.0, "0.0"),
    ],
)
def test_java_double_str(x: float, text: str) -> None:
    assert java_double_str(x) == text


def test_highest_for_metric() -> None:
    assert highest_for("publish_latency") == PUBLISH_HIGHEST_US
    assert highest_for("publish_delay") == PUBLISH_HIGHEST_US
    assert highest_for("publish_response") == PUBLISH_HIGHEST_US
    assert highest_for("e2e_latency") == E2E_HIGHEST_US
    assert highest_for("e2e_response") == E2E_HIGHEST_US
    assert highest_for("catchup_age") == E2E_HIGHEST_US
    assert LatencyHistogram.for_metric("e2e_response").highest_us == E2E_HIGHEST_US


def test_hlog_files_read_back_with_hdrh(tmp_path) -> None:
    periods = []
    for i in range(3):
        p = PeriodStats(
            index=i,
            start_ns=5_000_000_000 + i * 10_000_000_000,
            elapsed_s=10.0,
            phase="warmup" if i == 0 else "measure",
        )
        for metric in ("publish_latency", "e2e_latency"):
            h = LatencyHistogram.for_metric(metric)
            h.record_batch(_samples("lognormal", 1_000 * (i + 1), h.highest_us, seed=i))
            p.histograms[metric] = h
        periods.append(p)
    paths = write_period_hlogs(tmp_path, periods, start_epoch_s=1_700_000_000.25)
    assert set(paths) == {"publish_latency", "e2e_latency"}
    text = paths["publish_latency"].read_text()
    assert "#[StartTime: 1700000000.250 (seconds since epoch)" in text
    reader = HistogramLogReader(
        str(paths["publish_latency"]), HdrHistogram(1, PUBLISH_HIGHEST_US, 3)
    )
    seen = []
    try:
        while (hist := reader.get_next_interval_histogram()) is not None:
            seen.append((hist.get_total_count(), hist.get_tag()))
    finally:
        reader.close()
    assert seen == [(1000, "warmup"), (2000, None), (3000, None)]
    lines = [ln for ln in text.splitlines() if ln and ln[0] not in '#"']
    start, length, max_ms, _ = lines[1].split(",", 3)
    assert (start, length) == ("10.000", "10.000")
    assert float(max_ms) == pytest.approx(
        periods[1].histograms["publish_latency"].max() / 1000, abs=1e-3
    )


def test_hlog_writer_without_start_time(tmp_path) -> None:
    h = LatencyHistogram(PUBLISH_HIGHEST_US)
    h.record_batch([100, 200])
    with HlogWriter(tmp_path / "x.hlog") as w:
        w.write_interval(h, 0.0, 1.0)
    text = (tmp_path / "x.hlog").read_text()
    assert "#[StartTime" not in text and text.count("HISTFAAA") == 1


def test_write_hlogs_from_run_outcome(tmp_path) -> None:
    from types import SimpleNamespace

    def period(i: int, phase: str) -> PeriodStats:
        p = PeriodStats(
            index=i, start_ns=1_000_000_000 * (100 + 10 * i), elapsed_s=10.0, phase=phase
        )
        h = LatencyHistogram.for_metric("publish_response")
        h.record_batch([100 * (i + 1)] * 10)
        p.histograms["publish_response"] = h
        return p

    outcome = SimpleNamespace(
        warmup=[period(0, "warmup")],
        periods=[period(1, "measure"), period(2, "measure")],
        measure_begin_time="2024-02-08T10:00:10+00:00",
    )
    from pytest_brokerperf.metrics.hlog import write_hlogs

    paths = write_hlogs(tmp_path, outcome)
    text = paths["publish_response"].read_text()
    # first (warm-up) period starts 10 s before the measured window, on the monotonic clock
    assert "#[StartTime: 1707386400.000 (seconds since epoch)" in text
    starts = [ln.split(",")[1] for ln in text.splitlines() if ln.startswith("Tag=")]
    assert starts == ["0.000"]
    assert sum(1 for ln in text.splitlines() if ln[:1].isdigit()) == 2
