"""The engine end to end on the in-process loopback driver (no broker).

This checks the harness's own accounting — open-loop pacing, the latency views,
delivery reconciliation, periods and verdicts — where the right answer is known:
every acknowledged message is received once, in order, within milliseconds.
"""

import pytest

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.engine.coordinator import run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.judge.verdict import Thresholds, assess, window_steal_share
from pytest_brokerperf.workload.model import Workload


def _workload(**kw):
    base = dict(name="loopback", topics=1, partitions_per_topic=2, message_size=256,
                subscriptions_per_topic=2, producers_per_topic=2, consumer_per_subscription=1,
                producer_rate=2000, test_duration_minutes=1, warmup_duration_minutes=0)
    base.update(kw)
    return Workload(**base)


@pytest.fixture(scope="module")
def outcome():
    wl = _workload()
    # the warm-up ends once three periods are steady (capped at 4 s), so a start-up stall
    # is not caught up inside the measured window
    plan = RunPlan(rate=2000, period_s=0.5, warmup_max_s=4.0, measure_s=2.0, workers=1,
                   topic_prefix="loop", probe_timeout_s=20)
    # A window this host spoiled (hypervisor steal, a stall of the pacer, a shortfall) is
    # measured again, up to three times: a harness that cannot hold 2,000 msg/s is
    # spoiled in every window, a noisy minute rarely three in a row.
    for _ in range(3):
        periods = []
        out = run_workload(LoopbackDriver(partitions=2), wl, plan,
                           payloads=wl.payloads(None, seed=3), on_period=periods.append)
        out.seen_periods = periods
        if assess(out).status == "valid":
            break
    return out


def _noisy(out) -> bool:
    """The host voided the window: hypervisor steal, or other processes on the
    generator's CPUs while its workers waited on a run queue (both ``host-noise``)."""
    return assess(out).status == "host-noise"


def test_every_acked_message_received_once_per_subscription(outcome):
    d = outcome.delivery
    assert d.acknowledged > 0
    assert [s.subscription for s in d.subscriptions] == sorted(outcome.subscriptions)
    for s in d.subscriptions:
        assert s.received == s.acknowledged == d.acknowledged
        assert (s.lost, s.duplicates, s.reordered) == (0, 0, 0)


def test_rates_follow_the_open_loop_schedule(outcome):
    assert outcome.ack_rate == pytest.approx(2000, rel=0.1)
    assert outcome.consume_rate == pytest.approx(2 * 2000, rel=0.1)  # two subscriptions
    assert len(outcome.periods) == 4
    assert all(p.phase == "measure" for p in outcome.periods)
    assert outcome.seen_periods[-1] is outcome.periods[-1]


def test_latency_views_are_consistent(outcome):
    c = outcome.cumulative
    n_pub = c["publish_latency"].total_count
    assert n_pub == c["publish_delay"].total_count == c["publish_response"].total_count > 0
    assert c["e2e_latency"].total_count == c["e2e_response"].total_count
    # two subscriptions receive every message; window edges may shift a few across periods
    assert c["e2e_latency"].total_count == pytest.approx(2 * n_pub, rel=0.01)
    # response time = delay + latency, so it can never be below either view
    assert c["publish_response"].percentile(50) >= c["publish_latency"].percentile(50)
    assert c["e2e_response"].percentile(50) >= c["e2e_latency"].percentile(50)
    # in-process delivery: the harness floor is well below 50 ms
    assert 0 < c["e2e_latency"].percentile(50) < 50_000
    # at 2000 msg/s the pacer keeps its schedule (unless the hypervisor took the CPU)
    assert c["publish_delay"].percentile(99) < 10_000 or _noisy(outcome)


def test_lifetime_counters_and_backlog(outcome):
    last = outcome.periods[-1]
    assert last.total_sent >= sum(p.messages_sent for p in outcome.periods)
    assert last.backlog >= 0


def test_verdict_is_valid_at_low_rate(outcome):
    v = assess(outcome)
    if _noisy(outcome):  # three windows in a row robbed by the hypervisor: say so
        assert v.status == "host-noise", v.reasons
        assert "steal time" in v.reasons[0] or "other processes" in v.reasons[0], v.reasons
        assert not v.judgeable
    else:
        assert v.status == "valid", v.reasons


def test_window_above_target_rate_is_unsteady_not_a_figure(outcome):
    # ~2000 msg/s acknowledged against a 1000 msg/s target: only a catch-up does that
    from dataclasses import replace

    # this machine's load is not under test here: generator signals are switched off
    th = Thresholds(cpu_share=9.0, runq_share=9.0, publish_delay_p99_us=1e12, steal_share=9.0)
    catching_up = replace(outcome, plan=replace(outcome.plan, rate=1000))
    v = assess(catching_up, th)
    assert v.status == "unsteady" and not v.judgeable
    assert any("more than 110% of the target 1,000 msg/s" in r for r in v.reasons)
    # within the tolerance it stays valid
    assert assess(replace(outcome, plan=replace(outcome.plan, rate=1900)), th).status == "valid"


def test_steal_time_over_the_limit_outranks_every_other_status(outcome):
    from dataclasses import replace


    robbed = replace(outcome, periods=[replace(p, host_steal_share=0.2)
                                       for p in outcome.periods])
    assert window_steal_share(robbed.periods) == pytest.approx(0.2)
    # even a window that also caught up on a stall: the host comes first
    v = assess(replace(robbed, plan=replace(robbed.plan, rate=1000)))
    assert v.status == "host-noise" and {"host-noise", "unsteady"} <= set(v.flags)
    assert "the hypervisor took 20.0% of the machine's CPU time" in v.reasons[0]
    assert v.details["host_steal_share"] == pytest.approx(0.2)
    # under a limit the user raised, the same window is judged on its other signals
    th = Thresholds(steal_share=0.25, cpu_share=9.0, runq_share=9.0, publish_delay_p99_us=1e12)
    assert assess(robbed, th).status == "valid"
    # time-weighted: a 10 % period twice as long as a 40 % one is 20 %
    a, b = robbed.periods[:2]
    assert window_steal_share([replace(a, host_steal_share=0.1, elapsed_s=2.0),
                               replace(b, host_steal_share=0.4, elapsed_s=1.0)]) == (
        pytest.approx(0.2))
    assert window_steal_share([replace(a, host_steal_share=None)]) is None
