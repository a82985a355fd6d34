"""Kafka 4.x KRaft brokers as local JVM processes, from Maven Central jars.

Why processes and not containers: no image registry is reachable, and a process
can be pinned to its own CPU and inspected (pid, GC log, uptime) directly. Every node
is a combined broker+controller bound to 127.0.0.1 on free ports, started with the
JVM flags Kafka's own scripts use (pitfalls.md §5: a broker on JVM ergonomics is
not the Kafka users run), a GC log (pitfalls.md §6) and a fresh data directory per
start (pitfalls.md §9: no background deletion from an earlier scenario).

Usage::

    with KafkaProcessCluster(nodes=1) as kafka:
        producer = Producer({"bootstrap.servers": kafka.endpoint.bootstrap})
"""

from __future__ import annotations

import base64
import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable, ConfigError, ProvisionError
from pytest_brokerperf.provision.maven import (
    KAFKA_DEFAULT_VERSION,
    kafka_version_of,
    resolve_kafka,
)
from pytest_brokerperf.provision.ports import LOOPBACK, free_ports, port_open
from pytest_brokerperf.provision.process import (
    ManagedProcess,
    check_cpus_allowed,
    discard_cleanup_path,
    log_tail,
    register_cleanup_path,
    stop_all,
)

__all__ = [
    "KAFKA_DEFAULT_VERSION",
    "ExtraListener",
    "KafkaProcessCluster",
    "NodePorts",
    "default_broker_cpus",
    "generate_cluster_id",
    "java_version",
    "kafka_jvm_flags",
    "node_config",
    "render_log4j2_properties",
    "render_properties",
]

Quorum = Literal["static", "dynamic"]

DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 40

# What kafka-run-class.sh puts in KAFKA_JVM_PERFORMANCE_OPTS (brokers.md §1.3).
KAFKA_PERFORMANCE_FLAGS: tuple[str, ...] = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
# Short-lived tool JVMs (StorageTool): start fast, nothing to tune.
_TOOL_FLAGS: tuple[str, ...] = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

_HEAP = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")
_LISTENER_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_RESERVED_LISTENERS = frozenset({"PLAINTEXT", "CONTROLLER"})
_LISTENER_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})
_BIND_FAILURE = re.compile(r"Address already in use|BindException")


# -- pure pieces (unit-tested) -------------------------------------------------------------


