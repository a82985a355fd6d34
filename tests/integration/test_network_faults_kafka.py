"""Network faults on three local Kafka nodes, each in its own network namespace behind
Toxiproxy: one broker session, four tail reads with a fault each.

What can fail: each fault must strike at its time with the mechanism the probe chose
(veth link down, Toxiproxy toxics, tc tbf) and be undone; a partition of the leader
and a partition of the clients must show as unavailability (acknowledgements stop);
the delay must show in the publish latency during its window (p50 >= the delay); no
acknowledged message may be lost at level 1; every namespace and veth the run made
must be gone afterwards. Needs root, iproute2 and the Toxiproxy server ci/setup.sh
builds; skips with the reason otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.netfault import leftovers, probe_network
from pytest_brokerperf.testing import PLAIN_SCENARIOS

REPO = Path(__file__).resolve().parents[2]
DELAY_MS = 200


def test_partition_delay_bandwidth_and_clients_cut_on_three_kafka_nodes(
        pytester: pytest.Pytester) -> None:
    problem = probe_network().problem("bandwidth")
    if problem:
        pytest.skip(problem)
    before = leftovers()
    results = pytester.path / "res"
    pytester.makeini("[pytest]\n")
    faults = ",".join([f"delay@2s:4s/node-1={DELAY_MS}ms", "partition@2s:5s/leader",
                       "bandwidth@2s:3s/node-2=1mbit", "partition@2s:3s/clients"])
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=kafka", "--brokerperf-provision=process",
        "--brokerperf-nodes=3", "--brokerperf-durability=1", f"--brokerperf-fault={faults}",
        f"--brokerperf-results={results}", "--brokerperf-duration=10",
        "--brokerperf-warmup=2", "--brokerperf-rate=100", "-p", "no:cacheprovider",
        "--brokerperf-inconclusive=warn", "-p", "no:randomly", "--rootdir",
        str(pytester.path), "-v", timeout=900,
    )
    recs = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    by = {r["fault"]["action"] + ("-clients" if "/clients" in r["fault"]["spec"] else ""): r
          for r in recs}
    assert run.parseoutcomes().get("passed") == 4, (run.stdout.str()[-3000:],
                                                    [r["fault"] for r in recs])
    assert set(by) == {"delay", "partition", "bandwidth", "partition-clients"}
    for key, rec in by.items():
        fault, net = rec["fault"], rec["fault"]["network"]
        assert fault["error"] is None, fault
        assert [e["action"] for e in fault["events"]] == [fault["action"], "heal"], fault
        assert fault["lost"] == 0 and fault["verdict"] == "no-loss", (key, fault)
        assert net["applied"] and net["healed"] and net["mechanism"], net
        assert rec["manifest"]["broker"]["info"]["network"]["mechanism"], rec["manifest"]
    delay = by["delay"]["fault"]["network"]
    assert "latency toxic" in delay["applied"] and "node-1-peers" in delay["applied"]
    during = delay["latency_ms"]["during"]["publish"]["p50"]
    assert during is not None and during >= DELAY_MS, delay["latency_ms"]
    part = by["partition"]["fault"]
    assert "down" in part["network"]["applied"] and part["network"]["mechanism"].startswith(
        "veth link down"), part
    assert part["unavailable_s"] > 0, part
    assert "tbf" in by["bandwidth"]["fault"]["network"]["applied"]
    cut = by["partition-clients"]["fault"]
    assert "timeout toxic" in cut["network"]["applied"] and cut["unavailable_s"] > 0, cut
    assert leftovers() == before  # every namespace and veth pair removed
