"""Pulsar standalone in a container (``--brokerperf-provision=container``); with
``nodes=3``, three node containers and a ZooKeeper container (:mod:`.container_layout`).

Configured through the official ``apachepulsar/pulsar`` image's contract, so the local
build (``brokerperf/pulsar:<version>``, the Maven Central jars process mode runs, made by
``ci/docker.sh``) and the official image run the same way:

- ``bin/apply-config-from-env.py conf/standalone.conf`` before ``bin/pulsar standalone``:
  a variable named like a configuration key replaces it, ``PULSAR_PREFIX_<key>`` adds a
  key the file lacks; this module sets both for every key (:func:`env_from_config`), so
  either rule of the script applies it;
- ``PULSAR_MEM``, ``PULSAR_GC``, ``PULSAR_EXTRA_OPTS`` carry process mode's heap, direct
  memory, G1 settings and netty flags (:mod:`.process`), ``PULSAR_GC_LOG`` its GC log;
- the standalone's configuration is process mode's (:func:`.process.standalone_config`,
  durability journal included), apart from addresses.

Listeners, the classic trap (a broker advertising an address its clients cannot reach):
the binary port P and the web port W bind inside the container on the same numbers they
are published on (127.0.0.1 only), so the addresses the broker hands out in lookups
(``pulsar://127.0.0.1:P``, ``http://127.0.0.1:W``) work from the host and inside the
container alike; a second advertised listener, ``network``, names
``pulsar://pulsar-1:P`` for clients in containers on the session's network (they pass
``listenerName="network"``).
"""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.container_node import (
    ContainerNode,
    ContainerPlan,
    wait_for_log,
)
from pytest_brokerperf.brokers.provision.java import check_jvm_size
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.brokers.pulsar.container_layout import (
    META_ALIAS,
    META_READY,
    NodeLayout,
    broker_config,
    meta_command,
    meta_env,
    node_command,
    node_env,
)
from pytest_brokerperf.brokers.pulsar.process import (
    CLUSTER_NAME,
    PULSAR_EXTRA_FLAGS,
    PULSAR_GC_FLAGS,
    PulsarPorts,
    _http_get,
    journal_settings,
    standalone_config,
)
from pytest_brokerperf.core.errors import ConfigError, ProvisionError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["ALIAS", "PulsarContainerCluster", "container_config", "default_images",
           "env_from_config", "image_default_config", "jvm_env", "standalone_command"]

ALIAS = "pulsar-1"
LOG_DIR = "/pulsar/logs"
DEFAULT_START_TIMEOUT_S = 240.0
#: what the container may use beyond heap and direct memory (metaspace, RocksDB, threads)
MEMORY_HEADROOM_MB = 1024
#: pulsar-meta: ZooKeeper's 256 MiB heap and the metadata tool's
META_MEMORY_MB = 1024
PREFIX = "PULSAR_PREFIX_"


def default_images(version: str) -> tuple[str, ...]:
    """The local build first (``ci/docker.sh``), then the official image."""
    return (f"brokerperf/pulsar:{version}", f"apachepulsar/pulsar:{version}")


