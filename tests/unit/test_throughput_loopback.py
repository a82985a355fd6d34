"""The ladder engine end to end on the in-process loopback driver (no broker).

One session runs several rungs; a generator asked for far more than the harness can
generate is classified as the generator's limit — never as a broker result; OMB's rate
discovery runs its control loop; calibration finds and caches a ceiling. (The CPU-starved
generator, which burns a CPU on purpose, is in tests/integration/test_throughput_starved.py.)
"""

from __future__ import annotations

import pytest

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.engine.coordinator import LoadSession, run_rates
from pytest_brokerperf.engine.plan import Rung, RunOutcome, RunPlan
from pytest_brokerperf.engine.rate_controller import DiscoveryLoop, RateController
from pytest_brokerperf.judge import calibration as cal
from pytest_brokerperf.judge.ladder import GENERATOR, HOST, LadderPolicy
from pytest_brokerperf.scenario_library.throughput_judge import judge
from pytest_brokerperf.workload.model import Workload


def _workload(**kw: object) -> Workload:
    base: dict[str, object] = dict(
        name="loop-ladder", topics=1, partitions_per_topic=2, message_size=512,
        subscriptions_per_topic=1, producers_per_topic=1, consumer_per_subscription=1,
        producer_rate=1000, test_duration_minutes=1, warmup_duration_minutes=0)
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def _plan(prefix: str, **kw: object) -> RunPlan:
    base: dict[str, object] = dict(rate=1000, period_s=0.5, warmup_max_s=1.0, measure_s=1.5,
                                   warmup_min_periods=2, steady_periods=2, workers=1,
                                   topic_prefix=prefix, probe_timeout_s=20)
    base.update(kw)
    return RunPlan(**base)  # type: ignore[arg-type]


def _ladder(rates: list[float], plan: RunPlan, wl: Workload, *,
            harness_ceiling: float | None = None, policy: LadderPolicy | None = None):
    """The throughput scenario's climb: rungs in order, stop at the first failure."""
    results = []

    def next_rung(done: list[RunOutcome]) -> Rung | None:
        if (results and not results[-1].sustainable) or len(results) >= len(rates):
            return None
        return Rung(rates[len(results)], plan.warmup_max_s, plan.measure_s)

    def on_rung(out: RunOutcome) -> None:
        # the hypervisor's steal time and other tests' processes on these CPUs are not
        # what these mechanics tests are about
        results.append(judge(out, len(results),
                             policy=policy or LadderPolicy(steal_share=9.0, other_cpu_share=9.0),
                             subscriptions_per_topic=wl.subscriptions_per_topic,
                             producing_workers=1, harness_ceiling=harness_ceiling,
                             client_ceiling=None))

    outs, end = run_rates(LoopbackDriver(partitions=wl.partitions_per_topic), wl, plan,
                          next_rung, payloads=wl.payloads(None, seed=5), on_rung=on_rung)
    return results, outs, end


def test_one_session_runs_several_rungs():
    wl = _workload()
    # a lenient delay budget: this checks the session, not this busy machine's scheduler
    results, outs, end = _ladder([1_000, 3_000], _plan("loop-rungs"), wl,
                                 policy=LadderPolicy(publish_delay_budget_us=200_000,
                                                     steal_share=9.0, other_cpu_share=9.0))
    assert [o.plan.rate for o in outs] == [1_000, 3_000]
    assert [r.sustainable for r in results] == [True, True], [r.failures for r in results]
    for o in outs:
        assert o.ack_rate == pytest.approx(o.plan.rate, rel=0.05)
        assert {p.target_rate for p in o.periods} == {o.plan.rate}
        assert o.delivery is end.delivery  # reconciled once, for the whole session
    # lifetime counters span the session: the second rung continues the first's totals
    assert outs[1].periods[0].total_sent > outs[0].periods[-1].total_sent
    d = end.delivery
    assert d.acknowledged > 4_000 and d.lost == 0 and d.duplicates == 0
    assert d.received == d.acknowledged
    assert end.begin_time <= outs[0].begin_time <= outs[1].begin_time <= end.end_time


