"""Remote Pulsar: options, client.conf, the endpoint and the driver's remote rules.

The "cluster" is a tiny HTTP server in a thread that answers the admin REST calls.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig
from pytest_brokerperf.brokers.pulsar.driver import PulsarDriver
from pytest_brokerperf.brokers.pulsar.remote import (
    load_pulsar_client_config,
    remote_pulsar_endpoint,
)
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ClusterUnreachable, ConfigError, DriverError
from pytest_brokerperf.plugin.broker_session import start_broker


def resolve(**cli: Any) -> Settings:
    return Settings.resolve({f"brokerperf_{k}": v for k, v in cli.items()}, {}, {})


def test_urls_imply_remote_and_complete_each_other() -> None:
    s = resolve(pulsar_url="pulsar://b1:6650")
    assert (s.pulsar_url, s.pulsar_admin_url, s.provision_effective) == (
        "pulsar://b1:6650", "http://b1:8080", "remote")
    s = resolve(pulsar_admin_url="https://b2:8443/")
    assert (s.pulsar_url, s.pulsar_admin_url) == ("pulsar+ssl://b2:6651", "https://b2:8443")
    s = resolve(pulsar_url="pulsar+ssl://b3:6651", pulsar_admin_url="https://admin:443")
    assert s.pulsar_admin_url == "https://admin:443"


@pytest.mark.parametrize(("cli", "message"), [
    ({"pulsar_url": "http://b:8080"}, r"expected a pulsar:// or pulsar\+ssl:// URL"),
    ({"pulsar_admin_url": "pulsar://b:6650"}, r"expected a http:// or https:// URL"),
    ({"pulsar_url": "pulsar://b:6650", "provision": "process"}, r"names a remote cluster"),
    ({"provision": "remote", "broker": "pulsar"}, r"needs the cluster's address for pulsar"),
])
def test_bad_remote_options(cli: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(**cli)


def test_client_config_needs_a_remote_cluster(tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text("authPlugin=x\n")
    with pytest.raises(ConfigError, match="needs --pulsar-url"):
        resolve(pulsar_config=str(conf))


def test_client_conf_keys_and_secrets(tmp_path: Path) -> None:
    conf = tmp_path / "client.conf"
    conf.write_text(
        "webServiceUrl=http://elsewhere:8080/\n"
        "brokerServiceUrl=pulsar://elsewhere:6650/\n"
        "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
        "authParams=token:s3cr3t\n"
        "useTls=false\n"
        "tlsAllowInsecureConnection=false\n"
        "tlsEnableHostnameVerification=true\n"
        "tlsTrustCertsFilePath=\n"
        "somethingElse=1\n"
    )
    settings, notes = load_pulsar_client_config(conf)
    assert settings == {
        "auth_plugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "auth_secret": "token:s3cr3t",
        "tls_allow_insecure_connection": "false",
        "tls_validate_hostname": "true",
    }
    assert any("--pulsar-url wins" in n for n in notes)
    assert not any("s3cr3t" in n for n in notes)
    conf.write_text("tlsAllowInsecureConnection=maybe\n")
    with pytest.raises(ConfigError, match="true or false"):
        load_pulsar_client_config(conf)


class _Admin(BaseHTTPRequestHandler):
    calls: list[tuple[str, str, str | None]]  # set on the class per server

    def _answer(self) -> None:
        self.calls.append((self.command, self.path, self.headers.get("Authorization")))
        routes: dict[str, tuple[int, Any]] = {
            "/admin/v2/clusters": (200, ["prod"]),
            "/admin/v2/brokers/version": (200, "4.0.7"),
            "/admin/v2/bookies/all": (403, None),
            "/admin/v2/tenants/benchmark": (404, None),
        }
        code, body = routes.get(self.path.split("?")[0], (404, None))
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def admin_server() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    calls: list[tuple[str, str, str | None]] = []
    handler = type("Handler", (_Admin,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", calls
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def service_port() -> Iterator[str]:
    """A listening TCP port standing in for the brokers' binary-protocol port."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        yield f"pulsar://127.0.0.1:{srv.getsockname()[1]}"


def test_remote_endpoint_with_token(tmp_path: Path, admin_server: tuple[str, list[Any]],
                                    service_port: str) -> None:
    url, calls = admin_server
    conf = tmp_path / "client.conf"
    conf.write_text("authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
                    "authParams=token:s3cr3t\n")
    s = resolve(pulsar_url=service_port, pulsar_admin_url=url, pulsar_config=str(conf),
                broker="pulsar")
    ep = start_broker("pulsar", s, tmp_path, durability=2).endpoint
    assert ep.mode == "remote" and ep.kind == "pulsar" and ep.version == "4.0.7"
    assert ep.bootstrap == service_port and ep.admin_url == url
    assert ep.info["clusters"] == ["prod"] and ep.durability == 2
    assert ("GET", "/admin/v2/clusters", "Bearer s3cr3t") in calls
    assert "s3cr3t" not in json.dumps(ep.redacted())


