"""The harness side by side with the broker's own perf tool and a bare client loop.

Starts ONE local single-node broker with the project's own provisioning, then runs,
alternating and repeated, on the same broker:

* **harness** - the real engine (:class:`~pytest_brokerperf.engine.coordinator.LoadSession`),
  one spawned worker process with full recording (header, five latency views, delivery
  ledgers, stats periods) and one subscription consumed in that same process, as the
  scenarios run it (end to end). Its "max" is what it *sustains*: the offered-max run is
  followed by a run at a fixed rate just under what that run consumed, judged by the
  throughput ladder's own rules; a figure the consumer did not keep up with is printed as
  not sustainable, never as the harness's maximum;
* **harness-producer** - the same engine without a subscription (Kafka, Pulsar): the
  producer-only figure, on the same terms as the producer-only tools;
* **bare** - ``benchmarks/bare_clients.py``: a plain produce loop on the same client
  library and client settings, no pacing at maximum rate, no recording, counting acks;
* **native** - the broker's own tool, resolved from Maven into the jar cache: Kafka's
  ``org.apache.kafka.tools.ProducerPerformance`` (``kafka-tools``, the broker's version),
  Pulsar's ``PulsarPerfTestTool produce`` (``pulsar-testclient``; its closure includes
  the broker, so the broker's own classpath supplies that part), RabbitMQ's PerfTest
  (``com.rabbitmq:perf-test``).

at maximum rate and at fixed rates, and prints msg/s and publish latency p50/p99/p99.9
per generator, producer-only and end-to-end apart, the ratios of sides of the same kind
(min/median/max over the repeats, paired within a repeat), each side's settings and
every setting a generator cannot match. Every generator is pinned to the CPUs the broker
does not use, so each gets the same CPU.

On equal terms (docs/how-to/compare-native.md, "What fair means here"): the native tools
get their best documented settings - ProducerPerformance pre-made payloads
(``--payload-file``) instead of a random payload made per record, the G1 flags of Kafka's
``kafka-run-class.sh`` for every tool JVM (a JVM pinned to one CPU otherwise falls back to
SerialGC), pulsar-perf its script's Netty options, PerfTest ``--multi-ack-every`` like
the harness's one acknowledgement per received batch; Kafka idempotence the same on both
sides (``--kafka-idempotence``); equal warm-up and measured windows (pulsar-perf's 10 s
lines set both for every side); and the order of the sides rotated so that no side is
always first on the broker.

    python benchmarks/compare_native.py --broker kafka [--repeats 3] [--duration 10] \\
        [--rates max,1000,10000] [--warmup 3] [--json out.json]

Run it under the machine's broker lock (it also holds the project's integration-test
broker lock while the broker runs). Tool output is kept under ``--workdir``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_clients import BareSpec
from harness_profile import ProfileSummary, WorkerProfiler
from native_report import (
    PULSAR_PERF_INTERVAL_S,
    Measurement,
    ToolFigures,
    ToolOutputError,
    format_report,
    parse_perftest,
    parse_producer_performance,
    parse_pulsar_perf,
)

BROKERS = ("kafka", "pulsar", "rabbitmq")
SIDES = ("harness", "harness-producer", "bare", "native")
#: sides that consume what they produce (end to end); the others produce only
END_TO_END = {"kafka": ("harness",), "pulsar": ("harness",), "rabbitmq": ("harness", "native")}
#: What every tool JVM runs with: Kafka's ``kafka-run-class.sh`` KAFKA_JVM_PERFORMANCE_OPTS
#: (G1). A JVM limited to one CPU picks SerialGC by itself, which no script ships.
TOOL_JVM_FLAGS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
#: What ``bin/pulsar-perf`` adds for its client: Netty's recycler and allocator sizes and
#: the reflective access its direct buffers and CRC32C need on Java 17.
PULSAR_PERF_JVM_FLAGS = (
    "-Djava.net.preferIPv4Stack=true", "-Dio.netty.recycler.maxCapacityPerThread=4096",
    "-Dio.netty.allocator.maxOrder=10", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dorg.apache.pulsar.shade.io.netty.tryReflectionSetAccessible=true",
    *(flag for module in ("sun.net", "java.lang", "java.util.zip", "java.nio",
                          "jdk.internal.misc")
      for flag in ("--add-opens", f"java.base/{module}=ALL-UNNAMED")))
#: ProducerPerformance's pre-made payloads: this many lines of MESSAGE_SIZE bytes
PAYLOAD_LINES = 100
#: PerfTest's consumer acknowledges with one multiple-ack every this many messages; the
#: harness's consumer acknowledges once per received batch (up to 500 messages)
PERFTEST_MULTI_ACK_EVERY = 100
#: the follow-up run of the harness's "max" offers this share of what the max run consumed
SUSTAIN_SHARE = 0.95
MESSAGE_SIZE = 1024
KAFKA_PARTITIONS = 16
PULSAR_PARTITIONS = 16
PULSAR_TESTCLIENT_VERSION = "4.0.6"  # the newest pulsar-testclient Maven Central serves for 4.0
PERFTEST_VERSION = "2.22.1"
#: Offered rate of the harness "max" runs: far above any broker here, so the worker
#: sends as fast as it can and what is acknowledged is its ceiling.
HARNESS_MAX_OFFER = 1_000_000.0
NATIVE_MAX_RATE_GUESS = 100_000.0  # sizes ProducerPerformance's first max run
TOOL_HEAP = "512m"
#: pulsar-perf holds up to clientMemoryLimitMB (256 MiB) of pending payload on its heap
#: plus a histogram per interval: with 512 MiB its first max-rate run died of
#: OutOfMemoryError (before its first 10 s line) in 2 of 2 sessions.
PULSAR_PERF_HEAP = "1g"


@dataclass(frozen=True)
class NativeTool:
    """A resolved native tool: the classpath and main class to run."""

    name: str
    main_class: str
    classpath: str
    version: str


def resolve_native(broker: str, broker_version: str, broker_lib: str | None) -> NativeTool:
    """Resolve the broker's own perf tool into the jar cache (Maven, once)."""
    from pytest_brokerperf.brokers.provision.maven import Artifact, resolve_classpath

    if broker == "kafka":
        art = Artifact("org.apache.kafka", "kafka-tools", broker_version)
        lib = resolve_classpath("kafka-tools", broker_version, [art])
        return NativeTool("ProducerPerformance", "org.apache.kafka.tools.ProducerPerformance",
                          f"{lib}/*", broker_version)
    if broker == "pulsar":
        # pulsar-testclient depends on pulsar-broker, whose closure does not fully resolve
        # from Maven Central; the broker we run has that closure already: its jars go
        # first (slf4j 2 and the log4j2 binding included), the tool's own after.
        art = Artifact("org.apache.pulsar", "pulsar-testclient", PULSAR_TESTCLIENT_VERSION,
                       ("org.apache.pulsar:pulsar-broker",))
        lib = resolve_classpath("pulsar-testclient", PULSAR_TESTCLIENT_VERSION, [art])
        if not broker_lib:
            raise ToolOutputError("the Pulsar endpoint does not name its lib directory")
        return NativeTool("pulsar-perf produce", "org.apache.pulsar.testclient.PulsarPerfTestTool",
                          f"{broker_lib}/*:{lib}/*", PULSAR_TESTCLIENT_VERSION)
    art = Artifact("com.rabbitmq", "perf-test", PERFTEST_VERSION)
    lib = resolve_classpath("perf-test", PERFTEST_VERSION, [art])
    return NativeTool("PerfTest", "com.rabbitmq.perf.PerfTest", f"{lib}/*", PERFTEST_VERSION)


