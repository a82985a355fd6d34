"""benchmarks/native_report.py: the native tools' outputs read as steady-state figures.

The samples are captured outputs of the real tools (Kafka 4.3.1 ProducerPerformance,
pulsar-perf 4.0.6, PerfTest 2.22.1) on this project's local single-node brokers, trimmed
to the lines that matter plus some noise around them. No broker is needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from native_report import (
    Measurement,
    ToolFigures,
    ToolOutputError,
    format_report,
    paired_ratios,
    parse_perftest,
    parse_producer_performance,
    parse_pulsar_perf,
    spread,
)

DRIVERS = Path(__file__).resolve().parents[2] / "pytest_brokerperf" / "data" / "drivers"

KAFKA_MAX = """\
SLF4J: Failed to load class "org.slf4j.impl.StaticLoggerBinder".
Warmup first 400000 records. Steady state results will print after the complete test summary.
87039 records sent, 17232.0 records/sec (16.83 MB/sec), 389.2 ms avg latency, 1748.0 ms max latency.
252000 records sent, 50259.3 records/sec (49.08 MB/sec), 591.9 ms avg latency, 1212.0 ms max latency.
In steady state.
212718 records sent, 42424.8 records/sec (41.43 MB/sec), 269.9 ms avg latency, 897.0 ms max latency.
1400000 records sent, 40580.886403 records/sec (39.63 MB/sec), 216.80 ms avg latency, 1748.00 ms max latency, 67 ms 50th, 728 ms 95th, 953 ms 99th, 1132 ms 99.9th.
1000000 steady state records sent, 41872.539988 records/sec (40.89 MB/sec), 108.59 ms avg latency, 953.00 ms max latency, 32 ms 50th, 586 ms 95th, 757 ms 99th, 880 ms 99.9th.
"""  # noqa: E501

KAFKA_NO_WARMUP = """\
4998 records sent, 999.4 records/sec (0.98 MB/sec), 5.3 ms avg latency, 109.0 ms max latency.
7000 records sent, 991.360997 records/sec (0.97 MB/sec), 19.72 ms avg latency, 1275.00 ms max latency, 5 ms 50th, 67 ms 95th, 86 ms 99th, 132 ms 99.9th.
"""  # noqa: E501


def test_kafka_uses_the_steady_state_summary_not_the_whole_run() -> None:
    fig = parse_producer_performance(KAFKA_MAX)
    assert fig.msg_s == pytest.approx(41872.539988)
    assert (fig.p50_ms, fig.p99_ms, fig.p999_ms) == (32.0, 757.0, 880.0)
    assert "steady" in fig.how


def test_kafka_whole_run_summary_when_there_is_no_warmup() -> None:
    fig = parse_producer_performance(KAFKA_NO_WARMUP)
    assert fig.msg_s == pytest.approx(991.360997)
    assert (fig.p50_ms, fig.p99_ms, fig.p999_ms) == (5.0, 86.0, 132.0)
    assert fig.how == "whole-run summary"


def test_kafka_periodic_lines_alone_are_not_a_result() -> None:
    periodic_only = "\n".join(KAFKA_MAX.splitlines()[:6])
    with pytest.raises(ToolOutputError, match="no summary line"):
        parse_producer_performance(periodic_only)


PULSAR = """\
18:31:21.409 INFO  PerformanceProducer - Created 1 producers
18:31:30.610 INFO  PerformanceProducer - Throughput produced:  169210 msg ---  16727.0 msg/s ---    130.7 Mbit/s  --- failure      0.0 msg/s --- Latency: mean:   0.000 ms - med:   0.000 - 95pct:   0.000 - 99pct:   0.000 - 99.9pct:   0.000 - 99.99pct:   0.000 - Max:   0.000
18:31:41.491 INFO  PerformanceProducer - Throughput produced:  716475 msg ---  47867.4 msg/s ---    374.0 Mbit/s  --- failure      0.0 msg/s --- Latency: mean: 251.780 ms - med: 175.048 - 95pct: 662.315 - 99pct: 913.271 - 99.9pct: 993.071 - 99.99pct: 998.927 - Max: 999.451
18:31:43.428 INFO  PerformanceProducer - ------------- DONE (reached the maximum duration: [22 seconds] of production) --------------
18:31:51.540 INFO  PerformanceProducer - Aggregated throughput stats --- 875150 records sent --- 27003.611 msg/s --- 210.966 Mbit/s
18:31:51.715 INFO  PerformanceProducer - Aggregated latency stats --- Latency: mean: 243.120 ms - med: 176.929 - 95pct: 596.127 - 99pct: 806.519 - 99.9pct: 989.935 - 99.99pct: 998.867 - 99.999pct: 999.067 - Max: 999.451
"""  # noqa: E501


def test_pulsar_rate_comes_from_the_periodic_lines_after_the_warmup() -> None:
    fig = parse_pulsar_perf(PULSAR, warmup_s=10)
    # "Aggregated" says 27,003 msg/s: the warm-up's line and the shutdown are in it
    assert fig.msg_s == pytest.approx(47867.4)
    assert (fig.p50_ms, fig.p99_ms, fig.p999_ms) == (176.929, 806.519, 989.935)
    assert "1 periodic" in fig.how and "Aggregated" in fig.how


def test_pulsar_rate_is_the_mean_of_every_steady_line() -> None:
    line = ("12:00:00.000 INFO  PerformanceProducer - Throughput produced:   1,101,000 msg --- "
            "{rate} msg/s ---    860.2 Mbit/s  --- failure      0.0 msg/s --- Latency: mean:  "
            "10.500 ms - med:   {p50} - 95pct:  20.000 - 99pct:  30.000 - 99.9pct:  45.000 - "
            "99.99pct:  60.000 - Max:  70.000")
    text = "\n".join(line.format(rate=r, p50=p) for r, p in
                     (("16,000.0", "0.000"), ("100,000.0", "8.000"), ("120,000.0", "9.000"),
                      ("110,000.0", "7.000")))
    fig = parse_pulsar_perf(text, warmup_s=10)
    assert fig.msg_s == pytest.approx(110_000.0)
    assert fig.p50_ms == 8.0  # no Aggregated line: median of the steady lines
    assert "3 periodic" in fig.how


def test_pulsar_latency_falls_back_to_the_steady_lines_median() -> None:
    no_agg = "\n".join(ln for ln in PULSAR.splitlines() if "Aggregated" not in ln)
    fig = parse_pulsar_perf(no_agg, warmup_s=10)
    assert (fig.p50_ms, fig.p99_ms, fig.p999_ms) == (175.048, 913.271, 993.071)


def test_pulsar_a_warmup_longer_than_the_run_is_an_error_not_the_aggregate() -> None:
    with pytest.raises(ToolOutputError, match="includes the warm-up"):
        parse_pulsar_perf(PULSAR, warmup_s=20)


def test_pulsar_perf_out_of_memory_is_named_not_run_it_longer() -> None:
    died = ("INFO  PerformanceProducer - Created 1 producers\n"
            'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n'
            "INFO  PerformanceProducer - Aggregated throughput stats --- 2636974 records sent "
            "--- 30773.385 msg/s --- 240.417 Mbit/s\n")
    with pytest.raises(ToolOutputError, match=r"ran out of memory.*more heap"):
        parse_pulsar_perf(died, warmup_s=10)


PERFTEST = """\
id: test-183510-816, starting consumer #0
id: test-183510-816, starting consumer #0, channel #0
id: test-183510-816, starting producer #0
id: test-183510-816, starting producer #0, channel #0
id: test-183510-816, time 1.003 s, sent: 2505 msg/s, confirmed: 2298 msg/s, nacked: 0 msg/s, received: 2203 msg/s, min/median/75th/95th/99th consumer latency: 11111/72719/125287/235563/266797 µs, confirm latency: 6255/37479/95636/217466/232034 µs
id: test-183510-816, time 2.005 s, sent: 6012 msg/s, confirmed: 5685 msg/s, nacked: 0 msg/s, received: 5780 msg/s, min/median/75th/95th/99th consumer latency: 34019/83157/98350/152798/163657 µs, confirm latency: 21954/71331/86959/119476/143332 µs
id: test-183510-816, time 3.005 s, sent: 5396 msg/s, confirmed: 5210 msg/s, nacked: 0 msg/s, received: 5210 msg/s, min/median/75th/95th/99th consumer latency: 66489/139046/176967/211684/222436 µs, confirm latency: 60631/127032/164021/207096/219711 µs
id: test-183510-816, time 4.001 s, sent: 5933 msg/s, confirmed: 6180 msg/s, nacked: 0 msg/s, received: 6180 msg/s, min/median/75th/95th/99th consumer latency: 36556/84703/104227/128327/140124 µs, confirm latency: 33982/79696/98644/114282/128618 µs
id: test-183510-816, time 5.001 s, sent: 6672 msg/s, confirmed: 6646 msg/s, nacked: 0 msg/s, received: 6600 msg/s, min/median/75th/95th/99th consumer latency: 44789/87461/98753/109548/115643 µs, confirm latency: 30355/83928/95127/108876/115054 µs
id: test-183510-816, time 6.001 s, sent: 6608 msg/s, confirmed: 6747 msg/s, nacked: 0 msg/s, received: 6793 msg/s, min/median/75th/95th/99th consumer latency: 44619/80711/90951/102903/117493 µs, confirm latency: 37164/77247/88354/101592/106158 µs
id: test-183510-816, time 7.001 s, sent: 6338 msg/s, confirmed: 6265 msg/s, nacked: 0 msg/s, received: 6201 msg/s, min/median/75th/95th/99th consumer latency: 40109/93706/106899/124602/146853 µs, confirm latency: 37506/87723/101608/121503/143491 µs
test stopped (Reached time limit)
id: test-183510-816, sending rate avg: 5592 msg/s
id: test-183510-816, receiving rate avg: 5569 msg/s
id: test-183510-816, consumer latency min/median/75th/95th/99th 16613/89031/107030/163411/211746 µs
id: test-183510-816, confirm latency min/median/75th/95th/99th 7491/82441/101722/156845/218293 µs
"""  # noqa: E501


def test_perftest_mean_confirmed_rate_and_median_confirm_latency_after_warmup() -> None:
    fig = parse_perftest(PERFTEST, warmup_s=2.0)
    # lines at 3.005 .. 7.001 s: the one at 2.005 s still covers the warm-up
    assert fig.msg_s == pytest.approx((5210 + 6180 + 6646 + 6747 + 6265) / 5)
    assert fig.p50_ms == pytest.approx(83.928)
    assert fig.p99_ms == pytest.approx(128.618)
    assert fig.p999_ms is None
    assert "5 per-second" in fig.how
    assert fig.worst_second_p99_ms == pytest.approx(219.711)  # the 3.005 s line's


def test_the_worst_second_is_printed_per_run_beside_the_medians() -> None:
    """A stall in one second moves a median of per-second p99s not at all: the report
    prints each run's worst second for every side that has one."""
    ms = [Measurement("native", "10000", r, ToolFigures(10000, 1.5, 4.5, None,
                                                        worst_second_p99_ms=w))
          for r, w in enumerate((5.0, 340.0))]
    ms.append(Measurement("harness", "10000", 0, ToolFigures(10000, 1.3, 3.5, 6.0)))
    text = format_report(ms, [("harness", "harness"), ("native", "PerfTest")], ["10000"])
    (row,) = [ln for ln in text.splitlines() if "worst 1-s p99" in ln]
    assert "native" in row and "5.0, 340.0" in row and "(per run)" in row


