"""The reassign scenario's rules and figures, where the right answer is known.

The completion rule (out of the in-progress list AND replicas equal the target AND the
new replica in sync — each alone is not enough); during/before ratios from synthetic
periods with a slowdown injected into the move's window only (the after window, slower
still, counts in neither); ratios withheld and the verdict INCONCLUSIVE when the move
did not complete; the throttle configs set and removed; which drivers can move a
partition; the SLO metric names.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig
from pytest_brokerperf.brokers.kafka.driver import KafkaDriver
from pytest_brokerperf.brokers.kafka.reassign import (
    THROTTLE_BROKER_KEYS,
    THROTTLE_TOPIC_KEYS,
    MoveState,
    kafka_python_config,
    movable,
    move_complete,
    throttle_resources,
)
from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.judge.slo import SCALARS, SHIPPED_SLOS, SLO, evaluate
from pytest_brokerperf.judge.verdict import HOST_NOISE, UNDERSAMPLED, VALID, Verdict
from pytest_brokerperf.metrics.histogram import LatencyHistogram
from pytest_brokerperf.metrics.stats import METRICS, PeriodStats
from pytest_brokerperf.scenario_library.reassign import (
    REASSIGN_INCOMPLETE,
    Reassign,
    ReassignPrepared,
    judge_reassign,
    reassign_figures,
    window_ratios,
)

EP = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


def _period(phase: str, publish_us: int, e2e_us: int, n: int = 6000,
            start_s: float = 0.0, errors: int = 0) -> PeriodStats:
    """A period whose every publish and e2e response took exactly the given time."""
    p = PeriodStats(index=0, start_ns=int(start_s * 1e9), elapsed_s=1.0, phase=phase,
                    send_errors=errors)
    p.histograms = {m: LatencyHistogram.for_metric(m) for m in METRICS}
    p.histograms["publish_response"].record_batch([publish_us] * n)
    p.histograms["e2e_response"].record_batch([e2e_us] * n)
    return p


def _prepared(**kw: Any) -> ReassignPrepared:
    return Reassign(message_size=1024, rate=1000, **kw).prepare(_settings(), EP)


# ------------------------------------------------------------------ completion rule


@pytest.mark.parametrize(("in_progress", "replicas", "isr", "target", "done"), [
    (False, (2,), (2,), [2], True),             # moved, in sync
    (True, (2,), (2,), [2], False),             # still listed in progress
    (False, (1, 2), (1, 2), [2], False),        # the old replica not yet removed
    (False, (1,), (1,), [2], False),            # not moved at all
    (False, (2,), (), [2], False),              # the new replica not in the ISR yet
    (False, (3, 2), (2, 3), [2, 3], True),      # order as the controller lists it
    (False, (2, 3), (2,), [2, 3], False),       # one new replica out of sync
])
def test_move_complete_needs_all_three_conditions(in_progress: bool, replicas: tuple[int, ...],
                                                   isr: tuple[int, ...], target: list[int],
                                                   done: bool) -> None:
    state = MoveState(t_s=1.0, in_progress=in_progress, replicas=replicas, isr=isr)
    assert move_complete(state, target) is done


# ------------------------------------------------------------------ windows and ratios


def _windows(during_publish: int = 3000, during_e2e: int = 8000
             ) -> tuple[list[PeriodStats], list[PeriodStats], list[PeriodStats]]:
    before = [_period("measure", 1000, 2000, start_s=float(i)) for i in range(3)]
    during = [_period("reassign", during_publish, during_e2e, start_s=3.0 + i, errors=2)
              for i in range(2)]
    # the after window is slower still: it must count in neither ratio
    after = [_period("after", 50_000, 90_000, start_s=5.0, errors=1)]
    return before, during, after


def _mover(duration: float | None = 1.5, **kw: Any) -> dict[str, Any]:
    final = MoveState(t_s=duration or 9.0, in_progress=duration is None,
                      replicas=(2,) if duration else (1, 2), isr=(2,) if duration else (1,))
    return {"topic": "t-000", "partition": 0, "background_topic": "t-001",
            "brokers": [1, 2, 3], "replicas_before": [1], "target": [2], "final": final,
            "duration_s": duration, "polls": 15, "requested_at": "2026-01-01T00:00:03",
            "request_ns": int(3e9), **kw}


def test_injected_slowdown_gives_the_ratio_of_the_right_windows() -> None:
    before, during, after = _windows(3000, 8000)
    r = window_ratios(before, during)
    assert r["publish_p99_ratio"] == pytest.approx(3.0, rel=0.01)
    assert r["e2e_p99_ratio"] == pytest.approx(4.0, rel=0.01)
    report, figures = reassign_figures(_prepared(), before=before, during=during,
                                       after=after, mover=_mover())
    assert report.publish_p99_ratio == pytest.approx(3.0, rel=0.01)
    # 12,000 responses during the move: enough for p99.9 too
    assert report.publish_p999_ratio == pytest.approx(3.0, rel=0.01)
    assert figures["reassign.publish_p99_ratio"] == report.publish_p99_ratio
    assert figures["reassign.e2e_p99_ratio"] == pytest.approx(4.0, rel=0.01)
    assert figures["reassign.duration_s"] == 1.5 and figures["reassign.complete"] == 1.0
    assert report.publish_response_after_us["p99"] == pytest.approx(50_000, rel=0.01)
    assert (report.send_errors_before, report.send_errors_during,
            report.send_errors_after) == (0, 4, 1)
    assert figures["reassign.send_errors"] == 5.0
    # the series: one row per period, timed from the request
    assert [(row["phase"], row["t_s"]) for row in report.series] == [
        ("measure", -3.0), ("measure", -2.0), ("measure", -1.0), ("reassign", 0.0),
        ("reassign", 1.0), ("after", 2.0)]
    assert report.replicas_after == [2] and report.isr_after == [2]
    assert report.as_dict()["target_replicas"] == [2]


def test_no_slowdown_is_a_ratio_of_one() -> None:
    before, during, _ = _windows(1000, 2000)
    r = window_ratios(before, during)
    assert r["publish_p99_ratio"] == pytest.approx(1.0, rel=0.01)
    assert r["e2e_p99_ratio"] == pytest.approx(1.0, rel=0.01)


def test_incomplete_move_withholds_the_ratios_and_is_inconclusive() -> None:
    before, during, after = _windows()
    report, figures = reassign_figures(_prepared(timeout_s=9), before=before, during=during,
                                       after=after, mover=_mover(duration=None))
    assert not report.complete and report.duration_s is None
    assert figures["reassign.complete"] == 0.0 and figures["reassign.duration_s"] is None
    assert all(figures[f"reassign.{k}"] is None for k in (
        "publish_p99_ratio", "publish_p999_ratio", "e2e_p99_ratio", "e2e_p999_ratio"))
    v = Verdict(status=VALID)
    judge_reassign(v, report)
    assert v.status == REASSIGN_INCOMPLETE and not v.judgeable
    assert "did not complete within 9 s" in v.reasons[0]
    assert "replicas [1, 2], ISR [1]" in v.reasons[0]
    noisy = Verdict(status=HOST_NOISE)  # an inconclusive status is kept, the flag added
    judge_reassign(noisy, report)
    assert noisy.status == HOST_NOISE and REASSIGN_INCOMPLETE in noisy.flags


def test_inconclusive_window_withholds_the_ratios() -> None:
    before, during, after = _windows()
    report, _ = reassign_figures(_prepared(), before=before, during=during, after=after,
                                 mover=_mover(), judgeable=False)
    assert report.complete and report.publish_p99_ratio is None


def test_short_move_is_flagged_undersampled() -> None:
    before = [_period("measure", 1000, 2000)]
    during = [_period("reassign", 3000, 8000, n=200)]
    report, _ = reassign_figures(_prepared(), before=before, during=during, after=[],
                                 mover=_mover())
    assert report.publish_p99_ratio is None and report.publish_samples_during == 200
    v = Verdict(status=VALID)
    judge_reassign(v, report)
    assert v.status == VALID and UNDERSAMPLED in v.flags
    assert "publish_p99_ratio" in v.details["reassign_undersampled"]


# ------------------------------------------------------------------ throttle, config


def test_throttle_set_and_removed_on_the_same_resources() -> None:
    from confluent_kafka.admin import AlterConfigOpType, ResourceType

    set_ = throttle_resources("t-000", 0, [1], [3], 1_048_576)
    rm = throttle_resources("t-000", 0, [1], [3], None, remove=True)
    assert [(r.restype, r.name) for r in set_] == [(r.restype, r.name) for r in rm] == [
        (ResourceType.BROKER, "1"), (ResourceType.BROKER, "3"), (ResourceType.TOPIC, "t-000")]
    for r in set_[:2]:
        entries = {e.name: e for e in r.incremental_configs}
        assert set(entries) == set(THROTTLE_BROKER_KEYS)
        assert all(e.value == "1048576" and e.incremental_operation == AlterConfigOpType.SET
                   for e in entries.values())
    topic = {e.name: e.value for e in set_[2].incremental_configs}
    # leaders: the current replica (broker 1); followers: the new one (broker 3)
    assert topic == {THROTTLE_TOPIC_KEYS[0]: "0:1", THROTTLE_TOPIC_KEYS[1]: "0:3"}
    assert all(e.incremental_operation == AlterConfigOpType.DELETE
               for r in rm for e in r.incremental_configs)


def test_kafka_python_config_maps_connection_and_security() -> None:
    conf = kafka_python_config("a:9092,b:9092", {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "p", "ssl.ca.location": "/ca.pem", "socket.keepalive.enable": True})
    assert conf["bootstrap_servers"] == ["a:9092", "b:9092"]
    assert conf["security_protocol"] == "SASL_SSL" and conf["sasl_mechanism"] == "PLAIN"
    assert conf["sasl_plain_username"] == "u" and conf["sasl_plain_password"] == "p"
    assert conf["ssl_cafile"] == "/ca.pem" and "socket.keepalive.enable" not in conf


def test_prepare_two_single_partition_topics_and_bounds() -> None:
    p = _prepared(delay_s=7, after_s=2, timeout_s=30, throttle_bytes_s=1000)
    assert p.workload.topics == 2 and p.workload.partitions_per_topic == 1
    assert p.workload.producers_per_topic == 1 and p.workload.subscriptions_per_topic == 1
    assert (p.measure_s, p.after_s, p.timeout_s, p.throttle_bytes_s) == (7.0, 2.0, 30.0, 1000)
    assert p.params["throttle_bytes_s"] == 1000
    for bad, match in (({"delay_s": 0}, "delay_s=0"), ({"after_s": -1}, "after_s=-1"),
                       ({"timeout_s": 0}, "timeout_s=0"),
                       ({"throttle_bytes_s": 0}, "throttle_bytes_s=0")):
        with pytest.raises(ValueError, match=match):
            _prepared(**bad)


def test_a_background_topic_of_its_own_partitions_and_rate() -> None:
    """AutoMQ: the moved topic at 40 MiB/s, a 4-partition background topic at 10 MiB/s;
    the producers carry the two rates in their ratio (each offers the same rate)."""
    p = _prepared(background_partitions=4, background_rate=250)
    wl = p.workload
    assert wl.partitions_per_topic_list == (1, 4) and wl.producers_per_topic_list == (4, 1)
    assert (wl.rate_for_topic(0), wl.rate_for_topic(1)) == (1000.0, 250.0)
    assert p.rate == 1250
    assert any("background topic: 4 partition(s), 1 producer(s)" in n for n in p.notes)
    for bad, match in (({"background_rate": 0}, "background_rate=0"),
                       ({"background_partitions": 0}, "background_partitions=0"),
                       ({"background_rate": 1}, "needs more than 16 producers")):
        with pytest.raises(ValueError, match=match):
            _prepared(**bad)
    with pytest.raises(ValueError, match="needs rate="):
        Reassign(message_size=1024, background_rate=10).prepare(_settings(), EP)


def test_a_dry_run_asks_no_broker_whether_a_partition_can_move() -> None:
    pytest.importorskip("kafka")
    from pytest_brokerperf import brokers

    nowhere = BrokerEndpoint(kind="kafka", bootstrap="127.0.0.1:1", mode="process")
    driver = brokers.get("kafka").create_driver(nowhere, None, scenario="reassign")
    single = movable(driver, ask_broker=False)  # returns at once: nothing listens there
    assert single.config.replication_factor == 1


def test_only_kafka_protocol_drivers_can_move_a_partition() -> None:
    with pytest.raises(BrokerUnavailable, match="reassign on loopback: partition reassign"):
        movable(LoopbackDriver())
    tansu = KafkaDriver(endpoint=EP, config=KafkaDriverConfig(), kind="tansu")
    with pytest.raises(BrokerUnavailable, match="reassign on tansu"):
        movable(tansu)


def test_slo_metric_names_registered() -> None:
    for name in ("reassign.duration_s", "reassign.complete", "reassign.send_errors",
                 "reassign.publish_p99_ratio", "reassign.publish_p999_ratio",
                 "reassign.e2e_p99_ratio", "reassign.e2e_p999_ratio"):
        assert name in SCALARS
    assert {s.metric for s in SHIPPED_SLOS["reassign"]} == {"lost", "reassign.complete"}
    res = evaluate([SLO.parse("reassign.publish_p99_ratio < 2")],
                   {"reassign.publish_p99_ratio": 3.0})
    assert res[0].status == "fail"


class _FakeAdmin:
    """incremental_alter_configs recorded; resources named in ``fail`` fail."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (op, resource name, config)
        self.fail = fail

    def incremental_alter_configs(self, resources: list[Any]) -> dict[Any, Any]:
        from concurrent.futures import Future

        from confluent_kafka.admin import ResourceType

        if sum(r.restype == ResourceType.BROKER for r in resources) > 1:
            # as confluent-kafka: a broker resource goes to that broker
            raise ValueError("Only one ConfigResource of type BROKER is allowed per call")
        out = {}
        for r in resources:
            for e in r.incremental_configs:
                self.calls.append((e.incremental_operation.name, r.name, e.name))
            f: Future[None] = Future()
            if r.name in self.fail:
                f.set_exception(RuntimeError(f"broker {r.name} unreachable"))
            else:
                f.set_result(None)
            out[r] = f
        return out


