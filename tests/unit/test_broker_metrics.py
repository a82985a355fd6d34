"""Broker-side metrics: Prometheus parsing, per-period figures, alignment with client periods."""

from __future__ import annotations

import contextlib
import csv
import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
from pytest_brokerperf.brokers.kafka.jmx_exporter import agent_flag, render_config
from pytest_brokerperf.brokers.kafka.metrics import kafka_figures
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.metrics.broker import (
    COLUMN_NAMES,
    BrokerMetricsSampler,
    combine,
    parse_prometheus,
    period_figures,
    proc_figures,
    redact_url,
)
from pytest_brokerperf.scenario_library.setup import broker_sampler


def exporter_text(n: int) -> str:
    """What the JMX exporter serves, with counters that grow with ``n``."""
    return f"""# HELP kafka_network_requestmetrics_count x
# TYPE kafka_network_requestmetrics_count untyped
kafka_network_requestmetrics_count{{name="TotalTimeMs",request="Produce",}} {100 * n}.0
kafka_network_requestmetrics_mean{{name="TotalTimeMs",request="Produce",}} {2.0 + n}
kafka_network_requestmetrics_99thpercentile{{name="TotalTimeMs",request="Produce",}} 9.0
kafka_network_requestmetrics_count{{name="RequestQueueTimeMs",request="Produce",}} {100 * n}.0
kafka_network_requestmetrics_mean{{name="RequestQueueTimeMs",request="Produce",}} 0.5
kafka_server_brokertopicmetrics_count{{name="BytesInPerSec",}} {1048576 * n}.0
kafka_server_brokertopicmetrics_count{{name="BytesInPerSec",topic="t",}} 5.0
kafka_server_replicamanager_count{{name="IsrShrinksPerSec",}} {n // 2}.0
kafka_server_replicamanager_value{{name="UnderReplicatedPartitions",}} 0.0
jvm_gc_collection_seconds_count{{gc="G1 Young Generation",}} {n}
jvm_gc_collection_seconds_sum{{gc="G1 Young Generation",}} {0.01 * n}
jvm_gc_collection_seconds_count{{gc="G1 Old Generation",}} 0
jvm_gc_collection_seconds_sum{{gc="G1 Old Generation",}} 0.0
process_cpu_seconds_total {0.5 * n}
weird_metric{{label="with \\"quote\\"",}} +Inf
"""


def test_exporter_output_becomes_node_figures() -> None:
    series = parse_prometheus(exporter_text(3))
    assert series["weird_metric"][0][0] == {"label": 'with "quote"'}
    fig = kafka_figures(series)
    assert fig["produce_total_count"] == 300 and fig["produce_total_mean"] == 5.0
    assert fig["produce_total_p99"] == 9.0
    assert fig["bytes_in_count"] == 3 * 1048576  # the topic-less series, not topic="t"
    assert fig["gc_count"] == 3 and fig["gc_seconds"] == pytest.approx(0.03)
    assert fig["process_cpu_seconds"] == 1.5 and "fetch_total_count" not in fig


def test_period_means_are_exact_from_lifetime_mean_and_count() -> None:
    base = kafka_figures(parse_prometheus(exporter_text(1)))  # mean 3 over 100
    end = kafka_figures(parse_prometheus(exporter_text(2)))  # mean 4 over 200
    fig = period_figures(base, end, elapsed_s=2.0)
    assert fig["produce_total_mean_ms"] == pytest.approx((4 * 200 - 3 * 100) / 100)
    assert fig["produce_requests"] == 100
    assert fig["bytes_in_mib_s"] == pytest.approx(0.5)
    assert fig["isr_shrinks"] == 1 and fig["gc_count"] == 1
    assert fig["gc_ms"] == pytest.approx(10.0)
    assert fig["broker_cpu_cores"] == pytest.approx(0.25)  # process_cpu_seconds_total
    assert fig["under_replicated"] == 0 and fig["disk_write_mib_s"] is None


