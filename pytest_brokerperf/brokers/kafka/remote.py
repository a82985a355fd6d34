"""Remote clusters named by flags: ``--kafka-bootstrap`` plus ``--kafka-config``.

How remote runs stay safe: docs/how-to/remote.md.

Nothing is started here; the endpoint describes how to reach a cluster someone else
runs. The client properties file is Java-style (what ``kafka-*.sh --command-config``
takes: ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``) and
is translated to librdkafka names by the same code as OMB driver files. Its values may
be secrets: they live only in :attr:`BrokerEndpoint.client_config`, which results show
through :meth:`BrokerEndpoint.redacted` only, and no message here quotes a value.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.base import CONNECT_TIMEOUT_S, unreachable
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.core.errors import BrokerUnavailable, ClusterUnreachable, ConfigError
from pytest_brokerperf.core.redaction import MASK, SecretDict, is_secret

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerSettings

__all__ = ["client_config", "load_client_config", "remote_kafka_endpoint"]


def load_client_config(path: Path) -> tuple[dict[str, str], list[str]]:
    """librdkafka settings from a Java client properties file, and notes without values.

    ``bootstrap.servers`` in the file is ignored (``--kafka-bootstrap`` names the
    cluster). Errors cite the file and the key, never a value.
    """
    from pytest_brokerperf.brokers.kafka.librdkafka import translate
    from pytest_brokerperf.brokers.kafka.properties import JavaProperties

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the Kafka client config: {why}") from None
    try:
        props = JavaProperties.parse(text, source=str(path))
    except ConfigError:
        raise ConfigError(
            f"{path}: a line of the Kafka client config has no property name. Fix: write "
            "`name=value` lines (security.protocol=SASL_SSL, sasl.mechanism=PLAIN, ...)."
        ) from None
    notes: list[str] = []
    settings = SecretDict()  # its repr masks secrets, also in tracebacks
    for key, value in props.items():
        if key == "bootstrap.servers":
            notes.append("bootstrap.servers in the client config ignored: --kafka-bootstrap wins")
            continue
        out, key_notes = translate({key: value}, "admin")
        # translate drops producer/consumer-only keys for the admin role; a client config
        # file is for every client, so keep them.
        if not out and not any("dropped" in n for n in key_notes):
            out = {key: value}
            key_notes = []
        settings.update(out)
        for note in key_notes:
            for name, secret in props.items():
                if secret and is_secret(name):
                    note = note.replace(secret, MASK)
            notes.append(note.replace("admin: ", "", 1))
    return settings, notes


#: Kafka-protocol flavours reached through the Kafka driver in remote mode, and why
#: their results need a note.
FLAVOUR_NOTES: dict[str, str] = {
    "redpanda": ("Redpanda through the Kafka driver (untested by this project: Redpanda "
                 "cannot be started on its CI machines)"),
    "automq": ("AutoMQ through the Kafka driver (untested by this project: AutoMQ cannot be "
               "started on its CI machines); its default driver config is AutoMQ's own, RF 1 "
               "+ flush.messages=1, durability claimed from its WAL/object storage"),
}


def _admin_client(settings: BrokerSettings, client: dict[str, str], bootstrap: str,
                  errors: list[Any] | None = None) -> Any:
    """An AdminClient on ``client``; librdkafka checks every property as it is built
    (no connection yet), so a bad one is a :class:`ConfigError` naming the file. The
    client's own errors (a refused login, a TLS handshake) are appended to ``errors``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    extra: dict[str, Any] = {} if errors is None else {"error_cb": errors.append}
    try:
        return AdminClient(SecretDict({**client, "bootstrap.servers": bootstrap,
                                       "log_level": 0, **extra}))
    except KafkaException as e:  # librdkafka refused the configuration itself
        raise ConfigError(
            f"{settings.kafka_config}: librdkafka refused the Kafka client config "
            f"({e.args[0].str() if e.args else e}); fix the property it names") from None


