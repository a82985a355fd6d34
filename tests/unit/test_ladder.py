"""The throughput ladder's rules: rung judging, slopes, limit attribution, the knee."""

from __future__ import annotations

import pytest

from pytest_brokerperf.judge import ladder as lad
from pytest_brokerperf.judge.ladder import (
    BROKER,
    CLIENT_LIBRARY,
    GENERATOR,
    NONE,
    LadderPolicy,
    RungSignals,
    attribute_limit,
    judge_rung,
    slope,
)
from pytest_brokerperf.results import ladder as ladres
from pytest_brokerperf.results.ladder import RungResult, find_knee, summarize
from pytest_brokerperf.scenario_library.throughput_judge import (
    ladder_verdict,
    plan_workers,
    size_workers,
)


def sig(target: float = 10_000, **kw: object) -> RungSignals:
    """A healthy rung at ``target`` unless told otherwise."""
    base: dict[str, object] = dict(
        target=target, ack_rate=target, consume_rate=target, duration_s=5.0, lag_slope=0.0,
        lag_end=20.0, queue_slope=0.0, queue_end=10.0, queue_full=0,
        publish_delay_p99_us=800.0, send_errors=0, worker_cpu={0: 0.4}, worker_runq={0: 0.05},
        producing_workers=1,
    )
    base.update(kw)
    return RungSignals(**base)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- slope


def test_slope_is_least_squares():
    assert slope([(0, 1), (1, 3), (2, 5), (3, 7)]) == pytest.approx(2.0)
    assert slope([(0, 5), (1, 4), (2, 6), (3, 5)]) == pytest.approx(0.2)
    assert slope([(1, 5), (2, 5)]) == 0.0


def test_slope_needs_two_distinct_points():
    assert slope([]) == 0.0
    assert slope([(1.0, 100.0)]) == 0.0
    assert slope([(1.0, 1.0), (1.0, 9.0)]) == 0.0


# --------------------------------------------------------------------------- judging


def test_healthy_rung_is_sustainable():
    assert judge_rung(sig()) == []


def test_judged_by_acknowledged_rate_within_tolerance():
    assert judge_rung(sig(ack_rate=9_600)) == []  # -4 % is inside ±5 %
    (why,) = judge_rung(sig(ack_rate=9_400))
    assert "94.0% of the target" in why
    assert judge_rung(sig(ack_rate=9_400), LadderPolicy(rate_tolerance=0.10)) == []
    assert judge_rung(sig(ack_rate=10_600))  # catching up is not holding the rate either


def test_growing_lag_fails_but_noise_below_the_floor_does_not():
    # +300 msg/s is 3 % of the target, but the backlog is still below 1000 messages
    assert judge_rung(sig(lag_slope=300, lag_end=900)) == []
    (why,) = judge_rung(sig(lag_slope=300, lag_end=5_000))
    assert why.startswith("consumer lag grew +300 msg/s")
    # a large but flat backlog is not growth
    assert judge_rung(sig(lag_slope=50, lag_end=50_000)) == []


def test_growing_client_queue_fails():
    (why,) = judge_rung(sig(queue_slope=2_000, queue_end=40_000))
    assert "client local queue grew" in why


def test_publish_delay_budget_and_send_errors():
    (why,) = judge_rung(sig(publish_delay_p99_us=25_000))
    assert why == "publish delay p99 25.0 ms over the 10 ms budget"
    assert judge_rung(sig(publish_delay_p99_us=None)) == []
    assert judge_rung(sig(send_errors=3)) == ["3 sends failed"]


def test_floor_scales_with_the_rate():
    pol = LadderPolicy()
    assert pol.growth_floor(1_000) == 1000
    assert pol.growth_floor(100_000) == 10_000


# --------------------------------------------------------------------------- attribution


def failing(s: RungSignals) -> tuple[str, list[str]]:
    failures = judge_rung(s)
    assert failures, "the case must describe a failing rung"
    return attribute_limit(s, failures, harness_ceiling=None, client_ceiling=None)


def test_sustainable_rung_has_no_limit():
    assert attribute_limit(sig(), []) == (NONE, [])


def test_broker_backpressure_from_a_full_client_queue_while_cpu_is_spare():
    s = sig(ack_rate=7_000, queue_full=4_000, queue_slope=0, queue_end=100_000,
            publish_delay_p99_us=900_000, worker_cpu={0: 0.5})
    limit, (why,) = failing(s)
    assert limit == BROKER
    assert "queue full 4000 times" in why and "CPU to spare" in why


