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
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.core.redaction import SecretDict

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings

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


def _why(exc: BaseException) -> str:
    """The failure's type, and authentication named when the broker refused the login."""
    import pika.exceptions as pe

    if isinstance(exc, pe.ProbableAuthenticationError | pe.AuthenticationError):
        return f"{type(exc).__name__}: the broker refused the user name or password"
    if isinstance(exc, pe.ProbableAccessDeniedError):
        return f"{type(exc).__name__}: the user may not open this virtual host"
    return type(exc).__name__


def remote_rabbitmq_endpoint(settings: BrokerSettings,
                             timeout_s: float = CONNECT_TIMEOUT_S) -> BrokerEndpoint:
    """Reach the broker named by ``--rabbitmq-url`` (one connection, then closed).

    Raises :class:`ClusterUnreachable` naming the URI (without credentials) when it does
    not answer within ``timeout_s``, and :class:`ConfigError` for URIs with different
    credentials.
    """
    import pika

    uris = list(settings.rabbitmq_url)  # Secrets: shown masked in any traceback
    if not uris:
        raise BrokerUnavailable("remote RabbitMQ needs --rabbitmq-url=amqp://HOST:5672[,...]")
    clean = [split_credentials(u.reveal())[0] for u in uris]
    user = split_credentials(uris[0].reveal())[1]
    if len({split_credentials(u.reveal())[1:] for u in uris}) > 1:  # the parser refuses it
        raise ConfigError("--rabbitmq-url: every URI must carry the same user and password "
                          "(one set of credentials per run)")
    client: dict[str, str] = SecretDict()
    if user is not None:
        client = SecretDict(username=user, password=split_credentials(uris[0].reveal())[2] or "")
    params = pika.URLParameters(clean[0])
    if user is not None:
        params.credentials = pika.PlainCredentials(user, client["password"])
    params.socket_timeout = timeout_s
    params.stack_timeout = timeout_s
    params.connection_attempts = 1
    params.client_properties = {"connection_name": "brokerperf-probe"}
    started = time.monotonic()
    try:
        conn = pika.BlockingConnection(params)
    except Exception as e:  # AMQPConnectionError and friends; never quote the URI
        raise unreachable(
            "RabbitMQ", clean[0], started, _why(e), timeout_s,
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