def check_client_config(settings: BrokerSettings) -> None:
    """Refuse a ``--kafka-config`` librdkafka would refuse, before anything starts
    (:class:`ConfigError`; the preflight makes it a usage error)."""
    client, _ = client_config(settings)
    _admin_client(settings, client, settings.kafka_bootstrap or "127.0.0.1:9")


def remote_kafka_endpoint(settings: BrokerSettings, timeout_s: float = CONNECT_TIMEOUT_S,
                          kind: str = "kafka") -> BrokerEndpoint:
    """Reach the cluster named by ``--kafka-bootstrap`` (read-only: metadata only).

    ``kind`` names the Kafka-protocol flavour (``kafka``, ``redpanda``, ``automq``): it
    picks the default driver config and labels the results. Raises
    :class:`ClusterUnreachable` naming the address when the cluster does not answer
    within ``timeout_s``.
    """
    bootstrap = settings.kafka_bootstrap
    if not bootstrap:
        raise BrokerUnavailable(
            f"remote {kind} needs --kafka-bootstrap=HOST:PORT[,HOST:PORT] (and "
            "--kafka-config for TLS or SASL)"
        )
    client, notes = client_config(settings)
    info: dict[str, Any] = {
        "client_config_file": str(settings.kafka_config) if settings.kafka_config else None,
        "client_config_notes": notes,
    }
    from confluent_kafka import KafkaException

    started = time.monotonic()
    errors: list[Any] = []
    admin = _admin_client(settings, client, bootstrap, errors)
    try:
        future = admin.describe_cluster(request_timeout=timeout_s)
        while not future.done():  # a refused login says so at once, not after the timeout
            admin.poll(0.1)
            refused = _refused(errors)
            if refused is not None:
                raise _login_refused(kind, bootstrap, started, refused, settings)
            handshake = _tls_failed(errors)
            if handshake is not None:  # a certificate is refused as at once as a login
                raise _tls_refused(kind, bootstrap, started, handshake, settings, client)
            down = _all_down(errors)
            if down is not None:  # every bootstrap address refused: no need to wait
                raise unreachable(
                    f"{kind} cluster", bootstrap, started, down, timeout_s,
                    "--kafka-bootstrap, --kafka-config (security.protocol, sasl.*, ssl.*) "
                    "and the network path")
            if time.monotonic() - started > timeout_s + 5:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
        desc = future.result()
    except (KafkaException, TimeoutError, RuntimeError) as e:
        refused = _refused(errors)
        if refused is not None:
            raise _login_refused(kind, bootstrap, started, refused, settings) from None
        handshake = _tls_failed(errors)
        if handshake is not None:
            raise _tls_refused(kind, bootstrap, started, handshake, settings, client) from None
        raise unreachable(
            f"{kind} cluster", bootstrap, started, f"{type(e).__name__}: {str(e)[:200]}", timeout_s,
            "--kafka-bootstrap, --kafka-config (security.protocol, sasl.*, ssl.*) and the "
            "network path") from None
    info["cluster_id"] = desc.cluster_id
    info["brokers"] = sorted(
        (f"{n.id}@{n.host}:{n.port}" for n in desc.nodes), key=lambda x: int(x.split("@")[0])
    )
    info["controller"] = getattr(desc.controller, "id", None)
    return BrokerEndpoint(
        kind=kind,
        bootstrap=bootstrap,
        mode="remote",
        nodes=len(desc.nodes),
        version="unknown (remote)",
        client_config=client,
        topology_check=False,
        security_protocol=client.get("security.protocol", "PLAINTEXT"),
        sasl_mechanism=client.get("sasl.mechanism"),
        flavour_note=FLAVOUR_NOTES.get(kind),
        info=info,
    )


