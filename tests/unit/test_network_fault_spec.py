"""The network faults' grammar: amounts, the /clients target, canonical text, test ids,
and the errors naming the bad value and the fix."""

from __future__ import annotations

import pytest

from pytest_brokerperf.config.fault_spec import (
    FaultSpec,
    NetAmount,
    fault_ids,
    fault_problem,
    parse_fault,
    parse_faults,
)
from pytest_brokerperf.core.errors import ConfigError


@pytest.mark.parametrize(("text", "canonical", "short", "amount"), [
    ("partition@10s:20s/node-2", "partition@10s:20s/node-2", "partition", None),
    ("partition@5s/clients", "partition@5s:10s/clients", "partition-clients", None),
    ("delay@10s:20s/node-2=50ms~10ms", "delay@10s:20s/node-2=50ms~10ms", "delay",
     NetAmount(delay_ms=50, jitter_ms=10)),
    ("delay@3s=0.2s", "delay@3s:10s/leader=200ms", "delay", NetAmount(delay_ms=200)),
    ("loss@10s/node-1=2.5%", "loss@10s:10s/node-1=2.5%", "loss", NetAmount(loss_pct=2.5)),
    ("bandwidth@5s:5s/clients=10mbit", "bandwidth@5s:5s/clients=10mbit",
     "bandwidth-clients", NetAmount(kbit_s=10_000)),
    ("bandwidth@5s:5s/node-3=512kbit/s", "bandwidth@5s:5s/node-3=512kbit", "bandwidth",
     NetAmount(kbit_s=512)),
    ("bandwidth@5s/node-1=1Gbit", "bandwidth@5s:10s/node-1=1000mbit", "bandwidth",
     NetAmount(kbit_s=1_000_000)),
])
def test_network_faults_parse_to_their_amounts_and_canonical_text(
        text: str, canonical: str, short: str, amount: NetAmount | None) -> None:
    spec = parse_fault(text, "--brokerperf-fault")
    assert spec.network and spec.amount == amount
    assert spec.text() == canonical and spec.short == short
    assert parse_fault(spec.text(), "again") == spec  # the canonical text parses back
    assert spec.clients == text.split("=")[0].endswith("/clients")


def test_amount_values_are_what_the_mechanism_is_given() -> None:
    assert NetAmount(delay_ms=50, jitter_ms=10).values() == {"delay_ms": 50, "jitter_ms": 10}
    assert NetAmount(kbit_s=800).values() == {"jitter_ms": 0.0, "kbit_s": 800}


@pytest.mark.parametrize(("text", "says"), [
    ("delay@5s/node-2", "delay needs an amount. Fix: append =50ms or =50ms~10ms"),
    ("delay@5s=abc", "bad delay amount 'abc'. Fix: =50ms"),
    ("delay@5s=5ms~10ms", "jitter no larger than it, got '5ms~10ms'"),
    ("loss@5s=200%", "bad loss amount '200%'. Fix: =2%"),
    ("loss@5s=2", "bad loss amount '2'. Fix: =2%"),
    ("bandwidth@5s=10mbps", "bad bandwidth amount '10mbps'. Fix: =10mbit"),
    ("bandwidth@5s=4kbit", "a bandwidth below 8 kbit/s, got '4kbit'"),
    ("partition@5s=3ms", "partition takes no amount, got '=3ms'. Fix: drop '=3ms'"),
    ("kill-broker@5s/clients", "only the network faults (partition, delay, loss, "
     "bandwidth) strike the clients"),
    ("kill-broker@5s=3", "kill-broker takes no amount"),
    ("partition@5s/all", "only power-cut strikes every node at once"),
    ("partition@5s/node-x", "target 'node-x' is not 'leader', 'all', 'clients' or node-N"),
])
def test_bad_network_faults_name_the_value_and_the_fix(text: str, says: str) -> None:
    got = fault_problem(text)
    assert isinstance(got, str) and says in got, got
    with pytest.raises(ConfigError, match="--brokerperf-fault: "):
        parse_fault(text, "--brokerperf-fault")


def test_test_ids_tell_network_faults_apart() -> None:
    specs = parse_faults("partition@5s/node-2,partition@5s/clients,delay@5s=10ms", "x")
    assert fault_ids(specs) == ["partition", "partition-clients", "delay"]
    two = parse_faults("delay@5s/node-1=10ms,delay@5s/node-2=10ms", "x")
    assert fault_ids(two) == ["delay-5s-node-1", "delay-5s-node-2"]


def test_process_faults_stay_as_they_were() -> None:
    kill = parse_fault("kill-broker@10s", "x")
    assert kill == FaultSpec("kill-broker", 10.0, 10.0, "leader")
    assert not kill.network and kill.amount is None and kill.text() == "kill-broker@10s:10s/leader"


def test_the_probe_refuses_what_the_machine_cannot_do_with_the_fix() -> None:
    from pytest_brokerperf.brokers.provision.netfault import NetProbe

    here = NetProbe(netns=True, tbf=True, netem=False, gact_netrand=False,
                    toxiproxy="/bin/toxiproxy",
                    missing={"netem": "Specified qdisc kind is unknown."})
    assert here.problem("partition") is None and here.problem("delay") is None
    assert here.problem("bandwidth") is None
    loss = here.problem("loss")
    assert loss is not None and "Specified qdisc kind is unknown." in loss and "Fix:" in loss
    assert NetProbe(True, True, True, False, "/bin/toxiproxy").problem("loss") is None
    no_proxy = NetProbe(True, True, False, False, None).problem("delay")
    assert no_proxy is not None and "ci/setup.sh" in no_proxy
    no_ns = NetProbe(False, False, False, False, "/bin/t", {"netns": "not root"})
    assert "not root" in (no_ns.problem("partition") or "")
    assert "tbf" in (NetProbe(True, False, False, False, "/bin/t").problem("bandwidth") or "")