def test_publish_delay_with_push_back_is_a_broker_result_not_the_generator():
    """delay is not proof of a saturated generator when the client queue grows."""
    s = sig(publish_delay_p99_us=300_000, queue_slope=5_000, queue_end=60_000)
    assert failing(s)[0] == BROKER


def test_growing_lag_with_idle_generator_is_the_broker():
    s = sig(lag_slope=3_000, lag_end=30_000, worker_cpu={0: 0.3, 1: 0.35})
    assert failing(s)[0] == BROKER


def test_cpu_starved_generator_is_host_noise_not_the_broker():
    # another process held the generator's CPU: the machine's noise, measured again
    s = sig(ack_rate=6_000, lag_slope=3_000, lag_end=30_000, worker_cpu={0: 0.35},
            worker_runq={0: 0.6})
    limit, (why,) = failing(s)
    assert limit == lad.HOST
    assert "run queue 60% (worker 0)" in why and "another process took its CPU" in why


def test_run_queue_wait_of_its_own_threads_is_not_starvation():
    """librdkafka runs several threads per client: with the generator's CPU not full,
    run-queue wait is the worker's threads queueing behind each other, and a growing lag
    with CPU to spare is still the broker."""
    s = sig(lag_slope=3_000, lag_end=30_000, worker_cpu={0: 0.6}, worker_runq={0: 0.8},
            generator_cpu_busy=0.65)
    assert failing(s)[0] == BROKER
    s.generator_cpu_busy = 0.97  # the CPU was full and not with this worker: starved
    limit, (why,) = failing(s)
    assert limit == lad.HOST and "its CPUs 97% busy" in why


def test_other_processes_taking_a_fifth_of_the_generator_cpu_is_host_noise():
    """A rung of five consecutive ladders on one Kafka: 2,000 msg/s, publish delay p99
    100 ms, the worker at 23 % of a core waiting on a run queue 58 % of the time, the
    generator's CPU 50 % busy on average, 27 % of it other processes (a build beside
    it). That is the machine's noise, not a generator at its limit."""
    s = sig(target=2_000, ack_rate=1_995, consume_rate=1_995, worker_cpu={0: 0.23},
            worker_runq={0: 0.585}, generator_cpu_busy=0.497, other_cpu_share=0.267,
            publish_delay_p99_us=100_223)
    limit, (why,) = failing(s)
    assert limit == lad.HOST
    assert "its CPUs 50% busy (27% by other processes)" in why
    s.other_cpu_share = 0.05  # the same wait with the CPU to itself: its own schedule
    assert failing(s)[0] == GENERATOR


def test_full_cpus_with_the_workers_own_threads_are_not_host_noise():
    """The fifth ladder's first: 100,000 msg/s, the worker at 88 % of a core waiting on
    a run queue 174 % (its threads, summed), the CPU 93 % busy, 5 % of it other
    processes: the generator near its limit, not another process."""
    s = sig(target=100_000, ack_rate=90_000, consume_rate=90_000, worker_cpu={0: 0.88},
            worker_runq={0: 1.74}, generator_cpu_busy=0.93, other_cpu_share=0.054,
            publish_delay_p99_us=700_000)
    assert failing(s)[0] != lad.HOST
    s.other_cpu_share = None  # unknown: full CPUs are read as another process's
    assert failing(s)[0] == lad.HOST


def test_saturated_worker_is_the_client_library_when_the_harness_alone_keeps_up():
    s = sig(target=50_000, ack_rate=40_000, consume_rate=40_000, worker_cpu={0: 0.97},
            publish_delay_p99_us=200_000)
    failures = judge_rung(s)
    limit, (why,) = attribute_limit(s, failures, harness_ceiling=180_000)
    assert limit == CLIENT_LIBRARY
    assert "97% of a core" in why and "client library's cost" in why
    # the harness alone could not do it either: the generator
    assert attribute_limit(s, failures, harness_ceiling=50_000)[0] == GENERATOR
    # nothing known about the harness: conservatively the generator
    assert attribute_limit(s, failures)[0] == GENERATOR


def test_rate_above_the_harness_ceiling_is_the_generator_even_with_spare_cpu():
    s = sig(target=400_000, ack_rate=250_000, consume_rate=250_000, queue_full=10,
            worker_cpu={0: 0.6})
    failures = judge_rung(s)
    limit, (why,) = attribute_limit(s, failures, harness_ceiling=200_000)
    assert limit == GENERATOR and "harness's own calibrated ceiling" in why


