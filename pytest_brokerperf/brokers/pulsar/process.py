"""Apache Pulsar standalone (broker + bookies in one JVM) from Maven Central jars.

``org.apache.pulsar.PulsarStandaloneStarter`` with RocksDB metadata (no ZooKeeper, the
default since PIP-117), functions worker and stream storage off, bound to 127.0.0.1 on
free ports, pinned to its own CPU like the Kafka nodes, started with the JVM flags
``bin/pulsar standalone`` adds (without the ``--add-opens`` and the two
``bookkeeper.metadata.*.drivers`` properties the bookie cannot use the RocksDB metadata
store), a fixed heap and direct memory, G1 and a GC log.

``standalone.conf`` is generated (no jar holds one): the broker's default ensemble /
write / ack quorum are set explicitly (``ServiceConfiguration``'s own defaults are 2/2/2,
which one bookie cannot serve), ``managedLedgerNewEntriesCheckDelayInMillis=0`` as in
OMB's driver-pulsar deploy template (10 ms made caught-up consumers wait), and the bookie
journal from the durability level (:func:`journal_settings`). BookKeeper's journal
settings are per bookie, so a standalone serves exactly one durability level:
a different level means another start.

``nodes=3`` runs three bookies inside the one JVM (``--num-bookies 3``), so ensemble 3 /
write quorum 3 / ack quorum 2 can be created; it shares one JVM and one disk and is
labelled a topology check, not a replication cost.

``tls=True`` adds Pulsar's TLS listeners (``brokerServicePortTls``, ``webServicePortTls``)
with a certificate for ``localhost`` and ``127.0.0.1`` from a CA made at each start
(:mod:`~pytest_brokerperf.brokers.provision.tls`); the endpoint's clients use
``pulsar+ssl://`` and ``https://`` trusting that CA only, host names checked. The plaintext
ports stay: the standalone's own clients (its namespace set-up through the admin API,
the broker's internal client: ``brokerClientTlsEnabled`` stays false) and the harness's
readiness checks use them. Pulsar reads a PEM key without a
password (:class:`PulsarTls`), so the key it is given is an unencrypted copy.

``powercut_fs=True`` serves the data directory (metadata store and every bookie) through
the power-cut filesystem; the one JVM is the cluster's only node, so its power cut is
every bookie's at once (``covers`` in the cut's report). A restart after a fault runs
without ``--wipe-data`` and counts as serving once a topic can be created again
(docs/reference/faults.md, "Pulsar standalone").

Usage::

    with PulsarStandalone() as pulsar:
        client = pulsar_client.Client(pulsar.endpoint.bootstrap)
        admin_url = pulsar.endpoint.admin_url
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, TlsClient
from pytest_brokerperf.brokers.provision.java import (
    JVM_NON_HEAP,
    JavaRuntime,
    check_jvm_size,
    gc_log_flag,
    jvm_size_bytes,
    remove_gc_logs,
    render_console_log4j2,
    render_properties,
)
from pytest_brokerperf.brokers.provision.lifecycle import LocalNode, Probe, ProcessCluster
from pytest_brokerperf.brokers.provision.maven import (
    PULSAR_DEFAULT_VERSION,
    pulsar_version_of,
    resolve_pulsar,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports, port_open
from pytest_brokerperf.brokers.provision.tls import (
    TlsMaterial,
    make_tls_material,
    write_unencrypted_key,
)
from pytest_brokerperf.core.errors import ConfigError, ProvisionError
from pytest_brokerperf.core.shipped import DATA_DIR

__all__ = [
    "DURABILITY_LEVELS",
    "PULSAR_DEFAULT_VERSION",
    "PulsarPorts",
    "PulsarStandalone",
    "PulsarTls",
    "journal_settings",
    "pulsar_jvm_flags",
    "render_pulsar_log4j2",
    "standalone_config",
]

DEFAULT_START_TIMEOUT_S = 180.0  # three bookies on two cores take ~30 s; CI is slower
DEFAULT_STOP_TIMEOUT_S = 30.0
MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
CLUSTER_NAME = "standalone"
#: ``brokerShutdownTimeoutMs`` of every broker the suite starts: its stop waits a quarter
#: of it (1.5 s) for the event loops, where Pulsar's 60 s default waits 5 s
BROKER_SHUTDOWN_TIMEOUT_MS = 6000
DURABILITY_LEVELS = (1, 2, 3, 4)

# What bin/pulsar adds for `standalone`. Without the two metadata
# driver properties BookKeeper cannot use the RocksDB metadata store.
PULSAR_STANDALONE_FLAGS: tuple[str, ...] = (
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Djute.maxbuffer=10485760",
    "-Dbookkeeper.metadata.bookie.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.is.webapp=false",
)
# PULSAR_GC of conf/pulsar_env.sh: G1 with a 10 ms pause goal.
PULSAR_GC_FLAGS: tuple[str, ...] = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=10",
    "-XX:+ParallelRefProcEnabled",
    "-XX:+UnlockExperimentalVMOptions",
    "-XX:+DoEscapeAnalysis",
    "-XX:G1NewSizePercent=50",
    "-XX:+DisableExplicitGC",
    "-XX:-ResizePLAB",
)
# PULSAR_EXTRA_OPTS of conf/pulsar_env.sh.
PULSAR_EXTRA_FLAGS: tuple[str, ...] = (
    "-Dpulsar.allocator.exit_on_oom=true",
    "-Dio.netty.recycler.maxCapacity.default=1000",
    "-Dio.netty.recycler.linkCapacity=1024",
)

_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


# -- pure pieces (unit-tested) -------------------------------------------------------------


@dataclass(frozen=True)
class PulsarPorts:
    """The broker's ports; bookie ports are picked inside the JVM (RocksDB mode)."""

    broker_port: int  # binary protocol, pulsar://
    web_port: int  # admin REST API, http://
    #: the TLS listeners (``tls``): pulsar+ssl:// and https://; None without TLS
    broker_tls_port: int | None = None
    web_tls_port: int | None = None


