"""Kafka in KRaft mode in a container (``--brokerperf-provision=container``).

One combined broker+controller node through testcontainers' generic ``DockerContainer``,
configured through the official apache/kafka image's contract: every server property
as a ``KAFKA_<NAME>`` environment variable (:func:`env_from_properties`, the inverse of
what the image's entrypoint does, :func:`properties_from_env`), ``CLUSTER_ID`` for the
storage format, and the launcher variables ``KAFKA_HEAP_OPTS``,
``KAFKA_JVM_PERFORMANCE_OPTS`` and ``KAFKA_GC_LOG_OPTS``. ``ci/docker.sh`` builds a
local image honouring that contract (``brokerperf/kafka:<version>``); the official
image works unchanged where it is on the engine (``--brokerperf-image``).

So that both modes measure the same broker, the node gets the server properties,
JVM flags and heap of process mode (:mod:`.process`) and is pinned with
``--cpuset-cpus`` to the CPU a process-mode broker is pinned to.

Listeners, the classic trap (a broker advertising an address its clients cannot reach):

- ``HOST`` binds port P inside the container, published as the same port P on
  127.0.0.1 and advertised as ``127.0.0.1:P`` — right for clients on the host;
- ``PLAINTEXT`` on 9092 (the image's port) is advertised as ``kafka-1:9092``, the
  node's alias on the session's container network — right for clients in containers
  on that network; it is also the inter-broker listener;
- ``CONTROLLER`` on 9093, on the container network only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.node_config import (
    KAFKA_PERFORMANCE_FLAGS,
    generate_cluster_id,
)
from pytest_brokerperf.brokers.provision.container_node import (
    ContainerNode,
    ContainerPlan,
    wait_for_log,
)
from pytest_brokerperf.brokers.provision.java import jvm_size_bytes
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.core.errors import ConfigError, ProvisionError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = [
    "IN_NETWORK_PORT", "LAUNCHER_VARIABLES", "KafkaContainerCluster", "KafkaContainerLayout",
    "container_properties", "default_images", "env_from_properties", "launcher_env",
    "properties_from_env",
]

#: The official image's client port, used for the in-network listener.
IN_NETWORK_PORT = 9092
CONTROLLER_PORT = 9093
LOG_DIR = "/var/log/kafka"  # bind-mounted from the host's workdir/logs
DATA_DIR = "/var/lib/kafka/data"
DEFAULT_START_TIMEOUT_S = 120.0
#: What the container may use beyond the heap (metaspace, direct buffers and page cache:
#: the kernel charges the pages a container writes to its memory cgroup): a limit that
#: stops a runaway JVM. A catch-up backlog larger than about this much is read from disk
#: (the record's ``catchup.cache`` says so); --brokerperf-broker-memory sets another.
MEMORY_HEADROOM_MB = 1024

#: ``KAFKA_*`` variables the image's launcher reads itself: never server properties
#: (the list the official image's entrypoint excludes).
LAUNCHER_VARIABLES = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME",
    "KAFKA_HOME_DIR", "KAFKA_DEBUG",
})


# -- the image's contract (pure, unit-tested) ---------------------------------------------


def env_from_properties(props: Mapping[str, str]) -> dict[str, str]:
    """Server properties as the image's ``KAFKA_*`` variables: ``.`` → ``_``,
    ``_`` → ``__``, ``-`` → ``___``, upper case."""
    env: dict[str, str] = {}
    code = {".": "_", "_": "__", "-": "___"}
    for key, value in props.items():
        name = "KAFKA_" + "".join(code.get(ch, ch) for ch in key).upper()
        if name in LAUNCHER_VARIABLES:
            raise ConfigError(f"server property {key!r} would be the launcher variable {name}")
        env[name] = str(value)
    return env


def properties_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the image's entrypoint makes of ``env`` (``ci/images/kafka/entrypoint.sh``):
    the inverse of :func:`env_from_properties` for every non-launcher ``KAFKA_*``."""
    props: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith("KAFKA_") or name in LAUNCHER_VARIABLES:
            continue
        key = name[len("KAFKA_"):].lower()
        key = key.replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")
        props[key] = env[name]
    return props


@dataclass(frozen=True)
class KafkaContainerLayout:
    """Where one node listens: the host port its ``HOST`` listener binds and publishes."""

    node_id: int
    host_port: int
    alias: str  # the node's name on the container network

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.host_port}"

    @property
    def in_network_bootstrap(self) -> str:
        return f"{self.alias}:{IN_NETWORK_PORT}"