def test_perftest_without_confirm_lines_is_an_error() -> None:
    with pytest.raises(ToolOutputError, match="--confirm"):
        parse_perftest("id: x, sending rate avg: 100 msg/s\n", warmup_s=0)


def _m(side: str, rate: str, repeat: int, msg_s: float | None) -> Measurement:
    return Measurement(side, rate, repeat, None if msg_s is None else ToolFigures(msg_s),
                       error="" if msg_s is not None else "boom")


def test_ratios_pair_runs_of_the_same_repeat_and_rate() -> None:
    ms = [_m("harness", "max", 0, 80), _m("native", "max", 0, 100),
          _m("harness", "max", 1, 90), _m("native", "max", 1, 200),
          _m("harness", "1000", 0, 1000), _m("native", "1000", 0, 1000)]
    assert paired_ratios(ms, "harness", "native", "max") == [0.8, 0.45]
    assert paired_ratios(ms, "harness", "native", "1000") == [1.0]
    s = spread(paired_ratios(ms, "harness", "native", "max"))
    assert s is not None and (s.low, s.high, s.n) == (0.45, 0.8, 2)


def test_a_failed_run_is_left_out_of_the_ratios_and_listed() -> None:
    ms = [_m("harness", "max", 0, 80), _m("native", "max", 0, None),
          _m("harness", "max", 1, 90), _m("native", "max", 1, 100)]
    assert paired_ratios(ms, "harness", "native", "max") == [0.9]
    text = format_report(ms, [("harness", "harness"), ("native", "tool")], ["max"],
                         ["tool X cannot do Y"])
    assert "1 (1 failed)" in text
    assert "native rate=max repeat=0: boom" in text
    assert "tool X cannot do Y" in text
    assert "min 0.90 median 0.90 max 0.90" in text