@dataclass(frozen=True)
class PulsarTls:
    """What the standalone's TLS listeners serve: the certificate chain, its key and the
    run's CA (PEM files in the start's ``tls/`` scratch directory).

    ``key`` is an *unencrypted* PKCS#8 PEM (mode 0600, removed with the directory at
    stop): Pulsar 4.0's ``tlsKeyFilePath`` has no password setting (its
    ``SecurityUtility`` reads the ``BEGIN PRIVATE KEY`` block as a plain
    ``PKCS8EncodedKeySpec``), unlike Kafka's and RabbitMQ's, which get the encrypted key.
    Pulsar's key-store mode (``tlsEnabledWithKeyStore``, ``tlsKeyStorePassword``) would
    take the encrypted PKCS#12 store; it is not used here.
    """

    certificate: Path
    key: Path
    ca: Path

    def conf(self, ports: PulsarPorts) -> dict[str, str]:
        """The ``standalone.conf`` keys of the two TLS listeners (ServiceConfiguration)."""
        if ports.broker_tls_port is None or ports.web_tls_port is None:
            raise ConfigError("Pulsar's TLS listeners need broker_tls_port and web_tls_port")
        return {
            "brokerServicePortTls": str(ports.broker_tls_port),
            "webServicePortTls": str(ports.web_tls_port),
            "tlsCertificateFilePath": str(self.certificate),
            "tlsKeyFilePath": str(self.key),
            "tlsTrustCertsFilePath": str(self.ca),
            # server authentication only, as the Kafka and RabbitMQ listeners
            "tlsRequireTrustedClientCertOnConnect": "false",
            "tlsAllowInsecureConnection": "false",
        }


