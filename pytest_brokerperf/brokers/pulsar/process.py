"""Apache Pulsar standalone (broker + bookies in one JVM) from Maven Central jars.

``org.apache.pulsar.PulsarStandaloneStarter`` with RocksDB metadata (no ZooKeeper, the
default since PIP-117), functions worker and stream storage off, bound to 127.0.0.1 on
free ports, pinned to its own CPU like the Kafka nodes, started with the JVM flags
``bin/pulsar standalone`` adds (brokers.md §2.4: without the ``--add-opens`` and the two
``bookkeeper.metadata.*.drivers`` properties the bookie cannot use the RocksDB metadata
store), a fixed heap and direct memory, G1 and a GC log.

``standalone.conf`` is generated (brokers.md §2.5; no jar holds one): the broker's
default ensemble / write / ack quorum are set explicitly (``ServiceConfiguration``'s own
defaults are 2/2/2, which one bookie cannot serve), ``managedLedgerNewEntriesCheckDelayInMillis=0``
as in OMB's broker template (omb.md §12: 10 ms made caught-up consumers wait), and the
bookie journal from the durability level (:func:`journal_settings`). Journal settings
are bookie-wide (pitfalls.md §9), so a standalone serves exactly one durability level:
a different level means another start.

``nodes=3`` runs three bookies inside the one JVM (``--num-bookies 3``), so ensemble 3 /
write quorum 3 / ack quorum 2 can be created; it shares one JVM and one disk and is
labelled a topology check, not a replication cost.

Usage::

    with PulsarStandalone() as pulsar:
        client = pulsar_client.Client(pulsar.endpoint.bootstrap)
        admin_url = pulsar.endpoint.admin_url
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pytest_brokerperf.brokers.kafka.process import (
    _java_version_output,
    default_broker_cpus,
    find_java,
    java_version,
    render_properties,
)
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import BrokerUnavailable, ConfigError, ProvisionError
from pytest_brokerperf.provision.maven import (
    PULSAR_DEFAULT_VERSION,
    pulsar_version_of,
    resolve_pulsar,
)
from pytest_brokerperf.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.provision.process import (
    ManagedProcess,
    check_cpus_allowed,
    discard_cleanup_path,
    log_tail,
    register_cleanup_path,
)

__all__ = [
    "DURABILITY_LEVELS",
    "PULSAR_DEFAULT_VERSION",
    "PulsarPorts",
    "PulsarStandalone",
    "journal_settings",
    "pulsar_jvm_flags",
    "render_pulsar_log4j2",
    "standalone_config",
]

DEFAULT_START_TIMEOUT_S = 180.0  # three bookies on two cores take ~30 s; CI is slower
DEFAULT_STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 40
MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
CLUSTER_NAME = "standalone"
DURABILITY_LEVELS = (1, 2, 3, 4)

# What bin/pulsar adds for `standalone` (brokers.md §2.4). Without the two metadata
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

_MEM = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")
_BIND_FAILURE = re.compile(r"Address already in use|BindException")
_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


# -- pure pieces (unit-tested) -------------------------------------------------------------


@dataclass(frozen=True)
class PulsarPorts:
    """The broker's two ports; bookie ports are picked inside the JVM (RocksDB mode)."""

    broker_port: int  # binary protocol, pulsar://
    web_port: int  # admin REST API, http://


def journal_settings(durability: int | None) -> dict[str, str]:
    """Bookie journal settings of a durability level (omb.md §4.4, seed 003 table 6).

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
) -> dict[str, str]:
    """The ``standalone.conf`` keys (broker and bookie read the same file), overrides last."""
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
    lines = [
        "status = warn",
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


def pulsar_jvm_flags(heap: str, direct_memory: str, gc_log: Path, log_config: Path) -> list[str]:
    """Memory, GC, logging and the standalone's required flags."""
    for what, size in (("heap", heap), ("direct memory", direct_memory)):
        if not _MEM.match(size):
            raise ConfigError(f"bad {what} size {size!r}: use a JVM size such as 512m or 1g")
    if ":" in str(gc_log):
        raise ConfigError(f"log directory {gc_log.parent} must not contain ':' (JVM -Xlog syntax)")
    return [
        f"-Xms{heap}",
        f"-Xmx{heap}",
        f"-XX:MaxDirectMemorySize={direct_memory}",
        *PULSAR_GC_FLAGS,
        f"-Xlog:gc*:file={gc_log}:time,uptime:filecount=10,filesize=100M",
        *PULSAR_EXTRA_FLAGS,
        *PULSAR_STANDALONE_FLAGS,
        f"-Dlog4j2.configurationFile={log_config}",
    ]


