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
    faults = ",".join([f"delay@2s:3s/node-1={DELAY_MS}ms", "partition@2s:3s/leader",
                       "bandwidth@2s:2s/node-2=1mbit", "partition@2s:2s/clients"])
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=kafka", "--brokerperf-provision=process",
        "--brokerperf-nodes=3", "--brokerperf-durability=1", f"--brokerperf-fault={faults}",
        f"--brokerperf-results={results}", "--brokerperf-duration=6",
        "--brokerperf-warmup=2", "--brokerperf-rate=100", "--brokerperf-calibration=off",
        "-p", "no:cacheprovider",
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


OWNER = """
import sys, time
from pathlib import Path
from pytest_brokerperf.brokers.provision.netfault import ClusterNet, probe_network
net = ClusterNet(2, Path(sys.argv[1]), probe_network())
net.create()
print(" ".join(n.netns for n in net.nodes), flush=True)
time.sleep(600)
"""


def test_a_sigkilled_session_leaves_no_namespace_and_cleanup_local_removes_a_dead_run_s(
        tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from pytest_brokerperf.brokers.provision.watchdog import cleanup_local

    if probe_network().problem("partition"):
        pytest.skip(probe_network().problem("partition") or "")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    made = owner.stdout.readline().split()
    tag = str(owner.pid % 10_000_000)
    assert len(made) == 2 and set(leftovers(tag)["netns"]) == set(made), leftovers(tag)
    assert len(leftovers(tag)["veth"]) == 2
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    owner.stdout.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(leftovers(tag).values()):
        time.sleep(0.2)
    assert leftovers(tag) == {"netns": [], "veth": []}  # the watchdog removed them

    # a run whose watchdog died too: its state file names the namespace, and
    # `brokerperf cleanup --local` removes it (the owner pid is one that is gone)
    dead = 4_000_000 + os.getpid() % 100_000
    ns, veth = f"bpn{dead}-1", f"bpv{dead}-1"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    subprocess.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                    "netns", ns], check=True)
    token = f"{dead}.1.dead"
    (tmp_path / f"{token}.json").write_text(json.dumps(
        {"token": token, "owner_pid": dead, "netns": [{"netns": ns, "veth": veth}]}))
    assert leftovers(str(dead)) == {"netns": [ns], "veth": [veth]}
    report = cleanup_local(directory=tmp_path)
    assert f"netns {ns}" in report.removed, report.lines
    assert leftovers(str(dead)) == {"netns": [], "veth": []}
