"""TLS without a broker: the per-run CA and its files, Kafka's, RabbitMQ's and Pulsar's TLS
listener config, the clients' TLS settings, the endpoint's TLS record, the certificate
diagnosis (remote Kafka and Pulsar) and the refusals of --brokerperf-tls."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, TlsClient
from pytest_brokerperf.brokers.kafka.node_config import KafkaTls, NodePorts, node_config
from pytest_brokerperf.brokers.provision.tls import (
    TlsMaterial,
    certificate_problem,
    make_ca,
    make_tls_material,
)
from pytest_brokerperf.brokers.pulsar.process import PulsarTls
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.redaction import Secret

pytest.importorskip("trustme")


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def test_the_server_key_is_encrypted_and_opens_with_its_password_only(tmp_path: Path) -> None:
    """The PEM key (RabbitMQ) and the PKCS#12 key store (Kafka: Java 17 reads its classic
    encryption) hold the certificate's key, each under the run's key password only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    m = make_tls_material(tmp_path)
    pem = m.server_key.read_bytes()
    assert pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    for path in (m.server_key, m.server_key_store):
        assert path.stat().st_mode & 0o077 == 0
    with pytest.raises(TypeError):  # no password: refused
        serialization.load_pem_private_key(pem, password=None)
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(pem, password=b"wrong")
    password = m.key_password.reveal().encode()
    key = serialization.load_pem_private_key(pem, password=password)
    cert = x509.load_pem_x509_certificates(m.server_chain.read_bytes())[0]
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()  # type: ignore[union-attr]
    store = m.server_key_store.read_bytes()
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(store, b"wrong")
    stored_key, stored_cert, _ = pkcs12.load_key_and_certificates(store, password)
    assert stored_cert == cert
    assert stored_key is not None and stored_key.public_key().public_numbers() == (  # type: ignore[union-attr]
        key.public_key().public_numbers())  # type: ignore[union-attr]


