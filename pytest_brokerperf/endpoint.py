"""The one value every provisioning mode produces: how to reach a broker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.redaction import SecretDict, redact

if TYPE_CHECKING:
    from pytest_brokerperf.provision.cpus import CpuAffinity

__all__ = ["BrokerEndpoint", "LocalProcesses"]


@dataclass(frozen=True)
class LocalProcesses:
    """What a local provisioner started: processes, their files and their CPUs.

    Typed for readers inside the plugin; :meth:`as_info` gives the same values under
    the ``endpoint.info`` keys that results and older readers use.
    """

    pids: tuple[int, ...]
    log_files: tuple[str, ...] = ()
    gc_logs: tuple[str, ...] = ()
    data_dirs: tuple[str, ...] = ()
    config_files: tuple[str, ...] = ()
    metrics_urls: tuple[str, ...] = ()
    cpu_affinity: CpuAffinity | None = None
    started_at: float = 0.0  # time.time() when the first broker process was launched
    ready_at: float = 0.0  # time.time() when the readiness wait passed
    startup_s: float = 0.0  # from start() to ready, including port retries
    workdir: str | None = None

    def as_info(self) -> dict[str, Any]:
        """The ``endpoint.info`` keys of this record (lists, JSON-ready)."""
        return {
            "pids": list(self.pids),
            "data_dirs": list(self.data_dirs),
            "log_files": list(self.log_files),
            "gc_logs": list(self.gc_logs),
            "config_files": list(self.config_files),
            "metrics_urls": list(self.metrics_urls),
            "cpu_affinity": self.cpu_affinity.as_info() if self.cpu_affinity else None,
            "started_at": self.started_at,
            "ready_at": self.ready_at,
            "startup_s": self.startup_s,
            "workdir": self.workdir,
        }


@dataclass(frozen=True)
class BrokerEndpoint:
    """How to reach a broker, whatever made it (local process, container, remote).

    ``kind`` is the broker family (``kafka``, ``pulsar``, ``rabbitmq``, ``tansu``);
    ``bootstrap`` the client address string (Kafka bootstrap servers, Pulsar service
    URL, AMQP URI list). ``client_config`` holds extra client properties (TLS, SASL)
    that every client of this endpoint needs; it may contain secrets and is never
    written to results (see :meth:`redacted`).
    """

    kind: str
    bootstrap: str
    mode: str  # process | container | remote
    nodes: int = 1
    version: str = "unknown"
    admin_url: str | None = None
    client_config: dict[str, str] = field(default_factory=dict)
    topology_check: bool = False  # several nodes sharing one machine
    #: the durability level 1-4 this endpoint's tests run at (None: the driver file's
    #: settings as they are); the ``broker`` fixture sets it per test
    durability: int | None = None
    #: a dry run's endpoint: nothing was started; the address is what a run would use
    dry_run: bool = False
    #: a dry run against a remote cluster that did not answer: why, for the plan
    unreached: str | None = None
    info: dict[str, Any] = field(default_factory=dict)  # pids, data dirs, JVM flags, log paths
    #: what a local provisioner started (typed); None for remote and container brokers
    local: LocalProcesses | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.client_config, SecretDict):  # reprs mask secrets
            object.__setattr__(self, "client_config", SecretDict(self.client_config))

    def processes_record(self) -> LocalProcesses:
        """:attr:`local`, or the same record read from ``info`` (endpoints built without it).

        Empty for a remote cluster: nothing of it runs here.
        """
        if self.local is not None:
            return self.local
        info = self.info

        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in info.get(key) or ())

        return LocalProcesses(
            pids=tuple(int(p) for p in info.get("pids") or ()),
            log_files=strings("log_files"), gc_logs=strings("gc_logs"),
            data_dirs=strings("data_dirs"), config_files=strings("config_files"),
            metrics_urls=strings("metrics_urls"),
        )

    def broker_cpus(self) -> list[int] | None:
        """The CPUs the local broker processes are pinned to; None when not pinned."""
        if self.local is not None:
            aff = self.local.cpu_affinity
            return list(aff.broker_cpus) if aff is not None and aff.broker_cpus else None
        recorded = self.info.get("cpu_affinity")
        cpus = recorded.get("broker_cpus") if isinstance(recorded, dict) else recorded
        return [int(c) for c in cpus] if cpus else None

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe description with secrets removed, for manifests and results."""
        cfg = redact(self.client_config)
        info = dict(self.info)
        if self.durability is not None:
            info["durability"] = self.durability
        overrides = info.get("broker_overrides")
        if isinstance(overrides, dict):  # e.g. a SASL listener's JAAS line with passwords
            info["broker_overrides"] = redact(overrides)
        return {
            "kind": self.kind,
            "bootstrap": self.bootstrap,
            "mode": self.mode,
            "nodes": self.nodes,
            "version": self.version,
            "admin_url": self.admin_url,
            "client_config": cfg,
            "topology_check": self.topology_check,
            **({"dry_run": True} if self.dry_run else {}),
            "info": info,
        }
