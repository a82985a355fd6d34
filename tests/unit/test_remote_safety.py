"""Remote-cluster options, the safety plan, caps, cleanup selection and secret handling."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf import TailRead
from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.cleanup import parse_age, select
from pytest_brokerperf.brokers.kafka.config import KafkaDriverConfig, shipped_driver
from pytest_brokerperf.brokers.kafka.node_config import ExtraListener, NodePorts, node_config
from pytest_brokerperf.brokers.kafka.remote import load_client_config
from pytest_brokerperf.config.settings import REMOTE_MAX_BYTES, REMOTE_MAX_RATE, Settings
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.scenario_library import safety


def resolve(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {},
                            run_id="20260101-120000-abcdef")


# --------------------------------------------------------------------------- options


def test_kafka_bootstrap_implies_remote_with_conservative_caps() -> None:
    s = resolve(kafka_bootstrap="b1:9092, b2:9093")
    assert s.kafka_bootstrap == "b1:9092,b2:9093"
    assert s.provision_effective == "remote" and s.remote
    assert s.effective_max_bytes == REMOTE_MAX_BYTES == 1024**3
    assert s.effective_max_rate == REMOTE_MAX_RATE == (10 * 1024**2, "B/s")
    local = resolve()
    assert local.effective_max_bytes is None and local.effective_max_rate is None
    assert resolve(max_bytes="1MB").effective_max_bytes == 1_000_000


@pytest.mark.parametrize(("raw", "value"), [
    ("5000", (5000.0, "msg/s")), ("50k", (50000.0, "msg/s")),
    ("20MiB/s", (20 * 1024**2, "B/s")), ("1.5 GB/s", (1.5e9, "B/s")),
])
def test_rate_cap_in_messages_or_bytes(raw: str, value: tuple[float, str]) -> None:
    assert resolve(max_rate=raw).max_rate == value


@pytest.mark.parametrize(("kw", "needle"), [
    ({"kafka_bootstrap": "nohost"}, "not HOST:PORT"),
    ({"kafka_bootstrap": "h:70000"}, "not HOST:PORT"),
    ({"max_bytes": "lots"}, "expected a size"),
    ({"max_rate": "10 parsecs/s"}, "byte rate"),
    ({"owner": "a b"}, "expected 1-64"),
    ({"prometheus": "ftp://x/metrics"}, "not an http"),
    ({"kafka_bootstrap": "h:1", "provision": "process"}, "drop one of them"),
    ({"provision": "remote"}, "--kafka-bootstrap=HOST:PORT"),
])
def test_bad_remote_options_are_usage_errors(kw: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve(**kw)
    assert needle in str(exc.value)


def test_kafka_protocol_brokers_share_kafkas_remote_flags() -> None:
    # the flags live in the broker packages: Redpanda reaches a remote cluster through
    # --kafka-bootstrap, and remote mode without it is refused before anything starts
    with pytest.raises(ConfigError, match="address for redpanda: pass --kafka-bootstrap"):
        resolve(provision="remote", broker="redpanda")
    assert resolve(provision="remote", broker="redpanda",
                   kafka_bootstrap="h:1").provision_effective == "remote"


def test_client_config_needs_its_own_clusters_address(tmp_path: Path) -> None:
    # a Pulsar address does not make a Kafka client config meaningful
    cfg = tmp_path / "c.properties"
    cfg.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(ConfigError, match=r"--kafka-config .* needs --kafka-bootstrap"):
        resolve(kafka_config=str(cfg), pulsar_url="pulsar://h:6650")


def test_client_config_needs_a_remote_cluster(tmp_path: Path) -> None:
    cfg = tmp_path / "c.properties"
    cfg.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(ConfigError, match="needs --kafka-bootstrap"):
        resolve(kafka_config=str(cfg))
    assert resolve(kafka_config=str(cfg), kafka_bootstrap="h:1").kafka_config == cfg


def test_client_config_is_translated_and_notes_never_hold_secrets(tmp_path: Path) -> None:
    cfg = tmp_path / "client.properties"
    cfg.write_text(
        "bootstrap.servers=ignored:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="bench" password="hunter2-secret";\n'
        "ssl.truststore.password=jks-secret\nlinger.ms=5\n")
    settings, notes = load_client_config(cfg)
    assert settings == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": "bench", "sasl.password": "hunter2-secret",
                        "linger.ms": "5"}
    text = "\n".join(notes)
    assert "hunter2-secret" not in text and "jks-secret" not in text
    assert "ssl.truststore.password=***" in text


def test_redacted_endpoint_hides_client_and_broker_secrets() -> None:
    ep = BrokerEndpoint(
        kind="kafka", bootstrap="h:1", mode="remote",
        client_config={"sasl.password": "p1", "sasl.username": "u"},
        info={"broker_overrides": {"listener.name.sasl.plain.sasl.jaas.config": "pw=p2",
                                   "num.io.threads": "2"}})
    text = repr(ep.redacted())
    assert "p1" not in text and "p2" not in text and "'u'" in text and "'2'" in text


# --------------------------------------------------------------------------- naming


def test_owner_prefix_and_creation_time_from_the_name() -> None:
    s = resolve(owner="Alice@CI.box")
    prefix = safety.topic_prefix(s, "tailread", "tests/x.py::test[kafka]")
    assert prefix.startswith("bp-alice-ci-box-20260101-120000-abcdef-tailread-")
    assert prefix == safety.topic_prefix(s, "tailread", "tests/x.py::test[kafka]")
    assert safety.created_at(prefix + "-000-sub000") == dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    assert safety.created_at("bp-alice-manual") is None
    handmade = Settings.resolve({}, {}, {}, run_id="nightly")
    assert safety.created_at(safety.topic_prefix(handmade, "tailread", "t")) is not None


def test_default_owner_is_user_at_host() -> None:
    owner = resolve().owner_effective
    assert "@" in owner and owner.split("@")[0]


def test_cleanup_selects_only_old_names_with_a_run_id() -> None:
    now = dt.datetime(2026, 1, 3, tzinfo=dt.UTC)
    names = ["bp-ci-20260101-000000-aaaaaa-tailread-000001-000",  # 2 days old
             "bp-ci-20260102-230000-bbbbbb-tailread-000001-000",  # 1 hour old
             "bp-ci-manual", "other-20200101-000000-cccccc-x"]
    got = {x.name: x.delete for x in select("topic", names, "bp-ci-", parse_age("1d"), now)}
    assert got == {names[0]: True, names[1]: False, "bp-ci-manual": False}
    assert parse_age("90m") == 5400 and parse_age("2d") == 172800 and parse_age("30") == 30
    with pytest.raises(ConfigError, match="--older-than"):
        parse_age("yesterday")


# --------------------------------------------------------------------------- plans


def _plan(settings: Settings, mode: str = "remote", nodes: int = 3, *,
          driver_cfg: KafkaDriverConfig | None = None, rate: float = 1000,
          changes: tuple[str, ...] = ()) -> safety.ScenarioPlan:
    ep = BrokerEndpoint(kind="kafka", bootstrap="b1:9092", mode=mode, nodes=nodes,
                        security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
    prepared = TailRead(rate=rate).prepare(settings, ep)
    driver: Any = create_driver(ep, None, "tailread")
    if driver_cfg is not None:
        driver.config = driver_cfg
    run = RunPlan(rate=prepared.rate, period_s=1.0, warmup_max_s=10.0, measure_s=15.0,
                  topic_prefix=safety.topic_prefix(settings, "tailread", "t"))
    driver, _ = safety.safe_driver(driver, settings, ep, prepared, run)
    return safety.build_plan(settings, ep, prepared, driver, run, test_id="t::x",
                             cluster_changes=changes)


def test_remote_plan_lists_what_will_be_created_and_bounds_retention() -> None:
    plan = _plan(resolve(kafka_bootstrap="b1:9092", owner="ci"))
    assert plan.replication_factor == 3 and plan.partitions == [4]
    assert plan.topics == [plan.prefix + "-000"] and len(plan.consumer_groups) == 1
    assert plan.messages_max == 25_000 and plan.bytes_max == 25_000 * 1024
    assert plan.topic_config["min.insync.replicas"] == "2"
    assert int(plan.topic_config["retention.ms"]) >= 3_600_000
    assert int(plan.topic_config["retention.bytes"]) >= 16 * 1024**2
    assert "segment.ms" in plan.topic_config
    assert plan.refusals == []
    text = "\n".join(plan.lines())
    for needle in ("before anything is created", "b1:9092 (SASL_SSL/PLAIN)", "retention.ms=",
                   "replication factor 3", "1,000 msg/s x 1,024 B", "cluster-wide: none",
                   "within caps", "--prefix bp-ci- --older-than 1d", "<= 73.2 MiB stored"):
        assert needle in text, needle


def test_local_plan_keeps_the_driver_file_as_is() -> None:
    plan = _plan(resolve(), mode="process", nodes=1)
    assert "retention.ms" not in plan.topic_config and plan.replication_factor == 1
    assert plan.max_bytes is None and plan.refusals == []


def test_caps_refuse_naming_the_cap_and_the_flag() -> None:
    over_rate = _plan(resolve(kafka_bootstrap="b1:9092"), rate=20_000)
    (why,) = over_rate.refusals
    assert "rate cap 10 MiB/s" in why and "--brokerperf-max-rate" in why
    over_bytes = _plan(resolve(kafka_bootstrap="b1:9092", max_bytes="10MB"))
    assert any("byte cap" in r and "--brokerperf-max-bytes" in r for r in over_bytes.refusals)
    msgs = _plan(resolve(max_rate="500"), mode="process", nodes=1)
    assert any("1,000 msg/s is over the rate cap 500 msg/s" in r for r in msgs.refusals)
    assert "REFUSED" in "\n".join(msgs.lines())


def test_reset_true_and_cluster_changes_are_refused_remotely() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-latency")).with_overrides(reset=True)
    plan = _plan(resolve(kafka_bootstrap="b1:9092"), driver_cfg=cfg,
                 changes=("broker throttle 10 MiB/s",))
    assert any("reset: true" in r for r in plan.refusals)
    assert any("--brokerperf-allow-cluster-changes" in r for r in plan.refusals)
    allowed = _plan(resolve(kafka_bootstrap="b1:9092", allow_cluster_changes="true"),
                    changes=("broker throttle 10 MiB/s",))
    assert allowed.refusals == []
    ep = BrokerEndpoint(kind="kafka", bootstrap="b", mode="remote")
    with pytest.raises(ConfigError, match="--brokerperf-allow-cluster-changes"):
        safety.require_cluster_change(resolve(kafka_bootstrap="b:1"), ep, "a throttle")


def test_a_driver_files_own_finite_retention_wins() -> None:
    cfg = KafkaDriverConfig.from_yaml(shipped_driver("kafka-latency")).with_overrides(
        topic={"retention.ms": "600000", "retention.bytes": "-1"})
    plan = _plan(resolve(kafka_bootstrap="b1:9092"), driver_cfg=cfg)
    assert plan.topic_config["retention.ms"] == "600000"
    assert int(plan.topic_config["retention.bytes"]) > 0


# --------------------------------------------------------------------------- listeners


def test_sasl_listener_config_and_advertised_bind_port(tmp_path: Path) -> None:
    one = [NodePorts(1, 21001, 21002)]
    extra = [ExtraListener("SASL", bind_port=21003, advertised_port=21003,
                           protocol="SASL_PLAINTEXT")]
    cfg = node_config(one[0], one, data_dir=tmp_path, extra_listeners=extra)
    assert "SASL:SASL_PLAINTEXT" in cfg["listener.security.protocol.map"].split(",")
    assert "SASL://127.0.0.1:21003" in cfg["advertised.listeners"]
    from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

    KafkaProcessCluster(extra_listeners={"SASL": 0}, listener_protocols={"SASL": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match="listener protocol"):
        KafkaProcessCluster(extra_listeners={"SASL": 0}, listener_protocols={"SASL": "SSL"})


def test_a_refused_kafka_bootstrap_fails_at_once_saying_so() -> None:
    """Every bootstrap address refusing the connection is said in a second, not after the
    15 s timeout (issue 24: remote errors that say the wrong thing)."""
    import time

    from pytest_brokerperf.brokers.kafka.remote import remote_kafka_endpoint
    from pytest_brokerperf.brokers.provision.ports import free_port
    from pytest_brokerperf.core.errors import ClusterUnreachable

    port = free_port()
    settings = Settings.resolve({"brokerperf_kafka_bootstrap": f"127.0.0.1:{port}"}, {}, {})
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=rf"at 127.0.0.1:{port} did not answer: failed "
                       r"after \d+\.\d s \(all brokers down: .*Connection refused"):
        remote_kafka_endpoint(settings, timeout_s=15)
    assert time.monotonic() - started < 10
