"""Which driver file and which effective client settings a run used, as two short keys.

A figure depends on the client settings (``acks``, ``linger.ms``, batching, the
durability level's mapping), so ``brokerperf report`` keys a matrix cell by the driver
file and a hash of the effective OMB driver document: two runs compare only when both
are the same. The endpoint (``bootstrap.servers``, ``serviceUrl``, ``amqpUris``…) is
left out of the hash: where the broker listens does not change what the clients do,
and a process-mode run may listen elsewhere each time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

__all__ = ["ENDPOINT_KEYS", "driver_file_name", "settings_hash"]

#: Keys that name where the broker is, never how the clients behave (OMB driver files).
ENDPOINT_KEYS = frozenset({"bootstrap.servers", "serviceUrl", "httpUrl", "amqpUris",
                           "brokerUrl", "adminUrl", "uri", "uris"})


def driver_file_name(source: str | None) -> str | None:
    """The driver file's name (``kafka-latency.yaml``), or the driver's marker
    (``<loopback>``, ``<python>``); the directory is left out so a CI checkout and a
    workstation name the same file alike (the settings hash tells contents apart)."""
    if not source:
        return None
    if source.startswith("<"):
        return source
    return PurePath(source).name


def _without_endpoint(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(k): _without_endpoint(v) for k, v in node.items()
                if str(k) not in ENDPOINT_KEYS}
    if isinstance(node, list):
        return [_without_endpoint(v) for v in node]
    if isinstance(node, str) and "=" in node and "\n" in node:
        # a Java properties block (Kafka's commonConfig): drop the endpoint lines
        kept = [line for line in node.splitlines()
                if line.split("=", 1)[0].strip() not in ENDPOINT_KEYS]
        return "\n".join(kept)
    return node


def settings_hash(omb_driver_yaml: Mapping[str, Any] | None,
                  fallback: Mapping[str, Any] | None = None) -> str | None:
    """The first 12 hex digits of the SHA-256 of the effective driver document (canonical
    JSON, endpoint keys left out); ``fallback`` (the driver's description) when a driver
    has no OMB document; None when there is neither."""
    doc = omb_driver_yaml if omb_driver_yaml is not None else fallback
    if doc is None:
        return None
    text = json.dumps(_without_endpoint(doc), sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
