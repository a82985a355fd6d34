"""A remote Pulsar cluster named by ``--pulsar-url`` / ``--pulsar-admin-url``.

How remote runs stay safe: docs/how-to/remote.md.

Nothing is started. The client config file is Pulsar's own ``conf/client.conf`` format
(what ``pulsar-admin`` and ``pulsar-client`` read): ``authPlugin``, ``authParams``,
``tlsTrustCertsFilePath``, ``tlsAllowInsecureConnection``,
``tlsEnableHostnameVerification``. A certificate the client refuses (another CA, or a
name the certificate lacks) stops the session at once with what is wrong and the fix
(:func:`_tls_refused`). ``authParams`` is a secret: it lives only in
:attr:`BrokerEndpoint.client_config` under ``auth_secret`` (which
:meth:`BrokerEndpoint.redacted` hides) and no message quotes it.

Remote-safety rules the driver follows (docs/how-to/remote.md): the run creates one namespace of
its own in an *existing* tenant (creating a tenant is a cluster-wide change and needs
``--brokerperf-allow-cluster-changes``), gives it a bounded retention, and deletes its
topics and the namespace afterwards. The bookie journal (durability levels 1 vs 2) is
bookie configuration, not visible through the admin API: on a remote cluster the user
declares the level.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pytest_brokerperf.brokers.base import CONNECT_TIMEOUT_S, unreachable
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.core.errors import BrokerUnavailable, ClusterUnreachable, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings

__all__ = ["CLIENT_CONF_KEYS", "load_pulsar_client_config", "remote_pulsar_endpoint"]


#: client.conf key -> endpoint client_config key
CLIENT_CONF_KEYS = {
    "authPlugin": "auth_plugin",
    "authParams": "auth_secret",
    "tlsTrustCertsFilePath": "tls_trust_certs_file_path",
    "tlsAllowInsecureConnection": "tls_allow_insecure_connection",
    "tlsEnableHostnameVerification": "tls_validate_hostname",
}
_IGNORED_WITH_REASON = {
    "brokerServiceUrl": "--pulsar-url wins",
    "webServiceUrl": "--pulsar-admin-url wins",
    "useTls": "the URL scheme (pulsar+ssl://, https://) decides",
    "tlsEnableHostnameVerfication": "misspelt in old client.conf files; use "
                                    "tlsEnableHostnameVerification",
}


def load_pulsar_client_config(path: Path) -> tuple[dict[str, str], list[str]]:
    """Client settings from a ``client.conf``-style file, and notes that quote no value."""
    from pytest_brokerperf.brokers.kafka.config import JavaProperties

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the Pulsar client config: {why}") from None
    try:
        props = JavaProperties.parse(text, source=str(path))
    except ConfigError:
        raise ConfigError(
            f"{path}: a line of the Pulsar client config has no property name. Fix: write "
            "`name=value` lines (authPlugin=..., authParams=..., tlsTrustCertsFilePath=...)."
        ) from None
    settings: dict[str, str] = {}
    notes: list[str] = []
    for key, value in props.items():
        if not value.strip():
            continue
        if key in CLIENT_CONF_KEYS:
            settings[CLIENT_CONF_KEYS[key]] = value.strip()
        elif key in _IGNORED_WITH_REASON:
            notes.append(f"{key} in the client config ignored: {_IGNORED_WITH_REASON[key]}")
        else:
            notes.append(f"{key} in the client config is not used by pytest-brokerperf")
    for key in ("tls_allow_insecure_connection", "tls_validate_hostname"):
        if key in settings and settings[key].lower() not in ("true", "false"):
            raise ConfigError(f"{path}: {key}: expected true or false")
    return settings, notes


def _get(url: str, token: str | None, context: Any,
         timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[int, str]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=context) as r:
            return int(r.status), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return int(e.code), ""


def _http_meaning(code: int) -> str:
    if code == 404:
        return "no such path, so this is not a Pulsar admin API (wrong host, port or path prefix)"
    if 500 <= code < 600:
        return "the cluster reports an internal error or is unavailable"
    return "an answer a healthy admin API does not give"


def _admin_origin(settings: BrokerSettings) -> str:
    """Where the admin URL came from: the user's flag, or derived from ``--pulsar-url``."""
    where = settings.sources.get("pulsar_admin_url", "default")
    if where != "default":
        return f"given by {where}"
    return (f"derived from --pulsar-url={settings.pulsar_url} on Pulsar's default admin "
            "port: pass --pulsar-admin-url if the admin API listens elsewhere")


