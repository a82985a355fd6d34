"""The mixed scenario's rules and figures, where the right answer is known.

Synthetic periods with a slowdown injected into one window: the during/before ratios
come out as injected, from the right windows (the build phase between them counts in
neither); a tailing group that fell behind or a catch-up that never reached the head
withholds the ratios. Also which brokers can start a subscription at the earliest
position, and the SLO metric names.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.engine.plan import PhaseRun
from pytest_brokerperf.judge.slo import SCALARS, SHIPPED_SLOS, SLO, evaluate
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats
from pytest_brokerperf.scenario_library.mixed import (
    Mixed,
    MixedPrepared,
    earliest_reader,
    mixed_figures,
)

EP = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")
MIB = 1024**2


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


def _period(phase: str, publish_us: int, e2e_us: int, n: int = 6000) -> PeriodStats:
    """A period whose every publish and e2e response took exactly the given time."""
    p = PeriodStats(index=0, start_ns=0, elapsed_s=1.0, phase=phase)
    p.histograms = {m: LatencyHistogram.for_metric(m) for m in METRICS}
    p.histograms["publish_response"].record_batch([publish_us] * n)
    p.histograms["e2e_response"].record_batch([e2e_us] * n)
    return p


def _prepared() -> MixedPrepared:
    return Mixed(message_size=1024, rate=1000, backlog_bytes=4 * MIB).prepare(_settings(), EP)


def _phase(phase: str, periods: list[PeriodStats], start: dict[str, int],
           end: dict[str, int], elapsed: float, done: bool = True) -> PhaseRun:
    return PhaseRun(phase=phase, periods=periods, done=done, elapsed_s=elapsed,
                    start_totals=start, end_totals=end)


def _run(*, tail_lag: int = 0, done: bool = True, judgeable: bool = True,
         catchup_publish_us: int = 3000, catchup_e2e_us: int = 10_000) -> tuple[Any, Any]:
    before = [_period("measure", 1000, 2000) for _ in range(3)]
    # the build phase is slow too: it belongs to neither window
    build = _phase("build", [_period("build", 50_000, 90_000)],
                   {"acked": 5000, "received": 5000},
                   {"acked": 8000, "received": 8000 - tail_lag}, 3.0)
    catchup = _phase("catchup", [_period("catchup", catchup_publish_us, catchup_e2e_us)
                                 for _ in range(2)],
                     {"acked": 8000, "received": 8000}, {"acked": 10_000, "received": 10_000},
                     2.0, done=done)
    return mixed_figures(_prepared(), before=before, build=build, catchup=catchup,
                         catchup_consumed=(10_000, 10_000 * 1024), how="test",
                         subscription="s-catchup", judgeable=judgeable)


def test_injected_slowdown_gives_the_ratio_of_the_right_windows() -> None:
    report, figures = _run(catchup_publish_us=3000, catchup_e2e_us=10_000)
    # before: publish 1 ms, e2e 2 ms; during: 3 ms and 10 ms (the build's 50/90 ms unused)
    assert report.publish_p99_ratio == pytest.approx(3.0, rel=0.01)
    assert report.publish_p999_ratio == pytest.approx(3.0, rel=0.01)
    assert report.e2e_p99_ratio == pytest.approx(5.0, rel=0.01)
    assert report.e2e_p999_ratio == pytest.approx(5.0, rel=0.01)
    assert figures["mixed.publish_p99_ratio"] == report.publish_p99_ratio
    assert figures["mixed.e2e_p999_ratio"] == report.e2e_p999_ratio
    assert report.catchup_s == 2.0
    assert report.catchup_rate_msg_s == pytest.approx(5000.0)
    assert report.catchup_mib_s == pytest.approx(10_000 * 1024 / 2.0 / MIB)
    assert report.produced_during_catchup == 2000
    assert report.retained_at_catchup_start_messages == 8000
    assert report.tail_kept_up and figures["mixed.caught_up"] == 1.0


def test_no_slowdown_is_a_ratio_of_one() -> None:
    report, _ = _run(catchup_publish_us=1000, catchup_e2e_us=2000)
    assert report.publish_p99_ratio == pytest.approx(1.0, rel=0.01)
    assert report.e2e_p99_ratio == pytest.approx(1.0, rel=0.01)


def test_tailing_group_behind_withholds_the_ratios() -> None:
    limit = _prepared().tail_lag_limit
    report, figures = _run(tail_lag=limit + 1)
    assert not report.tail_kept_up and report.tail_lag_at_catchup_start == limit + 1
    assert report.publish_p99_ratio is None and report.e2e_p99_ratio is None
    assert figures["mixed.publish_p99_ratio"] is None
    ok, _ = _run(tail_lag=limit)
    assert ok.tail_kept_up and ok.publish_p99_ratio is not None


def test_catchup_not_at_the_head_withholds_rate_and_ratios() -> None:
    report, figures = _run(done=False)
    assert not report.catchup_complete and report.catchup_s is None
    assert report.catchup_rate_msg_s is None and report.publish_p99_ratio is None
    assert figures["mixed.caught_up"] == 0.0
    failed = evaluate(list(SHIPPED_SLOS["mixed"]), {**figures, "lost": 0.0})
    assert [r.slo.metric for r in failed if not r.passed] == ["mixed.caught_up"]


def test_inconclusive_window_withholds_the_ratios() -> None:
    report, _ = _run(judgeable=False)
    assert report.publish_p99_ratio is None


def test_slo_metric_names_registered() -> None:
    for name in ("mixed.publish_p99_ratio", "mixed.publish_p999_ratio", "mixed.e2e_p99_ratio",
                 "mixed.e2e_p999_ratio", "mixed.catchup_s", "mixed.catchup_rate_msg_s",
                 "mixed.catchup_mib_s", "mixed.caught_up"):
        assert name in SCALARS
    slo = SLO.parse("mixed.publish_p99_ratio < 2")
    _, figures = _run()
    (res,) = evaluate([slo], figures)
    assert not res.passed  # 3.0 is not < 2


def test_prepare_defaults_and_bounds() -> None:
    p = Mixed(message_size=1024, rate=1000).prepare(_settings(), EP)
    assert p.backlog_bytes == 8 * 1000 * 1024  # smoke: 8 s of publishing
    assert p.caught_up_lag == 500 and p.tail_lag_limit == 1000
    with pytest.raises(ValueError, match="backlog_bytes=10"):
        Mixed(message_size=1024, rate=1000, backlog_bytes=10).prepare(_settings(), EP)


def test_earliest_reader_by_broker() -> None:
    from pytest_brokerperf import brokers

    kafka = KafkaDriver(endpoint=EP, config=KafkaDriverConfig())
    for kind in ("kafka", "redpanda", "automq", "tansu"):  # the Kafka-protocol family
        reader, how = earliest_reader(brokers.get(kind), kafka)
        assert "earliest" in how
        assert reader.extra["auto.offset.reset"] == "earliest"  # type: ignore[attr-defined]
    assert "auto.offset.reset" not in kafka.extra  # the run's own clients unchanged
    with pytest.raises(BrokerUnavailable, match=r"mixed on loopback: .*no retained log"):
        earliest_reader(brokers.get("loopback"), LoopbackDriver())
    with pytest.raises(BrokerUnavailable, match=r"mixed on rabbitmq: .*stream queue"):
        earliest_reader(brokers.get("rabbitmq"), LoopbackDriver())


def test_verdict_says_why_the_ratios_are_withheld() -> None:
    from pytest_brokerperf.judge.verdict import HOST_NOISE, VALID, Verdict
    from pytest_brokerperf.scenario_library.mixed import (
        CATCHUP_INCOMPLETE,
        TAIL_BEHIND,
        judge_mixed,
    )

    report, _ = _run()
    v = Verdict(status=VALID)
    judge_mixed(v, report)
    assert v.status == VALID and v.flags == [] and v.judgeable

    # a catch-up too short for p99.9: the ratio is n/a and the verdict says why
    short = mixed_figures(_prepared(), before=[_period("measure", 1000, 2000)],
                          build=_phase("build", [], {}, {"acked": 1, "received": 1}, 0.0),
                          catchup=_phase("catchup", [_period("catchup", 3000, 3000, n=1500)],
                                         {}, {}, 0.5),
                          catchup_consumed=(1, 1), how="t", subscription="s")[0]
    assert short.publish_p99_ratio == pytest.approx(3.0, rel=0.01)
    assert short.publish_p999_ratio is None and short.publish_samples_during == 1500
    v = Verdict(status=VALID)
    judge_mixed(v, short)
    assert v.status == VALID and v.flags == ["undersampled"]
    assert "publish_p999_ratio, e2e_p999_ratio n/a" in v.details["mixed_undersampled"]
    assert "1,500 publish" in v.details["mixed_undersampled"]

    behind, _ = _run(tail_lag=10**6)
    v = Verdict(status=VALID)
    judge_mixed(v, behind)
    assert v.status == TAIL_BEHIND and not v.judgeable
    assert "tailing subscription was 1,000,000 messages behind" in v.reasons[0]

    unfinished, _ = _run(done=False)
    v = Verdict(status=VALID)
    judge_mixed(v, unfinished)
    assert v.status == CATCHUP_INCOMPLETE and v.flags == [CATCHUP_INCOMPLETE]
    assert "not at the head within" in v.reasons[0]

    noisy = Verdict(status=HOST_NOISE)  # an inconclusive status is kept, the flag added
    judge_mixed(noisy, unfinished)
    assert noisy.status == HOST_NOISE and noisy.flags == [CATCHUP_INCOMPLETE]


class _FakeConsumer:
    def __init__(self, total: int) -> None:
        self.left = total

    def receive(self, max_messages: int, timeout_s: float) -> list[tuple[bytes, int]]:
        n = min(self.left, max_messages)
        self.left -= n
        return [(b"x" * 10, 0)] * n

    def pause(self) -> None:
        pass

    def close(self) -> None:
        pass


class _FakeDriver:
    """Picklable: each topic holds ``per_topic`` messages; ``broken`` consumers raise."""

    kind = "fake"

    def __init__(self, per_topic: int, broken: bool = False) -> None:
        self.per_topic, self.broken = per_topic, broken

    def consumer(self, topic: str, subscription: str, client_id: str) -> _FakeConsumer:
        if self.broken:
            raise RuntimeError("no such subscription")
        return _FakeConsumer(self.per_topic)


def _wait_for(cond: Any, limit_s: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_catchup_reader_reads_every_topic_only_after_start() -> None:
    import time

    from pytest_brokerperf.scenario_library.mixed import CatchUpReader

    reader = CatchUpReader(_FakeDriver(1234), ["a", "b"], "sub", "t")  # type: ignore[arg-type]
    try:
        reader.spawn()
        time.sleep(0.2)
        assert reader.received() == (0, 0)  # up, not subscribed before start()
        reader.start()
        _wait_for(lambda: reader.received()[0] >= 2468)
        assert reader.stop() == (2468, 24680)
        assert not reader.failed()
    finally:
        reader.kill()


def test_catchup_reader_failure_is_an_error_not_a_count() -> None:
    from pytest_brokerperf.core.errors import MeasurementError
    from pytest_brokerperf.scenario_library.mixed import CatchUpReader

    reader = CatchUpReader(_FakeDriver(10, broken=True), ["a"], "sub", "t")  # type: ignore[arg-type]
    try:
        reader.spawn()
        reader.start()
        _wait_for(reader.failed)
        assert reader.failed()
        with pytest.raises(MeasurementError, match=r"catch-up reader \(sub\) failed"):
            reader.stop()
    finally:
        reader.kill()
