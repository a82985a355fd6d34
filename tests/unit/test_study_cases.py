"""Study cases: ids, per-profile scaling, the omb refusal rules, and producer tweaks
written into real driver files that the drivers' own parsers read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.config import Settings
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable
from pytest_brokerperf.scenario_library import CatchUp, Reassign, TailRead, Throughput
from pytest_brokerperf.study_cases import (
    SCALE_LIMITS,
    ProducerTweak,
    StudyCase,
    data_bytes,
    omb_refusals,
    size_id,
)

KIB, MIB, GIB = 1024, 1024**2, 1024**3
KAFKA = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")


def _settings(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize(("n", "want"), [(128, "128B"), (1024, "1KiB"), (1536, "1536B"),
                                         (512 * KIB, "512KiB"), (GIB, "1GiB"),
                                         (1024 * GIB, "1TiB")])
def test_size_ids_are_exact_binary_units(n: int, want: str) -> None:
    assert size_id(n) == want


def test_case_ids_name_what_differs_from_the_defaults() -> None:
    assert StudyCase("s", "t", "tailread", partitions=100, subscriptions=10,
                     rate=200_000).id == "p100-s10-1KiB-r200k"
    assert StudyCase("s", "t", "catchup", partitions=16, backlog_bytes=GIB).id == \
        "p16-1KiB-backlog1GiB"
    assert StudyCase("s", "t", "throughput", partitions=1, message_size=512 * KIB,
                     tweak=ProducerTweak(send_mode="sync")).id == "p1-512KiB-sync"
    assert StudyCase("s", "t", "tailread", producers=4, consumers=4,
                     tweak=ProducerTweak(batch_bytes=200 * KIB, linger_ms=5,
                                         compression="lz4")).id == \
        "p100-4x4-1KiB-batch200KiB-linger5ms-lz4"
    assert str(StudyCase("s", "t", "catchup", backlog_bytes=GIB,
                         producers_during_drain=False)).endswith("-consumer-only")


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"scenario": "latency"}, "expected one of tailread"),
    ({"scenario": "tailread", "partitions": 0}, "partitions=0"),
    ({"scenario": "tailread", "rate": 0}, "rate=0"),
    ({"scenario": "catchup"}, "needs backlog_bytes"),
])
def test_bad_cases_are_refused_when_declared(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        StudyCase("s", "t", **kwargs)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"compression": "brotli"}, "expected one of none, lz4"),
    ({"send_mode": "fire"}, "expected one of async, sync"),
    ({"batch_bytes": 0}, "at least 1 byte"),
    ({"linger_ms": -1}, ">= 0 ms"),
])
def test_bad_tweaks_are_refused(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ProducerTweak(**kwargs)


# --------------------------------------------------------------------------- scaling


def test_omb_keeps_the_study_numbers() -> None:
    case = StudyCase("streamnative", "t", "catchup", partitions=2000, rate=200_000,
                     backlog_bytes=512 * GIB)
    s = case.scaled("omb")
    assert (s.partitions, s.rate, s.backlog_bytes, s.notes) == (2000, 200_000, 512 * GIB, ())


def test_smoke_shrinks_every_dimension_and_says_so() -> None:
    case = StudyCase("streamnative", "t", "catchup", partitions=2000, producers=4,
                     consumers=4, subscriptions=10, rate=200_000, backlog_bytes=512 * GIB)
    s = case.scaled("smoke")
    lim = SCALE_LIMITS["smoke"]
    assert (s.partitions, s.producers, s.consumers) == (lim.partitions, 2, 2)
    assert s.subscriptions == 10  # within the smoke limit: kept
    assert s.rate == lim.rate
    assert s.backlog_bytes == lim.backlog_bytes
    assert "partitions 2000 -> 16" in s.notes
    assert "rate 200k -> 1k msg/s" in s.notes
    assert any(n.startswith("backlog 512 GiB -> 32 MiB") for n in s.notes)
    assert s.labels == {"study": "streamnative", "case": case.id}
    assert "scaled for --brokerperf-profile=smoke" in s.note()


def test_large_messages_shrink_the_rate_by_bytes() -> None:
    case = StudyCase("automq", "t", "tailread", message_size=512 * KIB, rate=1000)
    s = case.scaled("smoke")
    assert s.rate == 4  # 2 MiB/s of 512 KiB messages
    assert s.rate * case.message_size <= SCALE_LIMITS["smoke"].bytes_rate


def test_a_throughput_case_of_large_messages_gets_a_ladder_in_bytes() -> None:
    s = StudyCase("pulsar-limit", "t", "throughput", partitions=1,
                  message_size=512 * KIB).scaled("smoke")
    assert s.rate is None
    assert s.rates is not None and list(s.rates) == sorted(s.rates)
    assert s.rates[-1] * 512 * KIB == pytest.approx(8 * SCALE_LIMITS["smoke"].bytes_rate)
    # small messages keep the profile's own ladder
    assert StudyCase("c", "t", "throughput").scaled("smoke").rates is None


def test_reassign_delay_shrinks() -> None:
    s = StudyCase("automq", "t", "reassign", partitions=1, rate=10_240,
                  after_s=600.0).scaled("standard")
    assert s.reassign_after_s == SCALE_LIMITS["standard"].reassign_after_s


# --------------------------------------------------------------------------- omb refusal


def test_a_rate_above_the_calibrated_generator_is_refused_with_both_numbers() -> None:
    s = StudyCase("c", "t", "tailread", rate=200_000).scaled("omb")
    reasons = omb_refusals(s, generator_rate=150_000.0, generator_what="75,000 x 2",
                           disk_free_bytes=None, disk_where="-", duration_s=180, replicas=1)
    assert len(reasons) == 1
    assert "200k msg/s" in reasons[0] and "75,000 x 2" in reasons[0]
    assert omb_refusals(s, generator_rate=250_000.0, generator_what="", disk_free_bytes=None,
                        disk_where="-", duration_s=180, replicas=1) == []


def test_a_backlog_larger_than_the_disk_is_refused() -> None:
    s = StudyCase("streamnative", "t", "catchup", rate=200_000,
                  backlog_bytes=512 * GIB).scaled("omb")
    reasons = omb_refusals(s, generator_rate=None, generator_what="",
                           disk_free_bytes=30 * GIB, disk_where="/tmp", duration_s=180,
                           replicas=3)
    assert len(reasons) == 1 and "1.5 TiB" in reasons[0] and "30 GiB free" in reasons[0]
    assert omb_refusals(s, generator_rate=None, generator_what="",
                        disk_free_bytes=4096 * GIB, disk_where="/tmp", duration_s=180,
                        replicas=1) == []


def test_data_bytes_counts_the_rate_over_the_run_and_the_replicas() -> None:
    s = StudyCase("c", "t", "tailread", rate=1000, producers=2).scaled("omb")
    assert data_bytes(s, 100.0, 3) == 1000 * 1024 * 2 * 100 * 3
    moved = StudyCase("a", "t", "reassign", partitions=1, rate=1000).scaled("omb")
    assert data_bytes(moved, 10.0, 1) == 2 * 1000 * 1024 * 10  # plus the background topic


# --------------------------------------------------------------------------- tweaks


def test_kafka_tweak_is_written_and_read_back_by_the_kafka_parser(tmp_path: Path) -> None:
    tweak = ProducerTweak(batch_bytes=10 * KIB, linger_ms=5, compression="zstd")
    out = brokers.get("kafka").tweak_driver_file(shipped_driver("kafka-local"), tweak,
                                                 tmp_path / "d.yaml")
    cfg = KafkaDriverConfig.from_yaml(out)
    assert cfg.producer_config.get("batch.size") == "10240"
    assert cfg.producer_config.get("linger.ms") == "5"
    assert cfg.producer_config.get("compression.type") == "zstd"
    assert cfg.producer_config.get("acks") == "all"  # the rest of the file is kept
    assert cfg.replication_factor == 1


def test_kafka_has_no_synchronous_send_mode(tmp_path: Path) -> None:
    with pytest.raises(BrokerUnavailable, match="sync cases run on Pulsar"):
        brokers.get("kafka").tweak_driver_file(shipped_driver("kafka-local"),
                                               ProducerTweak(send_mode="sync"),
                                               tmp_path / "d.yaml")


def test_pulsar_sync_means_one_outstanding_message_and_no_batching(tmp_path: Path) -> None:
    out = brokers.get("pulsar").tweak_driver_file(
        shipped_driver("pulsar-local"), ProducerTweak(send_mode="sync", compression="gzip"),
        tmp_path / "d.yaml")
    cfg = PulsarDriverConfig.from_yaml(out)
    assert cfg.synchronous and cfg.max_outstanding(1) == 1
    assert cfg.producer.batching_enabled is False
    assert cfg.producer.compression_type == "ZLIB"


def test_rabbitmq_has_nothing_to_sweep(tmp_path: Path) -> None:
    with pytest.raises(BrokerUnavailable, match="no producer setting"):
        brokers.get("rabbitmq").tweak_driver_file(Path("x.yaml"),
                                                  ProducerTweak(batch_bytes=KIB),
                                                  tmp_path / "d.yaml")


# --------------------------------------------------------------------------- build


def test_build_gives_each_scenario_its_scaled_numbers(tmp_path: Path) -> None:
    smoke = _settings()
    tail, _ = StudyCase("c", "t", "tailread", partitions=100, producers=4, consumers=4,
                        rate=200_000).build(smoke, KAFKA, tmp_path)
    assert isinstance(tail, TailRead)
    assert (tail.partitions, tail.producers, tail.consumers, tail.rate) == (16, 2, 2, 1000)
    assert tail.driver_file is None  # no tweak: the broker's default driver
    cu, _ = StudyCase("a", "t", "catchup", rate=76_800, message_size=4 * KIB,
                      backlog_bytes=1024 * GIB, producers_during_drain=False
                      ).build(smoke, KAFKA, tmp_path)
    assert isinstance(cu, CatchUp)
    assert cu.backlog_bytes == 32 * MIB and cu.producers_during_drain is False
    assert cu.rate == 512  # 2 MiB/s of 4 KiB
    tp, _ = StudyCase("c", "t", "throughput", tweak=ProducerTweak(batch_bytes=KIB)
                      ).build(smoke, KAFKA, tmp_path)
    assert isinstance(tp, Throughput) and tp.driver_file is not None
    assert KafkaDriverConfig.from_yaml(tp.driver_file).producer_config.get("batch.size") \
        == "1024"
    mv, _ = StudyCase("a", "t", "reassign", partitions=1, rate=10_240, after_s=600.0,
                      throttle_bytes_s=100 * MIB).build(smoke, KAFKA, tmp_path)
    assert isinstance(mv, Reassign)
    assert (mv.after_s, mv.throttle_bytes_s) == (5.0, 100 * MIB)


def test_the_shipped_suite_declares_the_studies_cases() -> None:
    """Every study named in docs/reference/study-cases.md has cases in scenarios/."""
    import importlib

    studies: set[str] = set()
    for mod in ("test_tailread", "test_throughput", "test_catchup", "test_mixed",
                "test_reassign"):
        m = importlib.import_module(f"pytest_brokerperf.suite.{mod}")
        for value in vars(m).values():
            if isinstance(value, list) and value and isinstance(value[0], StudyCase):
                studies.update(c.study for c in value)
    assert studies == {"streamnative", "confluent", "automq", "pulsar-limit"}


def test_the_generator_capacity_is_the_lower_process_bound_ceiling_times_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_brokerperf import calibration
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.study_cases import generator_capacity

    def ceiling(rate: float, bound: str) -> calibration.Ceiling:
        return calibration.Ceiling(target="x", driver="d", broker="b", rate_msg_s=rate,
                                   bound=bound, failed_rate_msg_s=None, limit_reasons=[],
                                   steps=[], message_size=1024, partitions=1,
                                   measured_at="now", duration_s=1.0, cached=True)

    found = {"harness": ceiling(300_000, "client"), "driver": ceiling(120_000, "client")}
    monkeypatch.setattr(calibration, "cached_or_measured",
                        lambda drv, *, target, **kw: found[target])
    s = StudyCase("c", "t", "tailread", producers=4, consumers=4, rate=200_000).scaled("omb")
    driver = LoopbackDriver(partitions=1)
    got = generator_capacity(s, _settings(), (0, 1), measure=True, driver=driver,
                             broker=("kafka", "4.3.1"))
    assert got is not None
    total, what = got
    assert total == 240_000  # the driver's 120k x 2 workers (one per CPU)
    assert "driver ceiling, kafka" in what and "x 2 process(es)" in what
    # a broker-bound driver ceiling is a lower bound: only the harness's counts
    found["driver"] = ceiling(50_000, "broker")
    got = generator_capacity(s, _settings(), (0, 1), measure=True, driver=driver,
                             broker=("kafka", "4.3.1"))
    assert got is not None and got[0] == 600_000
    # calibration off: nothing is claimed
    assert generator_capacity(s, _settings(calibration="off"), (0, 1), measure=True) is None