def test_the_table_shows_the_harness_worker_cpu_per_rate() -> None:
    ms = [Measurement("harness", "max", 0, ToolFigures(80.0), extra={"worker_cpu_share": 0.97}),
          Measurement("harness", "max", 1, ToolFigures(90.0), extra={"worker_cpu_share": 0.91}),
          Measurement("harness", "1000", 0, ToolFigures(1000.0),
                      extra={"worker_cpu_share": 0.2})]
    lines = format_report(ms, [("harness", "harness")], ["max", "1000"]).splitlines()
    cpu = [ln for ln in lines if "harness worker CPU" in ln]
    assert len(cpu) == 2
    assert "0.94 [0.91-0.97]" in cpu[0] and cpu[0].split()[0] == "max"
    assert cpu[1].split()[0] == "1000" and cpu[1].rstrip().endswith("0.20")


@pytest.mark.parametrize("consume", [True, False])
def test_the_harness_side_runs_the_engine_with_full_recording(consume: bool) -> None:
    """run_harness end to end on the loopback driver (no broker): acked msg/s at the
    offered rate, publish latency percentiles and the worker's CPU share are filled in."""
    from compare_native import run_harness

    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

    endpoint = BrokerEndpoint(kind="loopback", bootstrap="loopback", mode="process")
    m = run_harness(endpoint, "loopback", "2000", 0, warmup_s=0.5, duration_s=1.0,
                    gen_cpus=None, consume=consume)
    assert m.side == ("harness" if consume else "harness-producer")
    assert m.figures is not None and not m.error
    assert m.figures.msg_s > 0
    assert m.figures.p50_ms is not None and m.figures.p99_ms is not None
    # ~2,000 samples resolve p99, not p99.9 (10,000): the engine's rule, shown as "-"
    assert m.figures.p999_ms is None
    assert m.extra["worker_cpu_share"] > 0
    assert (m.extra["consume_msg_s"] > 0) is consume