def test_unreachable_remote_is_an_error_naming_the_address(tmp_path: Path) -> None:
    s = resolve(pulsar_url="pulsar://127.0.0.1:9", pulsar_admin_url="http://127.0.0.1:9")
    with pytest.raises(ClusterUnreachable, match=r"admin API at http://127.0.0.1:9 did not "
                       r"answer: failed after \d+\.\d s \(URLError.*this admin URL was given "
                       r"by --pulsar-admin-url"):
        remote_pulsar_endpoint(s)  # refused at once: never "within 15 s"


def test_a_derived_admin_url_is_named_with_the_users_service_url() -> None:
    """Issue 23 item 9: the error names both URLs and which one failed."""
    s = resolve(pulsar_url="pulsar://127.0.0.1:1")
    with pytest.raises(ClusterUnreachable) as info:
        remote_pulsar_endpoint(s)
    msg = str(info.value)
    assert "admin API at http://127.0.0.1:8080 did not answer" in msg
    assert "this admin URL was derived from --pulsar-url=pulsar://127.0.0.1:1" in msg
    assert "the service URL pulsar://127.0.0.1:1 was not tried" in msg


@pytest.mark.parametrize("status", [404, 500, 503])
def test_an_admin_api_answering_an_error_status_fails_never_skips(status: int) -> None:
    """Issue 24 item 1: a broken cluster is ClusterUnreachable (exit 4), not a skip."""
    class Broken(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ClusterUnreachable, match=rf"at {url} answered HTTP {status} .*"
                           r"this admin URL was given by --pulsar-admin-url"):
            remote_pulsar_endpoint(resolve(pulsar_admin_url=url))
    finally:
        server.shutdown()
        server.server_close()


def test_a_closed_service_port_is_named_at_once(admin_server: tuple[str, list[Any]]) -> None:
    """Issue 24 item 7: an answering admin API and a closed binary port fail in seconds,
    naming the service URL (not after the client's 100 s operation timeout)."""
    url, _ = admin_server
    with socket.create_server(("127.0.0.1", 0)) as srv:
        closed = srv.getsockname()[1]
    s = resolve(pulsar_url=f"pulsar://127.0.0.1:{closed}", pulsar_admin_url=url)
    with pytest.raises(ClusterUnreachable, match=rf"service URL \(binary protocol\) at "
                       rf"pulsar://127.0.0.1:{closed} did not answer: failed after .*"
                       r"the admin API at http://127.0.0.1:\d+ did answer"):
        remote_pulsar_endpoint(s)


def test_remote_run_never_creates_a_tenant(tmp_path: Path, admin_server: tuple[str, list[Any]],
                                           service_port: str) -> None:
    url, calls = admin_server
    ep = remote_pulsar_endpoint(resolve(pulsar_url=service_port, pulsar_admin_url=url))
    cfg = PulsarDriverConfig.from_dict({"client": {"serviceUrl": "pulsar://ignored:1"}})
    driver = PulsarDriver(ep, cfg)
    assert driver.service_url == "pulsar://ignored:1"  # the YAML wins on a remote cluster
    admin = driver.admin()
    with pytest.raises(DriverError, match=r"tenant 'benchmark' .* cluster-wide change"):
        admin.create_topics(["t"], [4])
    assert not any(m == "PUT" for m, _, _ in calls)  # nothing was created
    admin.close()


def test_remote_safety_retention_becomes_the_namespace_policy() -> None:
    cfg = PulsarDriverConfig()
    assert cfg.topic_settings()["retention.ms"] == "-1"
    bounded = cfg.with_overrides(topic={"retention.ms": "7200000",
                                        "retention.bytes": "33554432",
                                        "segment.ms": "3600000"}, reason="remote cluster")
    assert bounded.client.retention_time_minutes == 120
    assert bounded.client.retention_size_mb == 32
    assert bounded.namespace_policies()["retention"] == {"retentionTimeInMinutes": 120,
                                                         "retentionSizeInMB": 32}
    assert any("segment.ms" in n for n in bounded.notes)
    with pytest.raises(ConfigError):
        cfg.with_overrides(topic={"cleanup.policy": "compact"})