def test_late_without_push_back_is_the_generator_or_client():
    s = sig(publish_delay_p99_us=50_000, worker_cpu={0: 0.7})
    failures = judge_rung(s)
    assert attribute_limit(s, failures)[0] == GENERATOR
    limit, (why,) = attribute_limit(s, failures, harness_ceiling=100_000)
    assert limit == CLIENT_LIBRARY
    # 70 % of a core is not saturation: the reason says sends blocked in the client
    assert "only 70% of a core" in why and "blocked inside the client library" in why
    assert "saturated" not in why


def test_above_the_client_ceiling_is_the_client_library():
    s = sig(target=60_000, ack_rate=50_000, consume_rate=50_000, worker_cpu={0: 0.6})
    failures = judge_rung(s)
    assert attribute_limit(s, failures, client_ceiling=45_000)[0] == CLIENT_LIBRARY
    assert attribute_limit(s, failures, client_ceiling=80_000)[0] == BROKER


def test_per_worker_rate_uses_the_producing_workers():
    s = sig(target=300_000, ack_rate=250_000, consume_rate=250_000, producing_workers=2,
            queue_full=5)
    failures = judge_rung(s)
    # 150k per process is below the 200k harness ceiling: not the generator by rate
    assert attribute_limit(s, failures, harness_ceiling=200_000)[0] == BROKER


# --------------------------------------------------------------------------- knee


def test_knee_is_the_rate_before_p99_doubles_over_its_floor():
    pts = [(1_000, 6_600), (5_000, 5_300), (10_000, 7_000), (20_000, 8_900),
           (50_000, 25_000), (100_000, 116_000)]
    k = find_knee(pts)
    assert k is not None
    assert (k.rate_msg_s, k.bend_rate_msg_s, k.floor_us, k.bend_p99_us) == (
        20_000, 50_000, 5_300, 25_000)
    assert k.metric == "e2e_response.p99" and k.factor == 2.0


def test_a_bend_that_does_not_hold_is_noise_not_the_knee():
    # measured on the local single-node Kafka: 20k looks bent, 50k is back on the floor
    pts = [(1_000, 12_919), (5_000, 23_951), (10_000, 19_215), (20_000, 29_311),
           (50_000, 11_319), (100_000, 358_143)]
    k = find_knee(pts)
    assert k is not None and (k.rate_msg_s, k.bend_rate_msg_s) == (50_000, 100_000)
    assert k.floor_us == 11_319


def test_no_knee_when_p99_stays_flat_and_undersampled_rungs_are_skipped():
    assert find_knee([(1_000, 5_000), (2_000, 6_000), (4_000, 9_000)]) is None
    assert find_knee([(1_000, 5_000), (2_000, None), (4_000, 9_000)]) is None
    k = find_knee([(2_000, None), (1_000, 5_000), (4_000, 30_000)])
    assert k is not None and k.rate_msg_s == 1_000
    assert find_knee([]) is None


def test_knee_factor_is_a_parameter():
    pts = [(1, 100), (2, 160), (3, 400)]
    assert find_knee(pts, factor=1.5).bend_rate_msg_s == 2  # type: ignore[union-attr]
    assert find_knee(pts, factor=2.0).bend_rate_msg_s == 3  # type: ignore[union-attr]


# --------------------------------------------------------------------------- ladder


def rung(i: int, rate: float, ok: bool, limit: str = NONE, p99: float = 5_000,
         status: str | None = None) -> RungResult:
    return RungResult(
        index=i, target_rate=rate, status=status or ("sustainable" if ok else "unsustainable"),
        signals=sig(rate), failures=[] if ok else ["x"], limit=limit,
        limit_reasons=[] if ok else [f"because {limit}"],
        verdict={"status": "valid" if ok else lad_status(limit), "reasons": []},
        latency_us={"e2e_response": {"p50": 1_000.0, "p99": p99, "p99.9": None},
                    "publish_response": {"p50": 500.0, "p99": p99 / 2, "p99.9": None}},
    )


def lad_status(limit: str) -> str:
    from pytest_brokerperf.scenario_library.throughput_judge import LIMIT_STATUS

    return LIMIT_STATUS[limit]


