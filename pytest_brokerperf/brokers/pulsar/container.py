"""Pulsar standalone in a container (``--brokerperf-provision=container``).

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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.pulsar.process import (
    CLUSTER_NAME,
    PULSAR_EXTRA_FLAGS,
    PULSAR_GC_FLAGS,
    PulsarPorts,
    _http_get,
    journal_settings,
    standalone_config,
)
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import ConfigError, ProvisionError
from pytest_brokerperf.provision.container_node import ContainerNode, ContainerPlan
from pytest_brokerperf.provision.java import check_jvm_size
from pytest_brokerperf.provision.ports import LOOPBACK, free_ports

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["ALIAS", "PulsarContainerCluster", "container_config", "default_images",
           "env_from_config", "image_default_config", "jvm_env"]

ALIAS = "pulsar-1"
LOG_DIR = "/pulsar/logs"
DEFAULT_START_TIMEOUT_S = 240.0
#: what the container may use beyond heap and direct memory (metaspace, RocksDB, threads)
MEMORY_HEADROOM_MB = 1024
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
    from pytest_brokerperf.provision.java import render_properties

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


class PulsarContainerCluster(ContainerNode):
    """One Pulsar standalone in a container: a broker and one bookie, or three bookies
    in the one JVM (``nodes=3``, as process mode runs them: ensemble 3, write quorum 3,
    ack quorum 2, a topology check)."""

    kind: ClassVar[str] = "pulsar"

    def __init__(self, *, version: str, workdir: Path, run_id: str, image: str | None = None,
                 nodes: int = 1, heap: str = "1g", direct_memory: str = "1g",
                 cpus: set[int] | None = None, durability: int | None = None,
                 overrides: dict[str, str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
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

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the Pulsar container is not running; call start() first")
        return self._endpoint

    def image_candidates(self) -> tuple[str, ...]:
        return default_images(self.version)

    def plan(self) -> ContainerPlan:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for old in logs.glob("gc.log*"):
            old.unlink(missing_ok=True)
        broker_port, web_port = free_ports(2)
        self._ports = PulsarPorts(broker_port=broker_port, web_port=web_port)
        self._config = container_config(self._ports, bookies=self.nodes,
                                        durability=self.durability, overrides=self.overrides)
        env = {**env_from_config(self._config), **jvm_env(self.heap, self.direct_memory)}
        command = ["sh", "-c", "bin/apply-config-from-env.py conf/standalone.conf && exec "
                   "bin/pulsar standalone --no-functions-worker --no-stream-storage "
                   f"--advertised-address {LOOPBACK} --wipe-data"
                   + (f" --num-bookies {self.nodes}" if self.nodes > 1 else "")]
        return ContainerPlan(
            alias=ALIAS, hostname=ALIAS, env=env, command=command,
            ports={broker_port: broker_port, web_port: web_port},
            volumes={str(logs.resolve()): (LOG_DIR, "rw")},
            memory_mb=_size_mb(self.heap) + _size_mb(self.direct_memory) + MEMORY_HEADROOM_MB)

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """As process mode: broker health, ``public/default``, the bookie registered."""
        assert self._ports is not None
        admin = f"http://{LOOPBACK}:{self._ports.web_port}"
        wrapped = container.get_wrapped_container()
        checks = (
            ("/admin/v2/brokers/health", lambda code, body: code == 200 and "ok" in body),
            ("/admin/v2/namespaces/public", lambda code, body: code == 200
             and "public/default" in body),
            ("/admin/v2/bookies/all", lambda code, body: code == 200
             and body.count("bookieId") >= self.nodes),
        )
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
        """Start the standalone and wait until its admin API and bookie answer."""
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

    def forget(self) -> None:
        self._endpoint = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<PulsarContainerCluster version={self.version} {state}>"