def test_bare_consumer_with_rabbitmq_is_refused_before_a_broker_starts() -> None:
    """The bare RabbitMQ loop cannot consume: the flag is refused, not silently ignored."""
    from compare_native import main

    with pytest.raises(SystemExit, match="--bare-consumer: the bare RabbitMQ loop"):
        main(["--broker", "rabbitmq", "--bare-consumer", "--sides", "bare"])


def test_kafka_steady_window_is_its_records_over_its_rate() -> None:
    fig = parse_producer_performance(KAFKA_MAX)
    assert fig.window_s == pytest.approx(1_000_000 / 41872.539988)


def test_producer_performance_gets_pre_made_payloads_g1_and_the_harness_idempotence(
        tmp_path: Path) -> None:
    """Equal terms: 100 payloads made once (not a random one per record), the G1 flags of
    kafka-run-class.sh, and enable.idempotence as librdkafka runs it (false), never the
    Java client's default (true)."""
    from compare_native import TOOL_JVM_FLAGS, NativeRunner, NativeTool, kafka_tool_properties

    from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig

    cfg = KafkaDriverConfig.from_yaml(DRIVERS / "kafka-local.yaml")
    runner = NativeRunner("kafka", NativeTool("ProducerPerformance", "Main", "cp/*", "4.3.1"),
                          "java", tmp_path, warmup_s=3, duration_s=10)

    class _Drv:
        config = cfg

        class endpoint:  # the attribute the runner reads
            bootstrap = "127.0.0.1:9092"

    argv, _timeout = runner.kafka_argv(_Drv(), "t", "10000")
    assert "--record-size" not in argv
    payloads = Path(argv[argv.index("--payload-file") + 1]).read_bytes().split(b"\n")
    assert len(payloads) == 100 and {len(x) for x in payloads} == {1024}
    assert len(set(payloads)) == 100
    assert [f for f in TOOL_JVM_FLAGS if f in argv] == list(TOOL_JVM_FLAGS)
    assert "-XX:+UseG1GC" in argv and argv.index("-XX:+UseG1GC") < argv.index("Main")
    props = argv[argv.index("--command-property") + 1:]
    assert "enable.idempotence=false" in props and "acks=all" in props
    assert argv[argv.index("--num-records") + 1] == str(13 * 10000)
    on = cfg.with_overrides(producer={"enable.idempotence": "true"}, reason="test")
    assert kafka_tool_properties(on)["enable.idempotence"] == "true"