def journal_settings(durability: int | None) -> dict[str, str]:
    """Bookie journal settings of a durability level (docs/reference/durability.md).

    Levels 1 and 3 fsync the journal before a bookie acknowledges (``journalSyncData``);
    2 and 4 write it to the page cache only, flushed every second as StreamNative ran
    it. The replication half of a level (ack quorum) is a namespace policy set by the
    driver. ``None`` = BookKeeper's own defaults (write and fsync the journal, the same
    journal as level 1).
    """
    if durability is None:
        return {"journalWriteData": "true", "journalSyncData": "true"}
    if durability not in DURABILITY_LEVELS:
        raise ConfigError(
            f"durability level {durability!r} is not one of 1, 2, 3, 4 (1: sync replication "
            "+ fsync, 2: sync replication + page cache, 3: async replication + fsync, 4: "
            "async replication + page cache)"
        )
    if durability in (1, 3):
        return {"journalWriteData": "true", "journalSyncData": "true"}
    return {
        "journalWriteData": "true",
        "journalSyncData": "false",
        "journalPageCacheFlushIntervalMSec": "1000",
    }


def _default_quorum(bookies: int) -> tuple[int, int, int]:
    """Broker-wide default E/Qw/Qa: 1/1/1 on one bookie, OMB's 3/3/2 on three."""
    if bookies >= 3:
        return 3, 3, 2
    return bookies, bookies, bookies


def standalone_config(
    ports: PulsarPorts,
    *,
    bookies: int = 1,
    durability: int | None = None,
    overrides: Mapping[str, str] | None = None,
    extra_listeners: Mapping[str, int] | None = None,
    tls: PulsarTls | None = None,
) -> dict[str, str]:
    """The ``standalone.conf`` keys (broker and bookie read the same file), overrides last.

    ``extra_listeners`` (name → port) advertises more addresses of this broker (PIP-61
    ``advertisedListeners``; the first, ``internal``, is its own port): a client that
    names one (``listener_name``) is sent there by topic lookups, e.g. to a proxy in
    front of the broker. Pulsar refuses ``advertisedAddress`` beside them.

    ``tls``: the TLS listeners besides the plaintext ones, on ``ports.broker_tls_port``
    and ``ports.web_tls_port`` (:meth:`PulsarTls.conf`); the ``internal`` listener
    advertises its ``pulsar+ssl://`` address too.
    """
    e, qw, qa = _default_quorum(bookies)
    cfg: dict[str, str] = {
        "clusterName": CLUSTER_NAME,
        "bindAddress": LOOPBACK,
        "advertisedAddress": LOOPBACK,
        "brokerServicePort": str(ports.broker_port),
        "webServicePort": str(ports.web_port),
        # empty: the standalone uses rocksdb://<--metadata-dir> (PIP-117)
        "metadataStoreUrl": "",
        "configurationMetadataStoreUrl": "",
        # ServiceConfiguration's defaults are 2/2/2; set them for the bookies we have
        "managedLedgerDefaultEnsembleSize": str(e),
        "managedLedgerDefaultWriteQuorum": str(qw),
        "managedLedgerDefaultAckQuorum": str(qa),
        "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
        "loadBalancerEnabled": "false",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        # benchmark topics idle between phases must not vanish under a consumer
        "brokerDeleteInactiveTopicsEnabled": "false",
        "transactionCoordinatorEnabled": "false",
        "functionsWorkerEnabled": "false",
        # a stop waits a quarter of this (at most 5 s) for the broker's event loops to go
        # quiet: with the default 60 s every stop took 5 s more; nothing is left to serve
        # when the suite stops its broker (BrokerService's graceful-shutdown rule)
        "brokerShutdownTimeoutMs": str(BROKER_SHUTDOWN_TIMEOUT_MS),
        # OMB's broker template (StreamNative PR #210): dispatch new entries at once
        "managedLedgerNewEntriesCheckDelayInMillis": "0",
        # -- BookKeeper (same file) --
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "journalMaxGroupWaitMSec": "1",
        "dbStorage_writeCacheMaxSizeMb": "64",
        "dbStorage_readAheadCacheMaxSizeMb": "64",
        "allowLoopback": "true",
        # bookies bind to the loopback interface (else 0.0.0.0)
        "listeningInterface": "lo",
        "httpServerEnabled": "false",
        "diskUsageThreshold": "0.99",
        "diskUsageWarnThreshold": "0.99",
        "bookkeeperUseV2WireProtocol": "true",
    }
    cfg.update(journal_settings(durability))
    if tls is not None:
        cfg.update(tls.conf(ports))
    if extra_listeners:
        del cfg["advertisedAddress"]
        internal = [f"internal:pulsar://{LOOPBACK}:{ports.broker_port}"]
        if tls is not None:
            internal.append(f"internal:pulsar+ssl://{LOOPBACK}:{ports.broker_tls_port}")
        cfg["advertisedListeners"] = ",".join(
            internal
            + [f"{name}:pulsar://{LOOPBACK}:{port}" for name, port in extra_listeners.items()])
        cfg["internalListenerName"] = "internal"
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def render_pulsar_log4j2() -> str:
    """log4j2 config: console (= the broker's log file), WARN, start-up milestones at INFO."""
    info_loggers = {
        "standalone": "org.apache.pulsar.PulsarStandalone",
        "starter": "org.apache.pulsar.PulsarStandaloneStarter",
        "service": "org.apache.pulsar.broker.PulsarService",
        "brokerservice": "org.apache.pulsar.broker.service.BrokerService",
        "bkcluster": "org.apache.pulsar.metadata.bookkeeper.BKCluster",
        "bookieserver": "org.apache.bookkeeper.proto.BookieServer",
    }
    return render_console_log4j2(info_loggers)


