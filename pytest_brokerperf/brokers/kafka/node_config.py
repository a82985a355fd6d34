"""What a Kafka KRaft node is made of, as pure values: its server.properties, its log
configuration and the JVM flags Kafka's own scripts use.

Shared by the local process and the container (they differ only in how a node is
launched), and unit-tested without a JVM.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_brokerperf.brokers.provision.java import (
    check_jvm_size,
    gc_log_flag,
    render_console_log4j2,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.redaction import Secret

__all__ = [
    "KAFKA_PERFORMANCE_FLAGS",
    "ExtraListener",
    "KafkaTls",
    "NodePorts",
    "Quorum",
    "generate_cluster_id",
    "kafka_jvm_flags",
    "kafka_major",
    "logging_flags",
    "node_config",
    "render_log4j2_properties",
    "render_log4j_properties",
]

Quorum = Literal["static", "dynamic"]


# What kafka-run-class.sh puts in KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_PERFORMANCE_FLAGS: tuple[str, ...] = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)


LISTENER_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


RESERVED_LISTENERS = frozenset({"PLAINTEXT", "CONTROLLER"})


LISTENER_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})

#: The TLS listeners of a node started with ``tls``: name -> security protocol.
TLS_LISTENERS: Mapping[str, str] = {"SSL": "SSL", "SASL_SSL": "SASL_SSL"}

#: The SASL mechanism of the ``SASL_SSL`` listener (as the remote test's ``SASL`` one).
TLS_SASL_MECHANISM = "PLAIN"


@dataclass(frozen=True)
class NodePorts:
    """The ports of one combined broker+controller node."""

    node_id: int
    port: int  # PLAINTEXT, for clients and inter-broker traffic
    controller_port: int
    #: the TLS listeners' ports (``tls``): ``SSL`` and ``SASL_SSL``; None without TLS
    ssl_port: int | None = None
    sasl_ssl_port: int | None = None


@dataclass(frozen=True)
class KafkaTls:
    """What a node's TLS listeners serve: PEM key store and trust store, SASL/PLAIN users.

    The certificate chain and the key are a PKCS#12 key store (``ssl.keystore.type=
    PKCS12``) under the key password (``ssl.keystore.password``, ``ssl.key.password``);
    the trust store is the run's CA as PEM text; the JAAS line
    holds the SASL users' passwords. Only the broker's own file gets these values:
    :meth:`properties` is called by :func:`node_config` and nowhere else.
    """

    ca_cert: Path
    server_key_store: Path
    key_password: Secret
    #: SASL/PLAIN user name -> password on the SASL_SSL listener
    users: Mapping[str, Secret]

    def properties(self) -> dict[str, str]:
        """The broker-wide SSL settings and the SASL_SSL listener's JAAS config."""
        def pem(path: Path) -> str:
            return path.read_text(encoding="ascii").strip()

        users = " ".join(f'user_{name}="{pw.reveal()}"' for name, pw in self.users.items())
        admin, admin_pw = next(iter(self.users.items()))
        mech = TLS_SASL_MECHANISM.lower()
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.server_key_store),
            "ssl.keystore.password": self.key_password.reveal(),
            "ssl.key.password": self.key_password.reveal(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pem(self.ca_cert),
            "ssl.client.auth": "none",
            "sasl.enabled.mechanisms": TLS_SASL_MECHANISM,
            f"listener.name.sasl_ssl.{mech}.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{admin}" password="{admin_pw.reveal()}" {users};'),
        }


@dataclass(frozen=True)
class ExtraListener:
    """A second PLAINTEXT listener, bound on ``bind_port``, advertised on ``advertised_port``.

    The advertised port is where the test puts a proxy (e.g. a delay proxy) that
    forwards to ``bind_port``; clients bootstrapping through it get metadata that
    keeps them on the proxy. ``protocol`` ``SASL_PLAINTEXT`` (with the broker's
    ``sasl.enabled.mechanisms`` and ``listener.name.<name>.<mech>.sasl.jaas.config`` in the
    overrides) makes it an authenticated listener, e.g. to test remote mode locally.
    """

    name: str
    bind_port: int
    advertised_port: int
    protocol: str = "PLAINTEXT"  # security protocol: PLAINTEXT or SASL_PLAINTEXT


