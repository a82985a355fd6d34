"""Durability levels 1-4 per broker (StreamNative's table 6): mapping, skips, results.

No broker runs here: the mapping, what create_driver applies, the option's parsing and
the results block built from a driver description and a read-back document.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers import durability as d
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
from pytest_brokerperf.brokers.kafka.durability import (
    KAFKA_NEVER_FLUSH,
    apply_kafka,
    kafka_settings,
)
from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.brokers.pulsar.durability import apply_pulsar, pulsar_settings
from pytest_brokerperf.brokers.pulsar.process import journal_settings
from pytest_brokerperf.brokers.rabbitmq.config import DURABILITY, config_for_durability
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.scenario_library.finish import short_params as _short_params

NEVER = KAFKA_NEVER_FLUSH

# --------------------------------------------------------------------------- the table

# (kind, nodes, level) -> settings, or the fragment of the skip reason
EXPECTED: dict[tuple[str, int, int], dict[str, Any] | str] = {
    ("kafka", 1, 1): "replicationFactor 1",
    ("kafka", 1, 2): "replicationFactor 1",
    ("kafka", 1, 3): {"replicationFactor": 1, "acks": "1", "min.insync.replicas": "1",
                      "flush.messages": "1", "flush.ms": "0"},
    ("kafka", 1, 4): {"replicationFactor": 1, "acks": "1", "min.insync.replicas": "1",
                      "flush.messages": NEVER, "flush.ms": NEVER},
    ("kafka", 3, 1): {"replicationFactor": 3, "acks": "all", "min.insync.replicas": "2",
                      "flush.messages": "1", "flush.ms": "0"},
    ("kafka", 3, 2): {"replicationFactor": 3, "acks": "all", "min.insync.replicas": "2",
                      "flush.messages": NEVER, "flush.ms": NEVER},
    ("kafka", 3, 3): {"replicationFactor": 3, "acks": "1", "min.insync.replicas": "2",
                      "flush.messages": "1", "flush.ms": "0"},
    ("kafka", 3, 4): {"replicationFactor": 3, "acks": "1", "min.insync.replicas": "2",
                      "flush.messages": NEVER, "flush.ms": NEVER},
    ("pulsar", 1, 1): "writes each entry to 1",
    ("pulsar", 1, 2): "writes each entry to 1",
    ("pulsar", 1, 3): {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1,
                       "bookkeeperAckQuorum": 1, "journalWriteData": "true",
                       "journalSyncData": "true"},
    ("pulsar", 1, 4): {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1,
                       "bookkeeperAckQuorum": 1, "journalWriteData": "true",
                       "journalSyncData": "false", "journalPageCacheFlushIntervalMSec": "1000"},
    ("pulsar", 3, 1): {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3,
                       "bookkeeperAckQuorum": 2, "journalWriteData": "true",
                       "journalSyncData": "true"},
    ("pulsar", 3, 2): {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3,
                       "bookkeeperAckQuorum": 2, "journalWriteData": "true",
                       "journalSyncData": "false", "journalPageCacheFlushIntervalMSec": "1000"},
    ("pulsar", 3, 3): {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3,
                       "bookkeeperAckQuorum": 1, "journalWriteData": "true",
                       "journalSyncData": "true"},
    ("pulsar", 3, 4): {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 3,
                       "bookkeeperAckQuorum": 1, "journalWriteData": "true",
                       "journalSyncData": "false", "journalPageCacheFlushIntervalMSec": "1000"},
    ("rabbitmq", 1, 1): "majority of 3 nodes",
    ("rabbitmq", 1, 2): "majority of 3 nodes",
    ("rabbitmq", 1, 3): {"queueType": "QUORUM", "messagePersistence": True,
                         "x-quorum-initial-group-size": 1},
    ("rabbitmq", 1, 4): {"queueType": "STREAM", "messagePersistence": True,
                         "x-initial-cluster-size": 1},
    ("rabbitmq", 3, 1): {"queueType": "QUORUM", "messagePersistence": True,
                         "x-quorum-initial-group-size": 3},
    ("rabbitmq", 3, 2): {"queueType": "STREAM", "messagePersistence": True,
                         "x-initial-cluster-size": 3},
    ("rabbitmq", 3, 3): "means no replication",
    ("rabbitmq", 3, 4): "means no replication",
    **{("tansu", n, lv): "durability levels do not apply" for n in (1, 3) for lv in (1, 2, 3, 4)},
    **{("redpanda", n, lv): "not mapped for redpanda" for n in (1, 3) for lv in (1, 2, 3, 4)},
}


@pytest.mark.parametrize(("kind", "nodes", "level"), sorted(EXPECTED),
                         ids=[f"{k}-n{n}-d{lv}" for k, n, lv in sorted(EXPECTED)])
def test_every_broker_and_level(kind: str, nodes: int, level: int) -> None:
    want = EXPECTED[(kind, nodes, level)]
    if isinstance(want, str):
        with pytest.raises(BrokerUnavailable, match=want):
            d.describe(brokers.get(kind), level, nodes=nodes)
        with pytest.raises(BrokerUnavailable, match=want):
            brokers.get(kind).check_offered(level, nodes)  # the fixture's check, before a start
        return
    got = d.describe(brokers.get(kind), level, nodes=nodes)
    assert got["settings"] == want
    row = d.LEVELS[level]
    assert (got["level"], got["replication"], got["local"]) == (level, row.replication,
                                                               row.local)
    assert got["why"] and got["scope"]
    brokers.get(kind).check_offered(level, nodes)


def test_table_6_rows() -> None:
    assert [(lv.replication, lv.local) for lv in d.LEVELS.values()] == [
        ("sync", "fsync"), ("sync", "page cache"), ("async", "fsync"), ("async", "page cache")]
    assert d.LEVELS[2].label == "level 2: sync replication + page cache"
    assert d.level_id(3) == "d3" and d.level_id(None) == "driver-defined"


def test_skip_reasons_say_how_to_get_the_level() -> None:
    with pytest.raises(BrokerUnavailable) as k:
        kafka_settings(1, 1)
    assert "acks=all on one replica is the leader alone" in str(k.value)
    assert "--brokerperf-nodes=3" in str(k.value)
    with pytest.raises(BrokerUnavailable) as p:
        pulsar_settings(2, 1, 1)
    assert "--brokerperf-nodes=3" in str(p.value) and "3/3/2" in str(p.value)


@pytest.mark.parametrize("bad", [0, 5, "1", None, True, 2.0])
def test_a_bad_level_is_a_config_error_naming_it(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"expected 1, 2, 3 or 4"):
        d.check_level(bad, "somewhere")
    if bad is not None:
        with pytest.raises(ConfigError, match="somewhere"):
            d.check_level(bad, "somewhere")


def test_kafka_rf_two_needs_both_replicas_and_rf_five_three() -> None:
    assert kafka_settings(1, 2)["min.insync.replicas"] == "2"
    assert kafka_settings(2, 5)["min.insync.replicas"] == "3"


def test_the_mappings_are_the_brokers_own() -> None:
    """durability.py points at the Pulsar journal and RabbitMQ tables, never copies them."""
    for level in (1, 2, 3, 4):
        pulsar = d.describe(brokers.get("pulsar"), level, nodes=3)["settings"]
        assert {k: pulsar[k] for k in journal_settings(level)} == journal_settings(level)
        nodes = DURABILITY[level]["nodes"]
        rabbit = d.describe(brokers.get("rabbitmq"), level, nodes=nodes)
        cfg = config_for_durability(level, nodes)
        assert rabbit["settings"]["queueType"] == cfg.queue_type
        assert rabbit["why"] == DURABILITY[level]["why"]


def test_check_offered_before_a_start() -> None:
    brokers.get("kafka").check_offered(None, 1)  # no level: nothing to refuse
    brokers.get("kafka").check_offered(1, 3)
    brokers.get("kafka").check_offered(1, 1, remote=True)  # a remote cluster's size is unknown here
    with pytest.raises(BrokerUnavailable, match="Tansu"):
        brokers.get("tansu").check_offered(4, 1, remote=True)
    with pytest.raises(ConfigError):
        brokers.get("kafka").check_offered(9, 3)


def test_restart_key_only_for_bookie_wide_levels() -> None:
    assert brokers.get("pulsar").restart_key(2) == 2
    assert brokers.get("kafka").restart_key(2) is None
    assert brokers.get("rabbitmq").restart_key(1) is None


# --------------------------------------------------------------------------- applying


def test_apply_kafka_changes_acks_and_topic_configs_and_says_so() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-sync"))  # level 1 as shipped
    four = apply_kafka(cfg, 4)
    assert four.producer_settings("x")["acks"] == "1"
    assert four.topic_settings() == {"min.insync.replicas": "2", "flush.messages": NEVER,
                                     "flush.ms": NEVER}
    assert "topicConfig flush.messages: 1 -> 9223372036854775807 (durability level 4)" in (
        four.notes)
    assert "producerConfig acks: all -> 1 (durability level 4)" in four.notes
    assert apply_kafka(cfg, 1).topic_settings() == cfg.topic_settings()


def test_apply_kafka_refuses_acks_1_with_idempotence() -> None:
    cfg = KafkaDriverConfig.from_dict({"replicationFactor": 3,
                                       "producerConfig": "enable.idempotence=true\nacks=all"})
    assert apply_kafka(cfg, 2).producer_settings("x")["acks"] == "all"
    with pytest.raises(BrokerUnavailable, match=r"enable\.idempotence=true"):
        apply_kafka(cfg, 4)


def test_apply_kafka_refuses_flavours() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-local"))
    with pytest.raises(BrokerUnavailable, match="Tansu"):
        brokers.get("tansu").apply_level(cfg, 4)  # type: ignore[attr-defined]
    with pytest.raises(BrokerUnavailable, match="automq"):
        brokers.get("automq").apply_level(cfg, 4)  # type: ignore[attr-defined]


def test_apply_pulsar_sets_ack_quorum_and_refuses_one_bookie_sync() -> None:
    cfg = PulsarDriverConfig()  # 3/3/2
    assert apply_pulsar(cfg, 3).client.persistence.ack_quorum == 1
    assert apply_pulsar(cfg, 1).client.persistence.ack_quorum == 2
    one = cfg.with_overrides(persistence={"ensemble_size": 1, "write_quorum": 1,
                                          "ack_quorum": 1})
    with pytest.raises(BrokerUnavailable, match="writes each entry to 1"):
        apply_pulsar(one, 1)
    assert apply_pulsar(one, 4).client.persistence.ack_quorum == 1


BOOTSTRAP = {"kafka": "127.0.0.1:1", "pulsar": "pulsar://127.0.0.1:1",
             "rabbitmq": "amqp://127.0.0.1:1"}


def _ep(kind: str, level: int | None, nodes: int = 1,
        journal: dict[str, str] | None = None) -> BrokerEndpoint:
    return BrokerEndpoint(kind=kind, bootstrap=BOOTSTRAP[kind], mode="process", nodes=nodes,
                          admin_url="http://127.0.0.1:2", durability=level, journal=journal)


def test_create_driver_applies_the_level_per_broker() -> None:
    k = create_driver(_ep("kafka", 1, nodes=3), None)
    assert k.config.topic_settings()["flush.messages"] == "1"  # type: ignore[attr-defined]
    assert k.describe()["producer"]["acks"] == "all"
    k4 = create_driver(_ep("kafka", 4), None)
    assert k4.describe()["producer"]["acks"] == "1"
    assert k4.describe()["topic"]["flush.ms"] == NEVER
    assert create_driver(_ep("kafka", None), None).describe()["producer"]["acks"] == "all"
    with pytest.raises(BrokerUnavailable, match="replicationFactor 1"):
        create_driver(_ep("kafka", 2), None)
    p = create_driver(_ep("pulsar", 2, nodes=3), None)
    assert p.config.client.persistence.ack_quorum == 2  # type: ignore[attr-defined]
    with pytest.raises(BrokerUnavailable):
        create_driver(_ep("pulsar", 1), None)
    r = create_driver(_ep("rabbitmq", 3), None)
    assert r.config.queue_type == "QUORUM"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="expected 1, 2, 3 or 4"):
        create_driver(_ep("kafka", 7), None)


# --------------------------------------------------------------------------- results


KAFKA_READ_BACK = {
    "topics": {"t0": {
        "min.insync.replicas": {"value": "2", "source": "DYNAMIC_TOPIC_CONFIG"},
        "flush.messages": {"value": "1", "source": "DYNAMIC_TOPIC_CONFIG"},
        "flush.ms": {"value": "0", "source": "DYNAMIC_TOPIC_CONFIG"},
        "retention.ms": {"value": "1", "source": "DEFAULT_CONFIG"},
        "replicas": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "isr": {"0": [1, 2, 3], "1": [2, 3, 1]},
    }},
    "brokers": {"1": {"log.flush.interval.messages": {"value": NEVER, "source": "DEFAULT"},
                      "num.io.threads": {"value": "8", "source": "DEFAULT"}}},
    "cluster": {"brokers": 3},
}


def test_result_block_kafka_level() -> None:
    ep = _ep("kafka", 1, nodes=3)
    desc = create_driver(ep, None).describe()
    block = d.result_block(brokers.get(ep.kind), ep, desc, KAFKA_READ_BACK)
    assert block["level"] == 1 and block["label"].startswith("level 1: sync")
    assert block["settings"] == d.describe(brokers.get("kafka"), 1, nodes=3)["settings"]
    rb = block["read_back"]
    assert rb["topics"]["t0"]["flush.messages"]["value"] == "1"
    assert rb["topics"]["t0"]["replication_factor"] == 3
    assert "retention.ms" not in rb["topics"]["t0"]
    assert rb["brokers"]["1"] == {"log.flush.interval.messages": {"value": NEVER,
                                                                  "source": "DEFAULT"}}
    assert block["replication"] == "sync" and block["scope"].startswith("per topic")


def test_result_block_without_level_is_driver_defined() -> None:
    ep = _ep("kafka", None)
    block = d.result_block(brokers.get(ep.kind), ep, create_driver(ep, None).describe(), {})
    assert block["level"] is None and block["label"] == "driver-defined"
    assert block["settings"] == {"replicationFactor": 1, "acks": "all",
                                 "min.insync.replicas": "1",
                                 "flush.messages": "broker default", "flush.ms": "broker default"}


def test_result_block_pulsar_and_rabbitmq() -> None:
    ep = _ep("pulsar", 4, nodes=3, journal=journal_settings(4))
    block = d.result_block(brokers.get(ep.kind), ep, create_driver(ep, None).describe(), {
        "namespace": "public/bp-1", "persistence": {"bookkeeperAckQuorum": 1},
        "cluster": {"bookies": ["b1", "b2", "b3"]}})
    assert block["settings"] == d.describe(brokers.get("pulsar"), 4, nodes=3)["settings"]
    assert block["read_back"]["persistence"] == {"bookkeeperAckQuorum": 1}
    assert block["read_back"]["journal"]["journalSyncData"] == "false"
    remote = BrokerEndpoint(kind="pulsar", bootstrap="pulsar://x:6650", mode="remote",
                            admin_url="http://x:8080", durability=3)
    rblock = d.result_block(brokers.get(remote.kind), remote,
                            create_driver(remote, None).describe(), {})
    assert rblock["declared"] is True and "declaration" in rblock["read_back"]["journal_source"]
    ep = _ep("rabbitmq", 4)
    block = d.result_block(brokers.get(ep.kind), ep,
                           create_driver(ep, None).describe(), {"topics": {"t": {"queues": {
        "t-sub-part-0": {"type": "stream", "durable": True,
                         "arguments": {"x-initial-cluster-size": 1}, "policy": ""}}}}})
    assert block["settings"] == d.describe(brokers.get("rabbitmq"), 4, nodes=1)["settings"]
    assert block["read_back"]["queues"]["t-sub-part-0"]["type"] == "stream"


def test_summary_params_show_the_level() -> None:
    params = {"partitions": 4, "message_size": 1024, "rate": 5000.0}
    assert _short_params(params) == "p=4 size=1KiB rate=5k"
    assert _short_params({**params, "durability": 2}) == "p=4 size=1KiB d=2 rate=5k"


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize(("raw", "levels"), [
    ("1,2", (1, 2)), ("4, 1,1", (1, 4)), ("all", (1, 2, 3, 4)), ("d3", (3,)), (2, (2,)),
    ([3, 1], (1, 3)),
])
def test_levels_option_parsing(raw: object, levels: tuple[int, ...]) -> None:
    assert Settings.resolve({"brokerperf_durability": raw}, {}, {}).durability == levels


def test_levels_option_default_and_sources() -> None:
    s = Settings.resolve({}, {"BROKERPERF_DURABILITY": "3"}, {"brokerperf_durability": "1"})
    assert s.durability == (3,) and s.sources["durability"] == (
        "BROKERPERF_DURABILITY environment variable")
    assert Settings.resolve({}, {}, {}).durability == ()
    assert Settings.resolve({}, {}, {}).as_dict()["durability"] == []


@pytest.mark.parametrize(("where", "raw", "fragments"), [
    ("cli", "5", ["'5'", "--brokerperf-durability", "expected 1, 2, 3 or 4",
                  "pass e.g. --brokerperf-durability=1,2"]),
    ("env", "1,high", ["'high'", "BROKERPERF_DURABILITY environment variable",
                       "set e.g. BROKERPERF_DURABILITY=1,2, or unset it"]),
    ("ini", "0", ["'0'", "brokerperf_durability in pytest.ini/pyproject.toml",
                  "1: sync replication + fsync", "or remove the key"]),
    ("cli", ",", ["--brokerperf-durability", "expected levels 1-4"]),
])
def test_bad_levels_name_value_source_and_fix(where: str, raw: str,
                                              fragments: list[str]) -> None:
    cli = {"brokerperf_durability": raw} if where == "cli" else {}
    env = {"BROKERPERF_DURABILITY": raw} if where == "env" else {}
    ini = {"brokerperf_durability": raw} if where == "ini" else {}
    with pytest.raises(ConfigError) as exc:
        Settings.resolve(cli, env, ini)
    for fragment in fragments:
        assert fragment in str(exc.value), (fragment, str(exc.value))
