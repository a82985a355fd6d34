"""Study cases: ids, per-profile scaling, the omb refusal rules, and producer tweaks
written into real driver files that the drivers' own parsers read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.scenario_library import CatchUp, Reassign, TailRead, Throughput
from pytest_brokerperf.scenario_library.study_cases import (
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
    assert s.labels == {"study": "streamnative", "case": case.id, "study_source": "t"}
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


def test_reassign_delay_and_after_window_shrink_apart() -> None:
    s = StudyCase("automq", "t", "reassign", partitions=1, rate=10_240, delay_s=600.0,
                  after_s=900.0).scaled("standard")
    assert s.reassign_delay_s == SCALE_LIMITS["standard"].reassign_delay_s
    assert s.reassign_after_s == SCALE_LIMITS["standard"].reassign_after_s
    assert "move after 600 s -> 30 s of load" in s.notes
    assert "window after the move 900 s -> 30 s" in s.notes


def test_reassign_background_scales_in_the_studys_ratio() -> None:
    case = StudyCase("automq", "t", "reassign", partitions=1, message_size=4 * KIB,
                     rate=10_240, background_partitions=4, background_rate=2_560)
    s = case.scaled("smoke")
    assert s.rate is not None and s.background_rate is not None
    assert s.rate == 4 * s.background_rate  # 40 : 10 MiB/s
    assert (s.rate + s.background_rate) * 4 * KIB <= SCALE_LIMITS["smoke"].bytes_rate
    assert case.scaled("omb").background_rate == 2_560


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
    # the background topic's own rate, and the load before the move
    bg = StudyCase("a", "t", "reassign", partitions=1, rate=1000, background_rate=250,
                   delay_s=90.0).scaled("omb")
    assert data_bytes(bg, 10.0, 3) == 1250 * 1024 * (10 + 90)  # single-replica topics


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
    mv, _ = StudyCase("a", "t", "reassign", partitions=1, rate=10_240, delay_s=600.0,
                      throttle_bytes_s=100 * MIB).build(smoke, KAFKA, tmp_path)
    assert isinstance(mv, Reassign)
    assert (mv.delay_s, mv.after_s, mv.throttle_bytes_s) == (5.0, None, 100 * MIB)


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
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.judge import calibration
    from pytest_brokerperf.scenario_library.study_cases import generator_capacity

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


# --------------------------------------------------------------------------- the studies as run

SUITE = Path(__file__).resolve().parents[2] / "scenarios"
PULSAR = BrokerEndpoint(kind="pulsar", bootstrap="pulsar://localhost:6650", mode="process")
RABBITMQ = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://localhost:5672", mode="process")
ENDPOINTS = {"kafka": KAFKA, "pulsar": PULSAR, "rabbitmq": RABBITMQ}


def _suite_cases() -> dict[str, list[StudyCase]]:
    """The study cases of this checkout's scenarios/, by list name (loaded by path: the
    installed ``pytest_brokerperf.suite`` may be another checkout's)."""
    import importlib.util

    found: dict[str, list[StudyCase]] = {}
    for path in sorted(SUITE.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_suite_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name, value in vars(mod).items():
            if isinstance(value, list) and value and isinstance(value[0], StudyCase):
                found[name] = value
    return found


def _case(listing: str, study: str, case_id: str) -> StudyCase:
    (hit,) = [c for c in _suite_cases()[listing] if c.study == study and c.id == case_id]
    return hit


def _omb(case: StudyCase, kind: str, tmp_path: Path) -> Any:
    run, scaled = case.build(_settings(profile="omb"), ENDPOINTS[kind], tmp_path)
    assert scaled.notes == ()  # omb keeps the study's numbers
    return run


def test_automq_reassignment_moves_after_ten_minutes_beside_its_background_topic(
        tmp_path: Path) -> None:
    """AutoMQ 3.3: topic A (1 partition) at 40 MiB/s, topic B (4 partitions) at 10 MiB/s,
    A's partition moved after 10 minutes of load, throttled to 100 MiB/s."""
    (case,) = _suite_cases()["REASSIGN_CASES"]
    run = _omb(case, "kafka", tmp_path)
    assert isinstance(run, Reassign)
    assert run.delay_s == 600.0  # the delay before the move, not the window after it
    assert run.after_s is None  # the scenario's own window after the move
    assert run.throttle_bytes_s == 100 * MIB and run.message_size == 4 * KIB
    # one broker holds every replica: refused before any broker starts, not skipped after
    assert case.refusal("kafka", nodes=1, remote=False) == (
        "skip", f"study case automq {case.id} needs --brokerperf-nodes >= 2: moving a "
        "partition needs a broker without a replica of it (the study ran two)")
    assert case.refusal("kafka", nodes=3, remote=False) is None
    prepared = run.prepare(_settings(profile="omb"), KAFKA)
    wl = prepared.workload
    assert prepared.measure_s == 600.0  # the load before the move
    assert wl.partitions_per_topic_list == (1, 4)
    assert wl.rate_for_topic(0) * 4 * KIB == 40 * MIB
    assert wl.rate_for_topic(1) * 4 * KIB == 10 * MIB
    # the moved partition holds the study's order of data at the move (~30 GiB)
    assert wl.rate_for_topic(0) * 4 * KIB * (prepared.warmup_s + prepared.measure_s) \
        > 20 * GIB


def test_confluent_throughput_batches_as_the_study(tmp_path: Path) -> None:
    ladder = [10_000.0, 50_000.0, 100_000.0, 200_000.0, 500_000.0, 1_000_000.0]
    kafka = _omb(_case("THROUGHPUT_CASES", "confluent", "p100-4x4-1KiB-batch1MiB-linger10ms"),
                 "kafka", tmp_path / "k")
    assert isinstance(kafka, Throughput) and list(kafka.rates or ()) == ladder
    assert (kafka.partitions, kafka.producers, kafka.consumers) == (100, 4, 4)
    cfg = KafkaDriverConfig.from_yaml(kafka.driver_file)
    assert cfg.producer_config.get("batch.size") == str(1024 * KIB)
    assert cfg.producer_config.get("linger.ms") == "10"
    pulsar = _omb(_case("THROUGHPUT_CASES", "confluent", "p100-4x4-1KiB-batch1MiB-linger50ms"),
                  "pulsar", tmp_path / "p")
    pcfg = PulsarDriverConfig.from_yaml(pulsar.driver_file)
    assert pcfg.producer.batching_max_bytes == 1024 * KIB
    assert pcfg.producer.batching_max_publish_delay_ms == 50


def _rabbitmq_driver(run: Any) -> Any:
    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig

    return RabbitMQDriverConfig.from_yaml(run.driver_file)


def test_confluent_rabbitmq_runs_its_own_cases(tmp_path: Path) -> None:
    """24 queues on a direct exchange, mirrored to all nodes, not persisted, auto-ack,
    30k msg/s; figure 14 mirrored versus classic at 10k-40k; no 200k case."""
    lat = _omb(_case("TAILREAD_CASES", "confluent", "p24-4x4-1KiB-r30k-mirrored"),
               "rabbitmq", tmp_path)
    assert isinstance(lat, TailRead) and lat.rate == 30_000 and lat.partitions == 24
    cfg = _rabbitmq_driver(lat)
    assert cfg.exchange_type == "DIRECT" and cfg.queue_type == "CLASSIC"
    assert dict(cfg.ha_policy)["ha-mode"] == "all"
    assert cfg.message_persistence is False and cfg.auto_ack is True
    fig14 = [c for c in _suite_cases()["TAILREAD_CASES"]
             if c.source in ("figure 13", "figure 14") and "rabbitmq" in c.brokers]
    assert sorted((c.variant, c.rate) for c in fig14) == sorted(
        (v, float(r)) for v in ("mirrored", "classic") for r in (10_000, 20_000, 30_000, 40_000))
    classic = _rabbitmq_driver(_omb(_case("TAILREAD_CASES", "confluent",
                                          "p24-4x4-1KiB-r40k-classic"), "rabbitmq",
                                    tmp_path / "c"))
    assert classic.ha_policy == () and classic.auto_ack is True
    for cases in _suite_cases().values():
        for c in cases:
            if c.refusal("rabbitmq", nodes=3, remote=False) is None:
                assert c.rate is None or c.rate <= 40_000, c.id


def test_pulsar_perf_cases_carry_the_commands_settings(tmp_path: Path) -> None:
    cases = _suite_cases()["PULSAR_LIMIT"]
    assert sorted((c.tweak.send_mode, c.message_size) for c in cases) == sorted(
        [("sync", s) for s in (128, KIB, 16 * KIB, 512 * KIB)]
        + [("async", s) for s in (128, KIB, 16 * KIB)])
    asyn = _omb(_case("PULSAR_LIMIT", "pulsar-limit", "p1-1KiB-lz4-async"), "pulsar", tmp_path)
    cfg = PulsarDriverConfig.from_yaml(asyn.driver_file)
    assert cfg.producer.compression_type == "LZ4"
    assert cfg.producer.batching_max_messages == 10_000
    assert cfg.memory_limit_bytes() == 2 * GIB
    assert (cfg.client.persistence.ensemble_size, cfg.client.persistence.write_quorum,
            cfg.client.persistence.ack_quorum) == (2, 2, 2)
    sync = _omb(_case("PULSAR_LIMIT", "pulsar-limit", "p1-1KiB-none-sync"), "pulsar",
                tmp_path / "s")
    scfg = PulsarDriverConfig.from_yaml(sync.driver_file)
    assert scfg.synchronous and scfg.producer.batching_enabled is False
    assert scfg.producer.compression_type == "NONE"
    for c in cases:  # the bookie tuning: a local Pulsar is started with it
        assert ("journalFlushWhenQueueEmpty", "true") in c.server_config("pulsar")
        assert ("journalAlignmentSize", "4096") in c.server_config("pulsar")
        for mode in ("process", "container"):
            assert c.refusal("pulsar", nodes=3, remote=False, mode=mode) is None
        # two bookies for the namespace's 2/2/2 persistence
        assert c.refusal("pulsar", nodes=1, remote=False) == (
            "skip", f"study case pulsar-limit {c.id} needs --brokerperf-nodes >= 2: "
            f"{c.min_nodes_why}")


def test_broker_settings_a_kind_cannot_take_are_refused_naming_kind_mode_and_fix() -> None:
    case = StudyCase("mine", "t", "tailread", server_settings=("vm_memory_high_watermark=0.9",))
    assert case.server_config("rabbitmq") == (("vm_memory_high_watermark", "0.9"),)
    assert case.refusal("rabbitmq", nodes=1, remote=False, mode="process") == (
        "skip", f"study case mine {case.id} needs broker settings rabbitmq in process mode "
        "cannot take: vm_memory_high_watermark=0.9. Fix: run it against a cluster "
        "configured so (--brokerperf-provision=remote)")
    assert case.refusal("rabbitmq", nodes=1, remote=True) is None  # a note there
    assert case.refusal("kafka", nodes=1, remote=False, mode="container") is None
    for bad in ("flush", ":a=1", "pulsar:=1"):
        with pytest.raises(ValueError, match=r"server_settings=.*: each is key=value, or "
                           "kind:key=value"):
            StudyCase("mine", "t", "tailread", server_settings=(bad,))
    # a kind's own settings reach that kind only: no refusal, no setting on another
    scoped = StudyCase("mine", "t", "tailread",
                       server_settings=("pulsar:bookkeeperNumberOfChannelsPerBookie=64", "a=1"))
    assert scoped.server_config("pulsar") == (
        ("bookkeeperNumberOfChannelsPerBookie", "64"), ("a", "1"))
    assert scoped.server_config("kafka") == (("a", "1"),)
    assert StudyCase("mine", "t", "tailread", server_settings=(
        "pulsar:x=1",)).refusal("rabbitmq", nodes=1, remote=False) is None


def test_streamnative_cases_say_what_differs(tmp_path: Path) -> None:
    cases = [c for cs in _suite_cases().values() for c in cs if c.study == "streamnative"]
    assert all(c.drop_page_cache for c in cases)
    for c in cases:  # every case: the Pulsar tuning this suite does not apply ...
        notes = " ".join(c.deviations)
        for setting in ("batchingPartitionSwitchFrequencyByPublishDelay=2",
                        "managedLedgerNewEntriesCheckDelayInMillis=0"):
            assert setting in notes, (c.id, setting)
        # ... and the broker setting it does, on Pulsar only
        assert ("bookkeeperNumberOfChannelsPerBookie", "64") in c.server_config("pulsar")
        assert c.server_config("kafka") == ()
    latency = [c for c in cases if c.source in ("table 2", "table 3")]
    for c in latency:
        assert c.rate == 200_000
        assert any("does not state" in a for a in c.assumptions), c.id
    bypass = [c for c in latency if c.variant == "journal-bypass"]
    assert {c.subscriptions for c in bypass} == {1, 10}
    for c in bypass:
        assert c.server_config("pulsar") == (
            ("bookkeeperNumberOfChannelsPerBookie", "64"), ("journalWriteData", "false"),
            ("journalSyncData", "false"))
        # a standalone of its own, started with the bypass (or a remote cluster, noted)
        assert c.refusal("pulsar", nodes=1, remote=False) is None
        assert c.refusal("pulsar", nodes=1, remote=True) is None
        assert c.refusal("kafka", nodes=1, remote=False) == (
            "deselect", f"study case streamnative {c.id} is the study's pulsar case, not "
            "kafka's")


def test_automq_extreme_throughput_and_the_borrowed_drain(tmp_path: Path) -> None:
    run = _omb(_case("TAILREAD_CASES", "automq", "p100-4KiB-r230.4k-batch200KiB"), "kafka",
               tmp_path)
    assert run.rate * 4 * KIB == 900 * MIB
    drain = _case("CATCHUP_CASES", "confluent", "p100-1KiB-r200k-backlog512GiB-consumer-only")
    assert any("borrowed from StreamNative" in a for a in drain.assumptions)


def test_every_shipped_case_names_its_study_and_table() -> None:
    from pytest_brokerperf.report import published
    from pytest_brokerperf.scenario_library.study_cases import STUDIES

    unpublished = {"linger sweep", "compression sweep", "OMB changes"}
    for cases in _suite_cases().values():
        for c in cases:
            assert c.study in STUDIES
            assert STUDIES[c.study].title in c.cite() and c.section, c.id
            if c.source in unpublished:  # no published figure: the case says why
                assert c.deviations or c.assumptions, c.id
            else:
                assert (c.study, c.source) in published.layouts(), (c.study, c.source)


# --------------------------------------------------------------------------- refusals


def test_inapplicable_scenarios_are_deselected_by_the_brokers_declaration() -> None:
    moved = StudyCase("automq", "t", "reassign", partitions=1, rate=1000, delay_s=60.0)
    for kind in ("pulsar", "rabbitmq"):
        refusal = moved.refusal(kind, nodes=3, remote=False)
        assert refusal is not None and refusal[0] == "deselect"
        assert "does not apply to " + kind in refusal[1]
    assert moved.refusal("kafka", nodes=3, remote=False) is None
    mixed = StudyCase("s", "t", "mixed", backlog_bytes=GIB)
    assert mixed.refusal("rabbitmq", nodes=1, remote=False)[0] == "deselect"  # type: ignore[index]
    assert mixed.refusal("pulsar", nodes=1, remote=False) is None
    # a case for Kafka takes the Kafka-protocol brokers
    assert StudyCase("s", "t", "tailread", brokers=("kafka",)).refusal(
        "redpanda", nodes=1, remote=False) is None


def test_a_case_needing_more_nodes_is_refused_with_the_reason() -> None:
    case = StudyCase("c", "t", "tailread", min_nodes=2, min_nodes_why="mirrors need a node")
    assert case.refusal("rabbitmq", nodes=1, remote=False) == (
        "skip", f"study case c {case.id} needs --brokerperf-nodes >= 2: mirrors need a node")
    assert case.refusal("rabbitmq", nodes=3, remote=False) is None
    with pytest.raises(ValueError, match="min_nodes_why"):
        StudyCase("c", "t", "tailread", min_nodes=2)


def test_reassign_settings_on_another_scenario_are_refused() -> None:
    with pytest.raises(ValueError, match="reassignment setting"):
        StudyCase("c", "t", "tailread", delay_s=60.0)
    with pytest.raises(ValueError, match="needs rate="):
        StudyCase("c", "t", "reassign", background_rate=100.0)


def test_the_producer_split_carries_the_two_rates() -> None:
    from pytest_brokerperf.scenario_library.reassign import producer_split

    assert producer_split(40.0, 10.0) == (4, 1)
    assert producer_split(1.0, 1.0) == (1, 1)
    assert producer_split(30.0, 20.0) == (3, 2)
    with pytest.raises(ValueError, match="more than 16 producers"):
        producer_split(1000.0, 1.0)


def test_dropping_the_page_cache_says_why_it_could_not(tmp_path: Path) -> None:
    from pytest_brokerperf.scenario_library.study_cases import drop_page_cache

    target = tmp_path / "drop_caches"
    assert drop_page_cache(target) is None and target.read_text() == "3\n"
    why = drop_page_cache(tmp_path / "absent" / "drop_caches")
    assert why is not None and "was not dropped" in why and "needs root" in why


def test_deviations_and_assumptions_reach_the_record_notes() -> None:
    case = StudyCase("streamnative", "table 2", "tailread", rate=200_000,
                     deviations=("x is not set",), assumptions=("rate assumed",))
    notes = case.scaled("omb").all_notes()
    assert notes[0].startswith("study case streamnative p100-1KiB-r200k (StreamNative, "
                               '"Benchmarking Pulsar and Kafka')
    assert notes[1:] == ["study deviation: x is not set", "study assumption: rate assumed"]


def test_a_bytes_ladder_of_large_messages_repeats_no_rung() -> None:
    """512 KiB under smoke: the ladder's lowest rungs round to 1 msg/s; the case's rates
    and its scaling note name each rung once (the note once said "1, 1, 2, ...")."""
    (case,) = [c for c in _suite_cases()["PULSAR_LIMIT"] if c.message_size == 512 * KIB]
    scaled = case.scaled("smoke")
    assert scaled.rates == (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    assert "ladder 1, 2, 4, 8, 16, 32 msg/s (512KiB messages)" in scaled.note()


def test_a_synchronous_producer_climbs_its_own_ladder_from_100_msg_s() -> None:
    """pulsar-perf's sync cases publish one message at a time: the throughput scenario's
    default first rung (2,000 msg/s) sits above a small machine's round trips and
    brackets nothing, so a sync case without a ladder of its own climbs SYNC_LADDER
    (under every profile; a bytes-capped ladder of large messages still wins)."""
    from pytest_brokerperf.scenario_library.study_cases import SYNC_LADDER

    cases = {c.id: c for c in _suite_cases()["PULSAR_LIMIT"]}
    sync = cases["p1-1KiB-none-sync"]
    assert SYNC_LADDER[0] == 100 and SYNC_LADDER[-1] > 4_146  # above every published rate
    for profile in ("smoke", "omb"):
        assert sync.scaled(profile).rates == SYNC_LADDER
    assert "(a synchronous producer has one message in flight)" in sync.scaled("smoke").note()
    assert cases["p1-512KiB-none-sync"].scaled("smoke").rates == (1, 2, 4, 8, 16, 32)
    assert cases["p1-1KiB-lz4-async"].scaled("smoke").rates is None  # the scenario's own
