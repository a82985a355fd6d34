"""The RabbitMQ driver YAML model, topology naming and durability mapping (no broker)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import shipped_driver, shipped_drivers
from pytest_brokerperf.brokers.rabbitmq.config import (
    QueueSpec,
    RabbitMQDriverConfig,
    config_for_durability,
    durability_of,
    subscription_queues,
    topic_queues,
)
from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.core.warnings import BrokerPerfWarning

RABBIT_FILES = [n for n in shipped_drivers() if n.startswith("rabbitmq")]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "rabbitmq.yaml"
    p.write_text(text)
    return p


def test_every_shipped_rabbitmq_file_loads_and_round_trips() -> None:
    assert {"rabbitmq-quorum", "rabbitmq-omb", "rabbitmq-confluent", "rabbitmq-stream",
            "rabbitmq-classic-mirrored"} <= set(RABBIT_FILES)
    for name in RABBIT_FILES:
        cfg = RabbitMQDriverConfig.from_yaml(shipped_driver(name))
        assert RabbitMQDriverConfig.from_dict(cfg.to_omb_dict()) == cfg, name
        assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_omb_main_file_reads_with_omb_defaults(tmp_path: Path) -> None:
    cfg = RabbitMQDriverConfig.from_yaml(write(tmp_path, (
        "name: RabbitMQ\n"
        "driverClass: io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver\n"
        "amqpUris:\n  - amqp://localhost\n"
        "messagePersistence: false\nqueueType: QUORUM\n"
        "producerCreationDelay: 100\nproducerCreationBatchSize: 5\n")))
    assert cfg.queue_type == "QUORUM"
    assert cfg.exchange_type == "FANOUT"  # OMB main has no exchangeType: fanout
    assert cfg.amqp_uris == ("amqp://localhost",)
    assert cfg.queue_declare_arguments() == {"x-queue-type": "quorum"}
    assert cfg.routing_keys(1) == [""]


def test_confluent_file_keeps_deployment_keys_as_notes(tmp_path: Path) -> None:
    cfg = RabbitMQDriverConfig.from_yaml(write(tmp_path, (
        "brokers: [10.0.0.1, 10.0.0.2]\nmessagePersistence: true\nqueueType: CLASSIC\n"
        "exchangeType: DIRECT\ntopicPrefix: summit\nroutingKeyLength: 7\nexclusive: false\n"
        "singleNode: false\n")))
    assert cfg.exchange_type == "DIRECT" and cfg.queue_type == "CLASSIC"
    assert cfg.queue_declare_arguments() == {}
    assert cfg.routing_keys(3) == ["0", "1", "2"]
    assert any("topicPrefix" in n and "routingKeyLength" in n for n in cfg.notes())


@pytest.mark.parametrize(("text", "message"), [
    ("queueType: LAZY\n", r"queueType = 'LAZY'.*CLASSIC, QUORUM, STREAM"),
    ("exchangeType: TOPIC\n", r"exchangeType = 'TOPIC'.*FANOUT.*DIRECT"),
    ("queueType: STREAM\nautoAck: true\n", r"autoAck.*streams need manual"),
    ("queueType: QUORUM\nhaPolicy: {ha-mode: all}\n", r"haPolicy.*classic queues only"),
    ("prefetchCount: 70000\n", r"prefetchCount.*65535"),
    ("maxPendingConfirms: 0\n", r"maxPendingConfirms = 0.*>= 1"),
    ("amqpUris: [http://x]\n", r"rabbitmq\.yaml:1: amqpUris\[0\] = 'http://x'.*amqp://"),
    ("streamOffset: middle\n", r"streamOffset = 'middle'"),
    ("- a list\n", r"must be a mapping"),
])
def test_invalid_values_name_file_key_and_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as exc:
        RabbitMQDriverConfig.from_yaml(write(tmp_path, text))
    assert "rabbitmq.yaml" in str(exc.value)


def test_unknown_key_warns_with_suggestion(tmp_path: Path) -> None:
    with pytest.warns(BrokerPerfWarning, match=r"'queuetype'.*Did you mean 'queueType'"):
        RabbitMQDriverConfig.from_yaml(write(tmp_path, "queuetype: QUORUM\n"))


def test_fanout_topology_one_queue_per_subscription() -> None:
    cfg = RabbitMQDriverConfig(queue_type="QUORUM", exchange_type="FANOUT")
    assert topic_queues("t", 1, cfg) == []
    assert subscription_queues("t", "t-sub000", 1, cfg) == [QueueSpec("t-t-sub000", "", 0)]
    with pytest.raises(BrokerUnavailable, match="fanout topology has no partitions"):
        cfg.check_partitions(4)
    cfg.check_partitions(1)


def test_direct_topology_one_queue_per_subscription_and_partition() -> None:
    cfg = RabbitMQDriverConfig(queue_type="CLASSIC", exchange_type="DIRECT")
    qs = subscription_queues("t", "t-sub001", 3, cfg)
    assert qs == [QueueSpec(f"t-t-sub001-part-{j}", str(j), j) for j in range(3)]
    cfg.check_partitions(16)


def test_streams_belong_to_the_topic_and_are_shared_by_subscriptions() -> None:
    direct = RabbitMQDriverConfig(queue_type="STREAM", exchange_type="DIRECT")
    streams = topic_queues("t", 2, direct)
    assert streams == [QueueSpec("t-stream-part-0", "0", 0), QueueSpec("t-stream-part-1", "1", 1)]
    # two subscriptions read the same streams (consumers at their own offsets), no copies
    assert subscription_queues("t", "a", 2, direct) == subscription_queues("t", "b", 2, direct)
    fanout = RabbitMQDriverConfig(queue_type="STREAM", exchange_type="FANOUT")
    assert topic_queues("t", 1, fanout) == [QueueSpec("t-stream", "", 0)]
    assert direct.queue_declare_arguments() == {"x-queue-type": "stream"}


def test_stream_consumers_of_one_subscription_split_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_brokerperf.brokers.rabbitmq.driver as mod

    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:1", mode="process")
    seen: list[tuple[list[int], bool]] = []

    def capture(params: object, exchange: str, queues: list[QueueSpec],
                cfg: RabbitMQDriverConfig, declare: bool, failover: object = ()) -> None:
        seen.append(([q.partition for q in queues], declare))

    monkeypatch.setattr(mod, "_RabbitConsumer", capture)
    stream = RabbitMQDriver(ep, RabbitMQDriverConfig(queue_type="STREAM", exchange_type="DIRECT"),
                            topic_partitions={"t": 4})
    for k in range(3):
        stream.consumer("t", "t-sub000", f"c{k}", member=k, members=3)
    assert seen == [([0, 3], False), ([1], False), ([2], False)]
    seen.clear()
    # classic/quorum queues are shared by competing consumers: every member reads all
    quorum = RabbitMQDriver(ep, RabbitMQDriverConfig(queue_type="QUORUM", exchange_type="DIRECT"),
                            topic_partitions={"t": 2})
    quorum.consumer("t", "t-sub000", "c1", member=1, members=2)
    assert seen == [([0, 1], True)]


def test_durability_levels_map_to_queue_types() -> None:
    c1 = config_for_durability(1, 3)
    assert (c1.queue_type, c1.message_persistence) == ("QUORUM", True)
    assert dict(c1.queue_arguments)["x-quorum-initial-group-size"] == 3
    assert durability_of(c1, 3)["level"] == 1
    c2 = config_for_durability(2, 3)
    assert c2.queue_type == "STREAM" and durability_of(c2, 3)["level"] == 2
    assert durability_of(config_for_durability(3, 1), 1)["level"] == 3
    assert durability_of(config_for_durability(4, 1), 1)["level"] == 4
    with pytest.raises(BrokerUnavailable, match="needs replication to a majority of 3"):
        config_for_durability(1, 1)
    with pytest.raises(BrokerUnavailable, match="no replication"):
        config_for_durability(3, 3)
    classic = RabbitMQDriverConfig(message_persistence=True)
    assert durability_of(classic, 1)["level"] is None
    assert "once consumed" in durability_of(classic, 1)["reason"]


def test_create_driver_uses_the_direct_quorum_default_and_the_endpoint_uris() -> None:
    assert brokers.get("rabbitmq").default_driver_file(1, "tailread").name == "rabbitmq-quorum.yaml"
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap="amqp://127.0.0.1:5999,amqp://127.0.0.1:6000",
                        mode="process", nodes=1, version="3.10.8",
                        durability=4)
    d = create_driver(ep, shipped_driver("rabbitmq-omb"))
    assert isinstance(d, RabbitMQDriver)
    assert d.config.queue_type == "STREAM"  # durability level 4 on one node
    assert d.uris == ["amqp://127.0.0.1:5999", "amqp://127.0.0.1:6000"]
    desc = d.config.topic_settings()
    assert desc["queueType"] == "stream" and desc["exchangeType"] == "fanout"
    assert pickle.loads(pickle.dumps(d)).uris == d.uris


def test_every_client_knows_every_node_its_own_first_for_failover() -> None:
    ep = BrokerEndpoint(kind="rabbitmq", mode="process", nodes=3, version="3.10.8",
                        bootstrap="amqp://h:1,amqp://h:2,amqp://h:3")
    d = create_driver(ep, None)
    assert isinstance(d, RabbitMQDriver)
    orders = {tuple(d._uris_for(f"client-{i}")) for i in range(30)}
    assert all(sorted(o) == sorted(d.uris) for o in orders)  # every node, once
    assert {o[0] for o in orders} == set(d.uris)  # clients spread over the nodes
    assert orders <= {tuple(d.uris[k:] + d.uris[:k]) for k in range(3)}  # then in turn


def test_bad_list_item_names_its_own_line(tmp_path: Path) -> None:
    text = "name: RabbitMQ\namqpUris:\n  - amqp://a:5672\n  - http://b:5672\n"
    with pytest.raises(ConfigError, match=r"rabbitmq\.yaml:4: amqpUris\[1\] = 'http://b:5672'"):
        RabbitMQDriverConfig.from_yaml(write(tmp_path, text))


def test_quoted_flag_names_file_line_and_fix(tmp_path: Path) -> None:
    text = "name: RabbitMQ\nqueueType: QUORUM\nmessagePersistence: 'yes'\n"
    with pytest.raises(ConfigError, match=r"rabbitmq\.yaml:3: messagePersistence = 'yes': "
                       r"expected true or false, got str\. Fix: write `messagePersistence"):
        RabbitMQDriverConfig.from_yaml(write(tmp_path, text))


def test_the_model_and_the_config_share_one_declaration_of_the_choices() -> None:
    # declared once (.choices): neither the config nor the model repeats the tuples
    from pytest_brokerperf.brokers.rabbitmq import choices, config, driver_file

    for name in ("QUEUE_TYPES", "EXCHANGE_TYPES", "STREAM_OFFSETS"):
        assert getattr(driver_file, name) is getattr(choices, name)
    assert config.QUEUE_TYPES is choices.QUEUE_TYPES
    assert config.EXCHANGE_TYPES is choices.EXCHANGE_TYPES
