"""A real local Pulsar standalone (three bookies, one JVM): provisioning, driver, engine.

One module-scoped standalone serves every test here; the last test stops it and checks
that nothing is left behind. Assertions check on the broker itself (admin REST API)
that the driver created what the driver YAML asked for.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.provision.maven import resolve_pulsar
from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver
from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.engine.coordinator import default_generator_cpus, run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.workload.model import Workload


@pytest.fixture(scope="module")
def standalone(_broker_session_lock: None) -> Iterator[PulsarStandalone]:
    try:
        resolve_pulsar()
    except BrokerUnavailable as e:
        pytest.skip(str(e))
    s = PulsarStandalone(nodes=3)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def pulsar(standalone: PulsarStandalone) -> BrokerEndpoint:
    if not standalone.running:
        pytest.skip("the module's standalone was already stopped")
    return standalone.endpoint


def rest(endpoint: BrokerEndpoint, path: str) -> Any:
    with urllib.request.urlopen(f"{endpoint.admin_url}{path}", timeout=30) as r:
        text = r.read().decode()
    return json.loads(text) if text.strip() else None


def test_standalone_three_bookies_on_loopback(pulsar: BrokerEndpoint) -> None:
    info = pulsar.info
    assert pulsar.kind == "pulsar" and pulsar.version == "4.0.7" and pulsar.mode == "process"
    assert pulsar.nodes == 3 and pulsar.topology_check and info["bookies"] == 3
    assert len(rest(pulsar, "/admin/v2/bookies/all")["bookies"]) == 3
    assert "public/default" in rest(pulsar, "/admin/v2/namespaces/public")
    proc = psutil.Process(info["pids"][0])
    listening = [c.laddr for c in proc.net_connections("tcp") if c.status == "LISTEN"]
    assert len(listening) == 5  # broker, web, three bookies
    assert {a.ip for a in listening} == {"127.0.0.1"}
    cpus = info["cpu_affinity"]["broker_cpus"]
    if cpus:
        assert sorted(proc.cpu_affinity()) == cpus
    assert pulsar.journal is not None and pulsar.journal["journalSyncData"] == "true"
    assert "-XX:MaxDirectMemorySize=1g" in info["jvm_flags"]
    assert info["startup_s"] < 180
    assert Path(info["gc_logs"][0]).stat().st_size > 0


def test_driver_creates_namespace_policies_and_topics_as_specified(
        pulsar: BrokerEndpoint) -> None:
    import pulsar as pulsar_client

    driver = create_driver(pulsar, shipped_driver("pulsar"))  # OMB's 3/3/2
    assert isinstance(driver, PulsarDriver)
    admin = driver.admin()
    ns = driver.namespace
    try:
        admin.create_topics(["it-part", "it-single"], [4, 1])
        back = admin.read_back(["it-part", "it-single"])
        # the broker itself reports what the driver asked for
        assert rest(pulsar, f"/admin/v2/namespaces/{ns}/persistence") == {
            "bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3, "bookkeeperAckQuorum": 2,
            "managedLedgerMaxMarkDeleteRate": 1.0}
        assert back["persistence"]["bookkeeperAckQuorum"] == 2
        assert back["retention"] == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
        quota = back["backlogQuota"]["destination_storage"]
        assert (quota["limitSize"], quota["limitTime"], quota["policy"]) == (
            -1, -1, "producer_exception")
        assert back["deduplication"] is False
        assert back["topics"] == {"it-part": {"partitions": 4}, "it-single": {"partitions": 0}}
        assert back["cluster"]["bookies"] == 3 and back["cluster"]["brokers"] == 1
        # a subscription that does not consume: the broker counts its backlog
        client = pulsar_client.Client(pulsar.bootstrap)
        try:
            sub = client.subscribe(driver.full_topic("it-part"), "lagging")
            prod = client.create_producer(driver.full_topic("it-part"))
            for i in range(20):
                prod.send(f"m{i}".encode())
            prod.close()
            deadline = time.monotonic() + 30
            while admin.backlog(["it-part"]).get("lagging") != 20:
                assert time.monotonic() < deadline, admin.backlog(["it-part"])
                time.sleep(0.5)
            sub.close()
        finally:
            client.close()
    finally:
        admin.delete_topics(["it-part", "it-single"])
        admin.close()
    assert ns.split("/")[1] not in " ".join(rest(pulsar, "/admin/v2/namespaces/benchmark"))


def test_ensemble_the_cluster_cannot_place_is_refused(pulsar: BrokerEndpoint) -> None:
    cfg = PulsarDriverConfig.from_yaml(shipped_driver("pulsar")).with_overrides(
        persistence={"ensemble_size": 5, "write_quorum": 5, "ack_quorum": 3})
    admin = PulsarDriver(pulsar, cfg).admin()
    with pytest.raises(ConfigError, match=r"ensembleSize 5 .* 3 bookie"):
        admin.create_topics(["never"], [1])
    admin.close()


def _workload(rate: int, partitions: int = 4) -> Workload:
    return Workload(name="it", topics=1, partitions_per_topic=partitions, message_size=1024,
                    subscriptions_per_topic=2, producers_per_topic=2,
                    consumer_per_subscription=2, producer_rate=rate,
                    test_duration_minutes=1, warmup_duration_minutes=0)


def test_engine_delivers_everything_once_with_honest_latency(
        pulsar: BrokerEndpoint, measure_quietly: Callable[..., Any],
        expect_valid: Callable[..., Any]) -> None:
    wl = _workload(400)
    plan = RunPlan(rate=400, period_s=1.0, warmup_max_s=5.0, measure_s=5.0, workers=2,
                   topic_prefix="it-engine", probe_timeout_s=60,
                   generator_cpus=default_generator_cpus(pulsar.info.get("cpu_affinity")))
    out = measure_quietly(lambda k: run_workload(
        create_driver(pulsar, shipped_driver("pulsar")), wl,
        replace(plan, topic_prefix=f"it-engine-{k}"), payloads=wl.payloads(None, seed=3)))
    d = out.delivery
    assert d.acknowledged > 1500
    assert len(d.subscriptions) == 2
    for sub in d.subscriptions:
        assert sub.received == sub.acknowledged == d.acknowledged
        assert (sub.lost, sub.duplicates, sub.reordered, sub.unacked_received) == (0, 0, 0, 0)
    e2e = out.cumulative["e2e_latency"]
    assert e2e.min() > 0
    assert out.cumulative["publish_latency"].percentile(50) > 0
    if expect_valid(out).status == "valid":  # rates and timing say nothing on a noisy host
        assert out.ack_rate == pytest.approx(400, rel=0.1)
        assert out.consume_rate == pytest.approx(800, rel=0.15)
        assert e2e.percentile(50) < 1_000_000  # below a second on loopback
        assert out.cumulative["publish_delay"].percentile(99) < 10_000
    assert out.read_back["persistence"]["bookkeeperAckQuorum"] == 2
    assert out.driver_description["producer"]["batching_enabled"] is True
    # topics and the run's namespace are gone again
    namespaces = rest(pulsar, "/admin/v2/namespaces/benchmark")
    assert out.driver_description["namespace"] not in namespaces


def test_sync_producer_one_outstanding_message(pulsar: BrokerEndpoint) -> None:
    wl = _workload(100, partitions=1).replace(subscriptions_per_topic=1,
                                              producers_per_topic=1,
                                              consumer_per_subscription=1)
    plan = RunPlan(rate=100, period_s=1.0, warmup_max_s=0.0, measure_s=3.0, workers=1,
                   topic_prefix="it-sync", probe_timeout_s=60,
                   generator_cpus=default_generator_cpus(pulsar.info.get("cpu_affinity")))
    out = run_workload(create_driver(pulsar, shipped_driver("pulsar-sync")), wl, plan,
                       payloads=wl.payloads(None, seed=4))
    assert out.delivery.lost == 0 and out.delivery.acknowledged >= 250
    assert out.driver_description["send_mode"] == "sync"
    assert out.driver_description["producer"]["max_pending_messages"] == 1
    # one round trip per message: the latency is a real broker + journal round trip
    assert out.cumulative["publish_latency"].percentile(50) > 0


def _slice_producer(pulsar: BrokerEndpoint, topic: str, partitions: int,
                    **producer: Any) -> tuple[Any, list[Any], list[Any], Any]:
    cfg = PulsarDriverConfig.from_yaml(shipped_driver("pulsar")).with_overrides(
        producer={"send_callbacks": "perSlice", **producer})
    driver = PulsarDriver(pulsar, cfg)
    admin = driver.admin()
    admin.create_topics([topic], [partitions])
    acks: list[tuple[bytes, int, int | None]] = []
    errors: list[tuple[bytes, str]] = []

    def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
        acks.append((value, latency_ns or 0, sent_ns))

    def many(values: list[bytes], ack_ns: Any = None, *, latency_ns: Any = None,
             sent_ns: Any = None) -> None:
        for v, a, s in zip(values, ack_ns, sent_ns, strict=True):
            acks.append((v, a - s, s))

    on_ack.many = many  # type: ignore[attr-defined]
    prod = driver.producer(topic, "p0", on_ack, lambda v, why: errors.append((v, why)))
    return prod, acks, errors, admin


def test_slice_producer_acks_every_message_once_and_keeps_keys_on_one_partition(
        pulsar: BrokerEndpoint) -> None:
    """sendCallbacks: perSlice: one callback per slice still confirms every message, in
    order, with its own latency; unkeyed slices spread over the partitions; one key
    always lands on one partition."""
    import pulsar as pulsar_client

    prod, acks, errors, admin = _slice_producer(pulsar, "it-slices", 4)
    assert type(prod).__name__ == "_PulsarSliceProducer" and prod.partitions == 4
    client = pulsar_client.Client(prod._driver.service_url)
    try:
        consumer = client.subscribe(prod._driver.full_topic("it-slices"), "check",
                                    initial_position=pulsar_client.InitialPosition.Earliest)
        values = [b"%06d" % i + bytes(1018) for i in range(3000)]
        keys: list[bytes | None] = [b"k%d" % (i % 7) for i in range(600)]
        start = 0
        while start < len(values):  # as the engine hands them: 128 at a time, keyed first
            end = min(start + 128, 600 if start < 600 else len(values))
            start += prod.send_many(values[start:end], None if start >= 600 else keys[start:end])
            prod.service()
        assert prod.flush(30.0) == 0
        assert errors == []
        assert sorted(v for v, _, _ in acks) == values  # each once (partitions interleave)
        assert all(lat > 0 for _, lat, _ in acks)
        where: dict[bytes, str] = {}
        seen = 0
        while seen < len(values):
            msg = consumer.receive(timeout_millis=10_000)
            consumer.acknowledge(msg)
            seen += 1
            where[msg.data()[:6]] = msg.topic_name().rsplit("-partition-", 1)[-1]
        by_key: dict[bytes, set[str]] = {}
        for i, k in enumerate(keys):
            by_key.setdefault(k, set()).add(where[b"%06d" % i])  # type: ignore[arg-type]
        assert all(len(parts) == 1 for parts in by_key.values()), by_key
        unkeyed = {where[b"%06d" % i] for i in range(600, 3000)}
        assert unkeyed == {"0", "1", "2", "3"}
    finally:
        prod.close()
        client.close()
        admin.delete_topics(["it-slices"])
        admin.close()


def test_slice_producer_reports_a_failed_slice_as_send_errors(
        standalone: PulsarStandalone, pulsar: BrokerEndpoint) -> None:
    """The broker stops answering (SIGSTOP) past the send timeout: the slice's one
    callback fails, and every message of the slice is a send error, none an ack."""
    import os
    import signal

    prod, acks, errors, admin = _slice_producer(pulsar, "it-slice-fail", 1,
                                                send_timeout_ms=2000)
    pid = pulsar.info["pids"][0]
    try:
        assert prod.send_many([b"before" + bytes(100)] * 10, None) == 10
        assert prod.flush(30.0) == 0 and len(acks) == 10
        os.kill(pid, signal.SIGSTOP)
        try:
            assert prod.send_many([b"x" * 100] * 50, None) == 50
            deadline = time.monotonic() + 15
            while prod.queue_depth() and time.monotonic() < deadline:
                prod.service()
                time.sleep(0.05)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert prod.queue_depth() == 0
        assert len(acks) == 10
        assert len(errors) == 50 and all("Timeout" in why for _, why in errors)
    finally:
        prod.close()
        admin.delete_topics(["it-slice-fail"])
        admin.close()


def test_stop_leaves_nothing_behind(standalone: PulsarStandalone) -> None:
    ep = standalone.endpoint
    pid = ep.info["pids"][0]
    data = Path(ep.info["data_dirs"][0])
    t0 = time.monotonic()
    standalone.stop()
    assert time.monotonic() - t0 < 35
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not data.exists()
    # the working directory it made itself goes too, logs included (a caller that wants
    # them passes a workdir, as the plugin does: its results keep them)
    assert not Path(ep.info["workdir"]).exists()
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if "PulsarStandaloneStarter" in " ".join(p.info["cmdline"] or [])
                 and str(ep.info["workdir"]) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []
    standalone.stop()  # idempotent
