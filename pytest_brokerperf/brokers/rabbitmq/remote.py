"""A remote RabbitMQ named by ``--rabbitmq-url`` (one or more AMQP URIs).

Nothing is started: the endpoint says how to reach a broker someone else runs. The
URIs may carry credentials (``amqp://user:password@host:5672/vhost``); they are moved
out of the URIs into :attr:`BrokerEndpoint.client_config` (which results show only
redacted), so ``endpoint.bootstrap`` and every message here are free of passwords.
``amqps://`` uses the system's default TLS context (certificates verified).

Against a remote broker there is no ``rabbitmqctl``: queue types and arguments are
recorded as declared, classic mirroring (a policy) is refused with a skip, and the
durability level is whatever the queue type and persistence give (nodes = the number of
URIs, which the user declares).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from pytest_brokerperf.brokers.base import CONNECT_TIMEOUT_S, unreachable
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings

__all__ = ["remote_rabbitmq_endpoint", "split_credentials"]



def split_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """``(uri without user info, user, password)``."""
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return urlunsplit(parts._replace(netloc=netloc)), user, password


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def remote_rabbitmq_endpoint(settings: Settings,
                             timeout_s: float = CONNECT_TIMEOUT_S) -> BrokerEndpoint:
    """Reach the broker named by ``--rabbitmq-url`` (one connection, then closed).

    Raises :class:`ClusterUnreachable` naming the URI (without credentials) when it does
    not answer within ``timeout_s``, and :class:`ConfigError` for URIs with different
    credentials.
    """
    import pika

    uris = list(settings.rabbitmq_url)
    if not uris:
        raise BrokerUnavailable("remote RabbitMQ needs --rabbitmq-url=amqp://HOST:5672[,...]")
    clean: list[str] = []
    creds: set[tuple[str | None, str | None]] = set()
    for uri in uris:
        bare, user, password = split_credentials(uri)
        clean.append(bare)
        creds.add((user, password))
    if len(creds) > 1:
        raise ConfigError("--rabbitmq-url: every URI must carry the same user and password "
                          "(one set of credentials per run)")
    ((user, password),) = creds
    client: dict[str, str] = {}
    if user is not None:
        client = {"username": user, "password": password or ""}
    params = pika.URLParameters(clean[0])
    if user is not None:
        params.credentials = pika.PlainCredentials(user, password or "")
    params.socket_timeout = timeout_s
    params.stack_timeout = timeout_s
    params.connection_attempts = 1
    params.client_properties = {"connection_name": "brokerperf-probe"}
    started = time.monotonic()
    try:
        conn = pika.BlockingConnection(params)
    except Exception as e:  # AMQPConnectionError and friends; never quote the URI
        raise unreachable(
            "RabbitMQ", clean[0], started, type(e).__name__, timeout_s,
            "--rabbitmq-url (host, port, vhost, user and password) and the network path",
        ) from None
    try:
        props = dict(conn._impl.server_properties or {})
    finally:
        conn.close()
    info: dict[str, Any] = {
        "uris": clean,
        "product": _text(props.get("product")),
        "platform": _text(props.get("platform")),
        "cluster_name": _text(props.get("cluster_name")),
        "user": user,
        "tls": clean[0].startswith("amqps://"),
        "note": "remote broker: no rabbitmqctl access; queue types and arguments are "
                "recorded as declared, classic mirroring (a policy) is not available",
    }
    return BrokerEndpoint(
        kind="rabbitmq",
        bootstrap=",".join(clean),
        mode="remote",
        nodes=len(clean),
        version=_text(props.get("version")) or "unknown (remote)",
        client_config=client,
        topology_check=False,
        info=info,
    )
