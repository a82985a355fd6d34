"""The soak's growth rule on synthetic series (what grows without bound is flagged; a
steady or noisy-flat figure, a one-off step and a ramp that levels off are not) and the
soak's window and rate per profile."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.judge.resource_growth import (
    GrowthLimits,
    growth_findings,
    judge_series,
    process_series,
    trends,
)
from pytest_brokerperf.metrics.stats import PeriodStats, WorkerSample
from pytest_brokerperf.metrics.sysstats import (
    ProcessResources,
    jvm_heap_first_touch,
    process_resources,
)
from pytest_brokerperf.scenario_library.soak import SOAK_RATE, SOAK_SMOKE_S, SOAK_WINDOW_S, Soak

MIB = 1048576
LIMITS = GrowthLimits()


def series(values: list[float], period_s: float = 10.0) -> list[tuple[float, float]]:
    return [((i + 1) * period_s, v) for i, v in enumerate(values)]


def judge(values: list[float], resource: str = "rss_bytes"):
    t = judge_series("broker node 1 (pid 7)", resource, series(values), LIMITS)
    assert t is not None
    return t


def test_steady_is_not_growth() -> None:
    t = judge([500 * MIB] * 60)
    assert not t.grows and t.slope_per_min == 0


def test_noisy_flat_is_not_growth() -> None:
    rng = random.Random(13)
    t = judge([500 * MIB + rng.uniform(-30, 30) * MIB for _ in range(60)])
    assert not t.grows, t.why


def test_linear_leak_is_growth_with_start_end_and_slope() -> None:
    # 500 MiB growing 20 MiB a minute (10-s periods) for ten minutes, with noise
    rng = random.Random(5)
    values = [500 * MIB + i * 20 * MIB / 6 + rng.uniform(-4, 4) * MIB for i in range(60)]
    t = judge(values)
    assert t.grows, t.why
    assert t.slope_per_min / MIB == pytest.approx(20, rel=0.1)
    (line,) = growth_findings([t])
    assert line.startswith("resource-growth: broker node 1 (pid 7) rss_bytes ")
    assert "MiB/min" in line and "→" in line


def test_one_off_step_is_not_growth() -> None:
    for at in (2, 30, 40):  # early, in the middle, later
        t = judge([300 * MIB] * at + [500 * MIB] * (60 - at))
        assert not t.grows, (at, t.why)


def test_ramp_that_levels_off_is_not_growth() -> None:
    # a JVM touching its heap: rises over the first half, flat after
    values = [300 * MIB + min(i, 25) * 8 * MIB for i in range(60)]
    t = judge(values)
    assert not t.grows and "levelled off" in t.why


def test_growth_below_the_floors_is_not_flagged() -> None:
    # +1 fd a minute for ten minutes: 10 descriptors, below the 64-fd floor
    assert not judge([100 + i / 6 for i in range(60)], "open_fds").grows
    # +100 MiB on a 2 GiB process: over the floor, under 20 % of the start
    assert not judge([2048 * MIB + i * 100 * MIB / 60 for i in range(60)]).grows


def test_thread_and_fd_leaks_are_flagged() -> None:
    assert judge([50 + i for i in range(60)], "threads").grows
    assert judge([200 + 3 * i for i in range(60)], "open_fds").grows


def test_too_few_periods_are_not_judged() -> None:
    assert judge_series("worker 1", "threads", series([1, 100, 200]), LIMITS) is None


@pytest.mark.parametrize("bad", [{"relative": -0.1}, {"step_share": 0}, {"min_periods": 2}])
def test_limits_refuse_bad_values_by_name(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        GrowthLimits(**bad)  # type: ignore[arg-type]


def _period(i: int, worker_fds: int, broker_threads: int) -> PeriodStats:
    p = PeriodStats(index=i, start_ns=i * 10**9, elapsed_s=1.0)
    p.workers.append(WorkerSample(worker=1, cpu_s=0.1, runq_delay_s=0.0, elapsed_s=1.0,
                                  resources=ProcessResources(100 * MIB, worker_fds, 4)))
    p.broker_resources = {"node 1 (pid 9)": ProcessResources(None, None, broker_threads)}
    return p


def test_process_series_reads_workers_and_brokers_per_period() -> None:
    periods = [_period(i, 10, 60 + 2 * i) for i in range(10)]
    s = process_series(periods)
    assert s[("worker 1", "open_fds")] == [(i + 1.0, 10.0) for i in range(10)]
    assert ("broker node 1 (pid 9)", "rss_bytes") not in s  # not read: no series
    judged = {(t.process, t.resource): t for t in trends(s, LIMITS)}
    assert judged[("broker node 1 (pid 9)", "threads")].grows
    assert not judged[("worker 1", "open_fds")].grows
    assert periods[3].held("worker", "open_fds") == 10
    assert periods[3].held("broker", "rss_bytes") is None


def test_process_resources_reads_this_process() -> None:
    r = process_resources()
    assert r.rss_bytes is not None and r.rss_bytes > MIB
    assert r.open_fds is not None and r.open_fds >= 3
    assert r.threads is not None and r.threads >= 1


# --------------------------------------------------------------------------- Soak.prepare

EP = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


@pytest.mark.parametrize(("cli", "soak", "measure_s", "rate"), [
    ({"profile": "smoke"}, {}, SOAK_SMOKE_S, SOAK_RATE),
    ({"profile": "standard"}, {}, SOAK_WINDOW_S, SOAK_RATE),
    ({"profile": "omb"}, {}, SOAK_WINDOW_S, SOAK_RATE),
    ({"profile": "smoke"}, {"duration_s": 40, "rate": 300}, 40, 300),
    ({"profile": "standard", "duration": "45", "rate": "200"}, {"duration_s": 40}, 45, 200),
])
def test_soak_window_and_rate(cli: dict[str, str], soak: dict[str, Any], measure_s: float,
                              rate: float) -> None:
    p = Soak(**soak).prepare(_settings(**cli), EP)
    assert (p.scenario, p.measure_s, p.rate) == ("soak", measure_s, rate)
    assert any(n.startswith("soak: ") for n in p.notes)


def test_soak_refuses_a_window_of_zero_by_name() -> None:
    with pytest.raises(ValueError, match=r"Soak\(duration_s=0\)"):
        Soak(duration_s=0).prepare(_settings(profile="smoke"), EP)


#: a local Kafka's RSS (MiB) over a 60-s smoke soak at 1000 msg/s on a 2-core machine:
#: the 1 GiB heap touched for the first time, fast at first, slower after
KAFKA_SMOKE_RSS_MIB = [
    455.61, 455.89, 456.68, 456.89, 457.0, 457.77, 457.88, 457.91, 458.45, 463.57, 463.63,
    468.6, 484.39, 484.43, 486.53, 500.25, 501.36, 501.37, 501.38, 505.89, 537.08, 568.06,
    573.35, 573.36, 573.38, 573.39, 573.46, 586.39, 586.4, 586.43, 586.43, 586.43, 586.44,
    586.47, 586.49, 586.53, 586.53, 587.75, 587.84, 587.85, 587.86, 587.89, 588.21, 588.21,
    588.23, 588.23, 588.24, 589.21, 606.76, 606.77, 606.79, 606.84, 607.13, 607.14, 607.15,
    607.3, 607.32, 607.59, 607.61, 607.62]


def test_a_jvm_heap_ramp_that_slows_is_not_a_leak() -> None:
    points = series([v * MIB for v in KAFKA_SMOKE_RSS_MIB], period_s=1.0)
    t = judge_series("broker node 1 (pid 7)", "rss_bytes", points, LIMITS)
    assert t is not None and not t.grows and "levelled off" in t.why
    # the same rise kept up at its first-half rate to the end is one
    steady = [455.61 + i * 5.0 for i in range(60)]
    assert judge_series("b", "rss_bytes", series([v * MIB for v in steady], 1.0), LIMITS).grows


#: the same Kafka (1 GiB heap, G1, no pre-touch) over a 10-minute standard soak at
#: 1000 msg/s, 10-s periods: still touching heap regions at the window's end
KAFKA_STANDARD_RSS_MIB = [
    574.37, 574.91, 575.79, 576.2, 576.49, 576.64, 600.16, 600.83, 601.84, 602.62, 603.7,
    604.16, 604.41, 604.71, 604.85, 605.59, 605.95, 606.28, 608.39, 608.88, 635.32, 635.61,
    638.57, 638.75, 641.75, 653.07, 653.13, 701.9, 702.29, 703.31, 703.74, 704.17, 704.63,
    705.05, 706.32, 721.09, 722.01, 822.69, 822.92, 824.34, 824.75, 826.57, 827.29, 827.92,
    828.32, 828.48, 828.73, 828.89, 830.69, 831.21, 831.64, 832.6, 833.25, 834.0, 834.21,
    834.48, 834.95, 835.1, 835.32, 836.39]


def test_a_rise_within_a_jvm_heap_not_pre_touched_is_bounded() -> None:
    points = series([v * MIB for v in KAFKA_STANDARD_RSS_MIB])
    bare = judge_series("broker node 1 (pid 7)", "rss_bytes", points, LIMITS)
    assert bare is not None and bare.grows  # RSS alone cannot tell heap touch from a leak
    heap = judge_series("broker node 1 (pid 7)", "rss_bytes", points, LIMITS,
                        first_touch=1024 * MIB)
    assert heap is not None and not heap.grows and "first touch" in heap.why
    # more than the heap can explain: a leak all the same
    small = judge_series("broker node 1 (pid 7)", "rss_bytes", points, LIMITS,
                         first_touch=128 * MIB)
    assert small is not None and small.grows
    # open files and threads are never excused by a heap
    fds = judge_series("b", "open_fds", series([200 + 3 * i for i in range(60)]), LIMITS,
                       first_touch=1024 * MIB)
    assert fds is not None and fds.grows


@pytest.mark.parametrize(("args", "want"), [
    (["-Xms1g", "-Xmx1g"], 1024 * MIB),
    (["-Xmx256m", "-Xmx2g"], 2048 * MIB),  # the last one wins, as in the JVM
    (["-Xmx1g", "-XX:+AlwaysPreTouch"], 0),
    ([], None),  # not a JVM with a heap flag
])
def test_jvm_heap_first_touch_reads_the_command_line(args: list[str], want: int | None) -> None:
    code = "import sys, time; sys.stdout.write('up\\n'); sys.stdout.flush(); time.sleep(30)"
    with subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
            assert jvm_heap_first_touch(proc.pid) == want
        finally:
            proc.kill()
