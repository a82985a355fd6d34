"""The one value every provisioning mode produces: how to reach a broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf.core.redaction import SecretDict, redact

if TYPE_CHECKING:
    from pytest_brokerperf.metrics.cpus import CpuAffinity

__all__ = ["TLS_PROTOCOLS", "BrokerEndpoint", "CliAccess", "LocalProcesses", "TlsClient"]

#: Client protocols that run over TLS: Kafka's ``security.protocol`` values, AMQP's and
#: Pulsar's schemes.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL", "amqps", "pulsar+ssl"})


class CliAccess(Protocol):
    """How to run a broker's own CLI against nodes this session started (RabbitMQ's
    ``rabbitmqctl``): picklable, holds paths and names, never a secret."""

    def as_info(self) -> dict[str, Any]:
        """The JSON-ready description the manifest records."""
        ...


@dataclass(frozen=True)
class LocalProcesses:
    """What a local provisioner (process or container) started: processes, their files
    and their CPUs.

    Typed for readers inside the plugin; :meth:`as_info` gives the same values under
    the ``endpoint.info`` keys the manifest records.
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
    #: each node's memory cgroup limit (--brokerperf-broker-memory); None: no limit set
    memory_limit_bytes: int | None = None

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
            "memory_limit_bytes": self.memory_limit_bytes,
        }


@dataclass(frozen=True)
class TlsClient:
    """How clients reach the TLS listener of a broker this session started.

    ``protocol`` is what the clients speak (Kafka's ``security.protocol``: ``SSL`` or
    ``SASL_SSL``; ``amqps`` for RabbitMQ; ``pulsar+ssl`` for Pulsar, whose admin then
    speaks ``https``); ``ca_file`` the PEM of the run's CA, the only
    certificate clients trust; ``plaintext`` the broker's plaintext address, kept apart
    (its own admin and readiness checks use it) so a record shows it was not the one
    the clients used. Paths and names only: no key and no password.
    """

    protocol: str
    ca_file: str
    plaintext: str | None = None
    #: the names the server certificate carries (clients must connect to one of them)
    server_names: tuple[str, ...] = ()

    def as_info(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "ca_file": self.ca_file,
                "plaintext": self.plaintext, "server_names": list(self.server_names)}


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
    #: the run may change cluster-wide settings (``--brokerperf-allow-cluster-changes``);
    #: only a remote provisioner sets it: local brokers are the session's own
    allow_cluster_changes: bool = False
    #: Kafka: the clients' ``security.protocol`` and ``sasl.mechanism`` (the safety plan
    #: shows them); None where the broker has no such setting
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    #: why durability levels do not mean here what they mean on disk (Tansu's memory
    #: storage); recorded as ``info.durability_note``
    storage_note: str | None = None
    #: the Kafka-protocol system ``--kafka-flavour`` named, when not Apache Kafka
    flavour_note: str | None = None
    #: Pulsar: the bookie journal settings of a standalone this session wrote (the
    #: durability read-back); None against a remote cluster, where they are not visible
    journal: Mapping[str, str] | None = None
    #: how to run the broker's CLI against nodes this session started (RabbitMQ)
    control: CliAccess | None = None
    #: everything else the provisioner reports for the manifest (pids, data dirs, JVM
    #: flags, log paths, ports); recorded, never read to decide anything
    info: dict[str, Any] = field(default_factory=dict)
    #: what a local provisioner started (processes or containers); None for a remote cluster
    local: LocalProcesses | None = None
    #: the TLS listener a local broker serves its clients on (``--brokerperf-tls``);
    #: None: plaintext, or a remote cluster (whose TLS is in ``security_protocol``)
    tls: TlsClient | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.client_config, SecretDict):  # reprs mask secrets
            object.__setattr__(self, "client_config", SecretDict(self.client_config))

    def processes_record(self) -> LocalProcesses:
        """:attr:`local`, or an empty record: a remote cluster runs nothing here."""
        return self.local if self.local is not None else LocalProcesses(pids=())

    def broker_cpus(self) -> list[int] | None:
        """The CPUs the local broker processes are pinned to; None when not pinned."""
        aff = self.local.cpu_affinity if self.local is not None else None
        return list(aff.broker_cpus) if aff is not None and aff.broker_cpus else None

    def tls_record(self) -> dict[str, Any]:
        """Whether clients spoke TLS to this broker and in which protocol (the record's
        ``tls``): a local TLS listener, a remote Kafka whose ``security.protocol`` is
        ``SSL``/``SASL_SSL``, or ``amqps://`` or ``pulsar+ssl://`` URIs."""
        if self.tls is not None:
            return {"on": True, "protocol": self.tls.protocol, "local_ca": True}
        protocol = self.security_protocol
        for scheme in ("amqps", "pulsar+ssl"):
            if protocol is None and self.bootstrap.startswith(f"{scheme}://"):
                protocol = scheme
        return {"on": protocol in TLS_PROTOCOLS, "protocol": protocol, "local_ca": False}

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe description with secrets removed, for manifests and results."""
        cfg = redact(self.client_config)
        info = dict(self.info)
        typed = {"allow_cluster_changes": self.allow_cluster_changes or None,
                 "security_protocol": self.security_protocol,
                 "sasl_mechanism": self.sasl_mechanism,
                 "durability_note": self.storage_note, "flavour_note": self.flavour_note,
                 "journal": dict(self.journal) if self.journal is not None else None,
                 "ctl": self.control.as_info() if self.control is not None else None,
                 "tls": self.tls.as_info() if self.tls is not None else None}
        info.update({k: v for k, v in typed.items() if v is not None})
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
