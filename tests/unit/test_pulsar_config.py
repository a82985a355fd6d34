"""PulsarDriverConfig: OMB Pulsar driver YAML in, pulsar-client settings out."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import pytest
import yaml

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.pulsar.config import JAVA_INT_MAX, PulsarDriverConfig
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.warnings import BrokerPerfWarning

# OMB main's driver-pulsar/pulsar.yaml as it is in the OMB repository
OMB_PULSAR = """\
name: Pulsar
driverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver

# Pulsar client-specific configuration
client:
  serviceUrl: pulsar://localhost:6650
  httpUrl: http://localhost:8080
  ioThreads: 16
  connectionsPerBroker: 8
  clusterName: local
  namespacePrefix: benchmark/ns
  topicType: persistent
  persistence:
    ensembleSize: 3
    writeQuorum: 3
    ackQuorum: 2
    deduplicationEnabled: false
  tlsAllowInsecureConnection: false
  tlsEnableHostnameVerification: false
  tlsTrustCertsFilePath:
  authentication:
    plugin:
    data:

# Producer configuration
producer:
  batchingEnabled: true
  batchingMaxPublishDelayMs: 1
  batchingMaxBytes: 131072
  blockIfQueueFull: true
  pendingQueueSize: 0

consumer:
  receiverQueueSize: 10000
  subscriptionType: Failover
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pulsar.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_omb_file_reads_unchanged_without_warnings(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = PulsarDriverConfig.from_yaml(write(tmp_path, OMB_PULSAR))
    c, p, k = cfg.client, cfg.producer, cfg.consumer
    assert cfg.name == "Pulsar"
    assert c.service_url == "pulsar://localhost:6650" and c.http_url == "http://localhost:8080"
    assert (c.io_threads, c.connections_per_broker, c.namespace_prefix) == (16, 8, "benchmark/ns")
    pers = c.persistence
    assert (pers.ensemble_size, pers.write_quorum, pers.ack_quorum) == (3, 3, 2)
    assert c.tls_trust_certs_file_path is None and c.authentication_plugin is None
    assert p.batching_enabled and p.block_if_queue_full
    assert (p.batching_max_publish_delay_ms, p.batching_max_bytes, p.pending_queue_size) == (
        1, 131072, 0)
    assert (k.receiver_queue_size, k.subscription_type) == (10000, "Failover")
    # what OMB's Java code fixes, and the StreamNative additions, default as OMB runs them
    assert p.send_timeout_ms == 0 and p.batching_max_messages == JAVA_INT_MAX
    assert k.max_total_receiver_queue_size_across_partitions == JAVA_INT_MAX
    assert c.operation_timeout_seconds == 600 and c.stats_interval_seconds == 0
    assert cfg.tenant == "benchmark" and not cfg.synchronous


def test_round_trip_and_pickle(tmp_path: Path) -> None:
    for name in ("pulsar", "pulsar-local", "pulsar-sync"):
        cfg = PulsarDriverConfig.from_yaml(shipped_driver(name))
        assert PulsarDriverConfig.from_dict(cfg.to_omb_dict()) == cfg
        assert pickle.loads(pickle.dumps(cfg)) == cfg
        again = PulsarDriverConfig.from_yaml(cfg.to_yaml(tmp_path / f"{name}.yaml"))
        assert again == cfg


def test_shipped_defaults_by_bookie_count() -> None:
    assert brokers.get("pulsar").default_driver_file(1, "tailread").name == "pulsar-local.yaml"
    assert brokers.get("pulsar").default_driver_file(3, "tailread").name == "pulsar.yaml"
    local = PulsarDriverConfig.from_yaml(brokers.get("pulsar").default_driver_file(1, "tailread"))
    p = local.client.persistence
    assert (p.ensemble_size, p.write_quorum, p.ack_quorum) == (1, 1, 1)


def test_unknown_key_warns_with_line_and_suggestion(tmp_path: Path) -> None:
    text = OMB_PULSAR.replace("  pendingQueueSize: 0", "  pendingQueueSise: 0")
    path = write(tmp_path, text)
    with pytest.warns(BrokerPerfWarning,
                      match=r"pulsar\.yaml:\d+: unknown Pulsar driver key "
                            r"'producer.pendingQueueSise'.*'pendingQueueSize'"):
        PulsarDriverConfig.from_yaml(path)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("  ioThreads: 16", "  ioThreads: many", r"client\.ioThreads = 'many': expected a whole"),
    ("  ioThreads: 16", "  ioThreads: 0", r"client\.ioThreads = 0: must be >= 1"),
    ("  batchingEnabled: true", "  batchingEnabled: yes please",
     r"producer\.batchingEnabled.*expected true or false"),
    ("  subscriptionType: Failover", "  subscriptionType: Sometimes",
     r"consumer\.subscriptionType = 'Sometimes': expected one of Exclusive"),
    ("    ackQuorum: 2", "    ackQuorum: 4", r"ensembleSize >= writeQuorum >= ackQuorum"),
    ("  namespacePrefix: benchmark/ns", "  namespacePrefix: benchmark",
     r"expected <tenant>/<namespace prefix>"),
    ("  receiverQueueSize: 10000", "  receiverQueueSize: 3000000000", r"Integer.MAX_VALUE"),
])
def test_bad_values_name_file_line_and_fix(tmp_path: Path, old: str, new: str,
                                           message: str) -> None:
    path = write(tmp_path, OMB_PULSAR.replace(old, new))
    with pytest.raises(ConfigError, match=message) as info:
        PulsarDriverConfig.from_yaml(path)
    assert str(path) in str(info.value)