# -- settings the sides cannot share ------------------------------------------------------


def mismatches(broker: str, driver: Any) -> list[str]:
    """What still differs between the generators once every documented setting is
    matched (each side's own settings are printed beside the table)."""
    common = [
        "the harness records five latency views, delivery ledgers and 1 s periods; the bare "
        "loop records nothing and measures no latency",
        "at max the harness offers 1,000,000 msg/s open-loop: its publish latency then "
        "includes client-queue time, as the tools' does at their max",
    ]
    if broker == "kafka":
        return [
            *common,
            "ProducerPerformance runs the Java client (kafka-clients): buffer.memory 32 MiB "
            "(~32k messages of 1 KiB in flight) against librdkafka's queue of 100,000 "
            "messages / 1 GiB",
            "ProducerPerformance produces only: compare it with the producer-only harness; "
            "the end-to-end harness has no Kafka tool beside it (OMB's Java worker is that "
            "anchor)",
            "ProducerPerformance's window is a record count (its rate estimated from the "
            "previous max run): the window each run took is in the 'window s' column",
            "ProducerPerformance latency: send() to callback; the harness's: librdkafka's "
            "produce-to-ack time (Message.latency())",
        ]
    if broker == "pulsar":
        return [
            *common,
            "pulsar-perf: Java client 4.0.7 (the broker's jars) driven by the 4.0.6 "
            "testclient (4.0.7 is not published)",
            "pulsar-perf produces only: compare it with the producer-only harness",
            "pulsar-perf latency: send to callback per message; the harness's likewise "
            "(callback time minus send time)",
            "bare pulsar-client loop: no client memory limit (the Python client has none; "
            "the harness's driver enforces clientMemoryLimitMB itself, pulsar-perf gets -ml)",
            *(["sendCallbacks=perSlice (harness and bare loop): one producer per partition, "
               "one Python callback per slice of up to batchingMaxBytes; pulsar-perf: one "
               "partitioned producer, a Java callback per message"]
              if driver.config.producer.send_callbacks == "perSlice" else []),
        ]
    return [
        *common,
        f"PerfTest acknowledges every {PERFTEST_MULTI_ACK_EVERY} messages (--multi-ack-every); "
        "the harness once per received batch, whose size follows the rate",
        "PerfTest reports confirm latency min/median/75th/95th/99th only: no p99.9",
        "PerfTest's per-second percentiles are combined as their median (no merged "
        "histogram), which hides a stalled second: compare the 'worst 1-s p99' rows",
        "bare loop declares the quorum queue but has no consumer (the queue grows)",
    ]


# -- the runs ----------------------------------------------------------------------------


#: The driver YAML every side's settings come from (None: the shipped local default);
#: ``--pulsar-callbacks perSlice`` writes one with ``sendCallbacks: perSlice``.
DRIVER_FILE: Path | None = None
#: ``--bare-consumer``: the bare loop also consumes its topic in its process (Kafka, Pulsar)
BARE_CONSUMES = False


def _offered(rate: str) -> float:
    return HARNESS_MAX_OFFER if rate == "max" else float(rate)


def consumer_behind(acked: float, consumed: float) -> list[str]:
    """Why a consumer did not keep up with what was acknowledged (empty: it did), with
    the throughput ladder's own rate tolerance."""
    from pytest_brokerperf.judge import ladder as lad

    if consumed >= (1 - lad.LadderPolicy().rate_tolerance) * acked:
        return []
    return [f"consumed {consumed:,.0f} msg/s of the {acked:,.0f} acknowledged"]