def test_ladder_rates_scale_confluents_ladder_by_profile():
    assert lad.ladder_rates("smoke") == (2_000, 10_000, 20_000, 40_000, 100_000, 200_000)
    assert lad.ladder_rates("standard") == lad.CONFLUENT_LADDER
    assert lad.format_rate(1_500_000) == "1.5M" and lad.format_rate(20_000) == "20k"


def test_ladder_that_reaches_a_broker_limit():
    rates = (1_000, 5_000, 10_000, 20_000)
    res = summarize(rates, [rung(0, 1_000, True), rung(1, 5_000, True, p99=6_000),
                            rung(2, 10_000, False, BROKER, p99=90_000)], LadderPolicy())
    assert res.outcome == "limit-found" and res.limit == BROKER and res.limit_reached
    assert res.highest_sustainable_rate == 5_000 and res.limit_rate == 10_000
    assert res.knee is not None and res.knee.rate_msg_s == 5_000
    assert "between 5,000 msg/s and 10,000 msg/s" in res.summary()
    v = ladder_verdict(res)
    assert v.status == "broker-backpressure" and v.judgeable
    doc = res.as_dict()
    assert doc["mode"] == "ladder" and len(doc["rungs"]) == 3 and len(doc["curve"]) == 3
    assert doc["curve"][1]["e2e_response_p99_us"] == 6_000


def test_a_robbed_rung_that_sustained_counts_but_its_latency_is_not_the_curves():
    # steal time can only have hurt, so a rate sustained through it was sustained; its
    # p99 is the hypervisor's, though: it neither sets the floor nor bends the curve
    def ladder(robbed_verdict: str) -> ladres.LadderResult:
        robbed = rung(2, 10_000, True, p99=40_000)
        robbed.verdict = {"status": robbed_verdict, "reasons": []}
        return summarize((1_000, 5_000, 10_000, 20_000),
                         [rung(0, 1_000, True), rung(1, 5_000, True, p99=6_000), robbed,
                          rung(3, 20_000, False, BROKER, p99=90_000)], LadderPolicy())

    res = ladder("host-noise")
    assert res.highest_sustainable_rate == 10_000
    assert res.knee is not None and (res.knee.rate_msg_s, res.knee.bend_rate_msg_s) == (
        5_000, 20_000)
    assert [c["verdict"] for c in res.as_dict()["curve"]] == [
        "valid", "valid", "host-noise", "broker-backpressure"]
    # the same 40 ms measured on a quiet host is the bend
    quiet = ladder("valid")
    assert quiet.knee is not None and quiet.knee.bend_rate_msg_s == 10_000


def test_ladder_stopped_by_the_harness_is_not_a_broker_figure():
    res = summarize((1_000, 2_000), [rung(0, 1_000, True), rung(1, 2_000, False, GENERATOR)],
                    LadderPolicy())
    assert res.outcome == "harness-limited" and res.limit == GENERATOR
    v = ladder_verdict(res)
    assert v.status == "generator-bound" and not v.judgeable
    assert "the harness, not the broker" in v.reasons[0]
    assert "because generator" in v.reasons
    res = summarize((1_000, 2_000), [rung(0, 1_000, True),
                                     rung(1, 2_000, False, CLIENT_LIBRARY)], LadderPolicy())
    assert ladder_verdict(res).status == "client-bound"


def test_limit_not_reached_is_a_first_class_outcome():
    res = summarize((1_000, 2_000), [rung(0, 1_000, True), rung(1, 2_000, True)],
                    LadderPolicy())
    assert res.outcome == "limit-not-reached" and not res.limit_reached
    assert res.limit == NONE and res.highest_sustainable_rate == 2_000
    assert res.summary().startswith("limit not reached at 2,000 msg/s")
    v = ladder_verdict(res)
    assert v.status == "valid" and "limit-not-reached" in v.flags


