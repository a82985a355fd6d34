"""KafkaDriverConfig: OMB Kafka driver YAML, Java properties, librdkafka translation."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from pytest_brokerperf.brokers.kafka.config import (
    JavaProperties,
    KafkaDriverConfig,
    shipped_driver,
    shipped_drivers,
)
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.warnings import BrokerPerfWarning

# OMB main's driver-kafka/kafka-latency.yaml as it is in the OMB repository
OMB_LATENCY = """\
name: Kafka
driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver

# Kafka client-specific configuration
replicationFactor: 3

topicConfig: |
  min.insync.replicas=2

commonConfig: |
  bootstrap.servers=localhost:9092

producerConfig: |
  acks=all
  linger.ms=1
  batch.size=131072

consumerConfig: |
  auto.offset.reset=earliest
  enable.auto.commit=false
  max.partition.fetch.bytes=10485760
"""


def write(tmp_path: Path, text: str, name: str = "driver.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ Java properties


def test_properties_forms_comments_blank_lines_and_order() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   acks=all   \n"
        "linger.ms: 1\n"
        "batch.size 131072\n"
        "  compression.type =  lz4\t\n"
        "empty=\n"
    )
    props = JavaProperties.parse(text)
    assert list(props.items()) == [
        ("acks", "all"),
        ("linger.ms", "1"),
        ("batch.size", "131072"),
        ("compression.type", "lz4"),
        ("empty", ""),
    ]


def test_properties_continuation_escapes_and_duplicates() -> None:
    text = (
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
        '    required username="u" password="p";\n'
        "key\\=with\\:sep=v\\u00e9\n"
        "path=C:\\\\dir\n"
        "acks=1\n"
        "acks=all\n"
    )
    props = JavaProperties.parse(text)
    assert props["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="p";'
    )
    assert props["key=with:sep"] == "vé"
    assert props["path"] == "C:\\dir"
    assert props["acks"] == "all"  # last wins, as in Java
    assert list(props).index("acks") == 3  # first position kept


def test_properties_text_round_trip() -> None:
    props = JavaProperties({"a b": " lead", "x=y": "1", "t": "tab\there", "flag": True})
    assert props["flag"] == "true"
    assert JavaProperties.parse(props.to_text()) == props


def test_properties_without_name_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"f\.yaml: producerConfig, property line 2 = '=all'"):
        JavaProperties.parse("linger.ms=1\n=all\n", source="f.yaml", key="producerConfig")


def test_properties_is_immutable_hashable_picklable() -> None:
    props = JavaProperties({"a": "1"})
    assert pickle.loads(pickle.dumps(props)) == props
    assert hash(props) == hash(JavaProperties([("a", "1")]))
    assert props == {"a": "1"}
    assert props.merged({"a": None, "b": 2}) == {"b": "2"}
    assert props == {"a": "1"}


# ------------------------------------------------------------------ loading and round trips


def test_shipped_drivers_listed() -> None:
    assert set(shipped_drivers()) >= {
        "kafka-throughput",
        "kafka-latency",
        "kafka-sync",
        "kafka-local",
    }
    with pytest.raises(ConfigError, match="kafka-local"):
        shipped_driver("kafka-locl")


@pytest.mark.parametrize("name", [n for n in shipped_drivers() if n.startswith("kafka")])
def test_shipped_driver_round_trips(name: str, tmp_path: Path) -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver(name))
    assert KafkaDriverConfig.from_dict(cfg.to_omb_dict()) == cfg
    assert KafkaDriverConfig.from_yaml(cfg.to_yaml(tmp_path / "out.yaml")) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    hash(cfg)
    # the shipped files leave bootstrap to the endpoint and never reset the cluster
    assert "bootstrap.servers" not in cfg.common_config
    assert cfg.reset is False
    # written YAML uses OMB's keys and block strings
    written = yaml.safe_load((tmp_path / "out.yaml").read_text())
    assert set(written) <= {
        "name",
        "driverClass",
        "replicationFactor",
        "reset",
        "topicConfig",
        "commonConfig",
        "producerConfig",
        "consumerConfig",
    }


def test_shipped_values_match_omb() -> None:
    tp = KafkaDriverConfig.from_yaml(shipped_driver("kafka-throughput"))
    assert tp.replication_factor == 3
    assert tp.topic_settings() == {"min.insync.replicas": "2"}
    assert dict(tp.producer_config) == {"acks": "all", "linger.ms": "1", "batch.size": "1048576"}
    assert tp.common_config["default.api.timeout.ms"] == "1200000"
    lat = KafkaDriverConfig.from_yaml(shipped_driver("kafka-latency"))
    assert lat.producer_config["batch.size"] == "131072"
    sync = KafkaDriverConfig.from_yaml(shipped_driver("kafka-sync"))
    assert sync.topic_settings() == {
        "min.insync.replicas": "2",
        "flush.messages": "1",
        "flush.ms": "0",
    }
    local = KafkaDriverConfig.from_yaml(shipped_driver("kafka-local"))
    assert local.replication_factor == 1
    assert dict(local.producer_config) == {"acks": "all", "linger.ms": "1", "batch.size": "131072"}
    assert local.consumer_config["auto.offset.reset"] == "earliest"
    assert local.consumer_config["enable.auto.commit"] == "false"
    assert local.notes == []


def test_omb_file_unchanged_reads(tmp_path: Path) -> None:
    cfg = KafkaDriverConfig.from_yaml(write(tmp_path, OMB_LATENCY))
    assert cfg.name == "Kafka"
    assert cfg.driver_class == "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver"
    assert KafkaDriverConfig.from_dict(cfg.to_omb_dict()) == cfg


def test_reset_is_kept(tmp_path: Path) -> None:
    cfg = KafkaDriverConfig.from_yaml(write(tmp_path, OMB_LATENCY + "reset: true\n"))
    assert cfg.reset is True
    assert cfg.to_omb_dict()["reset"] is True


def test_defaults_and_mapping_form() -> None:
    cfg = KafkaDriverConfig.from_dict(
        {"producerConfig": {"acks": "all", "enable.idempotence": True}}
    )
    assert cfg.name == "Kafka" and cfg.replication_factor == -1
    assert cfg.producer_config["enable.idempotence"] == "true"
    assert KafkaDriverConfig.from_dict(cfg.to_omb_dict()) == cfg


# ------------------------------------------------------------------ client settings


def test_producer_settings_merge_and_bootstrap_default() -> None:
    cfg = KafkaDriverConfig(
        common_config=JavaProperties({"client.id": "c", "linger.ms": "5"}),
        producer_config=JavaProperties({"linger.ms": "1", "acks": "all"}),
    )
    s = cfg.producer_settings("broker:9092")
    assert s == {
        "bootstrap.servers": "broker:9092",
        "client.id": "c",
        "linger.ms": "1",
        "acks": "all",
    }


def test_yaml_bootstrap_wins_and_is_noted(tmp_path: Path) -> None:
    cfg = KafkaDriverConfig.from_yaml(write(tmp_path, OMB_LATENCY))
    assert cfg.producer_settings("remote:9093")["bootstrap.servers"] == "localhost:9092"
    assert cfg.admin_settings("remote:9093")["bootstrap.servers"] == "localhost:9092"
    # the note is produced for the actual endpoint only; a placeholder in notes
    assert any("bootstrap.servers=localhost:9092" in n for n in cfg.notes)
    unset = cfg.with_overrides(common={"bootstrap.servers": None})
    assert unset.producer_settings("remote:9093")["bootstrap.servers"] == "remote:9093"


def test_consumer_settings_group_and_omb_defaults() -> None:
    cfg = KafkaDriverConfig(consumer_config=JavaProperties({"group.id": "benchGroup"}))
    s = cfg.consumer_settings("b:1", "sub-000-abc")
    assert s["group.id"] == "sub-000-abc"
    assert s["auto.offset.reset"] == "earliest"
    assert s["enable.auto.commit"] == "false"
    assert any("group.id=benchGroup replaced" in n for n in cfg.notes)
    explicit = KafkaDriverConfig(
        consumer_config=JavaProperties(
            {"auto.offset.reset": "latest", "enable.auto.commit": "true"}
        )
    )
    s = explicit.consumer_settings("b:1", "g")
    assert (s["auto.offset.reset"], s["enable.auto.commit"]) == ("latest", "true")


def test_admin_settings_are_common_only() -> None:
    cfg = KafkaDriverConfig(
        common_config=JavaProperties({"security.protocol": "SASL_SSL", "acks": "all"}),
        producer_config=JavaProperties({"linger.ms": "1"}),
    )
    s = cfg.admin_settings("b:1")
    assert s == {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL"}
    assert any("acks=all not passed" in n and n.startswith("admin") for n in cfg.notes)


def test_java_only_properties_translated_or_dropped_with_notes() -> None:
    cfg = KafkaDriverConfig(
        common_config=JavaProperties(
            {
                "default.api.timeout.ms": "1200000",
                "request.timeout.ms": "1200000",
                "send.buffer.bytes": "-1",
            }
        ),
        producer_config=JavaProperties(
            {
                "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
                "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
                "buffer.memory": "33554432",
                "max.request.size": "4194304",
                "max.block.ms": "60000",
                "batch.size": "1048576",
            }
        ),
        consumer_config=JavaProperties(
            {
                "key.deserializer": "x",
                "max.partition.fetch.bytes": "10485760",
                "fetch.max.wait.ms": "100",
                "max.poll.records": "500",
                "partition.assignment.strategy": (
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
                ),
            }
        ),
    )
    p = cfg.producer_settings("b:1")
    assert p == {
        "bootstrap.servers": "b:1",
        "request.timeout.ms": "900000",
        "socket.send.buffer.bytes": "0",
        "queue.buffering.max.kbytes": "32768",
        "message.max.bytes": "4194304",
        "batch.size": "1048576",
    }
    c = cfg.consumer_settings("b:1", "g")
    assert c["max.partition.fetch.bytes"] == "10485760"
    assert c["fetch.wait.max.ms"] == "100"
    assert c["partition.assignment.strategy"] == "cooperative-sticky"
    assert "max.poll.records" not in c and "key.deserializer" not in c
    assert "request.timeout.ms" not in c  # a producer property in librdkafka
    notes = "\n".join(cfg.notes)
    for text in (
        "dropped default.api.timeout.ms=1200000",
        "capped at 900000",
        "dropped key.serializer",
        "buffer.memory=33554432 -> queue.buffering.max.kbytes=32768",
        "max.request.size=4194304 -> message.max.bytes=4194304",
        "dropped max.block.ms",
        "dropped max.poll.records",
        "fetch.max.wait.ms=100 -> fetch.wait.max.ms=100",
    ):
        assert text in notes, text
    # one note for the same change on several clients
    assert "admin, producer, consumer: dropped default.api.timeout.ms" in notes


def test_jaas_config_becomes_username_password_and_is_redacted() -> None:
    cfg = KafkaDriverConfig(
        common_config=JavaProperties(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="alice" password="s3cret";'
                ),
            }
        )
    )
    s = cfg.producer_settings("b:1")
    assert (s["sasl.username"], s["sasl.password"]) == ("alice", "s3cret")
    assert "sasl.jaas.config" not in s
    eff = cfg.effective("b:1")
    assert "s3cret" not in repr(eff)
    assert "s3cret" not in "\n".join(cfg.notes)
    assert eff["producer"]["sasl.password"] == "***"


def test_endpoint_client_config_is_under_the_yaml() -> None:
    cfg = KafkaDriverConfig(common_config=JavaProperties({"security.protocol": "SSL"}))
    s = cfg.producer_settings("b:1", {"security.protocol": "PLAINTEXT", "ssl.ca.location": "/ca"})
    assert s["security.protocol"] == "SSL" and s["ssl.ca.location"] == "/ca"


# ------------------------------------------------------------------ overrides and nodes


def test_with_overrides_records_adjustments() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-latency"))
    new = cfg.with_overrides(
        replication_factor=1,
        topic={"min.insync.replicas": 1, "retention.ms": 600000},
        producer={"linger.ms": None},
        reason="test",
    )
    assert new.replication_factor == 1
    assert new.topic_settings() == {"min.insync.replicas": "1", "retention.ms": "600000"}
    assert "linger.ms" not in new.producer_config
    assert new.notes[:4] == [
        "replicationFactor 3 -> 1 (test)",
        "topicConfig min.insync.replicas: 2 -> 1 (test)",
        "topicConfig retention.ms: None -> 600000 (test)",
        "producerConfig linger.ms: 1 -> None (test)",
    ]
    assert cfg.replication_factor == 3  # original untouched


def test_rf_3_on_one_node_is_refused_or_lowered_explicitly() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-sync"))
    with pytest.raises(ConfigError, match=r"kafka-sync\.yaml: replicationFactor = 3 .*1 node"):
        cfg.check_nodes(1)
    cfg.check_nodes(3)
    low = cfg.fit_to_nodes(1)
    assert low.replication_factor == 1
    assert low.topic_settings()["min.insync.replicas"] == "1"
    assert low.topic_settings()["flush.messages"] == "1"
    assert any("replicationFactor 3 -> 1" in n for n in low.notes)
    assert cfg.fit_to_nodes(3) is cfg


# ------------------------------------------------------------------ errors and warnings


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("replicationFactor: three\n", r"driver\.yaml:1: replicationFactor = 'three'.*Fix:"),
        ("replicationFactor: 0\n", r"driver\.yaml:1: replicationFactor = 0.*Fix:"),
        ("reset: maybe\n", r"driver\.yaml:1: reset = 'maybe'.*Fix:"),
        ("producerConfig: [acks=all]\n", r"driver\.yaml:1: producerConfig = \['acks=all'\].*Fix:"),
        (
            "replicationFactor: 1\ntopicConfig: |\n  min.insync.replicas=2\n",
            r"driver\.yaml:2: topicConfig min\.insync\.replicas = 2 is larger than "
            r"replicationFactor = 1.*Fix:",
        ),
        (
            "name: Kafka\nproducerConfig: |\n  acks=all\n  : 1\n",
            r"driver\.yaml:2: producerConfig, property line 2 = ': 1'.*Fix:",
        ),
        ("name: [a\n", r"driver\.yaml:\d+:\d+: invalid YAML"),
        ("- a\n", r"driver\.yaml: a Kafka driver file must be a mapping"),
    ],
)
def test_errors_name_file_line_key_value(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        KafkaDriverConfig.from_yaml(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        KafkaDriverConfig.from_yaml(tmp_path / "nope.yaml")


def test_unknown_key_warns_with_closest(tmp_path: Path) -> None:
    with pytest.warns(
        BrokerPerfWarning, match=r"driver\.yaml:2: .*'producerConfg'.*'producerConfig'"
    ):
        cfg = KafkaDriverConfig.from_yaml(write(tmp_path, "name: K\nproducerConfg: |\n  a=b\n"))
    assert len(cfg.producer_config) == 0


def test_non_kafka_driver_class_warns(tmp_path: Path) -> None:
    text = (
        "name: Pulsar\n"
        "driverClass: io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver\n"
    )
    with pytest.warns(BrokerPerfWarning, match="not OMB's Kafka driver"):
        KafkaDriverConfig.from_yaml(write(tmp_path, text))


def test_nested_property_value_names_its_own_line(tmp_path: Path) -> None:
    text = "name: Kafka\nproducerConfig:\n  linger.ms: 1\n  acks: [all]\n"
    with pytest.raises(
        ConfigError,
        match=r"driver\.yaml:4: producerConfig\.acks = \['all'\]: property values must be "
        r"scalars\. Fix:",
    ):
        KafkaDriverConfig.from_yaml(write(tmp_path, text))


def test_wrong_type_names_the_type_and_fix(tmp_path: Path) -> None:
    text = "name: Kafka\nreplicationFactor: '3'\n"
    with pytest.raises(
        ConfigError,
        match=r"driver\.yaml:2: replicationFactor = '3': expected a whole number, got str\. "
        r"Fix: write `replicationFactor: 3`",
    ):
        KafkaDriverConfig.from_yaml(write(tmp_path, text))