def test_enum_values_are_case_and_separator_insensitive() -> None:
    cfg = PulsarDriverConfig.from_dict({"consumer": {"subscriptionType": "key_shared"},
                                        "producer": {"compressionType": "lz4"}})
    assert cfg.consumer.subscription_type == "Key_Shared"
    assert cfg.producer.compression_type == "LZ4"
    assert not cfg.cumulative_acks  # shared subscriptions ack every message


def test_producer_kwargs_name_every_setting() -> None:
    cfg = PulsarDriverConfig.from_yaml(shipped_driver("pulsar-local"))
    kw = cfg.producer_kwargs()
    assert kw == {
        "send_timeout_millis": 0,
        "compression_type": "NONE",
        "max_pending_messages": 0,
        "max_pending_messages_across_partitions": JAVA_INT_MAX,
        "block_if_queue_full": True,
        "batching_enabled": True,
        "batching_max_messages": JAVA_INT_MAX,
        "batching_max_allowed_size_in_bytes": 131072,
        "batching_max_publish_delay_ms": 1,
        "batching_type": "Default",
        "chunking_enabled": False,
        "message_routing_mode": "RoundRobinDistribution",
        "lazy_start_partitioned_producers": False,
    }
    sub = cfg.subscribe_kwargs("c1")
    assert sub["consumer_type"] == "Failover" and sub["receiver_queue_size"] == 10000
    assert sub["max_total_receiver_queue_size_across_partitions"] == JAVA_INT_MAX
    assert sub["initial_position"] == "Earliest" and sub["consumer_name"] == "c1"


def test_sync_mode_is_one_outstanding_message() -> None:
    cfg = PulsarDriverConfig.from_yaml(shipped_driver("pulsar-sync"))
    assert cfg.synchronous
    assert cfg.max_outstanding(1) == cfg.max_outstanding(8) == 1
    kw = cfg.producer_kwargs()
    assert kw["max_pending_messages"] == 1 and kw["block_if_queue_full"] is False
    assert kw["batching_enabled"] is False
    assert any("sendMode=sync" in n for n in cfg.notes)


def test_outstanding_limit_follows_pending_queue_size() -> None:
    base = PulsarDriverConfig()
    assert base.max_outstanding(1) == 0  # pendingQueueSize 0: no count limit
    cfg = base.with_overrides(producer={"pending_queue_size": 1000,
                                        "max_pending_messages_across_partitions": 2500})
    assert cfg.max_outstanding(1) == 1000
    assert cfg.max_outstanding(4) == 2500  # 4 x 1000 capped across partitions
    assert cfg.memory_limit_bytes() == 256 * 1024 * 1024