def test_refused_rung_and_no_sustainable_rung():
    res = summarize((1_000, 9_000_000), [
        rung(0, 1_000, True),
        RungResult(index=1, target_rate=9_000_000, status="refused", signals=None,
                   failures=["refused"], limit=GENERATOR, limit_reasons=["refused"],
                   verdict={"status": "generator-bound"})], LadderPolicy())
    assert res.outcome == "harness-limited" and res.limit_rate == 9_000_000
    assert [c["offered_rate_msg_s"] for c in res.as_dict()["curve"]] == [1_000]
    # a broker that fails even the lowest rung is a broker result: its limit lies below
    none = summarize((5_000,), [rung(0, 5_000, False, BROKER)], LadderPolicy())
    assert none.highest_sustainable_rate is None and none.outcome == "limit-found"
    assert none.summary() == (
        "no rung was sustainable; limit broker-backpressure at 5,000 msg/s: the broker's "
        "limit lies below the lowest rung (lower --brokerperf-ladder to bracket it)")
    v = ladder_verdict(none)
    assert v.status == "broker-backpressure" and v.reasons[0] == none.summary()
    assert any("no rung was sustainable (lowest 5,000 msg/s)" in r for r in v.reasons)
    # any other limit on the lowest rung leaves no figure at all
    v = ladder_verdict(summarize((5_000,), [rung(0, 5_000, False, GENERATOR)], LadderPolicy()))
    assert v.status == "generator-bound" and not v.judgeable


def test_headline_rung_verdict_carries_into_the_ladder_verdict():
    top = rung(1, 2_000, True)
    top.verdict = {"status": "generator-bound", "reasons": ["worker CPU at 95%"]}
    res = summarize((1_000, 2_000, 4_000),
                    [rung(0, 1_000, True), top, rung(2, 4_000, False, BROKER)], LadderPolicy())
    v = ladder_verdict(res)
    assert v.status == "generator-bound"
    assert any("worker CPU at 95%" in r for r in v.reasons)


def test_rung_csv_row_matches_its_header():
    r = rung(0, 1_000, True)
    assert len(r.csv_row()) == len(RungResult.CSV_HEADER)


def test_worker_sizing_follows_the_calibrated_ceiling_and_the_cpus():
    assert size_workers(100_000, per_process=40_000, cpus=(0, 1, 2, 3), requested=None) == 3
    assert size_workers(100_000, per_process=40_000, cpus=(0,), requested=None) == 1
    assert size_workers(1_000, per_process=None, cpus=(0, 1), requested=None) == 1
    assert size_workers(100_000, per_process=40_000, cpus=(0,), requested=2) == 2
    # a driver keeping each topic in one worker (the loopback): one worker per topic
    assert size_workers(100_000, per_process=1_000, cpus=(0, 1), requested=None,
                        topic_limit=1) == 1


def test_worker_sizing_says_what_decided_it():
    s = plan_workers(100_000, per_process=40_000, cpus=(0, 1, 2, 3), requested=None)
    assert (s.workers, s.rule, s.needed, s.generator_cpus) == (3, "rate", 3, 4)
    assert (s.per_process_msg_s, s.per_process_source) == (40_000, "calibration")
    assert "ceil(100,000 / 40,000)" in s.describe()
    s = plan_workers(100_000, per_process=10_000, cpus=(2, 3), requested=None)
    assert (s.workers, s.rule, s.needed, s.generator_cpus) == (2, "generator-cpus", 10, 2)
    s = plan_workers(100_000, per_process=10_000, cpus=(0, 1, 2, 3), requested=None,
                     topic_limit=2)
    assert (s.workers, s.rule) == (2, "topics")
    s = plan_workers(None, per_process=None, cpus=(0, 1, 2), requested=None)  # discovery
    assert (s.workers, s.rule, s.needed, s.per_process_source) == (3, "generator-cpus", None,
                                                                   "default")
    assert plan_workers(5_000, per_process=10, cpus=(0,), requested=4).rule == "requested"
    assert s.as_dict()["generator_cpus"] == 3
    assert "one per generator CPU" in s.describe()  # no top rate to print


def test_steal_time_is_the_host_before_any_other_signal():
    # a late, CPU-starved generator on a robbed VM says nothing about generator or broker
    s = sig(ack_rate=6_000, publish_delay_p99_us=300_000, worker_runq={0: 0.6},
            host_steal_share=0.12)
    limit, (why,) = failing(s)
    assert limit == lad.HOST
    assert "the hypervisor took 12.0% of the machine's CPU time during the rung" in why
    # below the policy's share the other signals decide (a late generator, not starved)
    assert failing(sig(ack_rate=6_000, publish_delay_p99_us=300_000, worker_runq={0: 0.05},
                       host_steal_share=0.02))[0] == GENERATOR
    # a sustainable rung has no limit whatever the steal
    assert attribute_limit(sig(host_steal_share=0.5), []) == (NONE, [])


