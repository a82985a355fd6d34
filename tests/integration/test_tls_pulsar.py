"""Pulsar over TLS: one local standalone with ``pulsar+ssl://`` and ``https://`` listeners
from a per-run CA; the project's driver (producer, consumer, admin) and the power-cut
read-back go over them, never the plaintext ports; remote mode reaches it with the right
CA, and names a wrong CA or an address the certificate does not carry at once.

One TLS standalone serves the whole module (about 10 s to start here).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_brokerperf.brokers import create_driver
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.config import shipped_driver
from pytest_brokerperf.brokers.provision.maven import resolve_pulsar
from pytest_brokerperf.brokers.provision.tls import certificate_problem, make_tls_material
from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver
from pytest_brokerperf.brokers.pulsar.process import PulsarStandalone
from pytest_brokerperf.brokers.pulsar.remote import remote_pulsar_endpoint
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable, ClusterUnreachable
from pytest_brokerperf.core.header import KIND_DATA, MAGIC, VERSION, pack
from tests.support.forwarder import Forwarder

pytestmark = pytest.mark.integration
pytest.importorskip("trustme")


@pytest.fixture(scope="module")
def tls_pulsar(_broker_session_lock: None) -> Iterator[PulsarStandalone]:
    try:
        resolve_pulsar()
    except BrokerUnavailable as e:
        pytest.skip(str(e))
    standalone = PulsarStandalone(nodes=1, tls=True)
    with standalone:
        yield standalone
    assert standalone.workdir is None or not (standalone.workdir / "tls").exists()


def _ports(ep: BrokerEndpoint) -> dict[str, int]:
    return dict(ep.info["ports"])


def _connected_ports() -> set[int]:
    """The loopback ports this process has TCP connections to now."""
    return {c.raddr.port for c in psutil.Process().net_connections("tcp")
            if c.raddr and c.raddr.ip == "127.0.0.1" and c.status == "ESTABLISHED"}


def _round_trip(driver: PulsarDriver, topic: str, pid: int, n: int = 50) -> set[int]:
    """``n`` harness messages through the driver's producer and consumer; the loopback
    ports this process was connected to while both were open."""
    admin = driver.admin()
    admin.create_topics([topic], [2])
    errors: list[tuple[bytes, str]] = []
    acked: list[bytes] = []
    consumer = driver.consumer(topic, "tls-check", "c0")
    producer = driver.producer(topic, "p0", lambda v, *_: acked.append(v),
                               lambda v, why: errors.append((v, why)))
    try:
        values = [pack(MAGIC, VERSION, KIND_DATA, pid, seq, 0, 0) + b"x" * 16
                  for seq in range(n)]
        sent = 0
        while sent < n:
            sent += producer.send_many(values[sent:], None)
            producer.service()
        assert producer.flush(30.0) == 0 and errors == []
        assert sorted(acked) == sorted(values)
        received: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(received) < n and time.monotonic() < deadline:
            received += [v for v, _ in consumer.receive(100, 1.0)]
        assert sorted(received) == sorted(values)
        ports = _connected_ports()
    finally:
        producer.close()
        consumer.close()
    read = admin.read_back([topic])  # the admin's REST calls, over its URL
    assert read["topics"] == {topic: {"partitions": 2}}
    admin.delete_topics([topic])
    admin.close()
    return ports


def test_the_standalone_serves_tls_with_the_runs_ca(tls_pulsar: PulsarStandalone) -> None:
    ep = tls_pulsar.endpoint
    ports = _ports(ep)
    assert ep.tls is not None and ep.tls.protocol == "pulsar+ssl"
    assert ep.bootstrap == f"pulsar+ssl://127.0.0.1:{ports['broker_tls']}"
    assert ep.admin_url == f"https://127.0.0.1:{ports['web_tls']}"
    assert ep.tls.plaintext == f"pulsar://127.0.0.1:{ports['broker']}" != ep.bootstrap
    assert ep.tls.server_names == ("localhost", "127.0.0.1")
    assert ep.tls_record() == {"on": True, "protocol": "pulsar+ssl", "local_ca": True}
    assert ep.redacted()["info"]["tls"]["ca_file"] == ep.tls.ca_file
    # the broker listens on both TLS ports, besides the plaintext ones
    proc = psutil.Process(ep.info["pids"][0])
    listening = {c.laddr.port for c in proc.net_connections("tcp") if c.status == "LISTEN"}
    assert {ports["broker"], ports["web"], ports["broker_tls"], ports["web_tls"]} <= listening
    for port in (ports["broker_tls"], ports["web_tls"]):
        assert certificate_problem(f"127.0.0.1:{port}", ep.tls.ca_file) is None
        assert certificate_problem(f"localhost:{port}", ep.tls.ca_file) is None
    # standalone.conf names the chain, the unencrypted key copy and the CA
    assert tls_pulsar.workdir is not None
    conf = dict(line.split("=", 1) for line in
                (tls_pulsar.workdir / "config" / "standalone.conf").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    assert conf["brokerServicePortTls"] == str(ports["broker_tls"])
    assert conf["webServicePortTls"] == str(ports["web_tls"])
    assert conf["tlsTrustCertsFilePath"] == ep.tls.ca_file
    key = Path(conf["tlsKeyFilePath"])
    assert key == Path(ep.info["tls_key"]["file"]) and key.parent == Path(ep.tls.ca_file).parent
    assert key.stat().st_mode & 0o777 == 0o600
    assert key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert Path(conf["tlsCertificateFilePath"]).read_text().startswith("-----BEGIN CERTIFICATE")


def test_the_driver_and_the_read_back_go_over_tls_not_the_plaintext_ports(
        tls_pulsar: PulsarStandalone) -> None:
    from pytest_brokerperf.brokers.pulsar.readback import PulsarReadBack

    ep = tls_pulsar.endpoint
    ports = _ports(ep)
    driver = create_driver(ep, shipped_driver("pulsar-local"))
    assert isinstance(driver, PulsarDriver)
    kwargs = driver.client_kwargs()
    assert kwargs["tls_validate_hostname"] is True
    assert kwargs["tls_trust_certs_file_path"] == ep.tls.ca_file  # type: ignore[union-attr]
    assert driver._rest().base == ep.admin_url
    used = _round_trip(driver, "tls-trip", pid=7)
    assert ports["broker_tls"] in used
    assert ports["broker"] not in used and ports["web"] not in used
    # the power-cut read-back: topics listed over https, read over pulsar+ssl
    admin = driver.admin()
    admin.create_topics(["tls-readback"], [1])
    producer = driver.producer("tls-readback", "p1", lambda *_: None, lambda *_: None)
    try:
        assert producer.send_many([pack(MAGIC, VERSION, KIND_DATA, 9, seq, 0, 0) + b"y" * 8
                                   for seq in range(3)], None) == 3
        assert producer.flush(30.0) == 0
    finally:
        producer.close()
    try:
        present, read, complete = PulsarReadBack().read_back(ep, ["tls-readback"])
        assert (present, read, complete) == ({9: 0b111}, 3, True)
    finally:
        admin.delete_topics(["tls-readback"])
        admin.close()


def _client_conf(path: Path, ca: str, hostname_check: bool = True) -> Path:
    path.write_text(f"tlsTrustCertsFilePath={ca}\n"
                    f"tlsEnableHostnameVerification={str(hostname_check).lower()}\n")
    return path


def _remote(service: str, admin: str, config: Path) -> Settings:
    return Settings.resolve({"brokerperf_pulsar_url": service,
                             "brokerperf_pulsar_admin_url": admin,
                             "brokerperf_pulsar_config": str(config),
                             "brokerperf_allow_cluster_changes": True}, {}, {})


def test_remote_mode_over_tls_with_the_right_ca(
        tls_pulsar: PulsarStandalone, tmp_path: Path) -> None:
    ep = tls_pulsar.endpoint
    assert ep.tls is not None and ep.admin_url is not None
    config = _client_conf(tmp_path / "client.conf", ep.tls.ca_file)
    remote = remote_pulsar_endpoint(_remote(ep.bootstrap, ep.admin_url, config), timeout_s=15)
    assert remote.mode == "remote" and remote.version == ep.version
    assert remote.info["clusters"] == ["standalone"]
    assert remote.tls_record() == {"on": True, "protocol": "pulsar+ssl", "local_ca": False}
    driver = create_driver(remote, shipped_driver("pulsar-local"))
    assert isinstance(driver, PulsarDriver)
    used = _round_trip(driver, "tls-remote", pid=8)
    ports = _ports(ep)
    assert ports["broker_tls"] in used and ports["broker"] not in used


def test_a_wrong_ca_is_named_as_a_refused_certificate_at_once(
        tls_pulsar: PulsarStandalone, tmp_path: Path) -> None:
    ep = tls_pulsar.endpoint
    assert ep.admin_url is not None
    other = make_tls_material(tmp_path / "other-ca")
    config = _client_conf(tmp_path / "wrong.conf", str(other.ca_cert))
    fix = (f"fix: set tlsTrustCertsFilePath in --pulsar-config={config} to the PEM file of "
           f"the CA that signed the cluster's certificate (now: {other.ca_cert})")
    signed = ("certificate verify failed: the server's certificate is not signed by a CA in "
              f"{other.ca_cert}")
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable) as info:  # the admin API over https first
        remote_pulsar_endpoint(_remote(ep.bootstrap, ep.admin_url, config), timeout_s=15)
    assert time.monotonic() - started < 10  # not the whole timeout
    message = str(info.value)
    assert message.startswith(f"the remote Pulsar admin API at {ep.admin_url} failed the TLS "
                              "handshake after ")
    assert signed in message and message.endswith(fix)
    # the admin API in plaintext answers: the binary protocol's certificate is checked
    plain_admin = f"http://127.0.0.1:{_ports(ep)['web']}"
    with pytest.raises(ClusterUnreachable) as info:
        remote_pulsar_endpoint(_remote(ep.bootstrap, plain_admin, config), timeout_s=15)
    message = str(info.value)
    assert message.startswith(f"the remote Pulsar service URL (binary protocol) at "
                              f"{ep.bootstrap} failed the TLS handshake after ")
    assert signed in message and message.endswith(fix)


def test_an_address_the_certificate_does_not_name_is_named_at_once(
        tls_pulsar: PulsarStandalone, tmp_path: Path) -> None:
    ep = tls_pulsar.endpoint
    assert ep.tls is not None and ep.admin_url is not None
    ports = _ports(ep)
    forwarders: list[Any] = []
    try:
        web, service = (Forwarder("127.0.0.2", ("127.0.0.1", ports[name]))
                        for name in ("web_tls", "broker_tls"))
    except OSError as exc:  # pragma: no cover - a loopback without 127/8
        pytest.skip(f"cannot bind 127.0.0.2: {exc}")
    forwarders += [web, service]
    config = _client_conf(tmp_path / "client.conf", ep.tls.ca_file)
    try:
        admin, url = f"https://{web.address}", f"pulsar+ssl://{service.address}"
        started = time.monotonic()
        with pytest.raises(ClusterUnreachable) as info:
            remote_pulsar_endpoint(_remote(ep.bootstrap, admin, config), timeout_s=15)
        assert time.monotonic() - started < 10
        message = str(info.value)
        assert message.startswith(f"the remote Pulsar admin API at {admin} failed the TLS ")
        assert ("certificate verify failed: the server's certificate does not name "
                "127.0.0.2, the address connected to") in message
        assert ("fix: connect through a host name or address the certificate carries "
                f"(--pulsar-admin-url={admin})") in message
        # the service URL's name, when the clients check it (tlsEnableHostnameVerification)
        with pytest.raises(ClusterUnreachable) as info:
            remote_pulsar_endpoint(_remote(url, ep.admin_url, config), timeout_s=15)
        message = str(info.value)
        assert message.startswith(f"the remote Pulsar service URL (binary protocol) at {url} "
                                  "failed the TLS handshake after ")
        assert "does not name 127.0.0.2" in message and f"(--pulsar-url={url})" in message
        unchecked = _client_conf(tmp_path / "no-names.conf", ep.tls.ca_file, False)
        remote = remote_pulsar_endpoint(_remote(url, ep.admin_url, unchecked), timeout_s=15)
        assert remote.bootstrap == url
    finally:
        for f in forwarders:
            f.close()
