"""A remote cluster that stops answering mid-run stops the run; a blip or one node down
does not (pytest_brokerperf/engine/liveness.py), on an injected clock and probe."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import pytest

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.core.errors import BrokerDied, ClusterLost
from pytest_brokerperf.engine.liveness import (
    REMOTE_LOSS_S,
    Address,
    LossTracker,
    RemoteWatch,
    probe_addresses,
    tcp_probe,
)

A, B = ("10.0.0.1", 9092), ("10.0.0.2", 9092)
REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


def _remote(bootstrap: str, kind: str = "kafka", **info: object) -> BrokerEndpoint:
    return BrokerEndpoint(kind=kind, bootstrap=bootstrap, mode="remote", info=dict(info))


class Counters:
    """The clients' lifetime totals, as the coordinator reads them from its workers."""

    def __init__(self) -> None:
        self.acked = self.received = self.reads = 0

    def __call__(self) -> Mapping[str, int]:
        self.reads += 1
        return {"acked": self.acked, "received": self.received}


def _down(*addrs: Address) -> dict[Address, str | None]:
    return dict.fromkeys(addrs, REFUSED)


def _run(tracker: LossTracker, rounds: list[dict[Address, str | None]], counts: Counters,
         step_s: float = 0.5) -> tuple[float, ClusterLost | None]:
    """One probe round then one check every ``step_s``; the time and error of the stop."""
    t = 0.0
    for results in rounds:
        t += step_s
        tracker.observe(t, results)
        lost = tracker.decide(t, counts)
        if lost is not None:
            return t, lost
    return t, None


def test_every_address_down_past_the_bound_with_nothing_moving_is_a_loss() -> None:
    tracker = LossTracker("kafka", "10.0.0.1:9092,10.0.0.2:9092", bound_s=5.0)
    counts = Counters()
    t, lost = _run(tracker, [{A: None, B: None}] * 4 + [_down(A, B)] * 30, counts)
    assert lost is not None and isinstance(lost, BrokerDied)
    assert 2.0 + 5.0 <= t <= 2.0 + 5.5  # down from t=2.5, first look then, 5 s later
    msg = str(lost)
    assert "remote kafka cluster at 10.0.0.1:9092,10.0.0.2:9092" in msg
    assert f"10.0.0.1:9092: {REFUSED}" in msg and f"10.0.0.2:9092: {REFUSED}" in msg
    assert "for 5.0 s" in msg and "REMOTE_LOSS_S" in msg
    assert counts.reads == 2  # read only while down: at the first look and at the bound


def test_a_blip_shorter_than_the_bound_never_stops_the_run() -> None:
    tracker = LossTracker("kafka", "10.0.0.1:9092", bound_s=5.0)
    counts = Counters()
    blip = [_down(A)] * 9 + [{A: None}]  # 4.5 s down, then it answers again
    _, lost = _run(tracker, (blip * 4), counts)
    assert lost is None
    assert tracker.down_since is None and tracker.errors == {}


def test_one_node_of_several_down_is_not_a_loss() -> None:
    """A fault scenario's (or an operator's) node outage: the others still answer."""
    tracker = LossTracker("kafka", "10.0.0.1:9092,10.0.0.2:9092", bound_s=5.0)
    counts = Counters()
    _, lost = _run(tracker, [{A: REFUSED, B: None}] * 40, counts)
    assert lost is None and counts.reads == 0


def test_messages_still_moving_veto_the_probes() -> None:
    """Probes refused (a firewall on new connections) while acks still arrive: measure on;
    once they stop too, the bound counts from the last move."""
    tracker = LossTracker("kafka", "10.0.0.1:9092", bound_s=5.0)
    counts = Counters()
    t = 0.0
    for _ in range(30):
        t += 0.5
        counts.acked += 100
        tracker.observe(t, _down(A))
        assert tracker.decide(t, counts) is None
    moved_last = t
    for _ in range(30):
        t += 0.5
        tracker.observe(t, _down(A))
        lost = tracker.decide(t, counts)
        if lost is not None:
            break
    assert lost is not None
    assert moved_last + 5.0 <= t <= moved_last + 10.5
    assert "3000 acknowledged" in str(lost)


def test_probe_addresses_cover_each_client_address_form() -> None:
    assert probe_addresses(_remote("h1:9092,h2:9093", brokers=["1@h3:9092", "2@h1:9092"])) == (
        ("h1", 9092), ("h2", 9093), ("h3", 9092))
    assert probe_addresses(_remote("pulsar://p1:6650,p2:6651", "pulsar")) == (
        ("p1", 6650), ("p2", 6651))
    assert probe_addresses(_remote("pulsar+ssl://p1", "pulsar")) == (("p1", 6651),)
    assert probe_addresses(_remote("amqp://r1/vh,amqps://r2:5999/", "rabbitmq")) == (
        ("r1", 5672), ("r2", 5999))
    assert probe_addresses(_remote("[::1]:9092")) == (("::1", 9092),)


def test_only_remote_endpoints_are_watched() -> None:
    assert RemoteWatch.for_endpoint(None) is None
    local = BrokerEndpoint(kind="kafka", bootstrap="127.0.0.1:9092", mode="process")
    assert RemoteWatch.for_endpoint(local) is None
    watch = RemoteWatch.for_endpoint(_remote("h1:9092"))
    assert watch is not None and watch.tracker.bound_s == REMOTE_LOSS_S


def test_the_watch_probes_and_raises_on_the_injected_clock() -> None:
    now = [0.0]
    answering = {A: True, B: True}

    def probe(address: Address, timeout_s: float) -> str | None:
        return None if answering[address] else f"TimeoutError: {address[0]} timed out"

    watch = RemoteWatch(_remote("10.0.0.1:9092,10.0.0.2:9092"), probe=probe,
                        clock=lambda: now[0], bound_s=3.0)
    counts = Counters()
    answering[A] = False  # one node down: never a loss
    for _ in range(10):
        now[0] += 1
        watch.probe_once()
        watch.check(counts)
    answering[B] = False
    with pytest.raises(ClusterLost, match=r"10\.0\.0\.2:9092: TimeoutError"):
        for _ in range(10):
            now[0] += 1
            watch.probe_once()
            watch.check(counts)
    assert now[0] == 14  # down at 11, first look then, 3 s later


def test_tcp_probe_names_the_error() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert tcp_probe(("127.0.0.1", port), 1.0) is None
    err = tcp_probe(("127.0.0.1", port), 1.0)
    assert err is not None and err.startswith("ConnectionRefusedError")


def test_a_healthy_run_opens_no_probe_connection_and_a_stall_starts_probing() -> None:
    """Brokers log every connection: the probes run only while the counters stand
    still, and stop as soon as messages move again."""
    import threading

    opened: list[Address] = []
    probed = threading.Event()

    def probe(address: Address, timeout_s: float) -> str | None:
        opened.append(address)
        probed.set()
        return None

    watch = RemoteWatch(_remote("10.0.0.1:9092"), probe=probe, interval_s=0.01).start()
    counts = Counters()
    try:
        for _ in range(30):  # messages moving: 0.3 s of checks, no connection
            counts.acked += 100
            watch.check(counts)
            assert not watch.stalled.is_set()
            probed.wait(0.01)
        assert opened == [] and watch.probes == 0
        watch.check(counts)  # nothing moved since the last check
        assert watch.stalled.is_set()
        assert probed.wait(5.0), "a stall must start the probes"
        counts.received += 1
        watch.check(counts)
        assert not watch.stalled.is_set()
        assert watch.tracker.down_since is None
    finally:
        watch.stop()
    assert opened and set(opened) == {A}