def pulsar_jvm_flags(heap: str, direct_memory: str, gc_log: Path, log_config: Path) -> list[str]:
    """Memory, GC, logging and the standalone's required flags."""
    check_jvm_size(heap)
    check_jvm_size(direct_memory, "direct memory")
    return [
        f"-Xms{heap}",
        f"-Xmx{heap}",
        f"-XX:MaxDirectMemorySize={direct_memory}",
        *PULSAR_GC_FLAGS,
        gc_log_flag(gc_log),
        *PULSAR_EXTRA_FLAGS,
        *PULSAR_STANDALONE_FLAGS,
        f"-Dlog4j2.configurationFile={log_config}",
    ]


def standalone_args(config_file: Path, data_dir: Path, bookies: int, *,
                    advertised_address: bool = True) -> list[str]:
    """``PulsarStandaloneStarter`` arguments: no functions worker, no stream storage
    (no ``--advertised-address`` when the config advertises listeners instead)."""
    args = [
        "--config", str(config_file),
        "--no-functions-worker",
        "--no-stream-storage",
        *(["--advertised-address", LOOPBACK] if advertised_address else []),
        "--metadata-dir", str(data_dir / "metadata"),
        "--bookkeeper-dir", str(data_dir / "bookkeeper"),
        "--wipe-data",
    ]
    if bookies > 1:
        args += ["--num-bookies", str(bookies)]
    return args


def _http_get(url: str, timeout: float, method: str = "GET") -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Accept": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode("utf-8", "replace")


# -- the standalone -------------------------------------------------------------------------