def test_a_ladder_stopped_by_the_host_is_not_a_broker_figure():
    ok = RungResult(index=0, target_rate=1000, status="sustainable", signals=sig(1000),
                    failures=[], limit=NONE, limit_reasons=[],
                    verdict={"status": "valid", "reasons": [], "flags": [], "details": {}},
                    latency_us={})
    bad = RungResult(index=1, target_rate=2000, status="unsustainable",
                     signals=sig(2000, host_steal_share=0.3), failures=["x"], limit=lad.HOST,
                     limit_reasons=["the hypervisor took 30.0%"],
                     verdict={"status": "host-noise", "reasons": [], "flags": [],
                              "details": {}}, latency_us={})
    res = summarize([1000, 2000], [ok, bad], LadderPolicy())
    assert res.outcome == "harness-limited" and res.limit == lad.HOST
    assert "the host (hypervisor steal time), not the broker" in res.summary()
    v = ladder_verdict(res)
    assert v.status == "host-noise" and not v.judgeable


def test_a_rung_ahead_of_its_schedule_is_unsteady_not_a_limit():
    # 110 % of the target with the queue draining: the catch-up of a stall (a cold topic)
    # that began before the window; seen on a fresh 16-partition Kafka topic at 2k msg/s,
    # where it had been blamed on the broker ("acknowledged only 110.3% of the target")
    s = sig(2_000, ack_rate=2_205, queue_slope=-121.0, worker_cpu={0: 0.35})
    limit, (why,) = failing(s)
    assert limit == lad.UNSTEADY
    assert why.startswith("acknowledged 2,205 msg/s, 110.2% of the target 2,000: an "
                          "open-loop schedule only runs ahead")
    # steal time still comes first
    assert failing(sig(2_000, ack_rate=2_205, host_steal_share=0.2))[0] == lad.HOST
    # within tolerance above target is not unsteady
    assert attribute_limit(sig(2_000, ack_rate=2_090), []) == (NONE, [])
    bad = rung(1, 2_000, False, lad.UNSTEADY)
    res = summarize((1_000, 2_000), [rung(0, 1_000, True), bad], LadderPolicy())
    assert res.outcome == "harness-limited" and res.limit == lad.UNSTEADY
    assert "an unsteady rung (catching up a stall from before its window), not the broker" \
        in res.summary()
    v = ladder_verdict(res)
    assert v.status == "unsteady" and not v.judgeable


# ---------------------------------------------------------------- latency bound per rung


def test_a_rung_over_its_latency_bound_is_not_sustainable_and_the_broker_is_named():
    pol = LadderPolicy(latency_bound_us=50_000, latency_bound_metric="publish_response.p99")
    slow = sig(latency_us={"publish_response.p99": 80_000.0})
    failures = judge_rung(slow, pol)
    assert failures == ["publish_response.p99 80.0 ms over the rung's latency bound 50 ms"]
    limit, reasons = attribute_limit(slow, failures, pol)
    assert limit == BROKER and "over the rung's latency bound" in reasons[0]
    # within the bound, or without one, the same rung is sustainable
    assert judge_rung(sig(latency_us={"publish_response.p99": 40_000.0}), pol) == []
    assert judge_rung(slow, LadderPolicy()) == []


def test_the_latency_knee_is_reported_even_below_the_lowest_rung():
    from pytest_brokerperf.results.ladder import find_knee

    k = find_knee([(1000, 60_000.0), (2000, 90_000.0)], bound_us=50_000,
                  metric="publish_response.p99")
    assert k is not None and k.rate_msg_s is None and k.bend_rate_msg_s == 1000
    k = find_knee([(1000, 10_000.0), (2000, 20_000.0), (4000, 70_000.0)], bound_us=50_000)
    assert k is not None and (k.rate_msg_s, k.bend_rate_msg_s) == (2000, 4000)
    assert find_knee([(1000, 10_000.0)], bound_us=50_000) is None
    # the factor-based knee finds nothing when the first rung is already bent
    assert find_knee([(1000, 60_000.0), (2000, 90_000.0)]) is None


def test_throughput_refuses_an_unknown_rung_latency_metric():
    from pytest_brokerperf import Throughput
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings

    ep = BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
    with pytest.raises(ValueError, match=r"rung_latency_metric='e2e\.p98'"):
        Throughput(rung_latency_bound_ms=5, rung_latency_metric="e2e.p98").prepare(
            Settings(), ep)
    prepared = Throughput(rung_latency_bound_ms=5).prepare(Settings(), ep)
    assert prepared.policy is not None and prepared.policy.latency_bound_us == 5000
