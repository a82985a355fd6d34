"""pulsar-client helpers shared by producers, consumers and the admin: enum names from the
driver YAML, authentication and tokens, the admin's TLS context, and the one
``pulsar.Client`` per process and driver (OMB keeps one PulsarClient per worker).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf.core import header

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig

_mono = time.monotonic_ns
_get_ident = threading.get_ident
_unpack = header.unpack

#: Results that mean "no room in the client's queue" (retry later, not a send error).
_FULL_RESULTS = ("ProducerQueueIsFull", "MemoryBufferIsFull")


class ClientSource(Protocol):
    """What a producer or consumer uses of the driver that made it (a
    :class:`~pytest_brokerperf.brokers.pulsar.driver.PulsarDriver` is one): declared here,
    so they never import the driver module that imports them."""

    @property
    def config(self) -> PulsarDriverConfig: ...
    def full_topic(self, name: str) -> str: ...
    def _acquire_client(self) -> Any: ...
    def _release_client(self) -> None: ...


# -- one pulsar.Client per process and driver (OMB: one PulsarClient per worker) ---------

_CLIENTS: dict[str, list[Any]] = {}  # driver key -> [client, users]
_CLIENTS_LOCK = threading.Lock()


def _enum(kind: str, name: str) -> Any:
    import pulsar

    if kind == "consumer_type":
        return getattr(pulsar.ConsumerType, name.replace("_", ""))
    if kind == "compression_type":
        return {
            "NONE": pulsar.CompressionType.NONE,
            "LZ4": pulsar.CompressionType.LZ4,
            "ZLIB": pulsar.CompressionType.ZLib,
            "ZSTD": pulsar.CompressionType.ZSTD,
            "SNAPPY": pulsar.CompressionType.SNAPPY,
        }[name]
    if kind == "initial_position":
        return getattr(pulsar.InitialPosition, name)
    if kind == "message_routing_mode":
        return getattr(pulsar.PartitionsRoutingMode, name)
    if kind == "batching_type":
        return getattr(pulsar.BatchingType, name)
    raise KeyError(kind)


_ENUM_KWARGS = (
    "consumer_type",
    "compression_type",
    "initial_position",
    "message_routing_mode",
    "batching_type",
)


def _with_enums(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turn the config's enum names into pulsar-client enums."""
    return {
        k: (_enum(k, v) if k in _ENUM_KWARGS and isinstance(v, str) else v)
        for k, v in kwargs.items()
    }


def _read_token(text: str) -> str:
    token = text.removeprefix("token:")
    if token.startswith("file:"):
        path = token[5:].removeprefix("//")
        with open(path, encoding="utf-8") as fh:
            token = fh.read().strip()
    return token


def auth_token(plugin: str | None, secret: str | None) -> str | None:
    """The bearer token of token authentication (``token:...`` or ``file:...``), else None."""
    if plugin and plugin.rsplit(".", 1)[-1] in ("AuthenticationToken", "token") and secret:
        return _read_token(secret)
    return None


def admin_ssl_context(
    admin_url: str, trust_file: str | None, insecure: bool
) -> ssl.SSLContext | None:
    """The TLS context of an ``https://`` admin URL (None for plain http)."""
    if not admin_url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=trust_file or None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def tls_client_kwargs(client_config: Mapping[str, str]) -> dict[str, Any]:
    """``pulsar.Client`` TLS settings from an endpoint's client settings: a remote
    cluster's ``--pulsar-config`` (``tlsTrustCertsFilePath``, ...), or a local TLS
    standalone's CA with host names checked. Empty when it names none."""
    kwargs: dict[str, Any] = {}
    if client_config.get("tls_trust_certs_file_path"):
        kwargs["tls_trust_certs_file_path"] = client_config["tls_trust_certs_file_path"]
    for key in ("tls_allow_insecure_connection", "tls_validate_hostname"):
        if key in client_config:
            kwargs[key] = str(client_config[key]).lower() == "true"
    return kwargs


def endpoint_ssl_context(admin_url: str, client_config: Mapping[str, str]
                         ) -> ssl.SSLContext | None:
    """The TLS context of an endpoint's ``https://`` admin URL from its client settings
    (the CA it trusts, insecure or not); None for plain http."""
    insecure = str(client_config.get("tls_allow_insecure_connection", "false")).lower()
    return admin_ssl_context(admin_url, client_config.get("tls_trust_certs_file_path"),
                             insecure == "true")


def _authentication(plugin: str | None, data: str | None) -> Any:
    """A pulsar-client Authentication for OMB's ``authentication{plugin, data}``."""
    if not plugin:
        return None
    import pulsar

    short = plugin.rsplit(".", 1)[-1]
    text = data or ""
    if short in ("AuthenticationToken", "token"):
        return pulsar.AuthenticationToken(_read_token(text))
    if short in ("AuthenticationTls", "AuthenticationTLS", "tls"):
        params = dict(p.split(":", 1) for p in text.split(",") if ":" in p)
        return pulsar.AuthenticationTLS(params.get("tlsCertFile", ""), params.get("tlsKeyFile", ""))
    if short in ("AuthenticationOAuth2", "AuthenticationOauth2", "oauth2"):
        return pulsar.AuthenticationOauth2(text)
    return pulsar.Authentication(plugin, text)


# -- producer ----------------------------------------------------------------------------