def test_nodes_combine_by_sum_max_and_weighted_mean() -> None:
    a = {"bytes_in_mib_s": 1.0, "produce_total_p99_ms": 5.0, "produce_total_mean_ms": 2.0,
         "_produce_total_mean_ms_sum": 200.0, "_produce_total_mean_ms_n": 100.0}
    b = {"bytes_in_mib_s": 2.0, "produce_total_p99_ms": 9.0, "produce_total_mean_ms": 8.0,
         "_produce_total_mean_ms_sum": 2400.0, "_produce_total_mean_ms_n": 300.0}
    row = combine([a, b])
    assert row["bytes_in_mib_s"] == 3.0 and row["produce_total_p99_ms"] == 9.0
    assert row["produce_total_mean_ms"] == pytest.approx(2600 / 400)
    assert row["gc_ms"] is None


def test_proc_figures_of_a_live_process() -> None:
    fig = proc_figures(os.getpid())
    assert fig["cpu_seconds"] > 0 and fig["rss_bytes"] > 1e6
    assert "write_bytes" in fig


def test_agent_config_and_flag() -> None:
    text = render_config()
    assert "includeObjectNames:" in text and "IsrShrinksPerSec" in text
    flag = agent_flag(Path("/c/agent.jar"), "127.0.0.1", 7071, Path("/c/cfg.yaml"))
    assert flag == "-javaagent:/c/agent.jar=127.0.0.1:7071:/c/cfg.yaml"


def test_urls_lose_their_credentials() -> None:
    assert redact_url("https://u:pw@h:9/metrics?token=x") == "https://h:9/metrics"


def test_sources_of_an_endpoint() -> None:
    s = Settings.resolve({}, {}, {})
    local = BrokerEndpoint(kind="kafka", bootstrap="b", mode="process", local=LocalProcesses(
        pids=(11, 12), metrics_urls=("http://127.0.0.1:1/metrics",)))
    sampler = broker_sampler(brokers.get(local.kind), local, s)
    assert sampler is not None and sampler.nodes == ["1", "2"]
    assert broker_sampler(brokers.get("loopback"),
                          BrokerEndpoint(kind="loopback", bootstrap="x", mode="process"),
                          s) is None
    off = Settings.resolve({"brokerperf_broker_metrics": "false"}, {}, {})
    assert broker_sampler(brokers.get(local.kind), local, off) is None
    remote = Settings.resolve({"brokerperf_kafka_bootstrap": "h:1",
                               "brokerperf_prometheus": "http://a/m,http://b/m"}, {}, {})
    sampler = broker_sampler(brokers.get("kafka"),
                             BrokerEndpoint(kind="kafka", bootstrap="h:1", mode="remote"),
                             remote)
    assert sampler is not None and sampler.nodes == ["1", "2"]
    assert sampler.kinds == ["prometheus"]


def test_the_sampler_reads_a_scrape_as_the_broker_kind_does() -> None:
    """The kind's reading is handed in (metrics never look a broker up)."""
    from pytest_brokerperf import brokers

    s = Settings.resolve({"brokerperf_prometheus": "http://a/m"}, {}, {})
    kafka = broker_sampler(brokers.get("kafka"),
                           BrokerEndpoint(kind="kafka", bootstrap="b", mode="process"), s)
    assert kafka is not None
    assert kafka._figures == brokers.get("kafka").prometheus_figures
    assert BrokerMetricsSampler.for_sources(remote=True) is None