def container_properties(node: KafkaContainerLayout,
                         overrides: Mapping[str, str] | None = None, *,
                         cluster: Sequence[KafkaContainerLayout] | None = None
                         ) -> dict[str, str]:
    """The server properties of one node of ``cluster`` (default: the node alone), the
    same as process mode's (:func:`.process.node_config`) apart from addresses and paths:
    replication factor min(3, nodes), min ISR min(2, nodes)."""
    members = list(cluster) if cluster else [node]
    rf, isr = min(3, len(members)), min(2, len(members))
    cfg = {
        "node.id": str(node.node_id),
        "process.roles": "broker,controller",
        "listeners": (f"PLAINTEXT://:{IN_NETWORK_PORT},CONTROLLER://:{CONTROLLER_PORT},"
                      f"HOST://:{node.host_port}"),
        "advertised.listeners": (f"PLAINTEXT://{node.in_network_bootstrap},"
                                 f"HOST://{node.bootstrap}"),
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "HOST:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.quorum.voters": ",".join(f"{m.node_id}@{m.alias}:{CONTROLLER_PORT}"
                                             for m in members),
        "log.dirs": DATA_DIR,
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
        "group.initial.rebalance.delay.ms": "0",
    }
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def launcher_env(node_id: int, heap: str) -> dict[str, str]:
    """Heap, JVM and GC-log flags as process mode sets them (:func:`.process.kafka_jvm_flags`)."""
    from pytest_brokerperf.brokers.provision.java import check_jvm_size

    check_jvm_size(heap)
    return {
        "KAFKA_HEAP_OPTS": f"-Xms{heap} -Xmx{heap}",
        "KAFKA_JVM_PERFORMANCE_OPTS": " ".join(KAFKA_PERFORMANCE_FLAGS),
        "KAFKA_GC_LOG_OPTS": (f"-Xlog:gc*:file={LOG_DIR}/gc-{node_id}.log:time,uptime:"
                              "filecount=10,filesize=100M"),
        "KAFKA_OPTS": f"-Dkafka.logs.dir={LOG_DIR}",
        "BROKERPERF_LOG_FILE": f"{LOG_DIR}/kafka-{node_id}.log",
    }