def container_config(ports: PulsarPorts, *, bookies: int = 1, durability: int | None = None,
                     overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Process mode's ``standalone.conf`` with the container's addresses."""
    cfg = standalone_config(ports, bookies=bookies, durability=durability, overrides=None)
    cfg.update({
        "bindAddress": "0.0.0.0",
        "advertisedAddress": LOOPBACK,
        "advertisedListeners": (f"host:pulsar://{LOOPBACK}:{ports.broker_port},"
                                f"network:pulsar://{ALIAS}:{ports.broker_port}"),
        "internalListenerName": "host",
    })
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def image_default_config() -> str:
    """The local image's ``conf/standalone.conf``: process mode's keys on the official
    image's ports (6650, 8080), bound to every interface, advertised as localhost."""
    from pytest_brokerperf.brokers.provision.java import render_properties

    cfg = standalone_config(PulsarPorts(broker_port=6650, web_port=8080))
    cfg.update({"bindAddress": "0.0.0.0", "advertisedAddress": "localhost"})
    return render_properties(cfg, header="Pulsar standalone, the brokerperf/pulsar image's "
                             "defaults (ci/docker.sh)")


def env_from_config(cfg: Mapping[str, str]) -> dict[str, str]:
    """Every key twice: by name (replaces a key the image's file has) and with
    ``PULSAR_PREFIX_`` (adds a key it lacks), the two rules of apply-config-from-env.py."""
    env: dict[str, str] = {}
    for key, value in cfg.items():
        env[key] = str(value)
        env[PREFIX + key] = str(value)
    return env


def jvm_env(heap: str, direct_memory: str) -> dict[str, str]:
    """Process mode's JVM flags in the image's variables (:func:`.process.pulsar_jvm_flags`)."""
    check_jvm_size(heap)
    check_jvm_size(direct_memory, "direct memory")
    return {
        "PULSAR_MEM": f"-Xms{heap} -Xmx{heap} -XX:MaxDirectMemorySize={direct_memory}",
        "PULSAR_GC": " ".join(PULSAR_GC_FLAGS),
        "PULSAR_GC_LOG": (f"-Xlog:gc*:file={LOG_DIR}/gc.log:time,uptime:"
                          "filecount=10,filesize=100M"),
        "PULSAR_EXTRA_OPTS": " ".join(PULSAR_EXTRA_FLAGS),
    }


def _size_mb(size: str) -> int:
    unit = size[-1].lower()
    number = int(size[:-1]) if unit.isalpha() else int(size)
    return {"k": number // 1024, "m": number, "g": number * 1024}.get(unit, number // 2**20)



#: in the container's working directory, which a stop and start keeps (no volume)
STARTED_MARKER = ".brokerperf-started"


def standalone_command(address: str) -> list[str]:
    """The container's command: ``--wipe-data`` on its first start only. A container
    started again after a fault (``kill-broker``, ``restart-broker``) runs the same
    command, and ``--wipe-data`` there would delete every bookie's data before the
    broker came back: the fault would be judged on an empty broker."""
    return ["sh", "-c",
            "bin/apply-config-from-env.py conf/standalone.conf && "
            f"if [ -e {STARTED_MARKER} ]; then wipe=''; "
            f"else wipe='--wipe-data'; touch {STARTED_MARKER}; fi && "
            "exec bin/pulsar standalone --no-functions-worker --no-stream-storage "
            f"--advertised-address {address} $wipe"]

class PulsarContainerCluster(ContainerNode):
    """One Pulsar standalone in a container (a broker and a bookie), or three nodes
    ``pulsar-1..3`` on the session's network, each a broker and a bookie, sharing the
    ZooKeeper of a ``pulsar-meta`` container (:mod:`.container_layout`; ensemble 3,
    write quorum 3, ack quorum 2, a topology check). ``bookie_heap`` and
    ``bookie_direct_memory`` size each node's bookie JVM (three nodes only)."""

    kind: ClassVar[str] = "pulsar"

    def __init__(self, *, version: str, workdir: Path, run_id: str, image: str | None = None,
                 nodes: int = 1, heap: str = "1g", direct_memory: str = "1g",
                 cpus: set[int] | None = None, durability: int | None = None,
                 overrides: dict[str, str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S,
                 bookie_heap: str = "512m", bookie_direct_memory: str = "512m") -> None:
        if isinstance(nodes, bool) or nodes not in (1, 3):
            raise ConfigError(f"nodes (bookies) must be 1 or 3 in container mode, got {nodes!r}")
        journal_settings(durability)  # validates the level before anything starts
        check_jvm_size(heap)
        check_jvm_size(direct_memory, "direct memory")
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.version = version
        self.nodes = nodes
        self.heap = heap
        self.direct_memory = direct_memory
        self.durability = durability
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self._endpoint: BrokerEndpoint | None = None
        self._ports: PulsarPorts | None = None
        self._config: dict[str, str] = {}
        check_jvm_size(bookie_heap)
        check_jvm_size(bookie_direct_memory, "direct memory")
        self.bookie_heap = bookie_heap
        self.bookie_direct_memory = bookie_direct_memory
        self._layout: list[NodeLayout] = []

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the Pulsar container is not running; call start() first")
        return self._endpoint

    def image_candidates(self) -> tuple[str, ...]:
        return default_images(self.version)

    def plan(self) -> ContainerPlan:
        """The one-node standalone (three nodes: :meth:`plans`' own layout)."""
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for old in logs.glob("gc.log*"):
            old.unlink(missing_ok=True)
        broker_port, web_port = free_ports(2)
        self._ports = PulsarPorts(broker_port=broker_port, web_port=web_port)
        self._config = container_config(self._ports, bookies=self.nodes,
                                        durability=self.durability, overrides=self.overrides)
        env = {**env_from_config(self._config), **jvm_env(self.heap, self.direct_memory)}
        command = standalone_command(LOOPBACK)
        return ContainerPlan(
            alias=ALIAS, hostname=ALIAS, env=env, command=command,
            ports={broker_port: broker_port, web_port: web_port},
            volumes={str(logs.resolve()): (LOG_DIR, "rw")},
            memory_mb=_size_mb(self.heap) + _size_mb(self.direct_memory) + MEMORY_HEADROOM_MB)

    # -- three nodes (container_layout) ---------------------------------------------------

    def plans(self) -> list[ContainerPlan]:
        if self.nodes == 1:
            return [self.plan()]
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for old in [*logs.glob("gc-broker-*.log*"), *logs.glob("gc-bookie-*.log*")]:
            old.unlink(missing_ok=True)
        if not self._layout:
            self._make_layout()
        self._ports = PulsarPorts(broker_port=self._layout[0].broker_port,
                                  web_port=self._layout[0].web_port)
        self._config = broker_config(self._layout[0], self.overrides)
        memory = (_size_mb(self.heap) + _size_mb(self.direct_memory)
                  + _size_mb(self.bookie_heap) + _size_mb(self.bookie_direct_memory)
                  + 2 * MEMORY_HEADROOM_MB)
        return [ContainerPlan(
            alias=n.alias, hostname=n.alias, command=node_command(),
            env=node_env(n, durability=self.durability, heap=self.heap,
                         direct_memory=self.direct_memory, bookie_heap=self.bookie_heap,
                         bookie_direct_memory=self.bookie_direct_memory,
                         overrides=self.overrides, nodes=self._layout),
            ports={n.broker_port: n.broker_port, n.web_port: n.web_port},
            volumes={str(logs.resolve()): (LOG_DIR, "rw")}, memory_mb=memory)
            for n in self._layout]

    def _make_layout(self) -> None:
        ports = free_ports(2 * self.nodes)
        self._layout = [NodeLayout(index=i, broker_port=ports[2 * i - 2],
                                   web_port=ports[2 * i - 1])
                        for i in range(1, self.nodes + 1)]

    def support_plans(self) -> list[ContainerPlan]:
        if self.nodes == 1:
            return []
        # before plans(): the layout is made here so the metadata names the brokers
        self._make_layout()
        return [ContainerPlan(alias=META_ALIAS, hostname=META_ALIAS,
                              env=meta_env(),
                              command=meta_command(self._layout), ports={},
                              memory_mb=META_MEMORY_MB)]

    def wait_support_ready(self, container: DockerContainer, plan: ContainerPlan,
                           deadline: float) -> None:
        """ZooKeeper answers and the cluster metadata is written."""
        wait_for_log(container, META_READY.encode(), deadline, self.start_timeout)

    def wait_cluster_ready(self, started: list[DockerContainer], plans: list[ContainerPlan],
                           deadline: float) -> None:
        """Every broker healthy, then (from node 1) ``public/default`` and every
        bookie registered."""
        super().wait_cluster_ready(started, plans, deadline)
        if self.nodes > 1:
            self._wait_checks(started[0], self._layout[0].admin_url, deadline,
                              self._cluster_checks())

    def _cluster_checks(self) -> list[tuple[str, Callable[[int, str], bool]]]:
        return [
            ("/admin/v2/namespaces/public", lambda code, body: code == 200
             and "public/default" in body),
            ("/admin/v2/bookies/all", lambda code, body: code == 200
             and body.count("bookieId") >= self.nodes),
        ]

    def _admin_of(self, plan: ContainerPlan) -> str:
        if self.nodes == 1:
            assert self._ports is not None
            return f"http://{LOOPBACK}:{self._ports.web_port}"
        (node,) = [n for n in self._layout if n.alias == plan.alias]
        return node.admin_url

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """As process mode: broker health, ``public/default``, the bookie registered
        (three nodes: this node's broker health; the cluster's checks follow)."""
        health = ("/admin/v2/brokers/health", lambda code, body: code == 200 and "ok" in body)
        checks = [health] if self.nodes > 1 else [health, *self._cluster_checks()]
        self._wait_checks(container, self._admin_of(plan), deadline, checks)

    def _wait_checks(self, container: DockerContainer, admin: str, deadline: float,
                     checks: list[tuple[str, Callable[[int, str], bool]]]) -> None:
        wrapped = container.get_wrapped_container()
        last = "no answer"
        for path, ok in checks:
            while True:
                try:
                    code, body = _http_get(admin + path, 5.0)
                    last = f"GET {path} -> {code} {body[:200]!r}"
                    if ok(code, body):
                        break
                except (OSError, urllib.error.URLError) as exc:
                    last = f"GET {path} -> {exc}"
                wrapped.reload()
                if wrapped.status in ("exited", "dead"):
                    exit_code = (wrapped.attrs.get("State") or {}).get("ExitCode")
                    raise ProvisionError(f"the container exited with code {exit_code} during "
                                         "start-up")
                if time.monotonic() > deadline:
                    raise ProvisionError(f"not ready within {self.start_timeout:.0f} s; last "
                                         f"answer: {last}")
                time.sleep(0.5)

    def start(self) -> BrokerEndpoint:
        """Start the standalone (or the three nodes) and wait until the admin API and
        the bookies answer."""
        if self.nodes > 1:
            return self._start_nodes()
        (plan,), info = self.launch()
        labels = info.pop("image_labels")
        ports = self._ports
        assert ports is not None
        admin_url = f"http://{LOOPBACK}:{ports.web_port}"
        version = labels.get("org.brokerperf.pulsar-version") or self.version
        try:
            _, body = _http_get(admin_url + "/admin/v2/brokers/version", 10.0)
            version = body.strip().strip('"') or version
        except (OSError, urllib.error.URLError):
            pass
        bookies: list[str] = []
        try:
            _, body = _http_get(admin_url + "/admin/v2/bookies/all", 10.0)
            bookies = [b["bookieId"] for b in json.loads(body).get("bookies", [])]
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
            pass
        logs = self.workdir / "logs"
        info.update({
            "env": {k: v for k, v in sorted(plan.env.items()) if not k.startswith(PREFIX)},
            "command": plan.command,
            "jvm_flags": " ".join(plan.env[k] for k in ("PULSAR_MEM", "PULSAR_GC",
                                                        "PULSAR_EXTRA_OPTS")).split(),
            "brokers": 1,
            "bookies": self.nodes,
            "bookie_ids": bookies,
            "cluster_name": CLUSTER_NAME,
            "ports": {"broker": ports.broker_port, "web": ports.web_port},
            "listeners": {"host": f"pulsar://{LOOPBACK}:{ports.broker_port}",
                          "network": f"pulsar://{ALIAS}:{ports.broker_port}"},
            "durability": self.durability,
            "default_persistence": {
                "ensemble": int(self._config["managedLedgerDefaultEnsembleSize"]),
                "write_quorum": int(self._config["managedLedgerDefaultWriteQuorum"]),
                "ack_quorum": int(self._config["managedLedgerDefaultAckQuorum"]),
            },
            "standalone_conf": dict(self._config),
            "heap": self.heap,
            "direct_memory": self.direct_memory,
            "broker_overrides": dict(self.overrides),
            "gc_logs": [str(logs / "gc.log")],
        })
        # the JVM, not the shell the command starts in (it execs, but be sure)
        info["pids"] = self.host_pids("java") or info["pids"]
        self._endpoint = BrokerEndpoint(
            kind="pulsar", bootstrap=f"pulsar://{LOOPBACK}:{ports.broker_port}",
            mode="container", nodes=self.nodes, topology_check=self.nodes > 1, version=version,
            admin_url=admin_url, info=info, local=self.local_record(info),
            journal={k: v for k, v in self._config.items() if k.startswith("journal")})
        return self.serving(self._endpoint)

    def _start_nodes(self) -> BrokerEndpoint:
        plans, info = self.launch()
        labels = info.pop("image_labels")
        first = self._layout[0]
        version = labels.get("org.brokerperf.pulsar-version") or self.version
        try:
            _, body = _http_get(first.admin_url + "/admin/v2/brokers/version", 10.0)
            version = body.strip().strip('"') or version
        except (OSError, urllib.error.URLError):
            pass
        bookies: list[str] = []
        try:
            _, body = _http_get(first.admin_url + "/admin/v2/bookies/all", 10.0)
            bookies = sorted(b["bookieId"] for b in json.loads(body).get("bookies", []))
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError):
            pass
        logs = self.workdir / "logs"
        nodes = [n.index for n in self._layout]
        info.update({
            "layout": "three nodes (broker + bookie each) and a ZooKeeper container",
            "env": {n.alias: {k: v for k, v in sorted(p.env.items())}
                    for n, p in zip(self._layout, plans, strict=True)},
            "command": plans[0].command,
            "metadata_container": META_ALIAS,
            "metadata_store": self._config["metadataStoreUrl"],
            "brokers": self.nodes,
            "bookies": self.nodes,
            "bookie_ids": bookies,
            "cluster_name": CLUSTER_NAME,
            "ports": {n.alias: {"broker": n.broker_port, "web": n.web_port}
                      for n in self._layout},
            "admin_urls": [n.admin_url for n in self._layout],
            "listeners": {"host": ",".join(n.host_url for n in self._layout),
                          "network": ",".join(n.network_url for n in self._layout)},
            "durability": self.durability,
            "default_persistence": {
                "ensemble": int(self._config["managedLedgerDefaultEnsembleSize"]),
                "write_quorum": int(self._config["managedLedgerDefaultWriteQuorum"]),
                "ack_quorum": int(self._config["managedLedgerDefaultAckQuorum"]),
            },
            "broker_conf": dict(self._config),
            "heap": self.heap,
            "direct_memory": self.direct_memory,
            "bookie_heap": self.bookie_heap,
            "bookie_direct_memory": self.bookie_direct_memory,
            "broker_overrides": dict(self.overrides),
            "gc_logs": [str(logs / f"gc-{role}-{i}.log") for i in nodes
                        for role in ("broker", "bookie")],
        })
        # every node's two JVMs (broker and bookie), for /proc sampling
        info["pids"] = self.host_pids("java") or info["pids"]
        bookie_env = plans[0].env
        self._endpoint = BrokerEndpoint(
            # one scheme, several hosts: Pulsar's multi-host service URL
            kind="pulsar", bootstrap="pulsar://" + ",".join(
                n.host_url.removeprefix("pulsar://") for n in self._layout),
            mode="container", nodes=self.nodes, topology_check=True, version=version,
            admin_url=first.admin_url, info=info, local=self.local_record(info),
            journal={k[len("BOOKIE_"):]: v for k, v in bookie_env.items()
                     if k.startswith("BOOKIE_journal")})
        return self.serving(self._endpoint)

    def forget(self) -> None:
        self._endpoint = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<PulsarContainerCluster version={self.version} {state}>"