def test_drain_empties_queues_between_rungs():
    wl = _workload()
    with LoadSession(LoopbackDriver(partitions=2), wl, _plan("loop-drain"),
                     payloads=wl.payloads(None, seed=1)) as s:
        s.run_rung(Rung(2_000, 0.0, 1.0))
        assert s.drain(10.0)
        t = s.totals()
        assert t["queue_depth"] <= 10 and t["acked"] - t["received"] <= 10
        out = s.run_rung(Rung(1_000, 0.0, 1.0, drain_before_s=5.0))
        assert out.ack_rate == pytest.approx(1_000, rel=0.1)
        assert s.finish().delivery.lost == 0


def test_rate_far_above_the_harness_is_generator_bound_not_a_broker_result():
    wl = _workload(message_size=1024)
    results, _, _ = _ladder([5_000, 3_000_000], _plan("loop-overdrive"), wl)
    last = results[-1]  # 3M, or 5k already on a very busy machine: the generator either way
    assert not last.sustainable, last.limit_reasons
    if last.limit == HOST:  # another process took the generator's CPU: honestly the host's
        assert last.verdict["status"] == "host-noise", last.verdict
        assert "another process took its CPU" in " ".join(last.limit_reasons)
    else:
        assert last.limit == GENERATOR, last.limit_reasons
        assert last.verdict["status"] == "generator-bound"
    # with the harness's calibrated ceiling the reason is the ceiling itself
    results, _, _ = _ladder([3_000_000], _plan("loop-overdrive2"), wl,
                            harness_ceiling=150_000)
    assert results[0].limit == GENERATOR
    assert "harness's own calibrated ceiling" in results[0].limit_reasons[0]


def test_omb_rate_discovery_runs_its_control_loop_on_loopback():
    wl = _workload(message_size=256)
    loop = DiscoveryLoop(RateController(), 10_000, control_period_s=1.0)
    plan = _plan("loop-discovery", period_s=1.0)
    with LoadSession(LoopbackDriver(partitions=2), wl, plan,
                     payloads=wl.payloads(None, seed=2)) as s:
        out = s.run_rung(Rung(10_000, 0.0, 4.0, warmup_until_steady=False), on_wait=loop.poll)
        end = s.finish()
    assert len(loop.steps) >= 2
    first = loop.steps[0]
    assert first["rate_msg_s"] == 10_000
    # the loopback keeps up at 10k: no backlog, so OMB ramps up (×2 with factor 1)
    assert first["reason"] == "no backlog" and first["next_rate_msg_s"] == 20_000
    assert [p.target_rate for p in out.periods][-1] == loop.rate  # periods see the changes
    assert end.delivery.lost == 0


def test_calibration_finds_and_caches_a_ceiling(tmp_path, monkeypatch):
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    drv = LoopbackDriver()
    c = cal.calibrate(drv, target="harness", broker="loopback", message_size=256,
                      start_rate=2_000, max_rate=8_000, period_s=0.5, warmup_s=1.0,
                      measure_s=1.0, topic_prefix="loop-cal",
                      # the mechanics are under test, not this busy machine's scheduler
                      policy=LadderPolicy(publish_delay_budget_us=500_000, rate_tolerance=0.2,
                                          cpu_share=9.0, runq_share=9.0, steal_share=9.0))
    assert c.bound == "not-reached" and c.rate_msg_s == 8_000
    assert [s["rate_msg_s"] for s in c.steps] == [2_000, 4_000, 8_000]
    assert c.client_ceiling is None and c.sizing_rate == 8_000
    key = cal.calibration_key(drv, broker_version="in-process", message_size=256,
                              partitions=1, generator_cpus=None)
    c.key = key
    cal.store(c)
    assert cal.cache_path() == tmp_path / "calibration.json"
    hit = cal.load_cached(key)
    assert hit is not None and hit.cached and hit.rate_msg_s == 8_000
    other = dict(key, message_size=1024)
    assert cal.load_cached(other) is None
    assert cal.cached_or_measured(drv, target="harness", broker="loopback",
                                  broker_version="in-process", message_size=256, partitions=1,
                                  generator_cpus=None, mode="off") is None
    got = cal.cached_or_measured(drv, target="harness", broker="loopback",
                                 broker_version="in-process", message_size=256, partitions=1,
                                 generator_cpus=None, mode="auto")
    assert got is not None and got.cached and got.rate_msg_s == 8_000


