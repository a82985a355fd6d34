"""pika connection parameters shared by the RabbitMQ producers, consumers and admin
(timeouts, credentials from the client config, the connection name).
"""

from __future__ import annotations

import time
from typing import Any

_mono = time.monotonic_ns
CONNECT_TIMEOUT_S = 30.0


def _params(uri: str, client_config: dict[str, str], name: str) -> Any:
    import pika

    params = pika.URLParameters(uri)
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