@dataclass(frozen=True)
class NodePorts:
    """The ports of one combined broker+controller node."""

    node_id: int
    port: int  # PLAINTEXT, for clients and inter-broker traffic
    controller_port: int


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
) -> dict[str, str]:
    """The server properties of one node (brokers.md §1.4/§1.6), ``overrides`` merged last."""
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
            # Default 3 s would eat a short warm-up (pitfalls.md §6).
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def _escape_properties(text: str, *, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    if key:
        for ch in ("=", ":", " ", "#", "!"):
            out = out.replace(ch, "\\" + ch)
    return out


def render_properties(cfg: Mapping[str, str], header: str = "") -> str:
    """Java ``.properties`` text (keys and values escaped where needed)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [
        f"{_escape_properties(k, key=True)}={_escape_properties(v, key=False)}"
        for k, v in cfg.items()
    ]
    return "\n".join(lines) + "\n"


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
    lines = [
        "status = warn",
        # Kafka logs its controlled shutdown from its own shutdown hook; log4j's hook
        # would stop logging first. The console appender flushes every line anyway.
        "shutdownHook = disable",
        "appender.out.type = Console",
        "appender.out.name = OUT",
        "appender.out.target = SYSTEM_OUT",
        "appender.out.layout.type = PatternLayout",
        "appender.out.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.out.ref = OUT",
    ]
    for short, name in info_loggers.items():
        lines += [f"logger.{short}.name = {name}", f"logger.{short}.level = info"]
    return "\n".join(lines) + "\n"


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


def _kafka_major(version: str) -> int:
    try:
        return int(version.split(".", 1)[0])
    except ValueError:
        return 4


def logging_flags(version: str, log_config: Path) -> list[str]:
    """The system property that points Kafka's logging backend at ``log_config``."""
    if _kafka_major(version) >= 4:
        return [f"-Dlog4j2.configurationFile={log_config}"]
    return [f"-Dlog4j.configuration=file:{log_config}"]


def kafka_jvm_flags(heap: str, gc_log: Path, logs_dir: Path) -> list[str]:
    """Heap, GC and logging flags as ``kafka-server-start.sh``/``kafka-run-class.sh`` set them."""
    if not _HEAP.match(heap):
        raise ConfigError(f"bad heap size {heap!r}: use a JVM size such as 512m or 1g")
    if ":" in str(gc_log):
        raise ConfigError(f"log directory {gc_log.parent} must not contain ':' (JVM -Xlog syntax)")
    return [
        f"-Xms{heap}",
        f"-Xmx{heap}",
        *KAFKA_PERFORMANCE_FLAGS,
        # Decorations as asked for the report; rotation as kafka-run-class.sh sets it.
        f"-Xlog:gc*:file={gc_log}:time,uptime:filecount=10,filesize=100M",
        f"-Dkafka.logs.dir={logs_dir}",
    ]


def default_broker_cpus(available: set[int] | None = None) -> set[int] | None:
    """The last allowed CPU when there are several (the generator gets the rest), else None."""
    cpus = set(available) if available is not None else set(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return {max(cpus)}


@functools.lru_cache(maxsize=8)
def _java_version_output(java: str) -> str:
    try:
        out = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BrokerUnavailable(f"cannot run {java} -version: {e}") from e
    return (out.stderr or out.stdout).strip()


def java_version(java: str) -> tuple[str, int]:
    """``("17.0.15", 17)`` from ``java -version``."""
    text = _java_version_output(java)
    m = re.search(r'version "([^"]+)"', text)
    if not m:
        raise BrokerUnavailable(f"cannot read the Java version from {java} -version: {text!r}")
    version = m.group(1)
    parts = version.split(".")
    if parts[0] == "1" and len(parts) > 1:  # 1.8.0_x style
        major = int(parts[1])
    else:
        major = int(re.sub(r"\D.*", "", parts[0]) or 0)
    return version, major


def find_java(java: str | None = None) -> str:
    """``java`` argument, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    if java:
        return java
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise BrokerUnavailable(
            "Kafka needs Java 17+, but no 'java' is on PATH and JAVA_HOME is not set. "
            "Install a JDK/JRE 17+ (Debian: apt-get install openjdk-17-jre-headless)."
        )
    return found


# -- the cluster ----------------------------------------------------------------------------


class _StartFailure(Exception):
    """Internal: one start attempt failed; ``retry`` when ports collided."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass
class _Node:
    ports: NodePorts
    config_file: Path
    data_dir: Path
    log_file: Path
    gc_log: Path
    flags: list[str]
    proc: ManagedProcess | None = None


class KafkaProcessCluster:
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
    ``kafka_home`` (or ``$KAFKA_HOME``) replaces the Maven cache, and then the version
    is the one of its jars, whatever ``version`` says; ``endpoint.version`` is always
    the version actually run. ``start_timeout`` bounds format + start + readiness,
    not a first-time Maven download.
    """

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
        keep_logs: bool = True,
        java: str | None = None,
        listener_protocols: dict[str, str] | None = None,
        metrics_agent: bool = False,
    ) -> None:
        if not isinstance(nodes, int) or nodes < 1:
            raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
        if quorum not in ("static", "dynamic"):
            raise ConfigError(f"quorum must be 'static' or 'dynamic', got {quorum!r}")
        self.nodes = nodes
        self.version = version
        self.workdir_arg = Path(workdir) if workdir is not None else None
        self.heap = heap
        self.cpus = set(cpus) if cpus is not None else None
        self.broker_overrides: dict[str, str] = dict(broker_overrides or {})
        self.extra_listeners: dict[str, int] = dict(extra_listeners or {})
        self.listener_protocols: dict[str, str] = dict(listener_protocols or {})
        self.metrics_agent = metrics_agent
        self._agent_jar: Path | None = None
        self._agent_error: str | None = None
        self._metrics_ports: list[int] = []
        self.kafka_home = kafka_home
        self.quorum: Quorum = quorum
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.keep_logs = keep_logs
        self.java = java
        self._workdir: Path | None = None
        self._owns_workdir = False
        self._nodes: list[_Node] = []
        self._extras: list[ExtraListener] = []
        self._log_config: Path | None = None
        self._cluster_id = ""
        self._launched_at = 0.0
        self._endpoint: BrokerEndpoint | None = None
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
        if not _HEAP.match(self.heap):
            raise ConfigError(f"bad heap size {self.heap!r}: use a JVM size such as 512m or 1g")
        if self.quorum == "dynamic" and self.nodes != 1:
            raise ConfigError("quorum='dynamic' is only supported for a single node; use 'static'")
        if self.extra_listeners and self.nodes != 1:
            raise ConfigError("extra_listeners are only supported on a single-node cluster")
        seen: set[int] = set()
        for name, port in self.extra_listeners.items():
            if not _LISTENER_NAME.match(name) or name in _RESERVED_LISTENERS:
                raise ConfigError(
                    f"bad extra listener name {name!r}: use upper-case letters, digits and _, "
                    f"not {', '.join(sorted(_RESERVED_LISTENERS))}"
                )
            if not isinstance(port, int) or not 0 <= port < 65536 or port in seen:
                raise ConfigError(f"bad advertised port {port!r} for listener {name}")
            if port:
                seen.add(port)
        for name, protocol in self.listener_protocols.items():
            if name not in self.extra_listeners or protocol not in _LISTENER_PROTOCOLS:
                raise ConfigError(
                    f"bad listener protocol {name}={protocol!r}: name an extra listener and "
                    f"one of {', '.join(sorted(_LISTENER_PROTOCOLS))}"
                )
        check_cpus_allowed(self.cpus)

    # -- lifecycle ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._endpoint is not None

    @property
    def endpoint(self) -> BrokerEndpoint:
        """The endpoint of the running cluster."""
        if self._endpoint is None:
            raise RuntimeError("KafkaProcessCluster is not running; call start() first")
        return self._endpoint

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` of the running cluster."""
        return self.endpoint.bootstrap

    @property
    def processes(self) -> list[ManagedProcess]:
        """The broker JVMs started by the current (or current failed) start."""
        return [n.proc for n in self._nodes if n.proc is not None]

    def broker_cpus(self) -> set[int] | None:
        """The CPUs the brokers are (to be) pinned to, None for no pinning."""
        if self.cpus is None:
            return default_broker_cpus()
        return set(self.cpus) or None

    def start(self, timeout: float | None = None) -> BrokerEndpoint:
        """Format and start every node, wait until all N brokers serve; the endpoint.

        On any failure every process started so far is stopped and the data is
        removed before :class:`ProvisionError` (with the log tails) is raised.
        """
        if self._endpoint is not None:
            raise RuntimeError("KafkaProcessCluster is already running")
        self._validate()
        timeout = self.start_timeout if timeout is None else timeout
        lib = resolve_kafka(self.version, kafka_home=self.kafka_home)
        version = kafka_version_of(lib)
        java = find_java(self.java)
        java_ver, java_major = java_version(java)
        if _kafka_major(version) >= 4 and java_major < 17:
            raise BrokerUnavailable(
                f"Kafka {version} needs Java 17+, but {java} is Java {java_ver}; "
                "install a newer JDK or set JAVA_HOME to one"
            )
        workdir = self._prepare_workdir()
        self._resolve_agent()
        began = time.monotonic()
        attempts = 3  # a new set of ports when another process took one meanwhile
        for attempt in range(attempts):
            try:
                self._start_once(lib, version, java, workdir, began + timeout, timeout)
                break
            except _StartFailure as e:
                self._teardown(remove_data=True)
                if e.retry and attempt + 1 < attempts and time.monotonic() < began + timeout:
                    continue
                raise ProvisionError(str(e)) from None
            except BaseException:
                self._teardown(remove_data=True)
                raise
        self._endpoint = self._make_endpoint(lib, version, java, java_ver, began)
        return self._endpoint

    def _resolve_agent(self) -> None:
        """The JMX exporter jar, or the reason the cluster runs without it."""
        self._agent_jar, self._agent_error = None, None
        if not self.metrics_agent:
            return
        from pytest_brokerperf.brokers.kafka.jmx_exporter import resolve_agent
        from pytest_brokerperf.errors import BrokerPerfError

        try:
            self._agent_jar = resolve_agent()
        except BrokerPerfError as e:
            self._agent_error = str(e).splitlines()[0]

    def _prepare_workdir(self) -> Path:
        if self._workdir is None:
            if self.workdir_arg is not None:
                self._workdir = self.workdir_arg.resolve()
                self._owns_workdir = False
            else:
                self._workdir = Path(tempfile.mkdtemp(prefix="brokerperf-kafka-"))
                self._owns_workdir = True
        wd = self._workdir
        for sub in ("config", "logs"):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(wd / "data", ignore_errors=True)  # fresh data every start
        (wd / "data").mkdir(parents=True)
        return wd

    def _layout(self, workdir: Path, version: str) -> list[_Node]:
        """Pick ports and write config files for every node."""
        n = self.nodes
        n_agent = n if self._agent_jar is not None else 0
        ports = free_ports(
            2 * n + len(self.extra_listeners) + n_agent,
            exclude=set(self.extra_listeners.values()),
        )
        all_ports = [
            NodePorts(node_id=i + 1, port=ports[2 * i], controller_port=ports[2 * i + 1])
            for i in range(n)
        ]
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
        major = _kafka_major(version)
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
            )
            config_file = workdir / "config" / f"server-{i}.properties"
            config_file.write_text(
                render_properties(cfg, header=f"node {i} of {n}, written by pytest-brokerperf"),
                encoding="utf-8",
            )
            gc_log = logs / f"gc-{i}.log"
            for old in logs.glob(f"gc-{i}.log*"):  # the JVM would rotate, not truncate
                old.unlink()
            flags = kafka_jvm_flags(self.heap, gc_log, logs) + logging_flags(version, log_config)
            if self._agent_jar is not None:
                from pytest_brokerperf.brokers.kafka.jmx_exporter import agent_flag

                flags.append(
                    agent_flag(self._agent_jar, LOOPBACK, self._metrics_ports[i - 1], agent_config)
                )
            nodes.append(
                _Node(
                    ports=np_,
                    config_file=config_file,
                    data_dir=data_dir,
                    log_file=logs / f"kafka-{i}.log",
                    gc_log=gc_log,
                    flags=flags,
                )
            )
        return nodes

    def _start_once(
        self,
        lib: Path,
        version: str,
        java: str,
        workdir: Path,
        deadline: float,
        timeout: float,
    ) -> None:
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        register_cleanup_path(workdir / "data")
        nodes = self._layout(workdir, version)
        self._nodes = nodes
        classpath = f"{lib}/*"
        cluster_id = generate_cluster_id()
        self._cluster_id = cluster_id
        assert self._log_config is not None
        log_cfg_flags = logging_flags(version, self._log_config)
        # Format every node in parallel (one short JVM each); same id for all.
        formatters: list[tuple[_Node, ManagedProcess]] = []
        for node in nodes:
            argv = [java, *_TOOL_FLAGS, *log_cfg_flags, "-cp", classpath, "kafka.tools.StorageTool"]
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
                    raise _StartFailure(
                        f"formatting Kafka node {node.ports.node_id} storage {what}: "
                        f"{' '.join(f.argv)}\n--- last lines of {f.log_file} ---\n"
                        f"{f.log_tail(LOG_TAIL_LINES)}"
                    )
        finally:
            for _, f in formatters:
                f.stop(timeout=0.0)
        cpus = self.broker_cpus()
        self._launched_at = time.time()
        for node in nodes:
            argv = [java, *node.flags, "-cp", classpath, "kafka.Kafka", str(node.config_file)]
            node.proc = ManagedProcess(
                argv,
                log_file=node.log_file,
                name=f"kafka-{node.ports.node_id}",
                cpus=cpus,
            ).start()
        self._wait_ready(deadline, timeout)

    def _failure_text(self, headline: str) -> str:
        parts = [headline]
        for node in self._nodes:
            state = "not started"
            if node.proc is not None:
                rc = node.proc.returncode
                state = f"pid {node.proc.pid}, " + ("running" if rc is None else f"exit {rc}")
            parts.append(
                f"--- node {node.ports.node_id} ({state}), last lines of {node.log_file} ---\n"
                f"{log_tail(node.log_file, LOG_TAIL_LINES)}"
            )
        return "\n".join(parts)

    def _check_alive(self) -> None:
        for node in self._nodes:
            if node.proc is not None and not node.proc.alive():
                tail = log_tail(node.log_file, LOG_TAIL_LINES)
                raise _StartFailure(
                    self._failure_text(
                        f"Kafka node {node.ports.node_id} exited with code "
                        f"{node.proc.returncode} during start-up"
                    ),
                    retry=bool(_BIND_FAILURE.search(tail)),
                )

    def _wait_ready(self, deadline: float, timeout: float) -> None:
        """TCP connect to every node, then Admin describe_cluster/list_topics shows all N."""

        def timed_out(stage: str) -> _StartFailure:
            return _StartFailure(
                self._failure_text(
                    f"Kafka cluster ({self.nodes} node(s)) not ready within "
                    f"{timeout:.0f} s: {stage}"
                )
            )

        pending = [n.ports.port for n in self._nodes]
        while pending:
            self._check_alive()
            pending = [p for p in pending if not port_open(LOOPBACK, p, timeout=0.5)]
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise timed_out(f"ports {pending} not accepting connections")
            time.sleep(0.2)

        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        bootstrap = ",".join(f"{LOOPBACK}:{n.ports.port}" for n in self._nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        seen = "no answer"
        while True:
            self._check_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise timed_out(f"Admin API saw {seen}")
            try:
                req = min(5.0, max(0.5, remaining))
                desc = admin.describe_cluster(request_timeout=req).result(timeout=req + 1.0)
                md = admin.list_topics(timeout=req)
                described = len(desc.nodes)
                listed = len(md.brokers)
                seen = f"{described} broker(s) in describe_cluster, {listed} in metadata"
                if described == self.nodes and listed == self.nodes:
                    return
            except (KafkaException, TimeoutError, RuntimeError) as e:
                seen = f"error {e}"
            time.sleep(0.3)

    def _make_endpoint(
        self, lib: Path, version: str, java: str, java_ver: str, began: float
    ) -> BrokerEndpoint:
        procs = self.processes
        now = time.time()
        cpus = self.broker_cpus()
        available = set(os.sched_getaffinity(0))
        per_node: dict[str, list[int] | None] = {}
        for node in self._nodes:
            assert node.proc is not None
            aff = node.proc.affinity()
            per_node[str(node.ports.node_id)] = sorted(aff) if aff is not None else None
        home = self.kafka_home or os.environ.get("KAFKA_HOME") or None
        first = self._nodes[0]
        common_flags = [f for f in first.flags if not f.startswith(("-Xlog:", "-Dkafka.logs.dir"))]
        info: dict[str, Any] = {
            "pids": [p.pid for p in procs],
            "data_dirs": [str(n.data_dir) for n in self._nodes],
            "log_files": [str(n.log_file) for n in self._nodes],
            "gc_logs": [str(n.gc_log) for n in self._nodes],
            "config_files": [str(n.config_file) for n in self._nodes],
            "jvm_flags": common_flags,
            "jvm_flags_per_node": {str(n.ports.node_id): list(n.flags) for n in self._nodes},
            "java": java,
            "java_version": java_ver,
            "java_version_output": _java_version_output(java),
            # Silently changes every JVM flag above; recorded so a run shows it.
            "java_tool_options": os.environ.get("JAVA_TOOL_OPTIONS"),
            "cpu_affinity": {
                "broker_cpus": sorted(cpus) if cpus else None,
                "generator_cpus": sorted(available - cpus) if cpus else sorted(available),
                "nodes": per_node,
            },
            "started_at": self._launched_at,
            "ready_at": now,
            "startup_s": round(time.monotonic() - began, 3),
            "listeners": {
                x.name: {
                    "host": LOOPBACK,
                    "bind_port": x.bind_port,
                    "advertised_port": x.advertised_port,
                    "protocol": x.protocol,
                }
                for x in self._extras
            },
            "metrics_urls": [
                f"http://{LOOPBACK}:{p}/metrics" for p in self._metrics_ports
            ] if self._agent_jar is not None else [],
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
            "cluster_id": self._cluster_id,
            "quorum": self.quorum,
            "heap": self.heap,
            "broker_overrides": dict(self.broker_overrides),
            "kafka_home_or_cache": str(lib),
            "lib_source": "KAFKA_HOME" if home else "maven-cache",
            "workdir": str(self._workdir),
        }
        return BrokerEndpoint(
            kind="kafka",
            bootstrap=",".join(f"{LOOPBACK}:{n.ports.port}" for n in self._nodes),
            mode="process",
            nodes=self.nodes,
            version=version,
            topology_check=self.nodes > 1,
            info=info,
        )

    def _teardown(self, *, remove_data: bool, timeout: float | None = None) -> None:
        """Stop every node in parallel (SIGTERM, wait, SIGKILL) and drop the data."""
        timeout = self.stop_timeout if timeout is None else timeout
        stop_all(self.processes, timeout)
        if self._workdir is not None and remove_data:
            shutil.rmtree(self._workdir / "data", ignore_errors=True)
            discard_cleanup_path(self._workdir / "data")
        self._nodes = []

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node (controlled shutdown, then SIGKILL after ``timeout``), remove data.

        Logs are kept (their paths are in ``endpoint.info``) unless ``keep_logs=False``.
        Safe to call when not running.
        """
        self._teardown(remove_data=True, timeout=timeout)
        self._endpoint = None
        if not self.keep_logs and self._owns_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def alive(self) -> bool:
        """True while every node process runs."""
        procs = self.processes
        return bool(procs) and all(p.alive() for p in procs)

    def uptime_s(self) -> float:
        """Seconds since the broker JVMs were launched (the youngest node); 0.0 if not running.

        Comparable to the ``uptime`` decoration of the GC log.
        """
        procs = [p for p in self.processes if p.alive()]
        if not procs:
            return 0.0
        return min(p.uptime_s() for p in procs)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<KafkaProcessCluster nodes={self.nodes} version={self.version} {state}>"