def test_calibration_dir_moves_the_calibration_cache_alone(tmp_path, monkeypatch):
    """$BROKERPERF_CALIBRATION_DIR (one per CI run, shared by its sessions) holds
    calibration.json; the jars' cache dir is not moved, and a ceiling stored there is
    found there only."""
    from pytest_brokerperf.brokers.provision.maven import cache_root

    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path / "jars"))
    monkeypatch.setenv(cal.CALIBRATION_DIR_ENV, str(tmp_path / "ci-run"))
    assert cal.cache_path() == tmp_path / "ci-run" / "calibration.json"
    assert cache_root() == tmp_path / "jars"
    drv = LoopbackDriver()
    key = cal.calibration_key(drv, broker_version="in-process", message_size=256,
                              partitions=1, generator_cpus=None)
    cal.store(cal.Ceiling(target="harness", driver="loopback", broker="loopback",
                          rate_msg_s=5_000.0, bound="client", failed_rate_msg_s=10_000.0,
                          limit_reasons=[], steps=[], message_size=256, partitions=1,
                          measured_at="2026-11-28T00:00:00", duration_s=1.0, key=key))
    assert (tmp_path / "ci-run" / "calibration.json").is_file()
    assert not (tmp_path / "jars" / "calibration.json").exists()
    got = cal.cached_or_measured(drv, target="harness", broker="loopback",
                                 broker_version="in-process", message_size=256, partitions=1,
                                 generator_cpus=None, mode="auto")
    assert got is not None and got.cached and got.rate_msg_s == 5_000.0
    monkeypatch.setenv(cal.CALIBRATION_DIR_ENV, "  ")  # blank: the cache dir again
    assert cal.cache_path() == tmp_path / "jars" / "calibration.json"
    assert cal.load_cached(key) is None


def test_calibration_measures_a_stalled_step_again_before_it_counts(tmp_path, monkeypatch):
    # a 1 µs publish-delay budget fails every step while the process idles: a failure
    # that is not saturation is measured once more (here at most once) before it counts
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    c = cal.calibrate(LoopbackDriver(), target="harness", broker="loopback", message_size=256,
                      start_rate=2_000, max_rate=8_000, period_s=0.5, warmup_s=0.5,
                      measure_s=0.5, topic_prefix="loop-cal-retry", retries=1,
                      # neither the hypervisor nor other tests' processes (xdist
                      # workers beside this one) may call a step host noise here
                      policy=LadderPolicy(publish_delay_budget_us=1, steal_share=9.0,
                                          other_cpu_share=9.0))
    rates = [s["rate_msg_s"] for s in c.steps]
    assert rates[:3] == [2_000, 2_000, 1_000]
    assert c.steps[0].get("retried") is True and "retried" not in c.steps[1]
    assert all(not s["sustainable"] for s in c.steps)
    assert c.rate_msg_s is None and c.bound == "client"


def test_calibration_stopped_by_steal_time_has_no_ceiling_and_is_not_cached(tmp_path,
                                                                           monkeypatch):
    # /proc/stat as a hypervisor stealing 20 % would show it (the coordinator reads it)
    import itertools
    import time as _time

    from pytest_brokerperf.metrics import sysstats

    calls = itertools.count(1)

    def robbed() -> sysstats.CpuSnapshot:
        k = next(calls) * 1000
        ticks = (k // 2, 0, 0, k // 2 - k // 5, 0, 0, 0, k // 5)
        return sysstats.CpuSnapshot(_time.monotonic_ns(), ticks, {0: ticks, 1: ticks})

    monkeypatch.setattr(sysstats, "cpu_snapshot", robbed)
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path))
    # a 1 µs delay budget fails every step; with the steal over the limit, the host is
    # named as its limit (a step that holds despite steal is a lower bound, and counts)
    pol = LadderPolicy(publish_delay_budget_us=1)
    c = cal.cached_or_measured(LoopbackDriver(), target="harness", broker="loopback",
                               broker_version="in-process", message_size=256, partitions=1,
                               generator_cpus=None, mode="refresh", policy=pol,
                               topic_prefix="loop-cal-steal")
    assert c is not None and c.bound == "host" and c.rate_msg_s is None
    # measured once more, then stopped: a lower rate would not make the host quieter
    assert [s["rate_msg_s"] for s in c.steps] == [4_000, 4_000]
    assert all(s["limit"] == "host-noise" for s in c.steps)
    assert c.steps[0]["host_steal_share"] == pytest.approx(0.2, abs=0.01)
    assert "not cached" in c.describe()
    assert not (tmp_path / "calibration.json").exists()