@pytest.fixture
def exporter() -> Iterator[str]:
    """A local HTTP endpoint whose counters grow by one step per scrape."""
    state = {"n": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state["n"] += 1
            body = exporter_text(state["n"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_sampler_rows_line_up_with_client_periods(exporter: str, tmp_path: Path) -> None:
    sampler = BrokerMetricsSampler([("1", "prometheus", exporter),
                                    ("1", "proc", str(os.getpid()))], figures=kafka_figures)
    sampler.start()
    time.sleep(0.6)  # setup: topics, workers, readiness probe
    start = time.monotonic_ns()
    periods = [("warmup", 0), ("measure", 0), ("measure", 1)]
    for phase, index in periods:
        time.sleep(0.3)
        now = time.monotonic_ns()
        sampler.on_period(SimpleNamespace(phase=phase, index=index, start_ns=start,
                                          elapsed_s=(now - start) / 1e9))
        start = now
    sampler.stop()
    assert sampler.errors == []
    assert [(r.phase, r.index) for r in sampler.rows] == periods
    first, *rest = sampler.rows
    # the first period's base is the pre-boundary scrape nearest its start (<= 125 ms off)
    # (+150 ms: the sampler thread's scheduling on a busy 2-core host)
    assert abs(first.base_offset_ms) <= sampler.PRE_INTERVAL_S * 1000 / 2 + 150
    for prev, row in zip(sampler.rows, rest, strict=False):
        assert row.start_ns == prev.end_ns  # consecutive: base = previous period's end sample
        assert row.base_offset_ms == pytest.approx(prev.lag_ms, abs=0.01)
        assert 0 <= row.lag_ms < 500
        assert row.figures["produce_requests"] == 100  # one exporter step per boundary
        assert row.figures["broker_cpu_cores"] is not None
    sampler.write_csv(tmp_path / "broker-metrics.csv")
    with open(tmp_path / "broker-metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["phase"], r["index"]) for r in rows] == [(p, str(i)) for p, i in periods]
    assert set(COLUMN_NAMES) <= set(rows[0])
    summary = sampler.summary()
    assert summary["measured_periods"] == 2 and summary["nodes"] == 1
    assert summary["measured"]["produce_requests"] == {"mean": 100.0, "max": 100.0}
    assert summary["totals"]["gc_count"] == 2.0
    assert summary["sources"] == ["proc", "prometheus"]


def test_a_dead_endpoint_is_a_gap_not_a_failure() -> None:
    sampler = BrokerMetricsSampler([("1", "prometheus", "http://127.0.0.1:1/metrics")])
    sampler.start()
    now = time.monotonic_ns()
    sampler.on_period(SimpleNamespace(phase="measure", index=0, start_ns=now - 10**9,
                                      elapsed_s=1.0))
    sampler.stop()
    assert len(sampler.rows) == 1 and sampler.rows[0].figures["bytes_in_mib_s"] is None
    assert sampler.errors and "127.0.0.1:1" in sampler.errors[0]


def test_proc_figures_count_the_work_a_wrapper_scripts_child_does(tmp_path: Path) -> None:
    """Debian's ``rabbitmq-server`` is a shell script; the Erlang VM doing the broker's
    work is its child. The figures of the started pid must include it: before, they were
    the idle shell's (0.0 CPU cores, 1.7 MiB, one thread in a RabbitMQ soak)."""
    import subprocess
    import sys

    from pytest_brokerperf.metrics import broker

    child = ("import time\nblob = bytearray(96 * 1024 * 1024)\nt = time.process_time()\n"
             "while time.process_time() - t < 30: pass\n")
    (tmp_path / "child.py").write_text(child)
    # `sh -c 'python ...; true'`: the shell stays the parent instead of exec'ing python
    shell = subprocess.Popen(["sh", "-c", f"{sys.executable} {tmp_path / 'child.py'}; true"])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            broker._trees.clear()
            if len(broker.process_tree(shell.pid)) == 2:
                break
            time.sleep(0.05)
        assert len(broker.process_tree(shell.pid)) == 2
        before = proc_figures(shell.pid)
        time.sleep(1.0)
        after = proc_figures(shell.pid)
        # the shell alone: no CPU, a couple of MiB; with its child: busy, > 96 MiB
        assert after["cpu_seconds"] - before["cpu_seconds"] > 0.3
        assert after["rss_bytes"] > 96 * 1024 * 1024
        assert after["threads"] >= 2
    finally:
        for p in broker._trees.pop(shell.pid, (0.0, ()))[1][1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, 9)
        shell.kill()
        shell.wait(timeout=10)