def standalone_args(config_file: Path, data_dir: Path, bookies: int) -> list[str]:
    """``PulsarStandaloneStarter`` arguments: no functions worker, no stream storage."""
    args = [
        "--config", str(config_file),
        "--no-functions-worker",
        "--no-stream-storage",
        "--advertised-address", LOOPBACK,
        "--metadata-dir", str(data_dir / "metadata"),
        "--bookkeeper-dir", str(data_dir / "bookkeeper"),
        "--wipe-data",
    ]
    if bookies > 1:
        args += ["--num-bookies", str(bookies)]
    return args


def _http_get(url: str, timeout: float) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode("utf-8", "replace")


# -- the standalone -------------------------------------------------------------------------


class _StartFailure(Exception):
    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class PulsarStandalone:
    """One Pulsar standalone JVM (broker + ``nodes`` bookies) on loopback.

    ``durability`` (1-4, or None for BookKeeper's defaults) sets the bookie journal
    (:func:`journal_settings`); the endpoint records it. ``cpus``: as
    :class:`~pytest_brokerperf.brokers.kafka.process.KafkaProcessCluster` (None = the
    last CPU when there are several, ``set()`` = no pinning). ``overrides`` are merged
    into ``standalone.conf`` last (e.g. ``{"journalFlushWhenQueueEmpty": "true"}``, a
    tuning knob of seed 004). ``start_timeout`` bounds start and readiness, not a
    first-time Maven download.
    """

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
        keep_logs: bool = True,
        java: str | None = None,
    ) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ConfigError(f"nodes (bookies) must be a positive integer, got {nodes!r}")
        journal_settings(durability)  # validates the level
        self.nodes = nodes
        self.version = version
        self.workdir_arg = Path(workdir) if workdir is not None else None
        self.heap = heap
        self.direct_memory = direct_memory
        self.cpus = set(cpus) if cpus is not None else None
        self.durability = durability
        self.overrides: dict[str, str] = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.keep_logs = keep_logs
        self.java = java
        self._workdir: Path | None = None
        self._owns_workdir = False
        self._proc: ManagedProcess | None = None
        self._ports: PulsarPorts | None = None
        self._flags: list[str] = []
        self._argv: list[str] = []
        self._config: dict[str, str] = {}
        self._launched_at = 0.0
        self._endpoint: BrokerEndpoint | None = None
        self._validate()

    def _validate(self) -> None:
        for what, size in (("heap", self.heap), ("direct memory", self.direct_memory)):
            if not _MEM.match(size):
                raise ConfigError(f"bad {what} size {size!r}: use a JVM size such as 512m or 1g")
        for key in self.overrides:
            if not _OVERRIDE_KEY.match(key):
                raise ConfigError(f"bad standalone.conf key {key!r} in overrides")
        check_cpus_allowed(self.cpus)

    # -- properties -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._endpoint is not None

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("PulsarStandalone is not running; call start() first")
        return self._endpoint

    @property
    def processes(self) -> list[ManagedProcess]:
        return [self._proc] if self._proc is not None else []

    @property
    def workdir(self) -> Path | None:
        return self._workdir

    def broker_cpus(self) -> set[int] | None:
        if self.cpus is None:
            return default_broker_cpus()
        return set(self.cpus) or None

    # -- lifecycle --------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> BrokerEndpoint:
        """Start the standalone and wait until the admin API says it serves; the endpoint.

        On failure the JVM is stopped and its data removed before :class:`ProvisionError`
        (with the log tail) is raised.
        """
        if self._endpoint is not None:
            raise RuntimeError("PulsarStandalone is already running")
        self._validate()
        timeout = self.start_timeout if timeout is None else timeout
        lib = resolve_pulsar(self.version)
        version = pulsar_version_of(lib)
        java = find_java(self.java)
        java_ver, java_major = java_version(java)
        if java_major < 17:
            raise BrokerUnavailable(
                f"Pulsar {version} needs Java 17+, but {java} is Java {java_ver}; install a "
                "newer JDK or set JAVA_HOME to one"
            )
        workdir = self._prepare_workdir()
        began = time.monotonic()
        attempts = 3  # new ports when another process took one meanwhile
        for attempt in range(attempts):
            try:
                self._start_once(lib, java, workdir, began + timeout, timeout)
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

    def _prepare_workdir(self) -> Path:
        if self._workdir is None:
            if self.workdir_arg is not None:
                self._workdir = self.workdir_arg.resolve()
                self._owns_workdir = False
            else:
                self._workdir = Path(tempfile.mkdtemp(prefix="brokerperf-pulsar-"))
                self._owns_workdir = True
        wd = self._workdir
        for sub in ("config", "logs"):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(wd / "data", ignore_errors=True)  # fresh data every start
        (wd / "data").mkdir(parents=True)
        return wd

    def _start_once(self, lib: Path, java: str, workdir: Path, deadline: float,
                    timeout: float) -> None:
        (workdir / "data").mkdir(parents=True, exist_ok=True)
        register_cleanup_path(workdir / "data")
        broker_port, web_port = free_ports(2)
        self._ports = PulsarPorts(broker_port=broker_port, web_port=web_port)
        self._config = standalone_config(
            self._ports, bookies=self.nodes, durability=self.durability, overrides=self.overrides
        )
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
        for old in logs.glob("gc.log*"):  # the JVM would rotate, not truncate
            old.unlink()
        self._flags = pulsar_jvm_flags(self.heap, self.direct_memory, gc_log, log_config)
        self._argv = [
            java, *self._flags, "-cp", f"{lib}/*", MAIN_CLASS,
            *standalone_args(config_file, workdir / "data", self.nodes),
        ]
        self._launched_at = time.time()
        # cwd = workdir: the standalone resolves relative defaults (conf/, data/) from it
        self._proc = ManagedProcess(
            self._argv, log_file=logs / "pulsar.log", name="pulsar-standalone",
            cwd=workdir, cpus=self.broker_cpus(),
        ).start()
        self._wait_ready(deadline, timeout)

    def _failure_text(self, headline: str) -> str:
        proc = self._proc
        state = "not started"
        log = self._workdir / "logs" / "pulsar.log" if self._workdir else Path("pulsar.log")
        if proc is not None:
            rc = proc.returncode
            state = f"pid {proc.pid}, " + ("running" if rc is None else f"exit {rc}")
            log = proc.log_file
        return f"{headline}\n--- Pulsar standalone ({state}), last lines of {log} ---\n" + (
            log_tail(log, LOG_TAIL_LINES)
        )

    def _check_alive(self) -> None:
        proc = self._proc
        if proc is not None and not proc.alive():
            tail = log_tail(proc.log_file, LOG_TAIL_LINES)
            raise _StartFailure(
                self._failure_text(
                    f"Pulsar standalone exited with code {proc.returncode} during start-up"
                ),
                retry=bool(_BIND_FAILURE.search(tail)),
            )

    def _wait_ready(self, deadline: float, timeout: float) -> None:
        """Admin API health check, then ``public/default`` exists, then all bookies."""
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
        for path, ok, what in checks:
            while True:
                self._check_alive()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _StartFailure(
                        self._failure_text(
                            f"Pulsar standalone ({self.nodes} bookie(s)) not ready within "
                            f"{timeout:.0f} s: waiting for {what}; last answer: {stage}"
                        )
                    )
                try:
                    code, body = _http_get(admin + path, min(10.0, max(0.5, remaining)))
                    stage = f"GET {path} -> {code} {body[:200]!r}"
                    if ok(code, body):
                        break
                except (OSError, urllib.error.URLError) as e:
                    stage = f"GET {path} -> {e}"
                time.sleep(0.3)

    def _make_endpoint(self, lib: Path, version: str, java: str, java_ver: str,
                       began: float) -> BrokerEndpoint:
        assert self._proc is not None and self._ports is not None and self._workdir is not None
        cpus = self.broker_cpus()
        available = set(os.sched_getaffinity(0))
        aff = self._proc.affinity()
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
        info: dict[str, Any] = {
            "pids": [self._proc.pid],
            "data_dirs": [str(data)],
            "log_files": [str(self._proc.log_file)],
            "gc_logs": [str(self._workdir / "logs" / "gc.log")],
            "config_files": [str(self._workdir / "config" / "standalone.conf")],
            "jvm_flags": common_flags,
            "main_class": MAIN_CLASS,
            "argv": list(self._argv[self._argv.index(MAIN_CLASS):]),
            "java": java,
            "java_version": java_ver,
            "java_version_output": _java_version_output(java),
            "java_tool_options": os.environ.get("JAVA_TOOL_OPTIONS"),
            "cpu_affinity": {
                "broker_cpus": sorted(cpus) if cpus else None,
                "generator_cpus": sorted(available - cpus) if cpus else sorted(available),
                "nodes": {"standalone": sorted(aff) if aff is not None else None},
            },
            "started_at": self._launched_at,
            "ready_at": time.time(),
            "startup_s": round(time.monotonic() - began, 3),
            "brokers": 1,
            "bookies": self.nodes,
            "bookie_ids": bookies,
            "cluster_name": CLUSTER_NAME,
            "metadata_store": f"rocksdb://{data / 'metadata'}",
            "ports": {"broker": self._ports.broker_port, "web": self._ports.web_port},
            "durability": self.durability,
            "journal": journal,
            "default_persistence": {
                "ensemble": int(self._config["managedLedgerDefaultEnsembleSize"]),
                "write_quorum": int(self._config["managedLedgerDefaultWriteQuorum"]),
                "ack_quorum": int(self._config["managedLedgerDefaultAckQuorum"]),
            },
            "heap": self.heap,
            "direct_memory": self.direct_memory,
            "broker_overrides": dict(self.overrides),
            "lib": str(lib),
            "lib_source": "maven-cache",
            "workdir": str(self._workdir),
        }
        return BrokerEndpoint(
            kind="pulsar",
            bootstrap=f"pulsar://{LOOPBACK}:{self._ports.broker_port}",
            mode="process",
            nodes=self.nodes,
            version=version,
            admin_url=admin_url,
            topology_check=self.nodes > 1,
            info=info,
        )

    def _teardown(self, *, remove_data: bool, timeout: float | None = None) -> None:
        timeout = self.stop_timeout if timeout is None else timeout
        if self._proc is not None:
            self._proc.stop(timeout=timeout)
        if self._workdir is not None and remove_data:
            shutil.rmtree(self._workdir / "data", ignore_errors=True)
            discard_cleanup_path(self._workdir / "data")
        self._proc = None

    def stop(self, timeout: float | None = None) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL after ``timeout``) and remove its data.

        Logs are kept (their paths are in ``endpoint.info``) unless ``keep_logs=False``.
        Safe to call when not running.
        """
        self._teardown(remove_data=True, timeout=timeout)
        self._endpoint = None
        if not self.keep_logs and self._owns_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    def uptime_s(self) -> float:
        """Seconds since the JVM was launched; 0.0 if not running."""
        if self._proc is None or not self._proc.alive():
            return 0.0
        return self._proc.uptime_s()

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
        return f"<PulsarStandalone bookies={self.nodes} version={self.version} {state}>"