def test_throttle_removed_when_the_move_fails() -> None:
    from pytest_brokerperf.brokers.kafka.reassign import throttled

    admin, state = _FakeAdmin(), {}
    with pytest.raises(RuntimeError, match="the move failed"), \
            throttled(admin, "t-000", 0, [1], [3], 1000, state):
        assert {op for op, _, _ in admin.calls} == {"SET"}
        raise RuntimeError("the move failed")
    sets = {(r, c) for op, r, c in admin.calls if op == "SET"}
    deletes = {(r, c) for op, r, c in admin.calls if op == "DELETE"}
    assert sets == deletes and len(deletes) == 6  # 2 brokers x 2 rates + 2 topic lists
    assert state == {"throttle_removed": True}


def test_throttle_removal_goes_on_past_a_failed_resource_and_says_so() -> None:
    from pytest_brokerperf.brokers.kafka.reassign import throttled

    admin, state = _FakeAdmin(), {}
    with throttled(admin, "t-000", 0, [1], [3], 1000, state):
        admin.fail = ("1",)  # broker 1 is gone by the time the throttle is removed
    deleted = {r for op, r, _ in admin.calls if op == "DELETE"}
    assert deleted == {"1", "3", "t-000"}  # broker 3 and the topic still cleaned up
    assert state["throttle_removed"] is False
    assert "broker 1 unreachable" in state["throttle_errors"][0]


def test_no_throttle_no_config_change() -> None:
    from pytest_brokerperf.brokers.kafka.reassign import throttled

    admin, state = _FakeAdmin(), {}
    with throttled(admin, "t-000", 0, [1], [3], None, state):
        pass
    assert admin.calls == [] and state == {}


def test_the_record_block_is_the_one_the_report_charts() -> None:
    """The HTML report draws before/during bars from a record's ``reassignment`` block
    (report/series.py BLOCKS): the block's name and field names must match it."""
    from pytest_brokerperf.report.series import BLOCKS, before_during

    before, during, after = _windows(3000, 8000)
    report, _ = reassign_figures(_prepared(), before=before, during=during, after=after,
                                 mover=_mover())
    assert "reassignment" in BLOCKS
    pairs = {b.label: (b.before, b.during) for b in before_during(report.as_dict())}
    assert pairs["publish_response p99"] == pytest.approx((1000, 3000), rel=0.01)
    assert pairs["e2e_response p99"] == pytest.approx((2000, 8000), rel=0.01)
