"""Verdicts that used to say ``valid`` when they should not (each case failed before).

The run is a real loopback run (no broker); each test changes one signal of it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.engine.coordinator import run_workload
from pytest_brokerperf.engine.plan import RunOutcome, RunPlan
from pytest_brokerperf.judge.verdict import Thresholds, assess, window_steal_share
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.workload.model import Workload

#: this machine's load is not under test: the generator and host signals are switched off
QUIET = dict(cpu_share=9.0, runq_share=9.0, publish_delay_p99_us=1e12, steal_share=9.0)


@pytest.fixture(scope="module")
def outcome() -> RunOutcome:
    wl = Workload(name="gaps", topics=1, partitions_per_topic=2, message_size=256,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=2000, test_duration_minutes=1,
                  warmup_duration_minutes=0)
    plan = RunPlan(rate=2000, period_s=0.5, warmup_max_s=4.0, measure_s=2.0, workers=1,
                   topic_prefix="gaps", probe_timeout_s=20)
    out = run_workload(LoopbackDriver(partitions=2), wl, plan, payloads=wl.payloads(None, seed=3))
    assert len(out.periods) >= 3
    return out


def _quiet(out: RunOutcome) -> RunOutcome:
    """The same run without any hypervisor steal (the host's noise is tested elsewhere)."""
    return replace(out, periods=[replace(p, host_steal_share=0.0) for p in out.periods])


def test_an_acknowledged_rate_below_the_target_is_named_not_valid(outcome: RunOutcome) -> None:
    short = replace(_quiet(outcome), plan=replace(outcome.plan, rate=outcome.ack_rate / 0.9))
    v = assess(short, Thresholds(**QUIET))
    assert v.status == "rate-not-sustained" and not v.judgeable
    assert "90.0% of the offered" in " ".join(v.reasons)
    # within the 5 % tolerance it is a figure
    close = replace(_quiet(outcome), plan=replace(outcome.plan, rate=outcome.ack_rate / 0.97))
    assert assess(close, Thresholds(**QUIET)).status == "valid"


def test_sustained_back_pressure_explains_a_shortfall(outcome: RunOutcome) -> None:
    pushed = [replace(p, workers=[replace(w, queue_full=3) for w in p.workers])
              for p in _quiet(outcome).periods]
    short = replace(outcome, periods=pushed, plan=replace(outcome.plan,
                                                          rate=outcome.ack_rate / 0.8))
    v = assess(short, Thresholds(**QUIET))
    assert v.status == "broker-backpressure" and v.judgeable
    assert "rate-not-sustained" in v.flags


def test_a_growing_consumer_backlog_is_consumer_bound(outcome: RunOutcome) -> None:
    quiet = _quiet(outcome)
    growing = [replace(p, backlog=2000 * (i + 1)) for i, p in enumerate(quiet.periods)]
    v = assess(replace(quiet, periods=growing), Thresholds(**QUIET))
    assert v.status == "consumer-bound" and not v.judgeable
    assert "consumers fell behind" in " ".join(v.reasons)
    # a small steady backlog is the tail, not a trend
    steady = [replace(p, backlog=50) for p in quiet.periods]
    assert assess(replace(quiet, periods=steady), Thresholds(**QUIET)).status == "valid"


def test_consumers_that_stay_seconds_behind_are_not_at_the_tail(outcome: RunOutcome) -> None:
    # A CI run saw e2e p50 7.3 s at 500 msg/s with a steady (not growing) backlog and
    # the verdict said valid: a steady queue of seconds is not a tail read.
    quiet = _quiet(outcome)
    rate = quiet.plan.rate
    behind = [replace(p, backlog=int(rate * 7)) for p in quiet.periods]  # 7 s behind
    v = assess(replace(quiet, periods=behind), Thresholds(**QUIET))
    assert v.status == "consumer-bound" and not v.judgeable
    assert "stayed 7.0 s of publishing behind" in " ".join(v.reasons)
    # just under the limit it is still the tail
    near = [replace(p, backlog=int(rate * 0.9)) for p in quiet.periods]
    assert assess(replace(quiet, periods=near), Thresholds(**QUIET)).status == "valid"
    # the limit is a threshold of its own
    assert assess(replace(quiet, periods=near),
                  Thresholds(**QUIET, tail_lag_s=0.5)).status == "consumer-bound"


def test_messages_unconfirmed_when_the_drain_closed_are_consumer_bound(
        outcome: RunOutcome) -> None:
    quiet = _quiet(outcome)
    subs = [replace(s, unconfirmed=123) for s in quiet.delivery.subscriptions]
    late = replace(quiet, drain_complete=False,
                   delivery=replace(quiet.delivery, subscriptions=subs))
    v = assess(late, Thresholds(**QUIET))
    assert v.status == "consumer-bound"
    assert "123 acknowledged messages were still unconfirmed" in " ".join(v.reasons)


def test_one_burst_of_queue_full_events_does_not_excuse_a_late_generator(
        outcome: RunOutcome) -> None:
    quiet = _quiet(outcome)
    late = {**QUIET, "publish_delay_p99_us": 0.0}  # every message counts as late
    burst = list(quiet.periods)
    burst[0] = replace(burst[0], workers=[replace(w, queue_full=50) for w in burst[0].workers])
    v = assess(replace(quiet, periods=burst), Thresholds(**late))
    assert v.status == "generator-bound", v.reasons
    assert "broker-backpressure" not in v.flags
    assert "a burst, not sustained" in v.details["queue_full_note"]
    # in two periods it is the broker pushing back
    burst[1] = replace(burst[1], workers=[replace(w, queue_full=50) for w in burst[1].workers])
    v = assess(replace(quiet, periods=burst), Thresholds(**late))
    assert v.status == "broker-backpressure", v.reasons


def test_publish_delay_is_judged_at_the_percentile_the_slos_judge(
        outcome: RunOutcome) -> None:
    delay = LatencyHistogram.for_metric("publish_delay")
    delay.record_batch([1_000] * 9_980 + [50_000] * 20)  # p99 1 ms, p99.9 50 ms
    quiet = _quiet(outcome)
    run = replace(quiet, cumulative={**quiet.cumulative, "publish_delay": delay})
    th = {**QUIET, "publish_delay_p99_us": 10_000.0}
    assert assess(run, Thresholds(**th)).status == "valid"
    v = assess(run, Thresholds(**th, publish_delay_q=99.9))
    assert v.status == "generator-bound"
    assert "publish delay p99.9" in " ".join(v.reasons)


def test_another_process_on_the_generator_cpus_is_host_noise(outcome: RunOutcome) -> None:
    quiet = _quiet(outcome)
    starved = [replace(p, generator_cpu_busy=0.95,
                       workers=[replace(w, cpu_s=0.05 * w.elapsed_s,
                                        runq_delay_s=0.5 * w.elapsed_s) for w in p.workers])
               for p in quiet.periods]
    th = {**QUIET, "runq_share": 0.2, "cpu_share": 0.9}
    v = assess(replace(quiet, periods=starved, plan=replace(quiet.plan, generator_cpus=(0,))),
               Thresholds(**th))
    assert v.status == "host-noise", v.reasons
    assert "other processes used 90% of the generator's CPUs" in v.reasons[0]
    # the CPUs half busy on average, 45 % of them other processes (a burst of other
    # work beside the run): still the machine's noise
    half = [replace(p, generator_cpu_busy=0.5) for p in starved]
    v = assess(replace(quiet, periods=half, plan=replace(quiet.plan, generator_cpus=(0,))),
               Thresholds(**th))
    assert v.status == "host-noise", v.reasons
    assert "other processes used 45% of the generator's CPUs" in v.reasons[0]
    # half busy, nearly all of it the workers: their threads queueing behind each other
    mine = [replace(p, workers=[replace(w, cpu_s=0.45 * w.elapsed_s) for w in p.workers])
            for p in half]
    v = assess(replace(quiet, periods=mine, plan=replace(quiet.plan, generator_cpus=(0,))),
               Thresholds(**th))
    assert v.status != "host-noise"
    # the workers' own threads queueing behind each other are not another process
    own = [replace(p, workers=[replace(w, cpu_s=0.9 * w.elapsed_s) for w in p.workers])
           for p in starved]
    v = assess(replace(quiet, periods=own, plan=replace(quiet.plan, generator_cpus=(0,))),
               Thresholds(**th))
    assert v.status != "host-noise"
    assert window_steal_share(own) == 0.0


def test_judged_percentile_reads_the_slos() -> None:
    from pytest_brokerperf.judge.slo import judged_percentile, parse_slo

    assert judged_percentile([]) == 99.0
    slos = [parse_slo("e2e_response.p99.9 < 50ms", source="t"),
            parse_slo("publish_response.p50 < 5ms", source="t"),
            parse_slo("ack_rate > 10", source="t")]
    assert judged_percentile(slos) == 99.9


def test_a_rate_not_sustained_fails_the_test_even_with_inconclusive_warn(
        outcome: RunOutcome) -> None:
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.plugin.runner import BrokerPerf
    from pytest_brokerperf.scenario_library.base import ScenarioResult

    v = assess(replace(_quiet(outcome), plan=replace(outcome.plan, rate=outcome.ack_rate * 2)),
               Thresholds(**QUIET))
    result = ScenarioResult(prepared=None, outcome=outcome, verdict=v,  # type: ignore[arg-type]
                            figures={}, slo_results=[], record={},  # type: ignore[typeddict-item]
                            artefacts=None, inconclusive=list(v.reasons))  # type: ignore[arg-type]
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

    single = BrokerEndpoint(kind="kafka", bootstrap="127.0.0.1:9092", mode="process")
    bp = BrokerPerf(None, single, Settings(inconclusive="warn"), {},  # type: ignore[arg-type]
                    broker_type=brokers.get("kafka"))
    with pytest.raises(pytest.fail.Exception, match=r"RATE NOT SUSTAINED: .*acknowledged"):
        bp.check(result)
    # three nodes on one machine: the machine's limit, reported as the user chose
    three = replace(single, nodes=3, topology_check=True)
    bp = BrokerPerf(None, three, Settings(inconclusive="warn"), {},  # type: ignore[arg-type]
                    broker_type=brokers.get("kafka"))
    with pytest.warns(Warning, match=r"INCONCLUSIVE: .*acknowledged"):
        bp.check(result)


def test_a_warm_up_with_consumers_behind_is_not_steady(outcome: RunOutcome) -> None:
    # the warm-up used to end on publish rate and p99 alone, handing a consumer queue of
    # seconds to the measured window
    from pytest_brokerperf.engine.coordinator import _is_steady

    plan = replace(outcome.plan, steady_periods=2, warmup_min_periods=2,
                   steady_p99_tolerance=1e9)  # the p99 rule is not under test here
    periods = [replace(p, messages_sent=round(plan.rate * p.elapsed_s), backlog=10)
               for p in outcome.periods]
    assert _is_steady(periods, plan, subscriptions=1)
    behind = [*periods[:-1], replace(periods[-1], backlog=int(plan.rate * 3))]
    assert not _is_steady(behind, plan, subscriptions=1)
    # the limit counts every subscription's queue
    assert _is_steady(behind, plan, subscriptions=4)


def test_the_cpu_layout_says_when_the_split_is_not_clean() -> None:
    from pytest_brokerperf.metrics.cpus import cpu_layout

    clean = cpu_layout([3], [1, 2], coordinator=[0])
    assert clean["clean_split"] and clean["note"] is None
    # two cores: the pytest process (coordinator, sampler) shares with the generator
    two = cpu_layout([1], [0], coordinator=[0, 1])
    assert not two["clean_split"]
    assert "share CPUs [0] with the generator" in two["note"]
    assert "share CPUs [1] with the broker" in two["note"]
    assert "not pinned" in cpu_layout(None, None, coordinator=[0])["note"]
    assert "broker and generator share CPUs [1]" in cpu_layout([1], [0, 1], [2])["note"]


def test_a_real_run_is_on_one_clock_and_another_clock_is_clock_uncertain(
        outcome: RunOutcome) -> None:
    """The loopback run's workers reported their clocks and none differed; a period whose
    worker stamped on another clock makes the run clock-uncertain (not judged)."""
    assert all(p.clock_note is None for p in outcome.periods)
    quiet = _quiet(outcome)
    assert assess(quiet, Thresholds(**QUIET)).status == "valid"
    why = "worker 0's CLOCK_MONOTONIC is +3,600,000.0 ms outside the coordinator's bracket"
    skewed = [replace(p, clock_note=why) if i == 1 else p for i, p in enumerate(quiet.periods)]
    v = assess(replace(quiet, periods=skewed), Thresholds(**QUIET))
    assert v.status == "clock-uncertain" and not v.judgeable
    assert why in v.reasons