def test_the_certificate_names_localhost_and_the_loopback_address(material: TlsMaterial) -> None:
    import ipaddress

    from cryptography import x509

    cert = x509.load_pem_x509_certificate(material.server_chain.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert material.hosts == ("localhost", "127.0.0.1")


def test_the_key_password_is_never_shown(material: TlsMaterial) -> None:
    password = material.key_password.reveal()
    assert len(password) >= 24
    for shown in (repr(material), str(material), str(material.as_info())):
        assert password not in shown
    assert "***" in repr(material)


def _serve_elsewhere(material: TlsMaterial) -> tuple[Iterator[str], str]:
    """:func:`_serve` on 127.0.0.2, an address the certificate does not carry, and its
    address (a skip where the loopback has no 127/8)."""
    try:
        server = _serve(material, "127.0.0.2")
        return server, next(server)
    except OSError as exc:  # pragma: no cover - a loopback without 127/8
        pytest.skip(f"cannot bind 127.0.0.2: {exc}")


def _serve(material: TlsMaterial, host: str) -> Iterator[str]:
    """A TLS server on ``host`` that completes handshakes (Python's ssl, no broker)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(material.server_chain, material.server_key,
                        password=material.key_password.reveal())
    srv = socket.create_server((host, 0))
    stop = threading.Event()

    def loop() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            try:
                with ctx.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield f"{host}:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(5)
        srv.close()


@pytest.fixture
def tls_server(material: TlsMaterial) -> Iterator[str]:
    yield from _serve(material, "127.0.0.1")


def test_a_certificate_from_the_right_ca_at_a_name_it_carries_has_no_problem(
        material: TlsMaterial, tls_server: str) -> None:
    assert certificate_problem(tls_server, str(material.ca_cert)) is None


def test_a_certificate_of_another_ca_is_named_as_such(
        material: TlsMaterial, tls_server: str, tmp_path: Path) -> None:
    other = make_tls_material(tmp_path)
    problem = certificate_problem(tls_server, str(other.ca_cert))
    assert problem is not None
    assert problem.startswith(f"the server's certificate is not signed by a CA in {other.ca_cert}")


def test_an_address_the_certificate_does_not_carry_is_named(material: TlsMaterial) -> None:
    server, address = _serve_elsewhere(material)
    try:
        problem = certificate_problem(address, str(material.ca_cert))
    finally:
        server.close()
    assert problem is not None
    assert problem.startswith("the server's certificate does not name 127.0.0.2")


def test_a_closed_port_is_no_certificate_problem(material: TlsMaterial) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert certificate_problem(f"127.0.0.1:{port}", str(material.ca_cert)) is None


# -- Kafka's TLS listeners ------------------------------------------------------------


def _kafka_tls(material: TlsMaterial) -> KafkaTls:
    return KafkaTls(ca_cert=material.ca_cert, server_key_store=material.server_key_store,
                    key_password=material.key_password,
                    users={"admin": Secret("adm-pw-123"), "bench": Secret("bench-pw-456")})


def test_kafka_tls_listeners_use_a_pkcs12_key_store_and_the_run_s_ca(
        material: TlsMaterial, tmp_path: Path) -> None:
    node = NodePorts(node_id=1, port=9092, controller_port=9093, ssl_port=9094,
                     sasl_ssl_port=9095)
    cfg = node_config(node, [node], data_dir=tmp_path, tls=_kafka_tls(material))
    assert cfg["listeners"] == ("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,"
                                "SSL://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095")
    assert cfg["advertised.listeners"].endswith("SSL://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095")
    assert "SSL:SSL" in cfg["listener.security.protocol.map"].split(",")
    assert "SASL_SSL:SASL_SSL" in cfg["listener.security.protocol.map"].split(",")
    assert cfg["inter.broker.listener.name"] == "PLAINTEXT"
    assert cfg["ssl.keystore.type"] == "PKCS12" and cfg["ssl.truststore.type"] == "PEM"
    assert cfg["ssl.keystore.location"] == str(material.server_key_store)
    assert cfg["ssl.truststore.certificates"].count("BEGIN CERTIFICATE") == 1
    assert cfg["ssl.key.password"] == cfg["ssl.keystore.password"] == (
        material.key_password.reveal())
    assert cfg["sasl.enabled.mechanisms"] == "PLAIN"
    jaas = cfg["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert 'user_bench="bench-pw-456"' in jaas and 'username="admin"' in jaas
    # the dataclass's repr (a traceback's locals) shows no secret
    assert "bench-pw-456" not in repr(_kafka_tls(material))
    assert material.key_password.reveal() not in repr(_kafka_tls(material))


def test_kafka_without_tls_has_no_ssl_setting(tmp_path: Path) -> None:
    node = NodePorts(node_id=1, port=9092, controller_port=9093)
    cfg = node_config(node, [node], data_dir=tmp_path)
    assert not any(k.startswith(("ssl.", "sasl.")) for k in cfg)
    assert "SSL" not in cfg["listeners"]


def test_kafka_tls_needs_the_tls_ports(material: TlsMaterial, tmp_path: Path) -> None:
    node = NodePorts(node_id=1, port=9092, controller_port=9093)
    with pytest.raises(ConfigError, match="TLS listeners need ssl_port"):
        node_config(node, [node], data_dir=tmp_path, tls=_kafka_tls(material))


def test_a_tls_cluster_reserves_the_tls_listener_names() -> None:
    from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

    KafkaProcessCluster(extra_listeners={"SSL": 0})  # a plain cluster may name one SSL
    with pytest.raises(ConfigError, match="bad extra listener name 'SSL'"):
        KafkaProcessCluster(extra_listeners={"SSL": 0}, tls=True)


# -- the endpoint's record ----------------------------------------------------------


def test_the_record_says_whether_clients_spoke_tls_and_how() -> None:
    local = BrokerEndpoint(kind="kafka", bootstrap="127.0.0.1:9094", mode="process",
                           security_protocol="SSL",
                           tls=TlsClient(protocol="SSL", ca_file="/w/tls/ca.pem",
                                         plaintext="127.0.0.1:9092",
                                         server_names=("localhost", "127.0.0.1")))
    assert local.tls_record() == {"on": True, "protocol": "SSL", "local_ca": True}
    info = local.redacted()["info"]
    assert info["tls"] == {"protocol": "SSL", "ca_file": "/w/tls/ca.pem",
                           "plaintext": "127.0.0.1:9092",
                           "server_names": ["localhost", "127.0.0.1"]}
    remote = BrokerEndpoint(kind="kafka", bootstrap="b:9093", mode="remote",
                            security_protocol="SASL_SSL")
    assert remote.tls_record() == {"on": True, "protocol": "SASL_SSL", "local_ca": False}
    assert replace(remote, security_protocol="SASL_PLAINTEXT").tls_record()["on"] is False
    amqps = BrokerEndpoint(kind="rabbitmq", bootstrap="amqps://mq:5671/", mode="remote")
    assert amqps.tls_record() == {"on": True, "protocol": "amqps", "local_ca": False}
    ssl_pulsar = BrokerEndpoint(kind="pulsar", bootstrap="pulsar+ssl://p:6651", mode="remote")
    assert ssl_pulsar.tls_record() == {"on": True, "protocol": "pulsar+ssl", "local_ca": False}
    assert replace(ssl_pulsar, bootstrap="pulsar://p:6650").tls_record()["on"] is False
    plain = BrokerEndpoint(kind="kafka", bootstrap="127.0.0.1:9092", mode="process")
    assert plain.tls_record() == {"on": False, "protocol": None, "local_ca": False}


# -- refusals ------------------------------------------------------------------------


def _settings(**cli: object) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {})


def test_tls_is_offered_by_local_kafka_processes() -> None:
    s = _settings(tls=True)
    assert brokers.get("kafka").tls_problem(s, "process") is None
    assert brokers.get("kafka").tls_problem(_settings(), "container") is None  # flag off


@pytest.mark.parametrize(("kind", "mode", "needle"), [
    ("kafka", "container", "kafka in container mode has no TLS listener in this version "
                           "(it can in: process); drop the flag for kafka, or use "
                           "--brokerperf-provision=process"),
    ("pulsar", "container", "pulsar in container mode has no TLS listener in this version (it "
                            "can in: process); drop the flag for pulsar, or use "
                            "--brokerperf-provision=process"),
    ("tansu", "process", "tansu in process mode has no TLS listener"),
    ("kafka", "remote", "a remote cluster's TLS is the client's setting: drop the flag and "
                        "put security.protocol=SSL"),
    ("pulsar", "remote", "or pulsar+ssl:// in --pulsar-url with tlsTrustCertsFilePath in "
                         "--pulsar-config"),
])
def test_tls_is_refused_where_no_listener_serves_it(kind: str, mode: str, needle: str) -> None:
    problem = brokers.get(kind).tls_problem(_settings(tls=True), mode)
    assert problem is not None
    assert problem.startswith("--brokerperf-tls (from ")
    assert needle in problem


def test_a_refused_tls_start_raises_before_anything_starts(tmp_path: Path) -> None:
    from pytest_brokerperf.core.errors import BrokerUnavailable

    with pytest.raises(BrokerUnavailable, match="--brokerperf-tls"):
        brokers.get("pulsar").start("container", _settings(tls=True), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_ca_issues_certificates_that_verify_against_it(tmp_path: Path) -> None:
    ca = make_ca()
    a = make_tls_material(tmp_path / "a", ca=ca)
    b = make_tls_material(tmp_path / "b", ("other.invalid",), ca=ca)
    assert a.ca_cert.read_bytes() == b.ca_cert.read_bytes()
    with pytest.raises(ValueError):
        make_tls_material(tmp_path / "c", ())


# -- RabbitMQ's amqps listener --------------------------------------------------------


def test_rabbitmq_amqps_listener_conf(tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.rabbitmq.process import RabbitTls, node_conf

    m = make_tls_material(tmp_path)  # PBES2: what Erlang's public_key reads
    conf = node_conf(5672, nodes=1, tls=RabbitTls(5671, m))
    assert conf["listeners.tcp.1"] == "127.0.0.1:5672"
    assert conf["listeners.ssl.default"] == "127.0.0.1:5671"
    assert (conf["ssl_options.cacertfile"], conf["ssl_options.certfile"],
            conf["ssl_options.keyfile"]) == (str(m.ca_cert), str(m.server_chain),
                                             str(m.server_key))
    assert conf["ssl_options.password"] == m.key_password.reveal()
    assert conf["ssl_options.verify"] == "verify_none"
    assert not any(k.startswith(("ssl_options", "listeners.ssl"))
                   for k in node_conf(5672, nodes=1))
    assert m.key_password.reveal() not in repr(RabbitTls(5671, m))


def test_tls_is_offered_by_local_rabbitmq_processes_only() -> None:
    s = _settings(tls=True)
    assert brokers.get("rabbitmq").tls_problem(s, "process") is None
    problem = brokers.get("rabbitmq").tls_problem(s, "container")
    assert problem is not None and "rabbitmq in container mode has no TLS listener" in problem


def test_rabbitmq_clients_trust_the_runs_ca_on_amqps_only() -> None:
    from pytest_brokerperf.brokers.rabbitmq.connection import _params

    tls = TlsClient(protocol="amqps", ca_file=str(Path(__file__)), plaintext=None)
    with pytest.raises(ssl.SSLError):  # the CA file is read: this one is no PEM
        _params("amqps://127.0.0.1:5671/", {}, "x", tls)
    plain = _params("amqp://127.0.0.1:5672/", {}, "x", tls)
    assert plain.ssl_options is None


# -- Pulsar's TLS listeners, clients and remote certificate checks -----------------------


def test_the_unencrypted_key_pulsar_reads_is_the_certificates_and_private(
        material: TlsMaterial) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from pytest_brokerperf.brokers.provision.tls import write_unencrypted_key

    path = write_unencrypted_key(material)
    assert path.parent == material.directory and path != material.server_key
    assert path.stat().st_mode & 0o777 == 0o600
    pem = path.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, no password
    key = serialization.load_pem_private_key(pem, password=None)
    cert = x509.load_pem_x509_certificates(material.server_chain.read_bytes())[0]
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()  # type: ignore[union-attr]
    assert material.server_key.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY")
    path.chmod(0o644)  # written again: private again
    assert write_unencrypted_key(material).stat().st_mode & 0o777 == 0o600


def _pulsar_tls(material: TlsMaterial) -> PulsarTls:
    return PulsarTls(certificate=material.server_chain,
                     key=material.directory / "server-key-unencrypted.pem", ca=material.ca_cert)


def test_pulsar_standalone_tls_listeners_conf(material: TlsMaterial) -> None:
    from pytest_brokerperf.brokers.pulsar.process import PulsarPorts, standalone_config

    tls = _pulsar_tls(material)
    ports = PulsarPorts(6650, 8080, broker_tls_port=6651, web_tls_port=8443)
    cfg = standalone_config(ports, tls=tls)
    # the plaintext ports stay (the standalone's own clients, the readiness checks)
    assert (cfg["brokerServicePort"], cfg["webServicePort"]) == ("6650", "8080")
    assert (cfg["brokerServicePortTls"], cfg["webServicePortTls"]) == ("6651", "8443")
    assert cfg["tlsCertificateFilePath"] == str(material.server_chain)
    assert cfg["tlsKeyFilePath"] == str(material.directory / "server-key-unencrypted.pem")
    assert cfg["tlsTrustCertsFilePath"] == str(material.ca_cert)
    assert cfg["tlsRequireTrustedClientCertOnConnect"] == "false"
    assert cfg["tlsAllowInsecureConnection"] == "false"
    assert cfg["advertisedAddress"] == "127.0.0.1"
    assert not any("Tls" in k or k.startswith("tls") for k in standalone_config(ports))
    # a key the broker would need a password for never goes in: Pulsar has no such key
    assert str(material.server_key) not in cfg.values()
    assert not any("assword" in k for k in cfg)
    # advertised listeners (a proxy in front): the internal one serves pulsar+ssl too
    listed = standalone_config(ports, tls=tls, extra_listeners={"proxy": 7000})
    assert listed["advertisedListeners"] == (
        "internal:pulsar://127.0.0.1:6650,internal:pulsar+ssl://127.0.0.1:6651,"
        "proxy:pulsar://127.0.0.1:7000")
    with pytest.raises(ConfigError, match="need broker_tls_port and web_tls_port"):
        standalone_config(PulsarPorts(6650, 8080), tls=tls)


def test_tls_is_offered_by_the_local_pulsar_standalone() -> None:
    from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone

    assert brokers.get("pulsar").tls_problem(_settings(tls=True), "process") is None
    assert PulsarStandalone(tls=True).tls and not PulsarStandalone().tls


def _pulsar_tls_endpoint(ca: Path) -> BrokerEndpoint:
    """What a TLS standalone's endpoint looks like (PulsarStandalone._make_endpoint)."""
    return BrokerEndpoint(
        kind="pulsar", bootstrap="pulsar+ssl://127.0.0.1:6651", mode="process",
        admin_url="https://127.0.0.1:8443",
        client_config={"tls_trust_certs_file_path": str(ca), "tls_validate_hostname": "true",
                       "tls_allow_insecure_connection": "false"},
        tls=TlsClient(protocol="pulsar+ssl", ca_file=str(ca),
                      plaintext="pulsar://127.0.0.1:6650",
                      server_names=("localhost", "127.0.0.1")))


def test_pulsar_clients_and_admin_trust_the_runs_ca_with_host_names_checked(
        material: TlsMaterial) -> None:
    from pytest_brokerperf.brokers.kafka.config import shipped_driver
    from pytest_brokerperf.brokers.pulsar.client import endpoint_ssl_context, tls_client_kwargs
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
    from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver

    ep = _pulsar_tls_endpoint(material.ca_cert)
    assert ep.tls_record() == {"on": True, "protocol": "pulsar+ssl", "local_ca": True}
    driver = PulsarDriver(ep, PulsarDriverConfig.from_yaml(shipped_driver("pulsar-local")))
    kwargs = driver.client_kwargs()
    assert kwargs["service_url"] == "pulsar+ssl://127.0.0.1:6651"
    assert kwargs["tls_trust_certs_file_path"] == str(material.ca_cert)
    # the driver file's default (tlsEnableHostnameVerification: false) does not win
    assert kwargs["tls_validate_hostname"] is True
    assert kwargs["tls_allow_insecure_connection"] is False
    rest = driver._rest()
    assert rest.base == "https://127.0.0.1:8443"
    assert rest.context is not None and rest.context.check_hostname
    assert rest.context.verify_mode == ssl.CERT_REQUIRED
    # the read-back takes the same settings (it used a plaintext client whatever was said)
    assert tls_client_kwargs(ep.client_config) == {
        "tls_trust_certs_file_path": str(material.ca_cert), "tls_validate_hostname": True,
        "tls_allow_insecure_connection": False}
    assert tls_client_kwargs({}) == {}
    assert endpoint_ssl_context("http://127.0.0.1:8080", ep.client_config) is None
    ctx = endpoint_ssl_context("https://127.0.0.1:8443", ep.client_config)
    assert ctx is not None and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1  # the run's CA only, not the system's


def _remote_pulsar(tmp_path: Path, service: str, admin: str, **conf: str) -> Settings:
    path = tmp_path / "client.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return Settings.resolve({"brokerperf_pulsar_url": service,
                             "brokerperf_pulsar_admin_url": admin,
                             "brokerperf_pulsar_config": str(path)}, {}, {})