class PulsarStandalone(ProcessCluster[LocalNode]):
    """One Pulsar standalone JVM (broker + ``nodes`` bookies) on loopback.

    ``durability`` (1-4, or None for BookKeeper's defaults) sets the bookie journal
    (:func:`journal_settings`); the endpoint records it. ``cpus``: as
    :class:`~pytest_brokerperf.brokers.kafka.process.KafkaProcessCluster` (None = the
    last CPU when there are several, ``set()`` = no pinning). ``overrides`` are merged
    into ``standalone.conf`` last (e.g. ``{"journalFlushWhenQueueEmpty": "true"}``, a
    tuning knob of the Pulsar limit study). ``start_timeout`` bounds start and readiness, not a
    first-time Maven download. ``tls``: TLS listeners too, which the endpoint's clients
    use (``pulsar+ssl://``, ``https://``; :attr:`BrokerEndpoint.tls` carries the CA), from
    a CA made at each start in ``<workdir>/tls`` (removed at stop).
    """

    kind: ClassVar[str] = "pulsar"

    def __init__(
        self,
        nodes: int = 1,
        version: str = PULSAR_DEFAULT_VERSION,
        workdir: Path | None = None,
        heap: str = "1g",
        direct_memory: str = "1g",
        cpus: set[int] | None = None,
        durability: int | None = None,
        overrides: dict[str, str] | None = None,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        keep_logs: bool = False,
        java: str | None = None,
        memory_limit: int | None = None,
        extra_listeners: dict[str, int] | None = None,
        powercut_fs: bool = False,
        tls: bool = False,
    ) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ConfigError(f"nodes (bookies) must be a positive integer, got {nodes!r}")
        journal_settings(durability)  # validates the level
        super().__init__(nodes=nodes, workdir=workdir, cpus=cpus, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, keep_logs=keep_logs,
                         memory_limit=memory_limit, powercut_fs=powercut_fs)
        self.version = version
        self.heap = heap
        self.direct_memory = direct_memory
        self.durability = durability
        self.overrides: dict[str, str] = {str(k): str(v) for k, v in (overrides or {}).items()}
        #: more advertised listeners, name -> port (see :func:`standalone_config`)
        self.extra_listeners: dict[str, int] = dict(extra_listeners or {})
        self.java = java
        self.tls = tls
        self._tls: TlsMaterial | None = None
        self._tls_key: Path | None = None
        self._ports: PulsarPorts | None = None
        self._flags: list[str] = []
        self._argv: list[str] = []
        self._config: dict[str, str] = {}
        self._lib = Path()
        self._run_version = version
        self._java: JavaRuntime | None = None
        #: What the last start again removed from the metadata store (the fault's record).
        self.restart_note = ""
        self._validate()

    def _validate(self) -> None:
        check_jvm_size(self.heap)
        check_jvm_size(self.direct_memory, "direct memory")
        for key in self.overrides:
            if not _OVERRIDE_KEY.match(key):
                raise ConfigError(f"bad standalone.conf key {key!r} in overrides")
        super()._validate()

    def memory_floor(self) -> int:
        """The heap, the JVM's non-heap and what the in-process bookies' RocksDB and
        Netty pools take before any page cache."""
        return jvm_size_bytes(self.heap) + JVM_NON_HEAP + 256 * 1024**2

    def describe(self) -> str:
        return f"Pulsar standalone ({self.nodes} bookie(s))"

    # -- lifecycle --------------------------------------------------------------------

    def _prepare(self) -> None:
        """The jars from the Maven cache, the version they are, Java 17+."""
        self._lib = resolve_pulsar(self.version)
        self._run_version = pulsar_version_of(self._lib)
        self._java = JavaRuntime.find(self.java, "Pulsar", broker_version=self._run_version)

    def _init_workdir(self, workdir: Path) -> None:
        for sub in ("config", "logs"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)

    def _launch(self, workdir: Path, deadline: float) -> None:
        assert self._java is not None
        data = self.fresh_dir(workdir / "data")
        tls = self._make_tls(workdir)
        ports = free_ports(4 if tls is not None else 2)
        self._ports = PulsarPorts(*ports)
        self._config = standalone_config(
            self._ports, bookies=self.nodes, durability=self.durability, overrides=self.overrides,
            extra_listeners=self.extra_listeners, tls=tls)
        config_file = workdir / "config" / "standalone.conf"
        config_file.write_text(
            render_properties(
                self._config,
                header=f"Pulsar standalone ({self.nodes} bookie(s)), written by pytest-brokerperf",
            ),
            encoding="utf-8",
        )
        log_config = workdir / "config" / "log4j2.properties"
        log_config.write_text(render_pulsar_log4j2(), encoding="utf-8")
        logs = workdir / "logs"
        gc_log = logs / "gc.log"
        remove_gc_logs(gc_log)
        self._flags = (pulsar_jvm_flags(self.heap, self.direct_memory, gc_log, log_config)
                       + self.class_archive_flags(self._java.path, self._lib, 1))
        self._argv = [
            self._java.path, *self._flags, "-cp", f"{self._lib}/*", MAIN_CLASS,
            *standalone_args(config_file, data, self.nodes,
                             advertised_address=not self.extra_listeners),
        ]
        node = LocalNode(name="standalone", label="Pulsar standalone",
                         log_file=logs / "pulsar.log", data_dir=data, gc_log=gc_log,
                         config_file=config_file)
        self._nodes = [node]
        # the whole data directory: the RocksDB metadata store and every bookie's
        # journal, entry logs and ledger index (docs/reference/faults.md, power-cut)
        self._mount_powercut(workdir)
        # cwd = workdir: the standalone resolves relative defaults (conf/, data/) from it
        self._spawn(node, self._argv, name="pulsar-standalone", cwd=workdir)
        self._wait_ready(deadline)

    def _make_tls(self, workdir: Path) -> PulsarTls | None:
        """A fresh CA and server certificate for this start (``tls``) in
        ``<workdir>/tls``, a scratch directory removed at stop, with the unencrypted copy
        of the key Pulsar reads (:class:`PulsarTls`)."""
        self._tls, self._tls_key = None, None
        if not self.tls:
            return None
        self._tls = make_tls_material(self.fresh_dir(workdir / "tls"))
        self._tls_key = write_unencrypted_key(self._tls)
        return PulsarTls(certificate=self._tls.server_chain, key=self._tls_key,
                         ca=self._tls.ca_cert)

    def _readiness(self) -> list[Probe]:
        """Admin API health check, then ``public/default`` exists, then all bookies: one
        probe each, in that order; with ``tls``, then both TLS ports accept connections."""
        assert self._ports is not None
        admin = f"http://{LOOPBACK}:{self._ports.web_port}"
        stage = "admin API not answering"
        checks = (
            ("/admin/v2/brokers/health", lambda code, body: code == 200 and "ok" in body,
             "broker health check"),
            ("/admin/v2/namespaces/public", lambda code, body: code == 200
             and "public/default" in body, "namespace public/default"),
            ("/admin/v2/bookies/all", lambda code, body: code == 200
             and body.count("bookieId") >= self.nodes, f"{self.nodes} bookie(s) registered"),
        )
        probes: list[Probe] = []
        for path, ok, what in checks:

            def answered(remaining: float, path: str = path,
                         ok: Callable[[int, str], bool] = ok, what: str = what) -> str | None:
                nonlocal stage
                try:
                    code, body = _http_get(admin + path, min(10.0, max(0.5, remaining)))
                    stage = f"GET {path} -> {code} {body[:200]!r}"
                    if ok(code, body):
                        return None
                except (OSError, urllib.error.URLError) as e:
                    stage = f"GET {path} -> {e}"
                return f"waiting for {what}; last answer: {stage}"

            probes.append(answered)
        ports = self._ports
        if ports.broker_tls_port is not None and ports.web_tls_port is not None:
            tls_ports = (ports.broker_tls_port, ports.web_tls_port)

            def tls_open(remaining: float) -> str | None:
                closed = [p for p in tls_ports if not port_open(LOOPBACK, p)]
                return f"waiting for the TLS ports {closed} to accept" if closed else None

            probes.append(tls_open)
        return probes

    def _wait_ready(self, deadline: float) -> None:
        """Every readiness check in turn (:meth:`_readiness`) within ``deadline``."""
        for probe in self._readiness():
            self.wait_until(probe, deadline, interval=0.3)

    def _writable(self) -> Probe:
        """The broker can write again: a topic created through the admin API (which opens
        its managed ledger: a new BookKeeper ledger on enough writable bookies), then
        deleted. Just after a restart the broker's BookKeeper client can see no
        writable bookie for a while although the health check passes."""
        assert self._ports is not None
        admin = f"http://{LOOPBACK}:{self._ports.web_port}/admin/v2/persistent/public/default"

        def probe(remaining: float) -> str | None:
            topic = f"{admin}/brokerperf-restart-{time.monotonic_ns()}"
            try:
                code, body = _http_get(topic, min(10.0, max(0.5, remaining)), "PUT")
            except (OSError, urllib.error.URLError) as e:
                return f"waiting for a topic to be created (new ledger); last answer: {e}"
            if code not in (200, 204):
                return (f"waiting for a topic to be created (new ledger); last answer: "
                        f"PUT -> {code} {body[:200]!r}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                _http_get(f"{topic}?force=true", 10.0, "DELETE")
            return None

        return probe

    def _node_probe(self, node: LocalNode) -> Probe:
        """Serving again: the checks of the first start, then a topic can be created
        (:meth:`_writable`); each passed once, in order."""
        pending = [*self._readiness(), self._writable()]

        def probe(remaining: float) -> str | None:
            while pending:
                seen = pending[0](remaining)
                if seen is not None:
                    return seen
                pending.pop(0)
            return None

        return probe

    # -- node faults: one JVM holds the broker, every bookie and the metadata store ----

    def _restartable(self, index: int) -> None:
        """Start again on the node's own data: without ``--wipe-data``, which the first
        start passes (a fresh directory anyway) and which would delete every bookie's
        data before the restart; and without the ephemeral nodes a killed standalone
        left in its metadata store (:meth:`_drop_ephemerals`)."""
        proc = self._node_proc(index)
        proc.argv = [a for a in proc.argv if a != "--wipe-data"]
        self.restart_note = self._drop_ephemerals()

    def _drop_ephemerals(self) -> str:
        """Remove the ephemeral nodes (bookie registrations, locks) a killed standalone
        left in its RocksDB metadata store, as a ZooKeeper session expiry would; what
        was removed, for the fault's record.

        Pulsar's RocksDB store deletes an earlier instance's ephemeral nodes lazily, on
        a read; when that delete of the dead bookie's ``/ledgers/available/<bookie>``
        races the new bookie's registration lock, the lock livelocks (invalidated,
        deleted, re-acquired, thousands of times a second) and the broker sees no
        writable bookie for minutes (the livelock in at least 4 of 10 restarts here, a
        read-back that timed out in 1). A graceful stop leaves none, so this removes
        nothing then. ``data/java/DropEphemerals.java`` runs with the Pulsar jars (Java's
        single-file source launcher)."""
        if self._workdir is None or self._java is None:  # never started: nothing left
            return ""
        store = self._workdir / "data" / "metadata"
        if not store.is_dir():
            return ""
        tool = DATA_DIR / "java" / "DropEphemerals.java"
        began = time.monotonic()
        try:
            done = subprocess.run(
                [self._java.path, "-cp", f"{self._lib}/*", str(tool), str(store)],
                capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ProvisionError(f"could not clear the killed standalone's ephemeral "
                                 f"metadata nodes in {store}: {e}") from e
        if done.returncode != 0:
            raise ProvisionError(
                f"could not clear the killed standalone's ephemeral metadata nodes in "
                f"{store} (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
        said = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "removed ?"
        return f"{said} (before the start, {time.monotonic() - began:.1f} s)"

    def _whole(self, report: dict[str, Any]) -> dict[str, Any]:
        """``report`` of a cut of the standalone, saying that it took every bookie."""
        return {**report, "covers": self.nodes,
                "scope": (f"the Pulsar standalone is one JVM (broker, metadata store and "
                          f"all {self.nodes} bookie(s)): its power cut is every bookie's "
                          "at once")}

    def power_cut_node(self, index: int) -> dict[str, Any]:
        """Node 1 is the standalone: its cut is the whole cluster's (``covers``: how many
        bookies it took, ``scope``: why), the same as :meth:`power_cut_all`."""
        return self._whole(super().power_cut_node(index))

    def power_cut_all(self) -> dict[str, Any]:
        return self._whole(super().power_cut_all())

    def start_node(self, index: int, timeout: float) -> int:
        self._restartable(index)
        return super().start_node(index, timeout)

    def start_all(self, timeout: float) -> list[int]:
        """Start the standalone again after :meth:`power_cut_all` (its one JVM is every
        node) and wait until it serves as after the first start; its new pid."""
        for i in range(1, len(self._nodes) + 1):
            self._restartable(i)
        return self.start_nodes(list(range(1, len(self._nodes) + 1)), timeout)

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        assert self._ports is not None and self._workdir is not None and self._java is not None
        data = self._workdir / "data"
        common_flags = [f for f in self._flags if not f.startswith(("-Xlog:", "-Dlog4j2.conf"))]
        admin_url = f"http://{LOOPBACK}:{self._ports.web_port}"
        bookies: list[str] = []
        try:
            _, body = _http_get(admin_url + "/admin/v2/bookies/all", 10.0)
            bookies = [b["bookieId"] for b in json.loads(body).get("bookies", [])]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        journal = {k: v for k, v in self._config.items() if k.startswith("journal")}
        local = self._local_record(began)
        info: dict[str, Any] = {
            **local.as_info(),
            "jvm_flags": common_flags,
            "main_class": MAIN_CLASS,
            "argv": list(self._argv[self._argv.index(MAIN_CLASS):]),
            **self._java.as_info(),
            "brokers": 1,
            "bookies": self.nodes,
            "bookie_ids": bookies,
            "cluster_name": CLUSTER_NAME,
            "metadata_store": f"rocksdb://{data / 'metadata'}",
            "ports": {"broker": self._ports.broker_port, "web": self._ports.web_port,
                      **({"broker_tls": self._ports.broker_tls_port,
                          "web_tls": self._ports.web_tls_port} if self._tls else {})},
            "durability": self.durability,
            "default_persistence": {
                "ensemble": int(self._config["managedLedgerDefaultEnsembleSize"]),
                "write_quorum": int(self._config["managedLedgerDefaultWriteQuorum"]),
                "ack_quorum": int(self._config["managedLedgerDefaultAckQuorum"]),
            },
            "heap": self.heap,
            "direct_memory": self.direct_memory,
            "broker_overrides": dict(self.overrides),
            "lib": str(self._lib),
            "lib_source": "maven-cache",
        }
        plaintext = f"pulsar://{LOOPBACK}:{self._ports.broker_port}"
        bootstrap, tls, client = plaintext, None, {}
        if self._tls is not None:
            info["tls_key"] = {"file": str(self._tls_key), "encrypted": False,
                               "why": "Pulsar's tlsKeyFilePath takes no key password"}
            bootstrap = f"pulsar+ssl://{LOOPBACK}:{self._ports.broker_tls_port}"
            admin_url = f"https://{LOOPBACK}:{self._ports.web_tls_port}"
            tls = TlsClient(protocol="pulsar+ssl", ca_file=str(self._tls.ca_cert),
                            plaintext=plaintext, server_names=self._tls.hosts)
            # what --pulsar-config would say (client.conf keys, as the driver reads them)
            client = {"tls_trust_certs_file_path": str(self._tls.ca_cert),
                      "tls_validate_hostname": "true",
                      "tls_allow_insecure_connection": "false"}
        return BrokerEndpoint(
            kind="pulsar",
            bootstrap=bootstrap,
            client_config=client,
            tls=tls,
            mode="process",
            nodes=self.nodes,
            version=self._run_version,
            admin_url=admin_url,
            topology_check=self.nodes > 1,
            journal=journal,
            info=info,
            local=local,
        )

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<PulsarStandalone bookies={self.nodes} version={self.version} {state}>"
