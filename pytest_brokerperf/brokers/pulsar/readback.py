"""After a power cut: the harness messages a Pulsar standalone's topics still hold.

A Pulsar topic is a log that consumers read without removing anything while retention
keeps it (the shipped driver files set infinite retention), so after the restart every
partition of the run's topics is read again from its earliest message with a
pulsar-client ``Reader`` (no subscription, nothing acknowledged) and its (producer,
sequence) pairs compared with what was acknowledged
(:func:`pytest_brokerperf.brokers.readback.compare`). The driver puts its topics in a
namespace of its own (``<tenant>/<prefix>-<random>``), which the endpoint does not name:
the partitions are found by listing every namespace's topics through the admin API. See
docs/reference/faults.md (``power-cut``).
"""

from __future__ import annotations

import json
import re
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = ["PulsarEarliestReader", "PulsarReadBack", "read_back_pulsar", "run_partitions"]


class PulsarEarliestReader:
    """A new subscription at initial position Earliest (``Capabilities.earliest_reader``):
    the namespace's retention (``client.retention``, unlimited by default) keeps the
    acknowledged messages it replays."""

    def earliest(self, driver: Driver) -> tuple[Driver, str]:
        from pytest_brokerperf.core.errors import ConfigError

        config = getattr(driver, "config", None)
        kwargs: dict[str, Any] = dict(getattr(config, "subscribe_kwargs", dict)())
        pos = kwargs.get("initial_position")
        if pos is not None and str(pos).lower() != "earliest":
            raise ConfigError(
                f"mixed on Pulsar: the driver file's subscriptionInitialPosition is {pos!r}; "
                "the catch-up subscription must start at Earliest (remove the key or set "
                "subscriptionInitialPosition: Earliest)")
        return driver, ("new subscription, initial position Earliest; the namespace "
                        "retention policy (client.retention) keeps acknowledged messages")


class PulsarReadBack:
    """Every partition of the run's topics read again from its earliest message (a
    pulsar-client Reader: no subscription, nothing acknowledged)."""

    def read_back(self, endpoint: BrokerEndpoint, topics: Sequence[str]
                  ) -> tuple[dict[int, int], int, bool]:
        return read_back_pulsar(endpoint, topics)

#: One ``read_next`` waits at most this long for a message the broker said it has.
READ_NEXT_MS = 5000
#: One attempt to open a partition (the client's operation timeout): a topic the
#: restarted standalone fails to load is asked for again until the read-back's bound.
OPEN_TIMEOUT_S = 10
_PARTITION = re.compile(r"^(?P<base>.+)-partition-(?P<n>\d+)$")


def run_partitions(listed: Iterable[str], topics: Sequence[str]) -> list[str]:
    """The full names among ``listed`` (``persistent://tenant/ns/name``, as the admin API
    lists a namespace's topics) that are one of ``topics`` or one of its partitions
    (``name-partition-N``), sorted by topic and partition number."""
    wanted = set(topics)
    found: list[tuple[str, int, str]] = []
    for full in listed:
        local = str(full).rsplit("/", 1)[-1]
        m = _PARTITION.match(local)
        if m is not None and m["base"] in wanted:
            found.append((m["base"], int(m["n"]), str(full)))
        elif local in wanted:
            found.append((local, -1, str(full)))
    return [full for _, _, full in sorted(set(found))]


def _get(admin_url: str, path: str, context: ssl.SSLContext | None = None) -> Any:
    req = urllib.request.Request(admin_url.rstrip("/") + path,
                                 headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=15, context=context) as resp:
        return json.loads(resp.read().decode("utf-8") or "null")


def _listed_topics(admin_url: str, context: ssl.SSLContext | None = None) -> list[str]:
    """Every persistent topic of every namespace of every tenant (partitions each);
    ``context``: an ``https://`` admin URL's (the endpoint's CA)."""
    listed: list[str] = []
    for tenant in _get(admin_url, "/admin/v2/tenants", context) or []:
        for ns in _get(admin_url, f"/admin/v2/namespaces/{urllib.parse.quote(tenant)}",
                       context) or []:
            listed += _get(admin_url, f"/admin/v2/persistent/{ns}", context) or []
    return listed


def _open(client: Any, name: str, deadline: float) -> Any:
    """A Reader of ``name`` from its earliest message, asked for again while the broker
    fails to load the topic (each failure is in its log), until ``deadline``."""
    import pulsar

    while True:
        try:
            return client.create_reader(name, pulsar.MessageId.earliest)
        except pulsar.PulsarException as exc:
            if time.monotonic() + OPEN_TIMEOUT_S > deadline:
                raise RuntimeError(f"the Pulsar broker did not serve {name} for a Reader "
                                   f"within the read-back's bound: {exc}") from exc
            time.sleep(1.0)


def read_back_pulsar(endpoint: BrokerEndpoint, topics: Sequence[str],
                     timeout_s: float | None = None
                     ) -> tuple[dict[int, int], int, bool]:
    """Every harness message in the partitions of ``topics`` from the earliest message:
    (producer id -> sequence bitmap, messages read, whether every partition was read to
    the last message the broker reports within the bound)."""
    from pytest_brokerperf.brokers.readback import READ_BACK_TIMEOUT_S, SeqBitmaps

    if timeout_s is None:
        timeout_s = READ_BACK_TIMEOUT_S
    import pulsar

    if not endpoint.admin_url:
        raise ValueError(f"the Pulsar endpoint at {endpoint.bootstrap} has no admin URL to "
                         "list its topics; pass --pulsar-admin-url")
    from pytest_brokerperf.brokers.pulsar.client import endpoint_ssl_context, tls_client_kwargs

    # the endpoint's TLS settings (a TLS standalone's CA, --pulsar-config), as the driver's
    context = endpoint_ssl_context(endpoint.admin_url, endpoint.client_config)
    partitions = run_partitions(_listed_topics(endpoint.admin_url, context), topics)
    if not partitions:
        raise LookupError(f"none of the topics {list(topics)} exists on the Pulsar broker at "
                          f"{endpoint.admin_url} after the power cut (a topic whose metadata "
                          "the cut took is gone with every message in it)")
    seen = SeqBitmaps()
    deadline = time.monotonic() + timeout_s
    client = pulsar.Client(endpoint.bootstrap, operation_timeout_seconds=OPEN_TIMEOUT_S,
                           logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
                           **tls_client_kwargs(endpoint.client_config))
    complete = True
    try:
        for name in partitions:
            reader = _open(client, name, deadline)
            try:
                while reader.has_message_available():
                    if time.monotonic() > deadline:
                        complete = False
                        break
                    try:
                        msg = reader.read_next(READ_NEXT_MS)
                    except pulsar.Timeout:  # announced, never came: not read to its end
                        complete = False
                        break
                    seen.add(msg.data())
            finally:
                reader.close()
    finally:
        client.close()
    return seen.present(), seen.read, complete