def test_a_remote_pulsar_admin_api_signed_by_another_ca_is_named_at_once(
        material: TlsMaterial, tls_server: str, tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.pulsar.remote import remote_pulsar_endpoint
    from pytest_brokerperf.core.errors import ClusterUnreachable

    other = make_tls_material(tmp_path / "other")
    admin = f"https://{tls_server}"
    settings = _remote_pulsar(tmp_path, f"pulsar+ssl://{tls_server}", admin,
                              tlsTrustCertsFilePath=str(other.ca_cert),
                              authParams="token:never-shown-123")
    with pytest.raises(ClusterUnreachable) as info:
        remote_pulsar_endpoint(settings, timeout_s=5)
    message = str(info.value)
    assert message.startswith(f"the remote Pulsar admin API at {admin} failed the TLS "
                              "handshake after ")
    assert ("certificate verify failed: the server's certificate is not signed by a CA in "
            f"{other.ca_cert}") in message
    assert message.endswith(f"fix: set tlsTrustCertsFilePath in --pulsar-config="
                            f"{tmp_path / 'client.conf'} to the PEM file of the CA that signed "
                            f"the cluster's certificate (now: {other.ca_cert})")
    assert "never-shown-123" not in message


def test_a_remote_pulsar_service_certificate_is_checked_as_its_clients_check_it(
        material: TlsMaterial, tls_server: str, tmp_path: Path) -> None:
    from pytest_brokerperf.brokers.pulsar.remote import _check_service_certificate
    from pytest_brokerperf.core.errors import ClusterUnreachable

    service = f"pulsar+ssl://{tls_server}"
    right = {"tls_trust_certs_file_path": str(material.ca_cert), "tls_validate_hostname": "true"}
    settings = _remote_pulsar(tmp_path, service, "http://127.0.0.1:1")
    _check_service_certificate(service, settings, right, 5)  # passes
    _check_service_certificate(f"pulsar://{tls_server}", settings, {}, 5)  # no TLS: no check
    other = make_tls_material(tmp_path / "other")
    wrong = {"tls_trust_certs_file_path": str(other.ca_cert)}
    _check_service_certificate(service, settings,
                               {**wrong, "tls_allow_insecure_connection": "true"}, 5)
    with pytest.raises(ClusterUnreachable, match=(
            r"the remote Pulsar service URL \(binary protocol\) at pulsar\+ssl://127.0.0.1:\d+ "
            r"failed the TLS handshake after .* s: certificate verify failed: the server's "
            r"certificate is not signed by a CA in .*; fix: set tlsTrustCertsFilePath")):
        _check_service_certificate(service, settings, wrong, 5)
    server, address = _serve_elsewhere(material)
    try:
        elsewhere = f"pulsar+ssl://{address}"
        # the name is checked only when the clients check it
        _check_service_certificate(elsewhere, settings, {**right, "tls_validate_hostname":
                                                         "false"}, 5)
        with pytest.raises(ClusterUnreachable) as info:
            _check_service_certificate(elsewhere, settings, right, 5)
    finally:
        server.close()
    message = str(info.value)
    assert ("certificate verify failed: the server's certificate does not name 127.0.0.2, "
            "the address connected to") in message
    assert ("fix: connect through a host name or address the certificate carries "
            f"(--pulsar-url={elsewhere})") in message
