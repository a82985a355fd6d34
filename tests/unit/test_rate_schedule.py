"""AutoMQ's producerRateList as a rate schedule, and the engine following it.

The old code parsed producerRateList and then ran producerRate flat; these tests fail
there (no ``rate_schedule``, one target rate in every period).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.engine.coordinator import run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.scenario_library import CatchUp, TailRead
from pytest_brokerperf.scenario_library.mixed import Mixed
from pytest_brokerperf.scenario_library.throughput import Throughput
from pytest_brokerperf.workload.model import Workload
from pytest_brokerperf.workload.rate_schedule import RateSchedule

EP = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")


def _workload(**kw: Any) -> Workload:
    base: dict[str, Any] = dict(
        name="sched", topics=1, partitions_per_topic=2, message_size=256,
        subscriptions_per_topic=1, producers_per_topic=1, consumer_per_subscription=1,
        producer_rate=1000, test_duration_minutes=1, warmup_duration_minutes=0)
    base.update(kw)
    return Workload(**base)


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


# ------------------------------------------------------------------ the schedule


def test_minutes_form_is_steps_from_the_window_start() -> None:
    s = _workload(producer_rate_list=[[0, 100], [10, 200], [20, 400]]).rate_schedule()
    assert s is not None and s.kind == "elapsed"
    assert [s.rate_at(t) for t in (0, 599.9, 600, 1199, 1200, 99_999)] == [
        100, 100, 200, 200, 400, 400]


def test_minutes_form_before_the_first_point_and_unsorted() -> None:
    s = RateSchedule.from_list([[5, 300], [1, 100]])
    assert s.points == ((60.0, 100.0), (300.0, 300.0))
    assert s.rate_at(0) == 100  # before the first point: its rate (the warm-up's)
    assert s.peak == 300


def test_clock_form_interpolates_and_wraps_like_automq() -> None:
    # AutoMQ's RateGeneratorTest: points 03:00 100, 12:00 1000, 22:00 0
    s = RateSchedule.from_list([[3, 0, 100], [12, 0, 1000], [22, 0, 0]])
    at = lambda h, m=0: s.rate_at(0, datetime(2026, 1, 1, h, m))  # noqa: E731
    assert (at(3), at(12), at(22)) == (100, 1000, 0)
    assert at(7, 30) == pytest.approx(550)  # half way from 03:00 to 12:00
    assert at(0, 30) == pytest.approx(50)  # 22:00 0 -> 03:00 100 across midnight
    assert s.describe()["points"][0] == {"time": "03:00", "rate_msg_s": 100.0}


def test_single_point_is_flat_all_day() -> None:
    s = RateSchedule.from_list([[12, 34, 56]])
    assert s.rate_at(0, datetime(2026, 1, 1, 0, 0)) == 56
    assert s.rate_at(0, datetime(2026, 1, 1, 23, 59)) == 56


def test_no_list_no_schedule() -> None:
    assert _workload().rate_schedule() is None


# ------------------------------------------------------------------ the engine


def test_engine_sets_each_period_to_the_schedule() -> None:
    wl = _workload(producer_rate_list=[[0, 200], [0.02, 600], [0.04, 300]])  # 0, 1.2, 2.4 s
    schedule = wl.rate_schedule()
    plan = RunPlan(rate=600, period_s=0.6, warmup_max_s=0.0, measure_s=3.6, workers=1,
                   topic_prefix="sched", probe_timeout_s=20, rate_schedule=schedule)
    out = run_workload(LoopbackDriver(partitions=2), wl, plan,
                       payloads=wl.payloads(None, seed=1))
    assert [p.target_rate for p in out.periods] == [200, 200, 600, 600, 300, 300]
    # the outcome is judged against the mean offered rate, not the peak
    assert out.plan.rate == pytest.approx((400 + 1200 + 600) / 6, rel=0.05)
    sent = [p.messages_sent / p.elapsed_s for p in out.periods]
    assert sent[3] > 2 * sent[0]  # the rate really changed (600 vs 200 msg/s)
    assert out.delivery.subscriptions[0].lost == 0


# ------------------------------------------------------------------ scenarios


def _file(tmp_path: Path, extra: str) -> str:
    f = tmp_path / "w.yaml"
    f.write_text("name: s\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 256\n"
                 "subscriptionsPerTopic: 1\nproducersPerTopic: 1\nconsumerPerSubscription: 1\n"
                 "producerRate: 1000\ntestDurationMinutes: 1\n" + extra)
    return str(f)


def test_tailread_takes_the_schedule(tmp_path: Path) -> None:
    f = _file(tmp_path, "producerRateList: [[0, 100], [0.5, 400], [2, 50]]\n")
    p = TailRead().prepare(_settings(workload=f), EP)
    assert p.rate_schedule is not None and p.rate_schedule.kind == "elapsed"
    assert p.rate == 400  # sized for the peak
    assert any("after the 15-s measured window" in n for n in p.notes)  # the 120-s step


def test_tailread_refuses_a_fixed_rate_with_a_schedule(tmp_path: Path) -> None:
    f = _file(tmp_path, "producerRateList: [[0, 100]]\n")
    with pytest.raises(ValueError, match=r"w\.yaml:10: producerRateList = \[\[0, 100\]\]: .*"
                       "--brokerperf-rate sets a fixed rate"):
        TailRead().prepare(_settings(workload=f, rate="500"), EP)


@pytest.mark.parametrize("scenario", [CatchUp(), Mixed(), Throughput()],
                         ids=["catchup", "mixed", "throughput"])
def test_other_scenarios_refuse_a_schedule(tmp_path: Path, scenario: Any) -> None:
    f = _file(tmp_path, "producerRateList: [[0, 100]]\n")
    with pytest.raises(ValueError, match=r"w\.yaml:10: producerRateList = \[\[0, 100\]\]: "
                       r"the \w[\w-]* scenario cannot follow a rate schedule .*-m tailread"):
        scenario.prepare(_settings(workload=f), EP)


# ------------------------------------------------------------------ AutoMQ's per-topic lists


def test_engine_honours_per_topic_partitions_and_producers(monkeypatch) -> None:
    from pytest_brokerperf.brokers.loopback import driver as loop

    created: list[tuple[list[str], list[int]]] = []
    monkeypatch.setattr(loop._Admin, "create_topics",
                        lambda self, names, partitions: created.append((names, partitions)))
    wl = _workload(topics=2, partitions_per_topic_list=[1, 4],
                   producers_per_topic_list=[4, 1], producer_rate=1000)
    plan = RunPlan(rate=1000, period_s=0.5, warmup_max_s=0.0, measure_s=1.5, workers=1,
                   topic_prefix="lists", probe_timeout_s=20)
    out = run_workload(LoopbackDriver(partitions=2), wl, plan,
                       payloads=wl.payloads(None, seed=1))
    assert created == [(["lists-000", "lists-001"], [1, 4])]
    # the aggregate rate is shared evenly by the five producers: 4/5 into topic 0
    by_sub = {s.subscription: s.acknowledged for s in out.delivery.subscriptions}
    first, second = by_sub["lists-000-sub000"], by_sub["lists-001-sub000"]
    assert first == pytest.approx(4 * second, rel=0.1)


def test_fixed_topic_names_are_refused() -> None:
    from pytest_brokerperf.core.errors import WorkloadError

    with pytest.raises(WorkloadError, match=r"randomTopicNames \(Python: random_topic_names\) "
                       r"= False: fixed topic names cannot be honoured.*Fix: remove the key"):
        _workload(random_topic_names=False)
