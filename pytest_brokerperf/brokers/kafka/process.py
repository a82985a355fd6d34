"""Kafka 4.x KRaft brokers as local JVM processes, from Maven Central jars.

Why processes and not containers: no image registry is reachable, and a process
can be pinned to its own CPU and inspected (pid, GC log, uptime) directly. Every node
is a combined broker+controller bound to 127.0.0.1 on free ports, started with the
JVM flags Kafka's own scripts use (a broker on JVM ergonomics is not
the Kafka users run), a GC log (pauses explain latency spikes) and a fresh data directory per
start (no background deletion from an earlier scenario).

Usage::

    with KafkaProcessCluster(nodes=1) as kafka:
        producer = Producer({"bootstrap.servers": kafka.endpoint.bootstrap})
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, TlsClient
from pytest_brokerperf.brokers.kafka.node_config import (
    LISTENER_NAME,
    LISTENER_PROTOCOLS,
    RESERVED_LISTENERS,
    TLS_LISTENERS,
    TLS_SASL_MECHANISM,
    ExtraListener,
    KafkaTls,
    NodePorts,
    Quorum,
    generate_cluster_id,
    kafka_jvm_flags,
    kafka_major,
    logging_flags,
    node_config,
    render_log4j2_properties,
    render_log4j_properties,
)
from pytest_brokerperf.brokers.provision.java import (
    JVM_NON_HEAP,
    JavaRuntime,
    check_jvm_size,
    jvm_size_bytes,
    remove_gc_logs,
    render_properties,
)
from pytest_brokerperf.brokers.provision.lifecycle import (
    LocalNode,
    Probe,
    ProcessCluster,
    StartFailure,
    ports_open,
)
from pytest_brokerperf.brokers.provision.maven import (
    KAFKA_DEFAULT_VERSION,
    kafka_version_of,
    resolve_kafka,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.brokers.provision.process import ManagedProcess
from pytest_brokerperf.brokers.provision.tls import TlsMaterial, make_tls_material
from pytest_brokerperf.core.errors import BrokerPerfError, ConfigError
from pytest_brokerperf.core.redaction import Secret, SecretDict

__all__ = ["KAFKA_DEFAULT_VERSION", "KafkaProcessCluster"]


DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_STOP_TIMEOUT_S = 20.0

# Short-lived tool JVMs (StorageTool): start fast, nothing to tune.
_TOOL_FLAGS: tuple[str, ...] = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


# -- pure pieces (unit-tested) -------------------------------------------------------------


# -- the cluster ----------------------------------------------------------------------------


@dataclass(kw_only=True)
class _Node(LocalNode):
    ports: NodePorts
    flags: list[str]


class KafkaProcessCluster(ProcessCluster[_Node]):
    """N combined KRaft broker+controller JVMs on loopback, testcontainers-style.

    ``cpus``: CPUs every broker JVM is pinned to; ``None`` = the last CPU when the
    machine has several (the load generator uses the others), ``set()`` = no pinning.
    ``extra_listeners``: listener name -> advertised port (single node only); each gets
    its own bound port, reported in ``endpoint.info["listeners"]``; advertised port 0
    advertises the bound port itself. ``listener_protocols``: listener name -> security
    protocol (``PLAINTEXT`` default, ``SASL_PLAINTEXT``).
    ``metrics_agent``: attach the Prometheus JMX exporter javaagent (from Maven Central)
    to every node; ``endpoint.info["metrics_urls"]`` lists the scrape URLs in node
    order. When the agent cannot be resolved the cluster starts without it and
    ``endpoint.info["metrics_agent"]["error"]`` says why.
    ``tls``: every node also serves an ``SSL`` and a ``SASL_SSL`` (PLAIN) listener with a
    certificate for ``localhost``/``127.0.0.1`` from a CA made at start in
    ``<workdir>/tls`` (removed at stop); the endpoint's clients use ``SSL`` with that CA
    (:attr:`BrokerEndpoint.tls`), the plaintext listener stays for the brokers' own
    traffic and the readiness check. :meth:`sasl_ssl_login` gives the SASL user.
    ``kafka_home`` (or ``$KAFKA_HOME``) replaces the Maven cache, and then the version
    is the one of its jars, whatever ``version`` says; ``endpoint.version`` is always
    the version actually run. ``start_timeout`` bounds format + start + readiness,
    not a first-time Maven download.
    """

    kind: ClassVar[str] = "kafka"

    def __init__(
        self,
        nodes: int = 1,
        version: str = KAFKA_DEFAULT_VERSION,
        workdir: Path | None = None,
        heap: str = "1g",
        cpus: set[int] | None = None,
        broker_overrides: dict[str, str] | None = None,
        extra_listeners: dict[str, int] | None = None,
        *,
        kafka_home: str | Path | None = None,
        quorum: Quorum = "static",
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        keep_logs: bool = False,
        java: str | None = None,
        listener_protocols: dict[str, str] | None = None,
        metrics_agent: bool = False,
        memory_limit: int | None = None,
        powercut_fs: bool = False,
        tls: bool = False,
    ) -> None:
        if not isinstance(nodes, int) or nodes < 1:
            raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
        if quorum not in ("static", "dynamic"):
            raise ConfigError(f"quorum must be 'static' or 'dynamic', got {quorum!r}")
        super().__init__(nodes=nodes, workdir=workdir, cpus=cpus, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, keep_logs=keep_logs,
                         memory_limit=memory_limit, powercut_fs=powercut_fs)
        self.version = version
        self.heap = heap
        self.broker_overrides: dict[str, str] = dict(broker_overrides or {})
        self.extra_listeners: dict[str, int] = dict(extra_listeners or {})
        self.listener_protocols: dict[str, str] = dict(listener_protocols or {})
        self.metrics_agent = metrics_agent
        self._agent_jar: Path | None = None
        self._agent_error: str | None = None
        self._metrics_ports: list[int] = []
        self.kafka_home = kafka_home
        self.quorum: Quorum = quorum
        self.java = java
        self._extras: list[ExtraListener] = []
        self._log_config: Path | None = None
        self._cluster_id = ""
        self._lib = Path()
        self._run_version = version
        self._java: JavaRuntime | None = None
        self.tls = tls
        self._tls: TlsMaterial | None = None
        #: SASL/PLAIN users of the SASL_SSL listener (made per start; first is the admin)
        self._tls_users: dict[str, Secret] = {}
        self._validate()

    # -- fluent configuration -------------------------------------------------------

    def with_override(self, key: str, value: str) -> Self:
        """Add a broker property (merged after the defaults)."""
        self.broker_overrides[key] = str(value)
        return self

    def with_listener(self, name: str, advertised_port: int) -> Self:
        """Add an extra PLAINTEXT listener advertised on ``advertised_port``."""
        self.extra_listeners[name] = advertised_port
        self._validate()
        return self

    def memory_floor(self) -> int:
        """The heap plus what a Kafka JVM needs beside it (metaspace, threads, buffers)."""
        return jvm_size_bytes(self.heap) + JVM_NON_HEAP

    def with_heap(self, heap: str) -> Self:
        """Set -Xms/-Xmx of every broker JVM (e.g. ``"512m"`` for 3 nodes on a small box)."""
        self.heap = heap
        self._validate()
        return self

    def with_cpus(self, cpus: set[int]) -> Self:
        """Pin every broker JVM to ``cpus`` (``set()`` = no pinning)."""
        self.cpus = set(cpus)
        self._validate()
        return self

    def _validate(self) -> None:
        check_jvm_size(self.heap)
        if self.quorum == "dynamic" and self.nodes != 1:
            raise ConfigError("quorum='dynamic' is only supported for a single node; use 'static'")
        if self.extra_listeners and self.nodes != 1:
            raise ConfigError("extra_listeners are only supported on a single-node cluster")
        seen: set[int] = set()
        for name, port in self.extra_listeners.items():
            reserved = RESERVED_LISTENERS | (TLS_LISTENERS.keys() if self.tls else set())
            if not LISTENER_NAME.match(name) or name in reserved:
                raise ConfigError(
                    f"bad extra listener name {name!r}: use upper-case letters, digits and _, "
                    f"not {', '.join(sorted(reserved))}"
                )
            if not isinstance(port, int) or not 0 <= port < 65536 or port in seen:
                raise ConfigError(f"bad advertised port {port!r} for listener {name}")
            if port:
                seen.add(port)
        for name, protocol in self.listener_protocols.items():
            if name not in self.extra_listeners or protocol not in LISTENER_PROTOCOLS:
                raise ConfigError(
                    f"bad listener protocol {name}={protocol!r}: name an extra listener and "
                    f"one of {', '.join(sorted(LISTENER_PROTOCOLS))}"
                )
        super()._validate()

    # -- lifecycle ------------------------------------------------------------------

    def describe(self) -> str:
        return f"Kafka cluster ({self.nodes} node(s))"

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` of the running cluster."""
        return self.endpoint.bootstrap

    def _prepare(self) -> None:
        """The jars (Maven cache or ``kafka_home``), the version they are, a fitting Java."""
        self._lib = resolve_kafka(self.version, kafka_home=self.kafka_home)
        self._run_version = kafka_version_of(self._lib)
        self._java = JavaRuntime.find(
            self.java, "Kafka", broker_version=self._run_version,
            min_major=17 if kafka_major(self._run_version) >= 4 else None)
        self._resolve_agent()

    def _resolve_agent(self) -> None:
        """The JMX exporter jar, or the reason the cluster runs without it."""
        self._agent_jar, self._agent_error = None, None
        if not self.metrics_agent:
            return
        from pytest_brokerperf.brokers.kafka.jmx_exporter import resolve_agent

        try:
            self._agent_jar = resolve_agent()
        except BrokerPerfError as e:
            self._agent_error = str(e).splitlines()[0]

    def _init_workdir(self, workdir: Path) -> None:
        for sub in ("config", "logs"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)

    def _layout(self, workdir: Path, version: str) -> list[_Node]:
        """Pick ports and write config files for every node."""
        assert self._java is not None
        java = self._java.path
        n = self.nodes
        n_agent = n if self._agent_jar is not None else 0
        n_tls = 2 * n if self._tls is not None else 0
        ports = free_ports(
            2 * n + len(self.extra_listeners) + n_agent + n_tls,
            exclude=set(self.extra_listeners.values()),
        )
        tls_ports = ports[len(ports) - n_tls:]
        ports = ports[:len(ports) - n_tls]
        all_ports = [
            NodePorts(node_id=i + 1, port=ports[2 * i], controller_port=ports[2 * i + 1],
                      ssl_port=tls_ports[2 * i] if tls_ports else None,
                      sasl_ssl_port=tls_ports[2 * i + 1] if tls_ports else None)
            for i in range(n)
        ]
        tls = None
        if self._tls is not None:
            tls = KafkaTls(ca_cert=self._tls.ca_cert, server_key_store=self._tls.server_key_store,
                           key_password=self._tls.key_password, users=self._tls_users)
        extras = [
            ExtraListener(
                name,
                bind_port=ports[2 * n + k],
                advertised_port=adv or ports[2 * n + k],
                protocol=self.listener_protocols.get(name, "PLAINTEXT"),
            )
            for k, (name, adv) in enumerate(self.extra_listeners.items())
        ]
        self._metrics_ports = ports[2 * n + len(extras):]
        agent_config = workdir / "config" / "jmx-exporter.yaml"
        if self._agent_jar is not None:
            from pytest_brokerperf.brokers.kafka.jmx_exporter import render_config

            agent_config.write_text(render_config(), encoding="utf-8")
        major = kafka_major(version)
        log_name = "log4j2.properties" if major >= 4 else "log4j.properties"
        log_config = workdir / "config" / log_name
        log_config.write_text(
            render_log4j2_properties() if major >= 4 else render_log4j_properties(),
            encoding="utf-8",
        )
        self._log_config = log_config
        self._extras = extras
        logs = workdir / "logs"
        nodes: list[_Node] = []
        for np_ in all_ports:
            i = np_.node_id
            data_dir = workdir / "data" / f"node-{i}"
            cfg = node_config(
                np_,
                all_ports,
                data_dir=data_dir,
                quorum=self.quorum,
                extra_listeners=extras,
                overrides=self.broker_overrides,
                tls=tls,
            )
            config_file = workdir / "config" / f"server-{i}.properties"
            config_file.write_text(
                render_properties(cfg, header=f"node {i} of {n}, written by pytest-brokerperf"),
                encoding="utf-8",
            )
            gc_log = logs / f"gc-{i}.log"
            remove_gc_logs(gc_log)
            flags = (kafka_jvm_flags(self.heap, gc_log, logs) + logging_flags(version, log_config)
                     + self.class_archive_flags(java, self._lib, i,
                                                agent=self._agent_jar is not None))
            if self._agent_jar is not None:
                from pytest_brokerperf.brokers.kafka.jmx_exporter import agent_flag

                flags.append(
                    agent_flag(self._agent_jar, LOOPBACK, self._metrics_ports[i - 1], agent_config)
                )
            nodes.append(
                _Node(
                    name=str(i),
                    label=f"node {i}",
                    title=f"Kafka node {i}",
                    ports=np_,
                    config_file=config_file,
                    data_dir=data_dir,
                    log_file=logs / f"kafka-{i}.log",
                    gc_log=gc_log,
                    flags=flags,
                )
            )
        return nodes

    def _launch(self, workdir: Path, deadline: float) -> None:
        """Format every node's storage with one cluster id, start the JVMs, wait for all N."""
        assert self._java is not None
        java, version = self._java.path, self._run_version
        self.fresh_dir(workdir / "data")
        self._make_tls(workdir)
        nodes = self._layout(workdir, version)
        self._nodes = nodes
        self._mount_powercut(workdir)
        classpath = f"{self._lib}/*"
        cluster_id = generate_cluster_id()
        self._cluster_id = cluster_id
        assert self._log_config is not None
        log_cfg_flags = logging_flags(version, self._log_config)
        # Format every node in parallel (one short JVM each); same id for all.
        formatters: list[tuple[_Node, ManagedProcess]] = []
        for node in nodes:
            argv = [java, *_TOOL_FLAGS, *self.class_archive_flags(java, self._lib, None),
                    *log_cfg_flags, "-cp", classpath, "kafka.tools.StorageTool"]
            argv += ["format", "-t", cluster_id, "-c", str(node.config_file)]
            if self.quorum == "dynamic":
                argv.append("--standalone")
            log = workdir / "logs" / f"format-{node.ports.node_id}.log"
            formatters.append((node, ManagedProcess(argv, log_file=log, name="kafka-format")))
        try:
            for _, f in formatters:
                f.start()
            for node, f in formatters:
                rc = f.wait(max(1.0, deadline - time.monotonic()))
                if rc != 0:
                    what = "timed out" if rc is None else f"failed (exit {rc})"
                    raise StartFailure(
                        f"formatting Kafka node {node.ports.node_id} storage {what}: "
                        f"{' '.join(f.argv)}\n--- last lines of {f.log_file} ---\n"
                        f"{f.log_tail(self.log_tail_lines)}"
                    )
        finally:
            for _, f in formatters:
                f.stop(timeout=0.0)
        for node in nodes:
            argv = [java, *node.flags, "-cp", classpath, "kafka.Kafka", str(node.config_file)]
            self._spawn(node, argv, name=f"kafka-{node.ports.node_id}")
        self._wait_ready(deadline)

    def _make_tls(self, workdir: Path) -> None:
        """A fresh CA, server certificate and SASL users for this start (``tls``), in
        ``<workdir>/tls``: a scratch directory, removed at stop."""
        self._tls, self._tls_users = None, {}
        if not self.tls:
            return
        self._tls = make_tls_material(self.fresh_dir(workdir / "tls"))
        self._tls_users = {"admin": Secret(secrets.token_urlsafe(18)),
                           "bench": Secret(secrets.token_urlsafe(18))}

    def sasl_ssl_login(self) -> tuple[str, Secret]:
        """The SASL/PLAIN user and password of the ``SASL_SSL`` listeners (``tls`` only)."""
        if "bench" not in self._tls_users:
            raise ConfigError("sasl_ssl_login() needs a running cluster started with tls=True")
        return "bench", self._tls_users["bench"]

    def tls_bootstrap(self, protocol: str = "SSL") -> str:
        """``bootstrap.servers`` of the ``SSL`` or ``SASL_SSL`` listeners (``tls`` only)."""
        if self._tls is None or protocol not in TLS_LISTENERS:
            raise ConfigError(f"no {protocol!r} listener: start the cluster with tls=True and "
                              f"ask for one of {', '.join(TLS_LISTENERS)}")
        return ",".join(
            f"{LOOPBACK}:{n.ports.ssl_port if protocol == 'SSL' else n.ports.sasl_ssl_port}"
            for n in self._nodes)

    def start_all(self, timeout: float) -> list[int]:
        """Start every (killed) node at once and wait until the cluster serves: each
        client port open, then every node in the Admin API's view (the KRaft quorum
        needs a majority of the nodes up before any broker serves); the new pids."""
        pids = self.start_nodes(list(range(1, len(self._nodes) + 1)), timeout)
        self._wait_ready(time.monotonic() + timeout)
        return pids

    def _wait_ready(self, deadline: float) -> None:
        """TCP connect to every node, then Admin describe_cluster/list_topics shows all N."""
        self.wait_until(ports_open([n.ports.port for n in self._nodes]), deadline)

        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        bootstrap = ",".join(f"{LOOPBACK}:{n.ports.port}" for n in self._nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})

        def all_brokers_serve(remaining: float) -> str | None:
            try:
                req = min(5.0, max(0.5, remaining))
                desc = admin.describe_cluster(request_timeout=req).result(timeout=req + 1.0)
                md = admin.list_topics(timeout=req)
            except (KafkaException, TimeoutError, RuntimeError) as e:
                return f"Admin API saw error {e}"
            described, listed = len(desc.nodes), len(md.brokers)
            if described == self.nodes and listed == self.nodes:
                return None
            return (f"Admin API saw {described} broker(s) in describe_cluster, "
                    f"{listed} in metadata")

        self.wait_until(all_brokers_serve, deadline, interval=0.3)

    def _node_probe(self, node: _Node) -> Probe:
        return ports_open([node.ports.port], f"{node.label} client port")

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        assert self._java is not None
        home = self.kafka_home or os.environ.get("KAFKA_HOME") or None
        first = self._nodes[0]
        common_flags = [f for f in first.flags if not f.startswith(("-Xlog:", "-Dkafka.logs.dir"))]
        metrics_urls = [
            f"http://{LOOPBACK}:{p}/metrics" for p in self._metrics_ports
        ] if self._agent_jar is not None else []
        local = self._local_record(began, metrics_urls=metrics_urls)
        info: dict[str, Any] = {
            **local.as_info(),
            "jvm_flags": common_flags,
            "jvm_flags_per_node": {str(n.ports.node_id): list(n.flags) for n in self._nodes},
            **self._java.as_info(),
            "listeners": {
                x.name: {
                    "host": LOOPBACK,
                    "bind_port": x.bind_port,
                    "advertised_port": x.advertised_port,
                    "protocol": x.protocol,
                }
                for x in self._extras
            },
            "metrics_agent": (
                None if not self.metrics_agent
                else {"jar": str(self._agent_jar), "ports": list(self._metrics_ports)}
                if self._agent_jar is not None else {"error": self._agent_error}
            ),
            "node_ports": [
                {
                    "node_id": n.ports.node_id,
                    "port": n.ports.port,
                    "controller_port": n.ports.controller_port,
                }
                for n in self._nodes
            ],
            "tls_listeners": [
                {"node_id": n.ports.node_id, "SSL": n.ports.ssl_port,
                 "SASL_SSL": n.ports.sasl_ssl_port, "sasl_mechanism": TLS_SASL_MECHANISM}
                for n in self._nodes
            ] if self._tls is not None else None,
            "cluster_id": self._cluster_id,
            "quorum": self.quorum,
            "heap": self.heap,
            "broker_overrides": dict(self.broker_overrides),
            "kafka_home_or_cache": str(self._lib),
            "lib_source": "KAFKA_HOME" if home else "maven-cache",
        }
        plaintext = ",".join(f"{LOOPBACK}:{n.ports.port}" for n in self._nodes)
        tls, client, protocol = None, SecretDict(), None
        if self._tls is not None:
            protocol = "SSL"
            tls = TlsClient(protocol=protocol, ca_file=str(self._tls.ca_cert),
                            plaintext=plaintext, server_names=self._tls.hosts)
            client = SecretDict({"security.protocol": protocol,
                                 "ssl.ca.location": str(self._tls.ca_cert)})
        return BrokerEndpoint(
            kind="kafka",
            bootstrap=self.tls_bootstrap() if tls is not None else plaintext,
            client_config=client,
            security_protocol=protocol,
            tls=tls,
            mode="process",
            nodes=self.nodes,
            version=self._run_version,
            topology_check=self.nodes > 1,
            info=info,
            local=local,
        )

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<KafkaProcessCluster nodes={self.nodes} version={self.version} {state}>"