def run_harness(endpoint: Any, broker: str, rate: str, repeat: int, warmup_s: float,
                duration_s: float, gen_cpus: tuple[int, ...] | None,
                consume: bool = True, offered: float | None = None) -> Measurement:
    """The engine, one worker process, one producer and (``consume``) one consumer.

    End to end (``consume``) the run is judged as the throughput ladder judges a rung
    (:func:`~pytest_brokerperf.judge.ladder.judge_rung`: acknowledged at the offered
    rate, consumed as fast, no growing backlog): ``sustainable`` says so. ``offered``
    replaces the rate label's own offer (the follow-up of a "max" run)."""
    from pytest_brokerperf.brokers import create_driver
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import Rung, RunPlan
    from pytest_brokerperf.judge import ladder as lad
    from pytest_brokerperf.workload.model import Workload

    partitions = {"kafka": KAFKA_PARTITIONS, "pulsar": PULSAR_PARTITIONS}.get(broker, 1)
    offer = offered if offered is not None else _offered(rate)
    at_max = offer >= HARNESS_MAX_OFFER
    driver = create_driver(endpoint, DRIVER_FILE, stats_interval_ms=0)
    wl = Workload(name="compare-native", topics=1, partitions_per_topic=partitions,
                  message_size=MESSAGE_SIZE, subscriptions_per_topic=int(consume),
                  producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=int(min(offer, 2**31 - 1)),
                  test_duration_minutes=1, warmup_duration_minutes=0)
    side = "harness" if consume else "harness-producer"
    plan = RunPlan(rate=offer, period_s=1.0, warmup_max_s=warmup_s, measure_s=duration_s,
                   workers=1, topic_prefix=f"cmp-{side}-{rate}-{repeat}-{os.getpid()}",
                   drain_timeout_s=5.0, flush_timeout_s=10.0, generator_cpus=gen_cpus)
    with LoadSession(driver, wl, plan, payloads=wl.payloads(None, seed=1)) as s:
        out = s.run_rung(Rung(offer, warmup_s, duration_s, warmup_until_steady=not at_max))
        s.finish()
    h = out.cumulative["publish_latency"]

    def ms(q: float) -> float | None:
        v = h.percentile(q)
        return None if v is None else float(v) / 1000.0

    cpu = sum(w.cpu_s for p in out.periods for w in p.workers)
    seconds = [p.histograms["publish_latency"].percentile(99) for p in out.periods
               if p.phase == "measure" and "publish_latency" in p.histograms]
    worst = max((float(v) / 1000.0 for v in seconds if v is not None), default=None)
    sustainable = True
    notes: tuple[str, ...] = ()
    if consume:
        # an open-loop offer of 1M is never met: at max only the consumer's pace counts
        failures = (consumer_behind(out.ack_rate, out.consume_rate) if at_max else
                    lad.judge_rung(lad.RungSignals.from_outcome(out, subscriptions_per_topic=1)))
        sustainable, notes = not failures, tuple(failures)
    if offered is not None:
        notes = (f"offered {offer:,.0f} msg/s", *notes)
    return Measurement(side, rate, repeat,
                       ToolFigures(out.ack_rate, ms(50), ms(99), ms(99.9),
                                   how="engine: acked msg/s and publish_latency of the "
                                       "measured periods",
                                   worst_second_p99_ms=worst, window_s=out.measured_s),
                       extra={"worker_cpu_share": cpu / out.measured_s if out.measured_s else 0.0,
                              "consume_msg_s": out.consume_rate},
                       sustainable=sustainable, notes=notes)


def run_harness_sustained(endpoint: Any, broker: str, rate: str, repeat: int,
                          warmup_s: float, duration_s: float,
                          gen_cpus: tuple[int, ...] | None) -> list[Measurement]:
    """The end-to-end harness at ``rate``; at "max" the offered-max run, and, when its
    consumer fell behind, a second run at :data:`SUSTAIN_SHARE` of what it consumed: the
    harness's "max" is what it sustains (the ladder's word), not what it acknowledged."""
    first = run_harness(endpoint, broker, rate, repeat, warmup_s, duration_s, gen_cpus)
    if rate != "max" or first.figures is None or first.sustainable:
        return [first]
    consumed = min(first.extra.get("consume_msg_s") or 0.0, first.figures.msg_s)
    offer = round(SUSTAIN_SHARE * consumed, -2)
    if offer < 100:
        return [first]
    then = run_harness(endpoint, broker, rate, repeat, warmup_s, duration_s, gen_cpus,
                       offered=offer)
    return [first, then]


def _run_process(argv: list[str], log: Path, cpus: tuple[int, ...] | None,
                 timeout_s: float, name: str, env: dict[str, str] | None = None) -> int | None:
    """Run one generator process to its end (bounded); always stopped on the way out."""
    from pytest_brokerperf.brokers.provision.process import ManagedProcess

    proc = ManagedProcess(argv, log_file=log, name=name, cpus=cpus, env=env)
    proc.start()
    try:
        return proc.wait(timeout_s)
    finally:
        proc.stop(timeout=5.0)