def _probe_service(service: str, admin: str, timeout_s: float) -> None:
    """A TCP connect to the binary-protocol port: an admin API that answers says nothing
    about the port producers and consumers use (the C++ client would wait its own 100 s
    operation timeout and name no address)."""
    parts = urlsplit(service)
    host = parts.hostname or ""
    port = parts.port or (6651 if parts.scheme == "pulsar+ssl" else 6650)
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as e:
        raise unreachable(
            "Pulsar service URL (binary protocol)", service, started,
            f"{type(e).__name__}: {e.strerror or e}; the admin API at {admin} did answer",
            timeout_s, "--pulsar-url (host and port of the brokers' binary protocol, "
            "6650 or 6651 with TLS) and the network path") from None


def _first_address(url: str, default_port: int) -> tuple[str, int]:
    """The first ``host`` and ``port`` of a (possibly multi-host) Pulsar URL."""
    first = urlsplit(url).netloc.rpartition("@")[2].split(",")[0]
    if first.startswith("["):  # [v6]:port
        host, _, rest = first[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = first.partition(":")
    return host, int(port) if port.isdigit() else default_port


def _refused_certificate(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error under a urllib error, else None."""
    reason = getattr(exc, "reason", exc)
    return reason if isinstance(reason, ssl.SSLCertVerificationError) else None


def _tls_refused(what: str, flag: str, url: str, started: float,
                 problem: str | None, reason: str, settings: BrokerSettings,
                 client: dict[str, str]) -> ClusterUnreachable:
    """A certificate the client refused: what exactly is wrong with it (its chain or its
    name, from :func:`~pytest_brokerperf.brokers.provision.tls.certificate_problem`) and
    the setting to fix. CA paths are no secret; ``authParams`` never appears."""
    from pytest_brokerperf.brokers.provision.tls import certificate_fix

    elapsed = time.monotonic() - started
    cafile = client.get("tls_trust_certs_file_path")
    where = (f"--pulsar-config={settings.pulsar_config}" if settings.pulsar_config
             else "--pulsar-config")
    fix = certificate_fix(problem, address_option=f"{flag}={url}",
                          ca_setting="tlsTrustCertsFilePath", where=where, cafile=cafile)
    return ClusterUnreachable(
        f"the remote Pulsar {what} at {url} failed the TLS handshake after {elapsed:.1f} s: "
        f"certificate verify failed: {problem or reason}; fix: {fix}")


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_service_certificate(service: str, settings: BrokerSettings,
                               client: dict[str, str], timeout_s: float) -> None:
    """A ``pulsar+ssl://`` service URL: the certificate its first address serves must
    pass what the clients check (the chain against ``tlsTrustCertsFilePath``, the name
    when ``tlsEnableHostnameVerification`` is true); the C++ client would retry until its
    operation timeout and say only that it could not connect."""
    from pytest_brokerperf.brokers.provision.tls import certificate_problem

    if (urlsplit(service).scheme != "pulsar+ssl"
            or client.get("tls_allow_insecure_connection", "").lower() == "true"):
        return
    started = time.monotonic()
    host, port = _first_address(service, 6651)
    problem = certificate_problem(_address(host, port), client.get("tls_trust_certs_file_path"),
                                  timeout_s)
    if problem is None:
        return
    if ("does not name" in problem
            and client.get("tls_validate_hostname", "").lower() != "true"):
        return  # the clients do not check the name (tlsEnableHostnameVerification)
    raise _tls_refused("service URL (binary protocol)", "--pulsar-url", service, started,
                       problem, problem, settings, client)


def remote_pulsar_endpoint(settings: BrokerSettings,
                           timeout_s: float = CONNECT_TIMEOUT_S) -> BrokerEndpoint:
    """Reach the cluster named by ``--pulsar-url``/``--pulsar-admin-url`` (read-only).

    Raises :class:`ClusterUnreachable` naming the URL that failed — the admin URL (and
    whether the user gave it or it was derived from ``--pulsar-url``) when its admin API
    does not answer, or answers anything but 200/401/403; the service URL when the admin
    API answers but the binary-protocol port does not. Never a skip: a CI gate pointed at a
    broken cluster must not pass.
    """
    service, admin = settings.pulsar_url, settings.pulsar_admin_url
    if not service or not admin:
        raise BrokerUnavailable(
            "remote Pulsar needs --pulsar-url=pulsar://HOST:6650 (and --pulsar-admin-url, "
            "--pulsar-config for TLS or authentication)"
        )
    client: dict[str, str] = {}
    notes: list[str] = []
    if settings.pulsar_config is not None:
        client, notes = load_pulsar_client_config(Path(settings.pulsar_config))
    from pytest_brokerperf.brokers.pulsar.driver import admin_ssl_context, auth_token

    token = auth_token(client.get("auth_plugin"), client.get("auth_secret"))
    context = admin_ssl_context(admin, client.get("tls_trust_certs_file_path"),
                                client.get("tls_allow_insecure_connection") == "true")
    info: dict[str, Any] = {
        "client_config_file": str(settings.pulsar_config) if settings.pulsar_config else None,
        "client_config_notes": notes,
        "auth_plugin": client.get("auth_plugin"),
        "tls": service.startswith("pulsar+ssl://"),
    }
    origin = _admin_origin(settings)
    started = time.monotonic()
    try:
        code, body = _get(f"{admin}/admin/v2/clusters", token, context, timeout_s)
    except (OSError, urllib.error.URLError) as e:
        refused = _refused_certificate(e)
        if refused is not None:  # a certificate is refused at once, not after a timeout
            from pytest_brokerperf.brokers.provision.tls import certificate_problem

            host, port = _first_address(admin, 8443)
            problem = certificate_problem(_address(host, port),
                                          client.get("tls_trust_certs_file_path"), timeout_s)
            raise _tls_refused("admin API", "--pulsar-admin-url", admin, started,
                               problem, str(refused.verify_message or refused)[:300],
                               settings, client) from None
        raise unreachable(
            "Pulsar admin API", admin, started,
            f"{type(e).__name__}: {str(e)[:200]}; this admin URL was {origin}; the service "
            f"URL {service} was not tried", timeout_s,
            "--pulsar-admin-url, --pulsar-config (authPlugin, authParams, tls*) and the "
            "network path") from None
    if code in (401, 403):
        info["clusters"] = f"not readable (HTTP {code}): the role may lack superuser rights"
    elif code == 200:
        try:
            info["clusters"] = json.loads(body)
        except ValueError:
            info["clusters"] = body[:200]
    else:
        raise ClusterUnreachable(
            f"the remote Pulsar admin API at {admin} answered HTTP {code} to GET "
            f"/admin/v2/clusters: {_http_meaning(code)}; this admin URL was {origin}; the "
            f"service URL {service} was not tried. Fix: check --pulsar-admin-url points at a "
            "healthy Pulsar admin API.")
    _probe_service(service, admin, timeout_s)
    _check_service_certificate(service, settings, client, timeout_s)
    version = "unknown (remote)"
    try:
        code, body = _get(f"{admin}/admin/v2/brokers/version", token, context, timeout_s)
        if code == 200 and body.strip():
            version = body.strip().strip('"')
    except (OSError, urllib.error.URLError):
        pass
    return BrokerEndpoint(
        kind="pulsar",
        bootstrap=service,
        mode="remote",
        nodes=1,
        version=version,
        admin_url=admin,
        client_config=client,
        topology_check=False,
        allow_cluster_changes=bool(settings.allow_cluster_changes),
        info=info,
    )