def generate_cluster_id() -> str:
    """A KRaft cluster id like ``Uuid.randomUuid()``: 22 url-safe base64 chars, no leading '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid


def node_config(
    node: NodePorts,
    all_nodes: Sequence[NodePorts],
    *,
    data_dir: Path,
    quorum: Quorum = "static",
    extra_listeners: Sequence[ExtraListener] = (),
    overrides: Mapping[str, str] | None = None,
    tls: KafkaTls | None = None,
) -> dict[str, str]:
    """The server properties of one node, ``overrides`` merged last.

    ``tls``: the node's ``SSL`` and ``SASL_SSL`` listeners (on ``node.ssl_port`` and
    ``node.sasl_ssl_port``) with their key store; brokers still talk to each other and to
    the controller in PLAINTEXT on loopback, so only clients pay for TLS.
    """
    if tls is not None and (node.ssl_port is None or node.sasl_ssl_port is None):
        raise ConfigError(f"node {node.node_id}: TLS listeners need ssl_port and sasl_ssl_port")
    n = len(all_nodes)
    if quorum == "dynamic" and n != 1:
        raise ConfigError("quorum='dynamic' is only supported for a single node; use 'static'")
    if extra_listeners and n != 1:
        raise ConfigError("extra_listeners are only supported on a single-node cluster")
    host = LOOPBACK
    listeners = [
        f"PLAINTEXT://{host}:{node.port}",
        f"CONTROLLER://{host}:{node.controller_port}",
    ]
    advertised = [f"PLAINTEXT://{host}:{node.port}"]
    protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
    if tls is not None:
        for name, port in (("SSL", node.ssl_port), ("SASL_SSL", node.sasl_ssl_port)):
            listeners.append(f"{name}://{host}:{port}")
            advertised.append(f"{name}://{host}:{port}")
            protocols.append(f"{name}:{TLS_LISTENERS[name]}")
    for x in extra_listeners:
        listeners.append(f"{x.name}://{host}:{x.bind_port}")
        advertised.append(f"{x.name}://{host}:{x.advertised_port}")
        protocols.append(f"{x.name}:{x.protocol}")
    cfg: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
    }
    if quorum == "dynamic":
        # KIP-853 dynamic quorum, the 4.x default config; formatted with --standalone.
        cfg["controller.quorum.bootstrap.servers"] = f"{host}:{node.controller_port}"
        advertised.append(f"CONTROLLER://{host}:{node.controller_port}")
    else:
        cfg["controller.quorum.voters"] = ",".join(
            f"{m.node_id}@{host}:{m.controller_port}" for m in all_nodes
        )
    rf = min(3, n)
    isr = min(2, n)
    cfg.update(
        {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": str(rf),
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(isr),
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(isr),
            # Default 3 s would eat a short warm-up.
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    if tls is not None:
        cfg.update(tls.properties())
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def render_log4j2_properties() -> str:
    """log4j2 config: everything to the console (= the node's log file), WARN by default.

    Start-up milestones and the version banner stay at INFO so a failed or slow
    start can be read from the log tail. A ``.properties`` config avoids the
    YAML config's extra jackson dependency.
    """
    info_loggers = {
        "raftserver": "kafka.server.KafkaRaftServer",
        "brokerserver": "kafka.server.BrokerServer",
        "controllerserver": "kafka.server.ControllerServer",
        "kafka": "kafka.Kafka",
        "appinfo": "org.apache.kafka.common.utils.AppInfoParser",
    }
    return render_console_log4j2(info_loggers)


def render_log4j_properties() -> str:
    """reload4j config for Kafka 3.x, same shape as :func:`render_log4j2_properties`."""
    return (
        "log4j.rootLogger=WARN, out\n"
        "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.kafka.server.KafkaRaftServer=INFO\n"
        "log4j.logger.kafka.server.BrokerServer=INFO\n"
        "log4j.logger.kafka.server.ControllerServer=INFO\n"
        "log4j.logger.org.apache.kafka.common.utils.AppInfoParser=INFO\n"
    )


def kafka_major(version: str) -> int:
    try:
        return int(version.split(".", 1)[0])
    except ValueError:
        return 4


def logging_flags(version: str, log_config: Path) -> list[str]:
    """The system property that points Kafka's logging backend at ``log_config``."""
    if kafka_major(version) >= 4:
        return [f"-Dlog4j2.configurationFile={log_config}"]
    return [f"-Dlog4j.configuration=file:{log_config}"]


def kafka_jvm_flags(heap: str, gc_log: Path, logs_dir: Path) -> list[str]:
    """Heap, GC and logging flags as ``kafka-server-start.sh``/``kafka-run-class.sh`` set them."""
    check_jvm_size(heap)
    return [
        f"-Xms{heap}",
        f"-Xmx{heap}",
        *KAFKA_PERFORMANCE_FLAGS,
        # Decorations as asked for the report; rotation as kafka-run-class.sh sets it.
        gc_log_flag(gc_log),
        f"-Dkafka.logs.dir={logs_dir}",
    ]
