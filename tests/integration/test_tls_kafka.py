"""Kafka over TLS (issue 29 item 3): a local cluster with SSL and SASL_SSL listeners from
a per-run CA, reached in remote mode with the right CA, a wrong CA and through an
address its certificate does not name; and a tail-read with ``--brokerperf-tls``.

One TLS cluster serves every remote check of the module; the tail-read starts its own
through the plugin. Key and SASL passwords are searched for in everything the project
prints or writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.kafka.remote import remote_kafka_endpoint
from pytest_brokerperf.brokers.provision.tls import make_tls_material
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ClusterUnreachable
from pytest_brokerperf.testing import PLAIN_SCENARIOS
from tests.support.forwarder import Forwarder

pytestmark = pytest.mark.integration
pytest.importorskip("trustme")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tls_kafka(_broker_session_lock: None) -> Iterator[KafkaProcessCluster]:
    cluster = KafkaProcessCluster(nodes=1, tls=True, heap="512m")
    with cluster:
        yield cluster


def _config(path: Path, lines: str) -> Settings:
    path.write_text(lines)
    return path


def _remote(bootstrap: str, config: Path) -> Settings:
    return Settings.resolve({"brokerperf_kafka_bootstrap": bootstrap,
                             "brokerperf_kafka_config": str(config)}, {}, {})


def _sasl_ssl_lines(cluster: KafkaProcessCluster, ca: Path) -> str:
    user, password = cluster.sasl_ssl_login()
    return ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password.reveal()}";\n'
            f"ssl.ca.location={ca}\n")


def test_a_tailread_with_brokerperf_tls_runs_over_the_tls_listener_and_leaks_no_secret(
        pytester: pytest.Pytester) -> None:
    """First in the module: the shared TLS cluster starts after it, never beside it."""
    results, junit = pytester.path / "res", pytester.path / "junit.xml"
    basetemp = pytester.path / "bt"
    pytester.makeini("[pytest]\n")
    run = pytester.runpytest_subprocess(
        str(REPO / "scenarios" / "test_tailread.py"), "-m", "tailread", "-k", PLAIN_SCENARIOS,
        "--broker=kafka", "--brokerperf-provision=process", "--brokerperf-tls",
        "--brokerperf-rate=200", "--brokerperf-duration=2", "--brokerperf-warmup=3",
        "--brokerperf-broker-warmup=0",
        "--no-brokerperf-broker-metrics", "--brokerperf-inconclusive=warn",
        f"--brokerperf-results={results}", f"--junitxml={junit}", f"--basetemp={basetemp}",
        "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", str(pytester.path),
        timeout=300)
    run.assert_outcomes(passed=1, warnings=run.parseoutcomes().get("warnings", 0))
    (rec,) = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines()]
    assert rec["tls"] == {"on": True, "protocol": "SSL", "local_ca": True}
    assert rec["delivery"]["lost"] == 0 and rec["ack_rate_msg_s"] > 0
    broker = rec["manifest"]["broker"]
    tls = broker["info"]["tls"]
    assert tls["protocol"] == "SSL" and tls["server_names"] == ["localhost", "127.0.0.1"]
    assert broker["client_config"] == {"security.protocol": "SSL", "ssl.ca.location":
                                       tls["ca_file"]}
    (listeners,) = broker["info"]["tls_listeners"]
    # the clients used the SSL listener, not the plaintext one
    assert broker["bootstrap"] == f"127.0.0.1:{listeners['SSL']}" != tls["plaintext"]
    # the CA and key went with the broker's working directory; its config file stays
    assert not Path(tls["ca_file"]).exists()
    (config,) = {p.resolve() for p in basetemp.glob("broker-kafka*/config/server-1.properties")}
    props = dict(line.split("=", 1) for line in config.read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    secrets = [props["ssl.key.password"]]
    jaas = props["listener.name.sasl_ssl.plain.sasl.jaas.config"].replace("\\", "")
    secrets += [part.split('"')[1] for part in jaas.split() if part.startswith(
        ("password=", "user_"))]
    assert len(secrets) == 4 and all(len(s) >= 16 for s in secrets)
    outputs = [("stdout", run.stdout.str()), ("stderr", run.stderr.str()),
               ("junit", junit.read_text())]
    outputs += [(str(p), p.read_bytes().decode("utf-8", "replace"))
                for p in results.rglob("*") if p.is_file()]
    assert len(outputs) > 5
    for secret in secrets:
        assert [name for name, text in outputs if secret in text] == []
    assert not any("ENCRYPTED PRIVATE KEY" in text for _, text in outputs)


def test_remote_mode_over_sasl_ssl_with_the_right_ca(
        tls_kafka: KafkaProcessCluster, tmp_path: Path) -> None:
    ep = tls_kafka.endpoint
    assert ep.tls is not None
    bootstrap = tls_kafka.tls_bootstrap("SASL_SSL")
    config = _config(tmp_path / "client.properties",
                     _sasl_ssl_lines(tls_kafka, Path(ep.tls.ca_file)))
    remote = remote_kafka_endpoint(_remote(bootstrap, config), timeout_s=15)
    assert (remote.security_protocol, remote.sasl_mechanism) == ("SASL_SSL", "PLAIN")
    assert remote.tls_record() == {"on": True, "protocol": "SASL_SSL", "local_ca": False}
    assert remote.nodes == 1
    # the metadata the cluster returned points at the SASL_SSL listener, not the plaintext
    (broker,) = remote.info["brokers"]
    assert broker.endswith(bootstrap) and ep.tls.plaintext not in broker
    _, password = tls_kafka.sasl_ssl_login()
    assert password.reveal() not in json.dumps(remote.redacted())


def test_a_wrong_ca_is_named_as_a_refused_certificate_at_once(
        tls_kafka: KafkaProcessCluster, tmp_path: Path) -> None:
    other = make_tls_material(tmp_path / "other-ca")
    bootstrap = tls_kafka.tls_bootstrap("SSL")
    config = _config(tmp_path / "wrong-ca.properties",
                     f"security.protocol=SSL\nssl.ca.location={other.ca_cert}\n")
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as info:
        remote_kafka_endpoint(_remote(bootstrap, config), timeout_s=15)
    assert time.monotonic() - started < 10  # not the whole timeout
    message = str(info.value)
    assert message.startswith(f"the remote kafka cluster at {bootstrap} failed the TLS "
                              "handshake after ")
    assert (f"certificate verify failed: the server's certificate is not signed by a CA in "
            f"{other.ca_cert}") in message
    assert message.endswith(f"fix: set ssl.ca.location in --kafka-config={config} to the PEM "
                            "file of the CA that signed the cluster's certificate (now: "
                            f"{other.ca_cert})")


def test_an_address_the_certificate_does_not_name_is_named_at_once(
        tls_kafka: KafkaProcessCluster, tmp_path: Path) -> None:
    ep = tls_kafka.endpoint
    assert ep.tls is not None
    host, port = tls_kafka.tls_bootstrap("SASL_SSL").split(":")
    try:
        proxy = Forwarder("127.0.0.2", (host, int(port)))
    except OSError as exc:  # pragma: no cover - a loopback without 127/8
        pytest.skip(f"cannot bind 127.0.0.2: {exc}")
    try:
        config = _config(tmp_path / "client.properties",
                         _sasl_ssl_lines(tls_kafka, Path(ep.tls.ca_file)))
        started = time.monotonic()
        with pytest.raises(ClusterUnreachable) as info:
            remote_kafka_endpoint(_remote(proxy.address, config), timeout_s=15)
        assert time.monotonic() - started < 10
    finally:
        proxy.close()
    message = str(info.value)
    assert (f"at {proxy.address} failed the TLS handshake after") in message
    assert ("certificate verify failed: the server's certificate does not name 127.0.0.2, "
            "the address connected to") in message
    assert ("fix: connect through a host name or address the certificate carries "
            f"(--kafka-bootstrap={proxy.address})") in message
    _, password = tls_kafka.sasl_ssl_login()
    assert password.reveal() not in message


def test_the_read_back_reads_over_tls(tls_kafka: KafkaProcessCluster) -> None:
    """The power-cut read-back used a plaintext consumer whatever the endpoint said."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from pytest_brokerperf.brokers.kafka.readback import KafkaReadBack
    from pytest_brokerperf.core.header import KIND_DATA, MAGIC, VERSION, pack

    ep = tls_kafka.endpoint
    topic = "tls-readback"
    admin = AdminClient({**ep.client_config, "bootstrap.servers": ep.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({**ep.client_config, "bootstrap.servers": ep.bootstrap})
    for seq in range(3):
        producer.produce(topic, pack(MAGIC, VERSION, KIND_DATA, 7, seq, 0, 0) + b"x" * 8)
    assert producer.flush(30) == 0
    present, read, complete = KafkaReadBack().read_back(ep, [topic])
    assert (present, read, complete) == ({7: 0b111}, 3, True)