def bare_spec(broker: str, driver: Any, topic: str, rate: str, warmup_s: float,
              duration_s: float) -> BareSpec:
    """The bare loop's settings, taken from the same driver config as the harness's."""
    offered = 0.0 if rate == "max" else float(rate)
    if broker == "kafka":
        conf = dict(driver.config.producer_settings(driver.endpoint.bootstrap))
        conf.pop("bootstrap.servers", None)
        return BareSpec(address=driver.endpoint.bootstrap, topic=topic, rate=offered,
                        warmup_s=warmup_s, duration_s=duration_s, message_size=MESSAGE_SIZE,
                        client={k: v for k, v in conf.items() if isinstance(v, str | int | float
                                                                            | bool)})
    if broker == "pulsar":
        return BareSpec(address=driver.service_url, topic=driver.full_topic(topic), rate=offered,
                        warmup_s=warmup_s, duration_s=duration_s, message_size=MESSAGE_SIZE,
                        client=driver.client_kwargs(),
                        producer=driver.config.producer_kwargs(producer_name=None),
                        slice_bytes=(driver.config.producer.batching_max_bytes
                                     if driver.config.producer.send_callbacks == "perSlice"
                                     else 0))
    cfg = driver.config
    return BareSpec(address=driver.endpoint.bootstrap.split(",")[0], topic=topic, rate=offered,
                    warmup_s=warmup_s, duration_s=duration_s, message_size=MESSAGE_SIZE,
                    queue=f"{topic}-q", routing_key="0",
                    queue_arguments=cfg.queue_declare_arguments(),
                    persistent=cfg.message_persistence, max_pending=cfg.max_pending_confirms)


def _rabbit_cleanup(uri: str, queue: str, exchange: str | None) -> None:
    import pika

    with contextlib.suppress(Exception):
        conn = pika.BlockingConnection(pika.URLParameters(uri))
        try:
            ch = conn.channel()
            ch.queue_delete(queue)
            if exchange:
                ch.exchange_delete(exchange)
        finally:
            conn.close()


def run_bare(endpoint: Any, broker: str, rate: str, repeat: int, warmup_s: float,
             duration_s: float, gen_cpus: tuple[int, ...] | None, workdir: Path) -> Measurement:
    from pytest_brokerperf.brokers import create_driver

    driver: Any = create_driver(endpoint, DRIVER_FILE, stats_interval_ms=0)
    topic = f"cmp-bare-{rate}-{repeat}-{os.getpid()}"
    admin = driver.admin() if broker != "rabbitmq" else None
    spec = bare_spec(broker, driver, topic, rate, warmup_s, duration_s)
    spec.consume = BARE_CONSUMES
    log = workdir / f"bare-{rate}-{repeat}.log"
    try:
        if admin is not None:
            parts = KAFKA_PARTITIONS if broker == "kafka" else PULSAR_PARTITIONS
            admin.create_topics([topic], [parts])
        argv = [sys.executable, str(Path(__file__).with_name("bare_clients.py")), broker,
                "--spec", json.dumps(asdict(spec))]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        rc = _run_process(argv, log, gen_cpus, warmup_s + duration_s + 90, "bare", env)
    finally:
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.delete_topics([topic])
            admin.close()
        if broker == "rabbitmq":
            _rabbit_cleanup(spec.address, spec.queue, spec.topic)
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("{")]
    if not lines:
        return Measurement("bare", rate, repeat, None,
                           error=f"exit {rc}, no result line; see {log}")
    doc = json.loads(lines[-1])
    if doc.get("error") or not doc.get("seconds"):
        return Measurement("bare", rate, repeat, None,
                           error=f"{doc.get('error') or 'no window'}; see {log}")
    acked = float(doc["msg_s"])
    consumed = float(doc.get("consume_msg_s") or 0.0)
    behind = consumer_behind(acked, consumed) if spec.consume else []
    return Measurement("bare", rate, repeat,
                       ToolFigures(acked, how="acks counted in the window",
                                   window_s=float(doc["seconds"])),
                       extra={"consume_msg_s": consumed} if spec.consume else {},
                       sustainable=not behind, notes=tuple(behind))


def _write_log4j2(path: Path) -> None:
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<Configuration status="WARN">\n'
        '  <Appenders><Console name="out" target="SYSTEM_OUT">'
        '<PatternLayout pattern="%d{HH:mm:ss.SSS} %-5level %c{1} - %m%n"/></Console></Appenders>\n'
        '  <Loggers>\n'
        '    <Logger name="org.apache.pulsar.testclient" level="info"/>\n'
        '    <Root level="warn"><AppenderRef ref="out"/></Root>\n'
        '  </Loggers>\n'
        '</Configuration>\n', encoding="utf-8")


def write_payload_file(path: Path, lines: int = PAYLOAD_LINES, size: int = MESSAGE_SIZE,
                       seed: int = 1) -> Path:
    """``lines`` payloads of exactly ``size`` bytes, one per line, for ProducerPerformance's
    ``--payload-file`` (split on its default delimiter, a newline: so none inside)."""
    import random
    import string

    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    path.write_text("\n".join("".join(rng.choices(alphabet, k=size)) for _ in range(lines)),
                    encoding="ascii")
    return path


def kafka_idempotence(config: Any) -> str:
    """``enable.idempotence`` as the harness's librdkafka producer runs it: the driver
    file's value, else librdkafka's default (false; the Java client's default is true)."""
    for props in (config.producer_config, config.common_config):
        value = str(props.get("enable.idempotence", "")).strip().lower()
        if value:
            return value
    return "false"


def kafka_tool_properties(config: Any) -> dict[str, str]:
    """The producer properties ProducerPerformance gets: the driver file's acks, linger
    and batch size, and idempotence set as the harness runs it (never the Java default)."""
    props = config.producer_config
    keep = {k: str(props[k]) for k in ("acks", "linger.ms", "batch.size") if k in props}
    keep["enable.idempotence"] = kafka_idempotence(config)
    return keep