def test_durability_level_sets_ack_quorum() -> None:
    cfg = PulsarDriverConfig()  # 3/3/2
    assert cfg.with_durability(1).client.persistence.ack_quorum == 2
    assert cfg.with_durability(2).client.persistence.ack_quorum == 2
    three = cfg.with_overrides(persistence={"ack_quorum": 3})
    level3 = three.with_durability(3)
    assert level3.client.persistence.ack_quorum == 1
    assert "client.persistence.ack_quorum: 3 -> 1 (durability level 3)" in level3.notes
    with pytest.raises(ConfigError):
        cfg.with_durability(7)


def test_ensemble_larger_than_the_cluster_is_refused() -> None:
    cfg = PulsarDriverConfig()
    cfg.check_bookies(3, "x")
    with pytest.raises(ConfigError, match=r"ensembleSize 3 .* 1 bookie.*never lowered"):
        cfg.check_bookies(1, "http://127.0.0.1:8080")


def test_notes_say_what_python_cannot_set() -> None:
    notes = " ".join(PulsarDriverConfig().notes)
    assert "connectionsPerBroker=8 not applied" in notes
    assert "clientMemoryLimitMB=256 enforced by the driver" in notes
    cfg = PulsarDriverConfig.from_dict(
        {"producer": {"batchingPartitionSwitchFrequencyByPublishDelay": 2}})
    assert any("batchingPartitionSwitchFrequencyByPublishDelay=2 not applied" in n
               for n in cfg.notes)


def test_namespace_policies() -> None:
    pol = PulsarDriverConfig().namespace_policies()
    assert pol["persistence"] == {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3,
                                  "bookkeeperAckQuorum": 2,
                                  "managedLedgerMaxMarkDeleteRate": 1.0}
    assert pol["backlogQuota"] == {"limitSize": -1, "limitTime": -1,
                                   "policy": "producer_exception"}
    assert pol["retention"] == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert pol["deduplication"] is False


@pytest.mark.parametrize(("old", "new", "message"), [
    # lines 8 (ioThreads), 11 (namespacePrefix) and 13 (persistence) of OMB_PULSAR
    ("  namespacePrefix: benchmark/ns", "  namespacePrefix: benchmark",
     r"pulsar\.yaml:11: client\.namespacePrefix = 'benchmark': .*Fix:"),
    ("    ackQuorum: 2", "    ackQuorum: 4",
     r"pulsar\.yaml:13: client\.persistence ensembleSize 3 / writeQuorum 3 / ackQuorum 4"),
    ("  ioThreads: 16", "  ioThreads: 0",
     r"pulsar\.yaml:8: client\.ioThreads = 0: must be >= 1\. Fix: write e\.g\. `ioThreads: 1`"),
])
def test_checks_across_keys_name_the_line(tmp_path: Path, old: str, new: str,
                                          message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PulsarDriverConfig.from_yaml(write(tmp_path, OMB_PULSAR.replace(old, new)))


def test_per_slice_callbacks_need_async_batching_and_are_noted(tmp_path: Path) -> None:
    cfg = PulsarDriverConfig().with_overrides(producer={"send_callbacks": "perSlice"})
    assert any("sendCallbacks=perSlice" in n and "upper bound" in n for n in cfg.notes)
    assert PulsarDriverConfig.from_dict(cfg.to_omb_dict()) == cfg
    assert cfg.to_omb_dict()["producer"]["sendCallbacks"] == "perSlice"
    assert not any("sendCallbacks" in n for n in PulsarDriverConfig().notes)
    for change, why in (({"send_mode": "sync"}, "sendMode is sync"),
                        ({"batching_enabled": False}, "batchingEnabled is false")):
        with pytest.raises(ConfigError, match=f"sendCallbacks = perSlice but {why}.*Fix"):
            cfg.with_overrides(producer=change)
    doc = cfg.to_omb_dict()
    doc["producer"]["sendCallbacks"] = "sometimes"
    with pytest.raises(ConfigError, match="sendCallbacks"):
        PulsarDriverConfig.from_dict(doc)
    doc["producer"].update(sendCallbacks="perSlice", sendMode="sync")
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"d\.yaml:\d+: producer\.sendCallbacks"):
        PulsarDriverConfig.from_yaml(tmp_path / "d.yaml")
