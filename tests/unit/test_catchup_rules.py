"""The catch-up scenario's rules and figures, and the engine's pause/build/drain phases on
the in-process loopback driver (no broker).

Where the right answer is known: OMB's drain-done level, figures computed from given
counters and histograms, a paused consumer that receives nothing while the backlog grows
by exactly what was acknowledged, and a drain that delivers every message once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.driver import BrokerBacklog, consumer_pause
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.engine.coordinator import LoadSession
from pytest_brokerperf.engine.plan import PhaseRun, Rung, RunPlan
from pytest_brokerperf.judge.slo import SLO, evaluate
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats
from pytest_brokerperf.scenario_library.catchup import (
    BUILD_SECONDS,
    CatchUp,
    CatchUpPrepared,
    catchup_figures,
    drain_threshold,
)
from pytest_brokerperf.scenario_library.tailread import TailRead
from pytest_brokerperf.scenario_library.throughput import Throughput
from pytest_brokerperf.workload.model import Workload

GIB = 1024**3
EP = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


def _workload(**kw: Any) -> Workload:
    base: dict[str, Any] = dict(
        name="cu", topics=1, partitions_per_topic=2, message_size=256,
        subscriptions_per_topic=1, producers_per_topic=1, consumer_per_subscription=1,
        producer_rate=1000, test_duration_minutes=1, warmup_duration_minutes=0)
    base.update(kw)
    return Workload(**base)


# --------------------------------------------------------------------------- drain rule


@pytest.mark.parametrize(("backlog", "size", "ratio", "want"), [
    (GIB, 1024, 0.9, 104_857),  # (long)(0.1 * 1048576): OMB truncates
    (GIB, 1024, 1.0, 1000),  # full drain: OMB's floor of 1000 messages
    (GIB, 1024, 0.0, 1_048_576),  # best effort: the whole capacity
    (10 * 1024**2, 1024, 0.5, 5120),
    (100_000, 1024, 0.5, 1000),  # a small backlog: the floor wins
])
def test_drain_threshold_is_omb_rule(backlog: int, size: int, ratio: float, want: int) -> None:
    assert drain_threshold(backlog, size, ratio) == want


def test_drain_threshold_matches_the_workload_property() -> None:
    wl = _workload(message_size=1024, consumer_backlog_size_gb=1, backlog_drain_ratio=0.9)
    assert drain_threshold(wl.backlog_bytes, 1024, 0.9) == wl.drain_complete_threshold


# --------------------------------------------------------------------------- prepare


def test_smoke_backlog_is_seconds_of_publishing_at_the_rate() -> None:
    p = CatchUp(rate=2000, message_size=512).prepare(_settings(), EP)
    assert isinstance(p, CatchUpPrepared)
    assert p.backlog_bytes == int(2000 * BUILD_SECONDS["smoke"] * 512)
    assert p.drain_threshold == 1000 and p.producers_during_drain
    assert p.params["backlog_bytes"] == p.backlog_bytes
    assert p.workload.consumer_backlog_size_gb == pytest.approx(p.backlog_bytes / GIB)
    assert any("backlog" in n and "smoke profile" in n for n in p.notes)


def test_workload_backlog_ratio_and_consumer_only_are_honoured() -> None:
    wl = _workload(message_size=1024, consumer_backlog_size_gb=0.5, backlog_drain_ratio=0.9,
                   consumer_only=True)
    p = CatchUp(workload=wl).prepare(_settings(), EP)
    assert p.backlog_bytes == GIB // 2
    assert p.drain_ratio == 0.9 and p.drain_threshold == int(0.1 * (GIB // 2 // 1024))
    assert p.producers_during_drain is False
    # the scenario's own fields win
    q = CatchUp(workload=wl, backlog_bytes=10_000_000, drain_ratio=1.0,
                producers_during_drain=True).prepare(_settings(), EP)
    assert (q.backlog_bytes, q.drain_threshold, q.producers_during_drain) == (
        10_000_000, 1000, True)


def test_bad_ratio_and_tiny_backlog_are_refused() -> None:
    with pytest.raises(ValueError, match=r"drain_ratio=1.5 is outside 0..1"):
        CatchUp(drain_ratio=1.5).prepare(_settings(), EP)
    with pytest.raises(ValueError, match="below one 1024-byte message"):
        CatchUp(backlog_bytes=10).prepare(_settings(), EP)


def test_tailread_refuses_a_backlog_workload(tmp_path: Path) -> None:
    f = tmp_path / "backlog.yaml"
    f.write_text("name: b\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\n"
                 "subscriptionsPerTopic: 1\nproducersPerTopic: 1\nconsumerPerSubscription: 1\n"
                 "producerRate: 1000\nconsumerBacklogSizeGB: 1\nbacklogDrainRatio: 0.9\n"
                 "testDurationMinutes: 1\n")
    with pytest.raises(ValueError,
                       match=r"backlog.yaml:9: consumerBacklogSizeGB = 1: .*-m catchup"):
        TailRead().prepare(_settings(workload=str(f)), EP)
    with pytest.raises(ValueError, match=r"throughput scenario would ignore.*-m catchup"):
        Throughput().prepare(_settings(workload=str(f)), EP)
    p = CatchUp().prepare(_settings(workload=str(f)), EP)  # the catch-up scenario takes it
    assert p.backlog_bytes == GIB and p.drain_ratio == 0.9


def test_drivers_say_whether_consumers_can_pause() -> None:
    from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
    from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver
    from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

    assert consumer_pause(LoopbackDriver()) is not None
    assert "pause()" in (consumer_pause(KafkaDriver) or "")
    assert "subscribes again" in (consumer_pause(PulsarDriver) or "")
    assert "stream offset" in RabbitMQDriver.CONSUMER_PAUSE_MISSING  # streams only


# --------------------------------------------------------------------------- figures


def _period(phase: str, *, publish_us: list[int], e2e_us: list[int],
            send_us: list[int] | None = None) -> PeriodStats:
    p = PeriodStats(index=0, start_ns=0, elapsed_s=1.0, phase=phase)
    p.histograms = {m: LatencyHistogram.for_metric(m) for m in METRICS}
    if publish_us:
        p.histograms["publish_response"].record_batch(publish_us)
    if send_us:
        p.histograms["publish_latency"].record_batch(send_us)
    if e2e_us:
        p.histograms["e2e_latency"].record_batch(e2e_us)
    return p


def _phase(phase: str, start: dict[str, int], end: dict[str, int], elapsed: float,
           done: bool = True, periods: list[PeriodStats] | None = None) -> PhaseRun:
    return PhaseRun(phase=phase, periods=periods or [], done=done, elapsed_s=elapsed,
                    start_totals=start, end_totals=end)


def _prepared(**kw: Any) -> CatchUpPrepared:
    p = CatchUp(message_size=1024, rate=1000).prepare(_settings(), EP)
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def test_figures_from_known_counters_and_histograms() -> None:
    build = _phase("build", {"acked": 1000, "received": 1000},
                   {"acked": 11_000, "received": 1000}, 10.0)
    drain_periods = [_period("drain", publish_us=[4000] * 2000, e2e_us=[2_000_000] * 2000,
                             send_us=[3000] * 2000)]
    drain = _phase(
        "drain",
        {"acked": 11_000, "received": 1000, "received_bytes": 1000 * 1024},
        {"acked": 13_000, "received": 12_500, "received_bytes": 12_500 * 1024},
        4.0, periods=drain_periods)
    at_start = [BrokerBacklog("s0", 9_990, end=20_000, position=10_010, how="offsets")]
    report, fig = catchup_figures(_prepared(), subs_per_topic=1, build=build, drain=drain,
                                  before_p99=2000.0, consumer_pause="test",
                                  at_start=at_start, before_rate=1000.0,
                                  before_publish_mean=1000.0)
    assert report.backlog_at_drain_start_messages == 10_000
    assert report.consumed_during_drain == 11_500
    assert report.produced_during_drain == 2000
    assert report.residual_messages == 500
    # consumed = backlog at the start + produced during the drain - residual
    assert report.consumed_during_drain == 10_000 + 2000 - 500
    assert fig["build_s"] == 10.0 and fig["drain_s"] == 4.0
    assert fig["catchup_rate_msg_s"] == pytest.approx(11_500 / 4.0)
    assert fig["catchup_mib_s"] == pytest.approx(11_500 * 1024 / 4.0 / 1024**2)
    assert report.net_drain_rate_msg_s == pytest.approx((10_000 - 500) / 4.0)
    assert fig["drained"] == 1.0
    assert fig["drain_publish_response.p99"] == pytest.approx(4000, rel=0.01)
    assert fig["drain_publish_p99_ratio"] == pytest.approx(2.0, rel=0.01)
    # the writers' rate while the backlog is read (2,000 acknowledged in 4 s) against the
    # window before (AutoMQ's "send throughput during catch-up"), and OMB's mean send
    # latency before and during the drain
    assert report.publish_rate_drain_msg_s == pytest.approx(500.0)
    assert fig["drain_publish_rate_ratio"] == report.drain_publish_rate_ratio == 0.5
    assert report.publish_latency_mean_before_us == 1000.0
    assert report.publish_latency_mean_drain_us == pytest.approx(3000, rel=0.01)
    assert fig["drain_publish_latency.mean"] == pytest.approx(3000, rel=0.01)
    assert fig["drain_publish_latency.p99"] == pytest.approx(3000, rel=0.01)
    # producers stopped for the drain: no rate during it, no change
    off, off_fig = catchup_figures(_prepared(producers_during_drain=False), subs_per_topic=1,
                                   build=build, drain=drain, before_p99=2000.0,
                                   consumer_pause="test", before_rate=1000.0)
    assert off.publish_rate_drain_msg_s is None and off_fig["drain_publish_rate_ratio"] is None
    assert fig["catchup_age.p50"] == pytest.approx(2_000_000, rel=0.01)
    assert report.age["count"] == 2000
    assert fig["broker_backlog_at_drain_start"] == 9_990
    assert report.broker_backlog_at_drain_start == [
        {"subscription": "s0", "messages": 9_990, "end": 20_000, "position": 10_010,
         "how": "offsets"}]


def test_an_unfinished_drain_has_no_time_or_rate_and_fails_the_shipped_slo() -> None:
    build = _phase("build", {"acked": 0, "received": 0}, {"acked": 5000, "received": 0}, 5.0)
    drain = _phase("drain", {"acked": 5000, "received": 0, "received_bytes": 0},
                   {"acked": 9000, "received": 2000, "received_bytes": 2000 * 1024}, 60.0,
                   done=False)
    report, fig = catchup_figures(_prepared(), subs_per_topic=1, build=build, drain=drain,
                                  before_p99=None, consumer_pause="test")
    assert fig["drain_s"] is None and fig["catchup_rate_msg_s"] is None
    assert fig["drained"] == 0.0 and report.drain_complete is False
    assert report.residual_messages == 7000
    assert report.broker_backlog_at_drain_start is None
    (result,) = evaluate([SLO.parse("drained == 1")], fig, context={})
    assert result.failed


def test_catchup_slos_parse_with_their_units() -> None:
    figures = {"drain_s": 12.0, "build_s": 3.0, "catchup_rate_msg_s": 40_000.0,
               "catchup_mib_s": 39.0, "catchup_age.p99": 9_000_000.0,
               "drain_publish_p99_ratio": 2.5, "drain_publish_response.p99": 30_000.0}
    slos = [SLO.parse(e) for e in ("drain_s < 30 s", "build_s <= 5000 ms",
                                   "catchup_rate_msg_s > 20k msg/s", "catchup_mib_s >= 30 MiB/s",
                                   "catchup_age.p99 < 10 s", "drain_publish_p99_ratio < 3",
                                   "drain_publish_response.p99 < 50 ms")]
    assert all(r.passed for r in evaluate(slos, figures, context={}))
    (late,) = evaluate([SLO.parse("drain_s < 10 s")], figures, context={})
    assert late.failed


# --------------------------------------------------------------------------- engine


def test_paused_consumers_receive_nothing_and_the_drain_delivers_everything_once() -> None:
    wl = _workload(subscriptions_per_topic=2, producer_rate=2000)
    plan = RunPlan(rate=2000, period_s=0.5, warmup_max_s=0.0, measure_s=0.5, workers=1,
                   topic_prefix="cu-loop", probe_timeout_s=20)
    with LoadSession(LoopbackDriver(partitions=2), wl, plan,
                     payloads=wl.payloads(None, seed=5)) as s:
        s.run_rung(Rung(2000, 0.0, 0.5))
        paused = s.pause_consumers(True)
        build = s.run_until("build", lambda t: s.backlog(t) >= 4000, 20.0)
        assert build.done and all(p.phase == "build" for p in build.periods)
        # nothing was received while paused; the backlog is every acked message since
        assert build.end_totals["received"] == paused["received"]
        assert s.backlog(build.end_totals) >= 4000
        assert build.end_totals["acked"] > paused["acked"]
        drain = s.run_until("drain", lambda t: s.backlog(t) <= 100, 20.0,
                            begin=lambda: s.pause_consumers(False))
        assert drain.done and drain.start_totals["received"] == paused["received"]
        assert drain.end_totals["received"] - drain.start_totals["received"] >= 3900
        end = s.finish()
    d = end.delivery
    assert d.acknowledged > 2000 and len(d.subscriptions) == 2  # backlog: both subs
    for sub in d.subscriptions:
        assert sub.received == sub.acknowledged == d.acknowledged
        assert (sub.lost, sub.duplicates) == (0, 0)


def test_a_drain_is_hot_cold_or_mixed_by_what_the_broker_read_from_storage() -> None:
    from pytest_brokerperf.scenario_library.catchup import CacheReading

    mib = 1024**2

    def reading(disk: int | None, consumed: int = 100 * mib) -> CacheReading:
        return CacheReading(disk_read_bytes=disk, consumed_bytes=consumed,
                            memory_available_bytes=8192 * mib, backlog_bytes=100 * mib)

    assert reading(0).state == "hot" and reading(0).served_from_cache == 1.0
    assert reading(10 * mib).state == "hot"  # 90 % from the page cache
    assert reading(30 * mib).state == "mixed"
    assert reading(50 * mib).state == "cold"
    assert reading(400 * mib).state == "cold" and reading(400 * mib).served_from_cache == 0.0
    assert reading(None).state == "unknown"  # a remote broker: nothing to read
    assert reading(0, consumed=0).state == "unknown"
    why = reading(0).reason()
    assert "100% of the 100.0 MiB drained" in why and "fits in the 8,192 MiB" in why
    assert reading(0).as_dict()["state"] == "hot"


def test_disk_reads_are_read_only_for_local_brokers() -> None:
    import os

    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
    from pytest_brokerperf.scenario_library.catchup import broker_disk_reads

    mine = LocalProcesses(pids=(os.getpid(),))
    remote = BrokerEndpoint(kind="kafka", bootstrap="h:9092", mode="remote", local=mine)
    assert broker_disk_reads(remote) is None
    local = BrokerEndpoint(kind="kafka", bootstrap="h:9092", mode="process", local=mine)
    assert isinstance(broker_disk_reads(local), int)  # this process's own read_bytes


def test_residual_is_never_negative() -> None:
    """Messages received before their acks reached the counters (read while both go on)
    once made ``residual_messages: -20`` (issue 23, item 8)."""
    build = _phase("build", {"acked": 0, "received": 0}, {"acked": 5000, "received": 0}, 5.0)
    drain = _phase("drain", {"acked": 5000, "received": 0, "received_bytes": 0},
                   {"acked": 9000, "received": 9020, "received_bytes": 9020 * 1024}, 6.0)
    report, _ = catchup_figures(_prepared(), subs_per_topic=1, build=build, drain=drain,
                                before_p99=None, consumer_pause="test")
    assert report.residual_messages == 0
    assert report.received_ahead_of_acks == 20
    assert report.net_drain_rate_msg_s == pytest.approx(5000 / 6.0)
    # the accounting stays exact: consumed = backlog at the start + produced - residual
    # + what was received ahead of its acks
    assert report.consumed_during_drain == (
        report.backlog_at_drain_start_messages + report.produced_during_drain
        - report.residual_messages + report.received_ahead_of_acks)
