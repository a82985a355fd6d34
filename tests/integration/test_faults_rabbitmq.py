"""Node 1, then node 2 of a three-node local RabbitMQ cluster killed during a tail read.

What can fail: each fault must strike its node at its time and the node must rejoin on
its own data (a new process, serving AMQP); the clients connected to it must fail over
to the other nodes (pika never reconnects by itself; a subscription nobody reads would
look like lost messages) and no other client may — the producer lives on node 1 and the
consumer on node 2 in every run, so the first kill moves the producer and not the
consumer, the second the consumer and not the producer (a third kill, of the node
neither uses, would check nothing these two do not); every acknowledged message must
arrive (durability level 1: quorum queues, persistent messages, confirms after a
majority stored them); nothing may survive.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from pytest_brokerperf.testing import PLAIN_SCENARIOS

REPO = Path(__file__).resolve().parents[2]


def test_kill_each_client_s_node_at_level_1_it_fails_over_and_nothing_is_lost(
        pytester: pytest.Pytester) -> None:
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    faults = ",".join(f"kill-broker@3s:2s/node-{n}" for n in (1, 2))
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=rabbitmq",
        "--brokerperf-nodes=3", "--brokerperf-durability=1", f"--brokerperf-fault={faults}",
        f"--brokerperf-results={results}", "--brokerperf-duration=10",
        "--brokerperf-warmup=30", "-p", "no:cacheprovider", "--brokerperf-inconclusive=warn",
        "-W", "default::pytest_brokerperf.core.warnings.BrokerPerfWarning",
        "-p", "no:randomly", "--rootdir", str(pytester.path), "-v", timeout=900,
    )
    recs = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    seen = [(r["test_id"], r["verdict"]["status"], r["delivery"], r["fault"]) for r in recs]
    assert run.parseoutcomes().get("passed") == 2, (run.stdout.str()[-3000:], seen)
    assert [r["fault"]["node"] for r in recs] == [1, 2]
    moved = []
    for rec in recs:
        fault = rec["fault"]
        assert fault["error"] is None, fault
        assert [e["action"] for e in fault["events"]] == ["kill-broker", "start-broker",
                                                          "serving"], fault
        killed, restarted = fault["events"][0]["pid"], fault["events"][-1]["pid"]
        assert killed != restarted and fault["node_down_s"] >= 2.0
        assert rec["durability"]["level"] == 1
        assert rec["delivery"]["lost"] == 0 and rec["delivery"]["unconfirmed"] == 0, rec[
            "delivery"]
        assert fault["lost"] == 0 and fault["verdict"] == "no-loss"
        nodes = [u.removeprefix("amqp://") for u in rec["manifest"]["driver"]["amqp_uris"]]
        struck = nodes[fault["node"] - 1]
        stats = [json.loads(x) for x in
                 (Path(rec["artefacts"]) / "client-stats.jsonl").read_text().splitlines()]
        clients = {kind: s[kind] for s in stats for kind in s}
        assert set(clients) == {"rabbitmq_producer", "rabbitmq_consumer"}, stats
        assert clients["rabbitmq_producer"]["home_node"] == nodes[0], clients
        assert clients["rabbitmq_consumer"]["home_node"] == nodes[1], clients
        for kind, c in clients.items():
            if c["home_node"] == struck:  # its connection died with the node
                assert c["reconnects"] >= 1 and struck not in c["failed_over_to"], c
                moved.append(kind)
            else:
                assert c["reconnects"] == 0 and c["failed_over_to"] == [], (kind, c, struck)
        for pid in (killed, restarted):
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    assert moved == ["rabbitmq_producer", "rabbitmq_consumer"]