def await_node_advertised(bootstrap: str, deadline: float) -> None:
    """Return once the Kafka metadata asked at ``bootstrap`` names exactly one node, at
    ``bootstrap`` itself (a Kafka-protocol node advertising an address the host can
    reach); raise ProvisionError naming what it saw at ``deadline`` (monotonic)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    seen = "no answer"
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=5)
            addresses = sorted(f"{b.host}:{b.port}" for b in md.brokers.values())
            if addresses == [bootstrap]:
                return
            seen = f"metadata names {addresses}"
        except KafkaException as exc:
            seen = f"error {exc}"
        time.sleep(0.3)
    raise ProvisionError(f"the Kafka API at {bootstrap} saw {seen}, expected the node "
                         f"advertised at {bootstrap}")


def default_images(version: str) -> tuple[str, ...]:
    """The local build first (``ci/docker.sh``), then the official image."""
    return (f"brokerperf/kafka:{version}", f"apache/kafka:{version}")


# -- the cluster ----------------------------------------------------------------------------


class KafkaContainerCluster(ContainerNode):
    """One or three Kafka nodes in containers on their own network, testcontainers-style.

    Every node is a combined broker and controller (as process mode's); three form one
    KRaft quorum over their aliases ``kafka-1..3`` on the session's network and are a
    topology check (one machine). ``cpus``: as process mode (``None`` = the last CPU when
    there are several, ``set()`` = no pinning); ``run_id`` labels containers and network.
    """

    kind: ClassVar[str] = "kafka"

    def __init__(self, *, version: str, workdir: Path, run_id: str, image: str | None = None,
                 nodes: int = 1, heap: str = "1g", cpus: set[int] | None = None,
                 broker_overrides: dict[str, str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        if isinstance(nodes, bool) or nodes not in (1, 3):
            raise ConfigError(f"nodes must be 1 or 3 in container mode, got {nodes!r}")
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.version = version
        self.nodes = nodes
        self.heap = heap
        self.broker_overrides = dict(broker_overrides or {})
        self._endpoint: BrokerEndpoint | None = None
        self._layout: list[KafkaContainerLayout] = []
        self._props: list[dict[str, str]] = []

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the Kafka containers are not running; call start() first")
        return self._endpoint

    def image_candidates(self) -> tuple[str, ...]:
        return default_images(self.version)

    def plans(self) -> list[ContainerPlan]:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for i in range(1, self.nodes + 1):
            for old in [*logs.glob(f"gc-{i}.log*"), logs / f"kafka-{i}.log"]:
                old.unlink(missing_ok=True)
        self._layout = [KafkaContainerLayout(node_id=i, host_port=port, alias=f"kafka-{i}")
                        for i, port in enumerate(free_ports(self.nodes), start=1)]
        self._props = [container_properties(n, self.broker_overrides, cluster=self._layout)
                       for n in self._layout]
        cluster_id = generate_cluster_id()
        plans = []
        for node, props in zip(self._layout, self._props, strict=True):
            env = {**env_from_properties(props), **launcher_env(node.node_id, self.heap),
                   "CLUSTER_ID": cluster_id}
            # the HOST listener binds the same port inside that it is published on
            plans.append(ContainerPlan(
                alias=node.alias, env=env, ports={node.host_port: node.host_port},
                volumes={str(logs.resolve()): (LOG_DIR, "rw")},
                memory_mb=jvm_size_bytes(self.heap) // 2**20 + MEMORY_HEADROOM_MB))
        return plans

    def start(self) -> BrokerEndpoint:
        """Start the nodes and wait until the Admin API sees all of them from the host."""
        plans, info = self.launch()
        logs = self.workdir / "logs"
        nodes = range(1, self.nodes + 1)
        info.update({
            "env": dict(sorted(plans[0].env.items())),
            "server_properties": self._props[0] if self.nodes == 1 else {
                str(n.node_id): p for n, p in zip(self._layout, self._props, strict=True)},
            "listeners": {"HOST": ",".join(n.bootstrap for n in self._layout),
                          "PLAINTEXT": ",".join(n.in_network_bootstrap for n in self._layout)},
            "in_network_bootstrap": ",".join(n.in_network_bootstrap for n in self._layout),
            "jvm_flags": [f"-Xms{self.heap}", f"-Xmx{self.heap}", *KAFKA_PERFORMANCE_FLAGS],
            "heap": self.heap,
            "log_files": [str(logs / f"kafka-{i}.log") for i in nodes],
            "gc_logs": [str(logs / f"gc-{i}.log") for i in nodes],
            "metrics_urls": [],
            "metrics_agent": {"error": "the JMX exporter agent is not attached in container "
                              "mode in this version; /proc of the containers' JVMs is sampled"},
            "cluster_id": plans[0].env["CLUSTER_ID"],
            "broker_overrides": dict(self.broker_overrides),
        })
        labels = info.pop("image_labels")
        self._endpoint = BrokerEndpoint(
            kind="kafka", bootstrap=",".join(n.bootstrap for n in self._layout),
            mode="container", nodes=self.nodes,
            version=labels.get("org.brokerperf.kafka-version") or self.version,
            topology_check=self.nodes > 1, info=info, local=self.local_record(info))
        return self.serving(self._endpoint)

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """The node's start-up log line."""
        wait_for_log(container, b"Kafka Server started", deadline, self.start_timeout,
                     since=self.log_since)

    def wait_cluster_ready(self, started: list[DockerContainer], plans: list[ContainerPlan],
                           deadline: float) -> None:
        """Every node's log line, then the Admin API from the host sees every node at
        the address it advertises to the host."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        super().wait_cluster_ready(started, plans, deadline)
        expected = {n.node_id: n.bootstrap for n in self._layout}
        bootstrap = ",".join(n.bootstrap for n in self._layout)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        seen = "no answer"
        while time.monotonic() < deadline:
            try:
                md = admin.list_topics(timeout=5)
                brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
                if brokers == expected:
                    return
                seen = f"metadata names {brokers}"
            except KafkaException as exc:
                seen = f"error {exc}"
            time.sleep(0.3)
        raise ProvisionError(f"the Admin API at {bootstrap} saw {seen}, expected {expected}")

    def forget(self) -> None:
        self._endpoint = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<KafkaContainerCluster nodes={self.nodes} version={self.version} {state}>"