def _refused(errors: list[Any]) -> Any | None:
    """The client's authentication error among ``errors`` (librdkafka's
    ``_AUTHENTICATION``, or the broker's SASL_AUTHENTICATION_FAILED), else None."""
    from confluent_kafka import KafkaError

    codes = {KafkaError._AUTHENTICATION, getattr(KafkaError, "SASL_AUTHENTICATION_FAILED", 58)}
    return next((e for e in errors if getattr(e, "code", lambda: None)() in codes), None)


def _tls_failed(errors: list[Any]) -> Any | None:
    """librdkafka's TLS handshake error (``_SSL``) among ``errors``, else None."""
    from confluent_kafka import KafkaError

    return next((e for e in errors if getattr(e, "code", lambda: None)() == KafkaError._SSL),
                None)


def _tls_refused(kind: str, bootstrap: str, started: float, error: Any,
                 settings: BrokerSettings, client: dict[str, str]) -> ClusterUnreachable:
    """The TLS handshake failed: say so with librdkafka's reason, what exactly is wrong
    with the certificate (its chain or its name, found by a second handshake) and the
    setting to fix. Certificates and CA paths are no secret; key passwords never appear
    (librdkafka's reason does not carry them, and neither does the client config shown)."""
    from pytest_brokerperf.brokers.provision.tls import certificate_fix, certificate_problem

    reason = (error.str() if hasattr(error, "str") else str(error))[:400]
    elapsed = time.monotonic() - started
    cafile = client.get("ssl.ca.location")
    where = f"--kafka-config={settings.kafka_config}" if settings.kafka_config else "--kafka-config"
    if "certificate verify failed" not in reason:
        return ClusterUnreachable(
            f"the remote {kind} cluster at {bootstrap} failed the TLS handshake after "
            f"{elapsed:.1f} s ({reason}); check that --kafka-bootstrap names the cluster's TLS "
            f"listener and that security.protocol and ssl.* in {where} match it")
    problem = certificate_problem(bootstrap.split(",")[0], cafile)
    fix = certificate_fix(problem, address_option=f"--kafka-bootstrap={bootstrap}",
                          ca_setting="ssl.ca.location", where=where, cafile=cafile)
    return ClusterUnreachable(
        f"the remote {kind} cluster at {bootstrap} failed the TLS handshake after "
        f"{elapsed:.1f} s: certificate verify failed"
        f"{f': {problem}' if problem else ''} (librdkafka: {reason}); fix: {fix}")


def _all_down(errors: list[Any]) -> str | None:
    """librdkafka's "all brokers down" (every bootstrap address refused the connection),
    with the reason it gives, else None."""
    from confluent_kafka import KafkaError

    for e in errors:
        if getattr(e, "code", lambda: None)() == KafkaError._ALL_BROKERS_DOWN:
            transport = [x for x in errors
                         if getattr(x, "code", lambda: None)() == KafkaError._TRANSPORT]
            why = transport[0].str() if transport else e.str()
            return f"all brokers down: {why[:200]}"
    return None


def _login_refused(kind: str, bootstrap: str, started: float, error: Any,
                   settings: BrokerSettings) -> ClusterUnreachable:
    """The cluster answered and refused the credentials: say so, with librdkafka's reason
    (which never quotes the password) and where the credentials came from."""
    reason = error.str() if hasattr(error, "str") else str(error)
    return ClusterUnreachable(
        f"the remote {kind} cluster at {bootstrap} refused the login after "
        f"{time.monotonic() - started:.1f} s: authentication failed ({reason[:300]}); check "
        f"the user name and password in --kafka-config={settings.kafka_config} "
        "(sasl.jaas.config or sasl.username/sasl.password) and sasl.mechanism")


def client_config(settings: BrokerSettings) -> tuple[dict[str, str], list[str]]:
    """``--kafka-config`` as librdkafka settings and notes (empty without the flag)."""
    if settings.kafka_config is None:
        return {}, []
    return load_client_config(Path(settings.kafka_config))
