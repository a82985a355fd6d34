"""pika connection parameters shared by the RabbitMQ producers, consumers and admin
(timeouts, credentials from the client config, the connection name).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import TlsClient

_mono = time.monotonic_ns
CONNECT_TIMEOUT_S = 30.0


def _params(uri: str, client_config: Mapping[str, str], name: str,
            tls: TlsClient | None = None) -> Any:
    """pika parameters for ``uri``; ``tls`` (a local ``amqps`` listener) makes an
    ``amqps://`` URI trust the run's CA only, host name checked, instead of the system's
    trust store pika's own ``amqps`` default uses."""
    import pika

    params = pika.URLParameters(uri)
    if tls is not None and uri.startswith("amqps://"):
        import ssl

        context = ssl.create_default_context(cafile=tls.ca_file)
        params.ssl_options = pika.SSLOptions(context, server_hostname=params.host)
    user = client_config.get("username")
    if user:
        params.credentials = pika.PlainCredentials(user, client_config.get("password", ""))
    params.client_properties = {"connection_name": name, "product": "pytest-brokerperf"}
    # A blocked connection is broker back-pressure to be measured, not an error.
    params.blocked_connection_timeout = None
    params.socket_timeout = 10
    params.stack_timeout = CONNECT_TIMEOUT_S
    return params


def node_address(params: Any) -> str:
    """host:port of pika connection parameters: the node a client statistic names."""
    return f"{params.host}:{params.port}"