class NativeRunner:
    """Builds and runs the native tool's command line for one measurement."""

    def __init__(self, broker: str, tool: NativeTool, java: str, workdir: Path,
                 warmup_s: float, duration_s: float) -> None:
        self.broker, self.tool, self.java, self.workdir = broker, tool, java, workdir
        self.warmup_s, self.duration_s = warmup_s, duration_s
        self.max_estimate = NATIVE_MAX_RATE_GUESS  # updated from each max run
        self.measured_max = False

    def jvm(self) -> list[str]:
        heap = PULSAR_PERF_HEAP if self.broker == "pulsar" else TOOL_HEAP
        extra = PULSAR_PERF_JVM_FLAGS if self.broker == "pulsar" else ()
        return [self.java, f"-Xms{heap}", f"-Xmx{heap}", *TOOL_JVM_FLAGS, *extra,
                "-cp", self.tool.classpath]

    def payload_file(self) -> Path:
        """ProducerPerformance's pre-made payloads (written once per workdir)."""
        path = self.workdir / "payloads.txt"
        if not path.exists():
            write_payload_file(path)
        return path

    def kafka_argv(self, driver: Any, topic: str, rate: str) -> tuple[list[str], float]:
        per_s = self.max_estimate if rate == "max" else float(rate)
        warm = int(per_s * self.warmup_s)
        total = warm + int(per_s * self.duration_s)
        argv = [*self.jvm(), self.tool.main_class, "--bootstrap-server",
                driver.endpoint.bootstrap, "--topic", topic, "--num-records", str(total),
                "--warmup-records", str(warm), "--payload-file", str(self.payload_file()),
                "--throughput", "-1" if rate == "max" else str(int(float(rate))),
                "--command-property",
                *(f"{k}={v}" for k, v in kafka_tool_properties(driver.config).items())]
        # a max run lasts total/actual-rate: allow a slow broker three times the estimate
        return argv, (self.warmup_s + self.duration_s) * 3 + 60

    def pulsar_argv(self, driver: Any, topic: str, rate: str) -> tuple[list[str], float]:
        warm = math.ceil(max(self.warmup_s, 1.0) / 10.0) * 10
        total = warm + math.ceil(self.duration_s / 10.0) * 10 + 2
        conf = self.workdir / "pulsar-perf-client.conf"
        conf.write_text(f"brokerServiceUrl={driver.service_url}\n"
                        f"webServiceUrl={driver.admin_url}\n", encoding="utf-8")
        log4j = self.workdir / "pulsar-perf-log4j2.xml"
        _write_log4j2(log4j)
        c = driver.config.client
        p = driver.config.producer
        mem_mb = driver.config.memory_limit_bytes() // (1024 * 1024)
        argv = [*self.jvm(), f"-Dlog4j2.configurationFile={log4j}", self.tool.main_class,
                str(conf), "produce", "-u", driver.service_url, "-au", driver.admin_url,
                "-r", str(int(_offered(rate))), "-s", str(MESSAGE_SIZE), "-n", "1",
                "-time", str(total), "--warmup-time", str(warm),
                "-b", str(p.batching_max_publish_delay_ms),
                "-bb", str(p.batching_max_bytes), "-bm", str(min(p.batching_max_messages,
                                                                  2**31 - 1)),
                "-o", str(max(p.pending_queue_size, 0)),
                "-p", str(max(p.max_pending_messages_across_partitions, 0)),
                "-ioThreads", str(c.io_threads), "-c", str(c.connections_per_broker),
                "--send-timeout", str(p.send_timeout_ms // 1000),
                *(["-ml", f"{mem_mb}M"] if mem_mb else []),
                *(["-db"] if not p.batching_enabled else []),
                driver.full_topic(topic)]
        self.pulsar_warm = float(warm)
        return argv, total + 90

    def rabbit_argv(self, driver: Any, topic: str, rate: str) -> tuple[list[str], float]:
        cfg = driver.config
        total = math.ceil(self.warmup_s + self.duration_s)
        argv = [*self.jvm(), self.tool.main_class, "--uri", driver.endpoint.bootstrap.split(",")[0],
                "--producers", "1", "--consumers", "1", "--size", str(MESSAGE_SIZE),
                "--quorum-queue", "--queue", f"{topic}-q", "--exchange", topic,
                "--routing-key", "0", "--flag", "persistent",
                "--confirm", str(cfg.max_pending_confirms), "--qos", str(cfg.prefetch_count),
                "--multi-ack-every", str(PERFTEST_MULTI_ACK_EVERY),
                "--time", str(total), "--interval", "1"]
        if rate != "max":
            argv += ["--rate", str(int(float(rate)))]
        return argv, total + 90

    def run(self, endpoint: Any, rate: str, repeat: int, gen_cpus: tuple[int, ...] | None
            ) -> Measurement:
        from pytest_brokerperf.brokers import create_driver

        driver: Any = create_driver(endpoint, DRIVER_FILE, stats_interval_ms=0)
        topic = f"cmp-native-{rate}-{repeat}-{os.getpid()}"
        log = self.workdir / f"native-{rate}-{repeat}.log"
        admin = driver.admin() if self.broker != "rabbitmq" else None
        try:
            if admin is not None:
                parts = KAFKA_PARTITIONS if self.broker == "kafka" else PULSAR_PARTITIONS
                admin.create_topics([topic], [parts])
            build = {"kafka": self.kafka_argv, "pulsar": self.pulsar_argv,
                     "rabbitmq": self.rabbit_argv}[self.broker]
            argv, timeout_s = build(driver, topic, rate)
            rc = _run_process(argv, log, gen_cpus, timeout_s, self.tool.name.split()[0])
        finally:
            if admin is not None:
                with contextlib.suppress(Exception):
                    admin.delete_topics([topic])
                admin.close()
            if self.broker == "rabbitmq":
                _rabbit_cleanup(endpoint.bootstrap.split(",")[0], f"{topic}-q", topic)
        text = log.read_text(errors="replace")
        try:
            if self.broker == "kafka":
                fig = parse_producer_performance(text)
            elif self.broker == "pulsar":
                fig = parse_pulsar_perf(text, self.pulsar_warm)
            else:
                fig = parse_perftest(text, self.warmup_s)
        except ToolOutputError as e:
            return Measurement("native", rate, repeat, None, error=f"exit {rc}: {e}; see {log}")
        if rate == "max" and fig.msg_s > 0:
            self.max_estimate = fig.msg_s
            self.measured_max = True
        return Measurement("native", rate, repeat, fig)


# -- main --------------------------------------------------------------------------------


@contextlib.contextmanager
def _broker_lock() -> Iterator[None]:
    """The integration tests' lock: never two brokers of this project at once."""
    from pytest_brokerperf.brokers.provision.maven import cache_root

    path = cache_root() / ".integration-brokers.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def parse_rates(text: str) -> list[str]:
    """``max,1000,10000`` → ``["max", "1000", "10000"]``; a bad entry is named."""
    out: list[str] = []
    for item in (t.strip() for t in text.split(",")):
        if item == "max":
            out.append(item)
            continue
        try:
            value = float(item)
        except ValueError:
            value = -1.0
        if value <= 0:
            raise SystemExit(f"--rates: {item!r} is neither 'max' nor a positive msg/s")
        out.append(str(int(value)) if value == int(value) else str(value))
    if not out:
        raise SystemExit("--rates is empty: give e.g. max,1000,10000")
    return out


def _cluster(broker: str) -> Any:
    if broker == "kafka":
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

        return KafkaProcessCluster()
    if broker == "pulsar":
        from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

        return PulsarStandalone()
    from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster

    return RabbitMQProcessCluster()


def side_kind(broker: str, side: str, bare_consumes: bool) -> str:
    """"end to end" for a side that consumes what it produces, else "producer only"."""
    if side in END_TO_END[broker] or (side == "bare" and bare_consumes):
        return "end to end"
    return "producer only"


#: ratios worth printing, each only between sides of one kind
RATIOS = (("harness", "native"), ("harness-producer", "native"), ("harness", "bare"),
          ("harness-producer", "bare"))


def rotated(sides: list[str], repeat: int, rate_index: int) -> list[str]:
    """The sides in the order they run in one round at one rate: shifted by one more
    every round and every rate, so that no side is always first on the broker (the first
    run of round 0 is never the harness's when other sides run)."""
    k = (repeat + rate_index + 1) % len(sides)
    return sides[k:] + sides[:k]


def default_sides(broker: str) -> list[str]:
    """Every side the broker has: RabbitMQ has no producer-only harness (its subscription
    queue is its consumer's)."""
    return [s for s in SIDES if not (broker == "rabbitmq" and s == "harness-producer")]


def side_settings(broker: str, driver: Any, tool: NativeTool | None, *, warmup_s: float,
                  duration_s: float, bare_consumes: bool) -> dict[str, list[str]]:
    """What each side ran with, printed under the table beside the figures."""
    window = f"{warmup_s:g} s warm-up, {duration_s:g} s measured"
    cfg = driver.config
    if broker == "kafka":
        client = (f"acks={cfg.producer_config.get('acks')}, linger.ms="
                  f"{cfg.producer_config.get('linger.ms')}, batch.size="
                  f"{cfg.producer_config.get('batch.size')}, enable.idempotence="
                  f"{kafka_idempotence(cfg)}")
    elif broker == "pulsar":
        p = cfg.producer
        client = (f"batching {p.batching_max_publish_delay_ms} ms / {p.batching_max_bytes:,} "
                  f"bytes, sendCallbacks={p.send_callbacks}, {cfg.client.io_threads} I/O "
                  f"threads, {cfg.client.connections_per_broker} connections")
    else:
        client = (f"quorum queue, persistent, {cfg.max_pending_confirms:,} unconfirmed, "
                  f"prefetch {cfg.prefetch_count:,}")
    out = {
        "harness": [f"{_client_name(broker)} as the driver file sets it: {client}",
                    "one worker process: 1 producer + 1 consumer (manual multiple ack per "
                    "received batch of up to 500), 5 latency views, delivery ledgers",
                    "payload: one pre-made 1 KiB payload with the harness header",
                    f"{window}; max: offered 1,000,000 msg/s, then (consumer behind) "
                    f"{SUSTAIN_SHARE:.0%} of what it consumed, judged by the ladder's rules"],
        "harness-producer": [f"as harness without the consumer: {client}", window],
        "bare": [f"the same client and driver settings: {client}",
                 "no pacing at max, no recording" + (", a thread consuming" if bare_consumes
                                                      else ", produce only"),
                 window],
    }
    if tool is not None:
        heap = PULSAR_PERF_HEAP if broker == "pulsar" else TOOL_HEAP
        jvm = f"JVM -Xmx{heap} {' '.join(TOOL_JVM_FLAGS[:2])} (kafka-run-class.sh's G1 flags)"
        if broker == "kafka":
            native = [f"{tool.name} {tool.version} (Java client): {client}",
                      f"--payload-file: {PAYLOAD_LINES} pre-made payloads of {MESSAGE_SIZE} "
                      "bytes (not --record-size, which makes a random payload per record)",
                      f"{window} (by record count: --warmup-records, then the window the "
                      "steady records took, shown per run)", jvm]
        elif broker == "pulsar":
            native = [f"{tool.name} {tool.version}: {client} (-b, -bb, -bm, -o, -p, "
                      "-ioThreads, -c, -ml)", f"{window} (its 10 s lines)",
                      jvm + ", bin/pulsar-perf's Netty options"]
        else:
            native = [f"{tool.name} {tool.version}: {client}, 1 producer + 1 consumer, "
                      f"--multi-ack-every {PERFTEST_MULTI_ACK_EVERY}", window, jvm]
        out["native"] = native
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", choices=BROKERS, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0,
                    help="warm-up seconds per run (pulsar-perf: rounded up to its 10 s lines)")
    ap.add_argument("--rates", default="max,1000,10000")
    ap.add_argument("--sides", default=None,
                    help="subset of harness,harness-producer,bare,native (default: every side "
                    "the broker has; RabbitMQ has no harness-producer)")
    ap.add_argument("--broker-warmup", type=float, default=20.0,
                    help="seconds of bare-loop load at max rate before the first round, not "
                    "measured (a fresh broker is slower at first; 0 = none)")
    ap.add_argument("--kafka-idempotence", choices=("off", "on"), default="off",
                    help="Kafka: enable.idempotence for the harness, the bare loop and "
                    "ProducerPerformance alike (off: librdkafka's default; the Java client's "
                    "own default, on, is never left to differ)")
    ap.add_argument("--profile", action="store_true",
                    help="run py-spy on the harness worker during the first harness run at "
                    "--profile-rate and print its threads' and top frames' shares of the "
                    "samples")
    ap.add_argument("--profile-rate", default="max",
                    help="the rate (one of --rates) whose first harness run --profile samples")
    ap.add_argument("--pulsar-callbacks", choices=("perMessage", "perSlice"),
                    default="perMessage",
                    help="Pulsar: the driver's sendCallbacks for the harness and the bare loop "
                    "(perSlice: one producer per partition, a callback per slice)")
    ap.add_argument("--bare-consumer", action="store_true",
                    help="Kafka, Pulsar: the bare loop also consumes its topic in its own "
                    "process (a thread counting messages), the same client work as the "
                    "harness's worker")
    ap.add_argument("--workdir", default=None, help="tool logs (default: a new temp dir)")
    ap.add_argument("--json", default=None, help="write every measurement to this file")
    args = ap.parse_args(argv)
    rates = parse_rates(args.rates)
    profile_rate = parse_rates(args.profile_rate)[0]
    if args.profile and profile_rate not in rates:
        raise SystemExit(f"--profile-rate {args.profile_rate}: not one of --rates {rates}")
    sides = ([s.strip() for s in args.sides.split(",") if s.strip()] if args.sides
             else default_sides(args.broker))
    bad = [s for s in sides if s not in SIDES]
    if bad or not sides or args.repeats < 1 or args.duration <= 0:
        raise SystemExit(f"bad --sides {bad} / --repeats {args.repeats} / --duration "
                         f"{args.duration}: sides are {', '.join(SIDES)}, the rest positive")
    if args.kafka_idempotence == "on" and args.broker != "kafka":
        raise SystemExit("--kafka-idempotence on: Kafka only")
    if args.bare_consumer and args.broker == "rabbitmq":
        raise SystemExit("--bare-consumer: the bare RabbitMQ loop is one pika connection that "
                         "only publishes (the harness's consumer has its own); use it with "
                         "--broker kafka or pulsar.")
    global BARE_CONSUMES
    BARE_CONSUMES = args.bare_consumer
    if "harness-producer" in sides and args.broker == "rabbitmq":
        raise SystemExit("--sides harness-producer: RabbitMQ subscription queues are created by "
                         "their consumers; without one the exchange routes to no queue and "
                         "confirms come back for messages stored nowhere. Use it with "
                         "--broker kafka or pulsar.")
    warmup_s, duration_s = args.warmup, args.duration
    if args.broker == "pulsar" and "native" in sides:
        # pulsar-perf reports every 10 s: its warm-up and window are whole lines, and every
        # side gets the same ones
        warmup_s = math.ceil(max(warmup_s, 1.0) / PULSAR_PERF_INTERVAL_S) * PULSAR_PERF_INTERVAL_S
        duration_s = math.ceil(duration_s / PULSAR_PERF_INTERVAL_S) * PULSAR_PERF_INTERVAL_S
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"compare-native-{args.broker}-"))
    workdir.mkdir(parents=True, exist_ok=True)

    from pytest_brokerperf.brokers import create_driver
    from pytest_brokerperf.brokers.provision.maven import KAFKA_DEFAULT_VERSION

    tool = None
    if "native" in sides and args.broker != "pulsar":  # pulsar's needs the broker's lib dir
        tool = resolve_native(args.broker, KAFKA_DEFAULT_VERSION, None)
    ms: list[Measurement] = []
    profile: ProfileSummary | None = None
    with _broker_lock(), _cluster(args.broker) as cluster:
        endpoint = cluster.endpoint
        if "native" in sides and tool is None:
            tool = resolve_native(args.broker, endpoint.version, endpoint.info.get("lib"))
        aff = endpoint.info.get("cpu_affinity") or {}
        gen = aff.get("generator_cpus")
        gen_cpus = tuple(gen) if gen and aff.get("broker_cpus") else None
        global DRIVER_FILE
        if args.broker == "kafka" and args.kafka_idempotence == "on":
            kcfg = create_driver(endpoint, None, stats_interval_ms=0).config  # type: ignore[attr-defined]
            DRIVER_FILE = kcfg.with_overrides(
                producer={"enable.idempotence": "true"}, reason="--kafka-idempotence on",
            ).to_yaml(workdir / "kafka-idempotent.yaml")
        if args.broker == "pulsar" and args.pulsar_callbacks != "perMessage":
            cfg = create_driver(endpoint, None, stats_interval_ms=0).config  # type: ignore[attr-defined]
            DRIVER_FILE = cfg.with_overrides(
                producer={"send_callbacks": args.pulsar_callbacks},
                reason=f"--pulsar-callbacks {args.pulsar_callbacks}",
            ).to_yaml(workdir / f"pulsar-{args.pulsar_callbacks}.yaml")
        driver: Any = create_driver(endpoint, DRIVER_FILE, stats_interval_ms=0)
        print(json.dumps({"broker": args.broker, "version": endpoint.version,
                          "broker_cpus": aff.get("broker_cpus"), "generator_cpus": gen_cpus,
                          "native_tool": None if tool is None else f"{tool.name} {tool.version}",
                          "warmup_s": warmup_s, "duration_s": duration_s,
                          "workdir": str(workdir)}), flush=True)
        native = (NativeRunner(args.broker, tool, _find_java(), workdir, warmup_s,
                               duration_s) if tool is not None else None)
        if args.broker_warmup > 0:
            w = run_bare(endpoint, args.broker, "max", -1, 0.0, args.broker_warmup, gen_cpus,
                         workdir)
            print(json.dumps({"broker_warmup_s": args.broker_warmup,
                              "msg_s": None if w.figures is None else round(w.figures.msg_s),
                              "error": w.error or None}), flush=True)
        for repeat in range(args.repeats):
            for ri, rate in enumerate(rates):
                for side in rotated(sides, repeat, ri):
                    t0 = time.monotonic()
                    spy = None
                    if (args.profile and profile is None and side == "harness"
                            and rate == profile_rate):
                        # sample the measured part: after setup (~3 s) and the warm-up
                        spy = WorkerProfiler(workdir / "harness-profile.txt",
                                             delay_s=warmup_s + 3.0,
                                             duration_s=max(1.0, duration_s - 3.0)).start()
                    try:
                        if side == "harness":
                            runs = run_harness_sustained(endpoint, args.broker, rate, repeat,
                                                         warmup_s, duration_s, gen_cpus)
                        elif side == "harness-producer":
                            runs = [run_harness(endpoint, args.broker, rate, repeat, warmup_s,
                                                duration_s, gen_cpus, consume=False)]
                        elif side == "bare":
                            runs = [run_bare(endpoint, args.broker, rate, repeat, warmup_s,
                                             duration_s, gen_cpus, workdir)]
                        else:
                            assert native is not None
                            runs = [native.run(endpoint, rate, repeat, gen_cpus)]
                    except Exception as e:  # one failed run must not lose the others
                        runs = [Measurement(side, rate, repeat, None,
                                            error=f"{type(e).__name__}: {e}".splitlines()[0])]
                    ms.extend(runs)
                    m = runs[-1]
                    if spy is not None:
                        profile = spy.result()
                        print(json.dumps({"profile": f"harness {rate}",
                                          "samples": profile.samples,
                                          "error": profile.error or None,
                                          "raw": str(workdir / "harness-profile.txt")}),
                              flush=True)
                    if (side == "bare" and rate == "max" and native is not None
                            and not native.measured_max and m.figures is not None):
                        native.max_estimate = m.figures.msg_s  # sizes the first tool run
                    for run in runs:
                        f = run.figures
                        print(json.dumps({"repeat": repeat, "rate": rate, "side": side,
                                          "msg_s": None if f is None else round(f.msg_s),
                                          "p50_ms": None if f is None else f.p50_ms,
                                          "p99_ms": None if f is None else f.p99_ms,
                                          "p999_ms": None if f is None else f.p999_ms,
                                          "window_s": None if f is None else f.window_s,
                                          **{k: round(v, 3) for k, v in run.extra.items()},
                                          "sustainable": run.sustainable,
                                          "notes": list(run.notes) or None,
                                          "error": run.error or None,
                                          "wall_s": round(time.monotonic() - t0, 1)}),
                              flush=True)
        notes = mismatches(args.broker, driver)
        settings = side_settings(args.broker, driver, tool, warmup_s=warmup_s,
                                 duration_s=duration_s, bare_consumes=BARE_CONSUMES)
    labels = {"harness": "harness (1 worker, full recording)",
              "harness-producer": "harness (1 worker, no consumer)",
              "bare": f"bare {_client_name(args.broker)} loop"
                      + (" + consumer" if BARE_CONSUMES else ""),
              "native": tool.name if tool is not None else "native"}
    print()
    print(f"{args.broker} {endpoint.version}, single node; {args.repeats} repeat(s) x "
          f"{duration_s:g} s measured after {warmup_s:g} s warm-up; 1 KiB messages; "
          f"generators pinned to CPUs {list(gen_cpus) if gen_cpus else 'unpinned'}; "
          "sides in rotated order")
    print(format_report(ms, [(s, labels[s]) for s in sides], rates, notes,
                        kinds={s: side_kind(args.broker, s, BARE_CONSUMES) for s in sides},
                        ratios=RATIOS, settings=settings), end="")
    if profile is not None:
        print()
        print(f"Where the harness worker's time goes ({profile_rate} rate, repeat 0, "
              "with its consumer):")
        print("\n".join(profile.lines()))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(m) for m in ms], indent=2) + "\n",
                                   encoding="utf-8")
    return 0 if all(m.figures is not None for m in ms) else 1


def _find_java() -> str:
    """The JDK the project starts brokers with (``find_java`` lives in
    ``provision.java`` on newer trees, in ``brokers.kafka.process`` before)."""
    import importlib

    for module in ("pytest_brokerperf.brokers.provision.java",
                   "pytest_brokerperf.brokers.kafka.process"):
        try:
            find = importlib.import_module(module).find_java
        except (ImportError, AttributeError):
            continue
        return str(find(None))
    raise SystemExit("no find_java in pytest_brokerperf: cannot locate the JDK for the tools")


def _client_name(broker: str) -> str:
    return {"kafka": "confluent-kafka", "pulsar": "pulsar-client", "rabbitmq": "pika"}[broker]


if __name__ == "__main__":
    sys.exit(main())