def test_perftest_acknowledges_in_batches_like_the_harness(tmp_path: Path) -> None:
    from compare_native import PERFTEST_MULTI_ACK_EVERY, NativeRunner, NativeTool

    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig

    runner = NativeRunner("rabbitmq", NativeTool("PerfTest", "Main", "cp/*", "2.22.1"),
                          "java", tmp_path, warmup_s=3, duration_s=10)

    class _Drv:
        config = RabbitMQDriverConfig.from_yaml(DRIVERS / "rabbitmq-quorum.yaml")

        class endpoint:
            bootstrap = "amqp://guest:guest@127.0.0.1:5672/%2f"

    argv, _ = runner.rabbit_argv(_Drv(), "t", "10000")
    assert argv[argv.index("--multi-ack-every") + 1] == str(PERFTEST_MULTI_ACK_EVERY)
    assert "-XX:+UseG1GC" in argv


def test_no_side_is_always_first_on_the_broker() -> None:
    from compare_native import rotated

    sides = ["harness", "harness-producer", "bare", "native"]
    firsts = {rotated(sides, repeat, 0)[0] for repeat in range(4)}
    assert firsts == set(sides)
    assert rotated(sides, 0, 0)[0] != "harness"
    assert sorted(rotated(sides, 2, 1)) == sorted(sides)


def test_a_run_the_consumer_fell_behind_is_never_the_maximum() -> None:
    """An unsustainable run is printed as such, left out of the side's figures and of
    every ratio; ratios pair sides of one kind only; each side's settings are printed."""
    ms = [Measurement("harness", "max", 0, ToolFigures(160_000.0), sustainable=False,
                      notes=("consumed 80,000 msg/s of the 160,000 acknowledged",)),
          Measurement("harness", "max", 0, ToolFigures(76_000.0),
                      notes=("offered 76,000 msg/s",)),
          Measurement("harness-producer", "max", 0, ToolFigures(200_000.0)),
          Measurement("native", "max", 0, ToolFigures(400_000.0))]
    kinds = {"harness": "end to end", "harness-producer": "producer only",
             "native": "producer only"}
    text = format_report(
        ms, [("harness", "harness"), ("harness-producer", "harness no consumer"),
             ("native", "ProducerPerformance")], ["max"], kinds=kinds,
        ratios=[("harness", "native"), ("harness-producer", "native")],
        settings={"native": ["--payload-file: 100 pre-made payloads"]})
    row = next(ln for ln in text.splitlines() if ln.split()[1:2] == ["harness"])
    assert "76,000" in row and "160,000" not in row and "not sustainable" in row
    assert "NOT SUSTAINABLE, harness repeat 0" in text and "consumed 80,000" in text
    assert "ratio harness-producer/native" in text and "median 0.50" in text
    assert "ratio harness/native" not in text  # end to end against producer only
    assert "settings per side:" in text and "100 pre-made payloads" in text
    assert paired_ratios(ms, "harness", "harness-producer", "max") == [0.38]


def test_the_harness_max_is_followed_by_a_run_it_can_sustain(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An offered-max run whose consumer fell behind is followed by one at 95 % of what
    it consumed; a sustained first run is not followed by anything."""
    import compare_native

    calls: list[float | None] = []

    def fake(endpoint: object, broker: str, rate: str, repeat: int, warmup_s: float,
             duration_s: float, gen_cpus: object, consume: bool = True,
             offered: float | None = None) -> Measurement:
        calls.append(offered)
        behind = offered is None and rate == "max"
        return Measurement("harness", rate, repeat, ToolFigures(150_000.0),
                           extra={"consume_msg_s": 80_000.0}, sustainable=not behind)

    monkeypatch.setattr(compare_native, "run_harness", fake)
    runs = compare_native.run_harness_sustained(None, "kafka", "max", 0, 1, 2, None)
    assert calls == [None, 76_000.0] and [m.sustainable for m in runs] == [False, True]
    calls.clear()
    assert len(compare_native.run_harness_sustained(None, "kafka", "1000", 0, 1, 2, None)) == 1
    assert calls == [None]


@pytest.mark.parametrize(("args", "message"), [
    (["--broker", "rabbitmq", "--sides", "harness-producer"], "--sides harness-producer"),
    (["--broker", "pulsar", "--kafka-idempotence", "on"], "Kafka only"),
])
def test_impossible_sides_are_refused_before_a_broker_starts(args: list[str],
                                                             message: str) -> None:
    from compare_native import main

    with pytest.raises(SystemExit, match=message):
        main(args)


def test_a_consumer_is_behind_by_the_ladder_s_own_tolerance() -> None:
    """One rule for the harness at max and the bare loop that consumes: the throughput
    ladder's rate tolerance (5 %)."""
    from compare_native import consumer_behind

    assert consumer_behind(100_000, 95_000) == []
    assert consumer_behind(100_000, 94_900) == [
        "consumed 94,900 msg/s of the 100,000 acknowledged"]
