"""One lifecycle for every locally started broker: start, wait until ready, stop, clean up.

In the spirit of testcontainers' ``DockerContainer`` with its wait strategies: a
:class:`ProcessCluster` subclass says only what is its broker's own (which files to
write, which commands to run, what "ready" means); the base does the rest the same way
for every broker:

* a work directory (a temporary one unless given), scratch data directories that are
  fresh on every start and removed on stop — and at interpreter exit if a session ends
  before it could stop (:func:`~pytest_brokerperf.brokers.provision.process.register_cleanup_path`);
* broker processes pinned to the broker CPUs (:mod:`.cpus`), each in its own process
  group (:class:`~pytest_brokerperf.brokers.provision.process.ManagedProcess`);
* a readiness wait within one deadline (:meth:`ProcessCluster.wait_until` with a
  probe such as :func:`ports_open`) that notices a process dying on the way;
* up to three attempts when a port was taken between choosing and binding it;
* on any failure every process is stopped and the data removed before a
  :class:`~pytest_brokerperf.core.errors.ProvisionError` carrying each node's log tail;
* ``stop()`` (SIGTERM to every group at once, SIGKILL after the stop timeout), usable
  as a context manager, and a typed :class:`~pytest_brokerperf.brokers.endpoint.LocalProcesses`
  record of what was started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
from pytest_brokerperf.brokers.node_control import register_control, unregister_control
from pytest_brokerperf.brokers.provision import watchdog
from pytest_brokerperf.brokers.provision.cds import ClassDataSharing, class_data_sharing
from pytest_brokerperf.brokers.provision.cgroups import (
    MIN_NODE_MEMORY,
    MemoryCgroup,
    check_memory_limit,
    find_memory_hierarchy,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, port_open
from pytest_brokerperf.brokers.provision.powercut_nodes import PowerCutNodes
from pytest_brokerperf.brokers.provision.process import (
    ManagedProcess,
    discard_cleanup_path,
    log_tail,
    register_cleanup_path,
    stop_all,
)
from pytest_brokerperf.core.errors import ProvisionError
from pytest_brokerperf.metrics.cpus import CpuAffinity, broker_cpus, check_cpus_allowed

__all__ = [
    "BIND_FAILURE",
    "LocalNode",
    "Probe",
    "ProcessCluster",
    "StartFailure",
    "ports_open",
]

#: What a JVM's log says when a port was taken after it was chosen (another attempt helps).
BIND_FAILURE = re.compile(r"Address already in use|BindException")
START_ATTEMPTS = 3

#: A readiness probe: given the seconds left, None when ready, else what it saw (for the
#: error message when the deadline passes).
Probe = Callable[[float], "str | None"]


def _endpoint_ports(endpoint: BrokerEndpoint) -> list[int]:
    """The ports a local endpoint serves on (client and admin), for the run-state file."""
    text = " ".join(filter(None, [endpoint.bootstrap, endpoint.admin_url]))
    return sorted({int(m) for m in re.findall(r":(\d{2,5})\b", text)})


class StartFailure(Exception):
    """One start attempt failed; ``retry`` when ports collided and new ones may help."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(kw_only=True)
class LocalNode:
    """One broker process of a cluster: its name, files and (once spawned) its process."""

    name: str  # key of the node in ``cpu_affinity["nodes"]``
    label: str  # how a log tail's header names it
    title: str = ""  # how an error's headline names it (default: the label)
    log_file: Path  # the process's stdout and stderr
    data_dir: Path | None = None
    gc_log: Path | None = None
    config_file: Path | None = None
    proc: ManagedProcess | None = None

    def log_files(self) -> list[Path]:
        """Every log this node writes (tailed on failure, listed in results)."""
        return [self.log_file]

    def state(self) -> str:
        if self.proc is None:
            return "not started"
        rc = self.proc.returncode
        return f"pid {self.proc.pid}, " + ("running" if rc is None else f"exit {rc}")


def ports_open(ports: Sequence[int], what: str = "ports", *,
               connect_timeout: float = 0.5) -> Probe:
    """Ready once every loopback port in ``ports`` accepts a TCP connection."""
    pending = list(ports)

    def probe(remaining: float) -> str | None:
        pending[:] = [p for p in pending if not port_open(LOOPBACK, p, timeout=connect_timeout)]
        return f"{what} {pending} not accepting connections" if pending else None

    return probe


N = TypeVar("N", bound=LocalNode)


class ProcessCluster(Generic[N]):
    """Base of the local-process provisioners; see the module docstring for what it does.

    Subclasses set :attr:`kind`, implement :meth:`_launch` (write files, spawn nodes with
    :meth:`_spawn`, wait with :meth:`wait_until`) and :meth:`_make_endpoint`, and may
    override :meth:`_prepare` (find binaries before anything is written) and
    :meth:`_init_workdir`.
    """

    #: the broker kind, also the prefix of temporary work directories
    kind: ClassVar[str] = ""
    #: what a port collision looks like in this broker's logs
    bind_failure: ClassVar[re.Pattern[str]] = BIND_FAILURE
    log_tail_lines: ClassVar[int] = 40

    def __init__(self, *, nodes: int, workdir: Path | None, cpus: set[int] | None,
                 start_timeout: float, stop_timeout: float, keep_logs: bool = False,
                 memory_limit: int | None = None, powercut_fs: bool = False) -> None:
        self.nodes = nodes
        #: every node's durable directories on a filesystem that forgets unsynced writes
        #: on command (:meth:`power_cut_node`; docs/reference/faults.md, ``power-cut``)
        self.powercut_fs = powercut_fs
        self._powercut = PowerCutNodes(
            owner=type(self).__name__,
            fix=f"--brokerperf-powercut-fs (or {type(self).__name__}(powercut_fs=True))")
        #: each node's memory cgroup limit in bytes (:mod:`.cgroups`); None: no limit
        self.memory_limit = memory_limit
        self._cgroups: list[MemoryCgroup] = []
        self.workdir_arg = Path(workdir) if workdir is not None else None
        self.cpus = set(cpus) if cpus is not None else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        #: keep a working directory this object made after a clean stop (a caller's own
        #: ``workdir`` is never removed; a failed start always keeps its logs)
        self.keep_logs = keep_logs
        self._start_failed = False
        self._workdir: Path | None = None
        self._owns_workdir = False
        self._nodes: list[N] = []
        self._scratch: list[Path] = []
        self._launched_at = 0.0
        self._budget = start_timeout
        self._endpoint: BrokerEndpoint | None = None
        self._cds: ClassDataSharing | None = None

    # -- what subclasses provide ----------------------------------------------------------

    def describe(self) -> str:
        """How messages name the whole cluster, e.g. ``Kafka cluster (3 node(s))``."""
        return f"{self.kind} ({self.nodes} node(s))"

    def _validate(self) -> None:
        """Refuse bad arguments (ConfigError) before anything starts."""
        check_cpus_allowed(self.cpus)
        if self.memory_limit is not None:
            check_memory_limit(self.memory_limit, self.memory_floor(), self.describe())
            find_memory_hierarchy()

    def memory_floor(self) -> int:
        """The least memory one node needs beside page cache (heap and the rest of its
        VM): a smaller ``memory_limit`` is refused before anything starts."""
        return MIN_NODE_MEMORY

    def _prepare(self) -> None:
        """Find binaries and check versions before the work directory is touched."""

    def _init_workdir(self, workdir: Path) -> None:
        """Create what every start in ``workdir`` needs (sub-directories, private files)."""

    def _launch(self, workdir: Path, deadline: float) -> None:
        """One start attempt: write config, spawn the nodes, wait until they serve.

        Raise :class:`StartFailure` (``retry=True`` on a port collision); whatever it
        started is stopped by the caller.
        """
        raise NotImplementedError

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        """The endpoint of the cluster that just became ready."""
        raise NotImplementedError

    # -- state ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._endpoint is not None

    @property
    def endpoint(self) -> BrokerEndpoint:
        """The endpoint of the running cluster."""
        if self._endpoint is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return self._endpoint

    @property
    def processes(self) -> list[ManagedProcess]:
        """The broker processes of the current (or current failed) start, in node order."""
        return [n.proc for n in self._nodes if n.proc is not None]

    @property
    def workdir(self) -> Path | None:
        return self._workdir

    def broker_cpus(self) -> set[int] | None:
        """The CPUs the brokers are (to be) pinned to, None for no pinning."""
        return broker_cpus(self.cpus)

    def alive(self) -> bool:
        """True while every broker process runs."""
        procs = self.processes
        return bool(procs) and all(p.alive() for p in procs)

    def uptime_s(self) -> float:
        """Seconds since the youngest running broker process was launched; 0.0 if none runs.

        Comparable to the ``uptime`` decoration of a JVM's GC log.
        """
        return min((p.uptime_s() for p in self.processes if p.alive()), default=0.0)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> BrokerEndpoint:
        """Start every node and wait until the cluster serves; the endpoint.

        ``timeout`` (default ``start_timeout``) bounds start and readiness, not a
        first-time download in :meth:`_prepare`. On any failure every process started
        so far is stopped and the data removed before :class:`ProvisionError` (with the
        log tails) is raised.
        """
        if self._endpoint is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._validate()
        self._prepare()
        self._start_failed = True  # until it serves: the logs say why it did not
        self._budget = self.start_timeout if timeout is None else timeout
        workdir = self._prepare_workdir()
        began = time.monotonic()
        for attempt in range(START_ATTEMPTS):  # new ports when another process took one
            try:
                self._launched_at = 0.0
                self._launch(workdir, began + self._budget)
                break
            except StartFailure as e:
                self._teardown()
                if (e.retry and attempt + 1 < START_ATTEMPTS
                        and time.monotonic() < began + self._budget):
                    continue
                raise ProvisionError(str(e)) from None
            except BaseException:
                self._teardown()
                raise
        try:
            # the start-up's files (metadata, cluster membership) count as on disk: a
            # power cut comes long after boot, once the kernel's periodic writeback has
            # written them; what the load writes is judged by the broker's own fsyncs
            self.power_cut_write_back()
            self._endpoint = self._make_endpoint(began)
        except BaseException:
            self._teardown()
            raise
        self._start_failed = False
        watchdog.track_ports(self._ports_label(), _endpoint_ports(self._endpoint))
        register_control(self._endpoint, self)
        return self._endpoint

    def _ports_label(self) -> str:
        return f"{self.kind}:{self._workdir}"

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node (SIGTERM, then SIGKILL after ``timeout``) and remove the data.

        A working directory this object made itself (no ``workdir`` given) goes too,
        configuration and logs included, unless ``keep_logs=True`` or the start failed
        (the error names the logs to read). Safe to call when not running.
        """
        if self._endpoint is not None:
            unregister_control(self._endpoint)
        self._teardown(timeout)
        if self._endpoint is not None:
            watchdog.track_ports(self._ports_label(), [])
        self._endpoint = None
        if (not self.keep_logs and not self._start_failed and self._owns_workdir
                and self._workdir is not None):
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<{type(self).__name__} nodes={self.nodes} {state}>"

    # -- node faults (pytest_brokerperf.brokers.node_control.NodeControl) -----------------------

    def node_count(self) -> int:
        return len(self._nodes)

    def _node_at(self, index: int) -> N:
        if not 1 <= index <= len(self._nodes):
            raise ProvisionError(f"{self.describe()} has no node {index} (nodes 1.."
                                 f"{len(self._nodes)})")
        return self._nodes[index - 1]

    def _node_proc(self, index: int) -> ManagedProcess:
        proc = self._node_at(index).proc
        if proc is None:
            raise ProvisionError(f"{self.describe()}: node {index} was never started")
        return proc

    def node_pid(self, index: int) -> int | None:
        proc = self._node_at(index).proc
        return proc.pid if proc is not None and proc.alive() else None

    def kill_node(self, index: int) -> int:
        proc = self._node_proc(index)
        proc.watched = False  # an exit the run asked for, not a broker death
        proc.signal(signal.SIGKILL)
        proc.wait(10.0)
        return proc.pid

    def pause_node(self, index: int) -> int:
        proc = self._node_proc(index)
        proc.signal(signal.SIGSTOP)
        return proc.pid

    def resume_node(self, index: int) -> None:
        self._node_proc(index).signal(signal.SIGCONT)

    def stop_node(self, index: int, timeout: float) -> int | None:
        proc = self._node_proc(index)
        proc.watched = False
        proc.signal(signal.SIGCONT)  # a paused node cannot act on SIGTERM
        return proc.stop(timeout)

    def start_node(self, index: int, timeout: float) -> int:
        node = self._node_at(index)
        old = self._node_proc(index)
        if old.alive():
            raise ProvisionError(f"{node.label} still runs (pid {old.pid}): stop it first")
        node.proc = old.relaunched()
        node.proc.start()
        deadline = time.monotonic() + timeout
        probe = self._node_probe(node)
        while True:
            if not node.proc.alive():
                raise ProvisionError(self._failure_text(
                    f"{node.title or node.label} exited with code {node.proc.returncode} "
                    "while starting again"))
            seen = probe(max(0.0, deadline - time.monotonic()))
            if seen is None:
                node.proc.watched = True  # serving again: its death now fails the run
                return node.proc.pid
            if time.monotonic() >= deadline:
                raise ProvisionError(self._failure_text(
                    f"{node.title or node.label} not serving {timeout:.0f} s after it was "
                    f"started again: {seen}"))
            time.sleep(0.2)

    def _powercut_dirs(self, node: N) -> list[Path]:
        """The directories of ``node`` whose writes must be fsynced to survive a power
        cut (mounted on the power-cut filesystem when :attr:`powercut_fs`): its data
        directory unless the broker says otherwise."""
        return [node.data_dir] if node.data_dir is not None else []

    def _mount_powercut(self, workdir: Path) -> None:
        """With :attr:`powercut_fs`, each node's :meth:`_powercut_dirs` through the
        power-cut filesystem (backing data in ``powercut/``, removed on stop like the
        data); call it once the nodes are laid out, before any starts."""
        if not self.powercut_fs:
            return
        backing = self.fresh_dir(workdir / "powercut")
        self._powercut.mount(backing, {i: self._powercut_dirs(node)
                                       for i, node in enumerate(self._nodes, 1)})

    def power_cut_write_back(self) -> None:
        """Count everything the nodes wrote so far as on disk (the kernel's periodic
        writeback), e.g. a topology that exists long before the cut; a no-op without
        :attr:`powercut_fs`."""
        self._powercut.write_back()

    def power_cut_node(self, index: int) -> dict[str, Any]:
        """Cut node ``index``'s power: SIGKILL it, then drop every write it never
        fsynced; start it again with :meth:`start_node`. What the cut took away (files
        removed, files restored, bytes dropped) plus the killed pid."""
        return self._powercut.cut(index, self.kill_node)

    def power_cut_all(self) -> dict[str, Any]:
        """Cut every node's power at the same instant: SIGKILL all their process groups
        at once, then drop every write any of them never fsynced; start them again with
        :meth:`start_all`. Per node (``nodes``: index -> its report and pid) and summed
        (``bytes_dropped``; paths prefixed with ``node-N``)."""
        return self._powercut.cut_all(list(range(1, len(self._nodes) + 1)), self.kill_nodes)

    def kill_nodes(self, indices: Sequence[int]) -> list[int]:
        """SIGKILL every listed node's process group at the same instant (all signals sent
        before any is waited for: no node outlives another by a reap); their pids."""
        procs = [self._node_proc(i) for i in indices]
        for proc in procs:
            proc.watched = False  # exits the run asked for, not broker deaths
        for proc in procs:
            proc.signal(signal.SIGKILL)
        for proc in procs:
            proc.wait(10.0)
        return [proc.pid for proc in procs]

    def start_nodes(self, indices: Sequence[int], timeout: float) -> list[int]:
        """Start every listed stopped node at once, then wait until each serves (a
        cluster whose nodes need a quorum of each other cannot start one at a time);
        their new pids. ProvisionError naming the node that did not come back."""
        nodes = [self._node_at(i) for i in indices]
        olds = [self._node_proc(i) for i in indices]
        for node, old in zip(nodes, olds, strict=True):
            if old.alive():
                raise ProvisionError(f"{node.label} still runs (pid {old.pid}): stop it first")
        for node, old in zip(nodes, olds, strict=True):
            node.proc = old.relaunched()
            node.proc.start()
        deadline = time.monotonic() + timeout
        pids = []
        for node in nodes:
            proc, probe = node.proc, self._node_probe(node)
            assert proc is not None
            while True:
                if not proc.alive():
                    raise ProvisionError(self._failure_text(
                        f"{node.title or node.label} exited with code {proc.returncode} "
                        "while the cluster started again"))
                seen = probe(max(0.0, deadline - time.monotonic()))
                if seen is None:
                    break
                if time.monotonic() >= deadline:
                    raise ProvisionError(self._failure_text(
                        f"{node.title or node.label} not serving {timeout:.0f} s after the "
                        f"cluster was started again: {seen}"))
                time.sleep(0.2)
            pids.append(proc.pid)
        for node in nodes:
            assert node.proc is not None
            node.proc.watched = True  # serving again: a death now fails the run
        return pids

    def _node_probe(self, node: N) -> Probe:
        """What "serving again" means for one restarted node; default: its process runs."""
        return lambda remaining: None

    # -- helpers for subclasses -----------------------------------------------------------

    def _prepare_workdir(self) -> Path:
        if self._workdir is None:
            if self.workdir_arg is not None:
                self._workdir = self.workdir_arg.resolve()
                self._owns_workdir = False
            else:
                self._workdir = Path(tempfile.mkdtemp(prefix=f"brokerperf-{self.kind}-"))
                self._owns_workdir = True
        self._workdir.mkdir(parents=True, exist_ok=True)
        self._init_workdir(self._workdir)
        return self._workdir

    def fresh_dir(self, path: Path) -> Path:
        """An empty scratch directory: removed on stop, and at exit if the session dies first."""
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        register_cleanup_path(path)
        self._scratch.append(path)
        return path

    def _spawn(self, node: N, argv: Sequence[str], *, name: str,
               env: Mapping[str, str] | None = None, cwd: Path | None = None) -> ManagedProcess:
        """Start ``node``'s process on the broker CPUs, logging to ``node.log_file``."""
        if not self._launched_at:
            self._launched_at = time.time()
        node.proc = ManagedProcess(argv, log_file=node.log_file, name=name, env=env, cwd=cwd,
                                   cpus=self.broker_cpus(), cgroup=self._node_cgroup(node))
        node.proc.watched = True  # its death during a run fails the run (check_watched)
        node.proc.start()
        return node.proc

    def _node_cgroup(self, node: N) -> MemoryCgroup | None:
        """A fresh memory cgroup for ``node`` when a limit is set (removed at teardown)."""
        if self.memory_limit is None:
            return None
        group = MemoryCgroup.create(
            find_memory_hierarchy(), f"brokerperf-{self.kind}-{os.getpid()}-{node.name}",
            self.memory_limit)
        register_cleanup_path(group.path)  # the session dies first: kill_all and the watchdog
        self._cgroups.append(group)
        return group

    def class_archive_flags(self, java: str, lib: Path, node: int | None, *,
                            agent: bool = False) -> list[str]:
        """The JVM options that start ``node`` (1-based; None: a tool JVM of the same
        class path) from this kind's class-data sharing archive (:mod:`.cds`). Without
        one yet, node 1 writes it as it exits and the others start as they would.

        ``agent``: the JVM runs a Java agent (``-javaagent``, e.g. the metrics exporter).
        It may map an archive but never write one: Java refuses to start a JVM that
        dumps classes with an agent attached ("Must enable AllowArchivingWithJavaAgent",
        a diagnostic option not for production use), so it starts without."""
        if self._cds is None:
            self._cds = class_data_sharing(self.kind, java, lib.glob("*.jar"), write=True)
        if self._cds is None or (self._cds.writing is not None and (node != 1 or agent)):
            return []
        return self._cds.flags()

    def _failure_text(self, headline: str) -> str:
        """``headline`` and the last lines of every node's logs."""
        parts = [headline]
        for node in self._nodes:
            for i, f in enumerate(node.log_files()):
                tail = log_tail(f, self.log_tail_lines)
                if tail or i == 0:
                    parts.append(f"--- {node.label} ({node.state()}), last lines of {f} ---\n"
                                 f"{tail}")
        return "\n".join(parts)

    def _check_alive(self) -> None:
        """Raise StartFailure if a node's process has ended during start-up."""
        for node in self._nodes:
            if node.proc is not None and not node.proc.alive():
                tails = "\n".join(log_tail(f, 200) for f in node.log_files())
                raise StartFailure(
                    self._failure_text(
                        f"{node.title or node.label} exited with code {node.proc.returncode} "
                        "during start-up"),
                    retry=bool(self.bind_failure.search(tails)),
                )

    def wait_until(self, probe: Probe, deadline: float, *, interval: float = 0.2) -> None:
        """Poll ``probe`` until it reports ready; StartFailure with the log tails at ``deadline``.

        Every round first checks that no node has died, so a crash is reported at once
        with its log rather than as a timeout.
        """
        while True:
            self._check_alive()
            seen = probe(max(0.0, deadline - time.monotonic()))
            if seen is None:
                return
            if time.monotonic() >= deadline:
                raise StartFailure(self._failure_text(
                    f"{self.describe()} not ready within {self._budget:.0f} s: {seen}"))
            time.sleep(interval)

    def _local_record(self, began: float, *, metrics_urls: Sequence[str] = ()) -> LocalProcesses:
        """The typed record of the processes this start launched."""
        nodes = self._nodes
        return LocalProcesses(
            pids=tuple(p.pid for p in self.processes),
            log_files=tuple(str(f) for n in nodes for f in n.log_files()),
            gc_logs=tuple(str(n.gc_log) for n in nodes if n.gc_log is not None),
            data_dirs=tuple(str(n.data_dir) for n in nodes if n.data_dir is not None),
            config_files=tuple(str(n.config_file) for n in nodes if n.config_file is not None),
            metrics_urls=tuple(metrics_urls),
            cpu_affinity=CpuAffinity.of(
                self.broker_cpus(),
                {n.name: n.proc.affinity() if n.proc is not None else None for n in nodes}),
            started_at=self._launched_at,
            ready_at=time.time(),
            startup_s=round(time.monotonic() - began, 3),
            workdir=str(self._workdir) if self._workdir is not None else None,
            memory_limit_bytes=self.memory_limit,
        )

    def _teardown(self, timeout: float | None = None) -> None:
        """Stop every node in parallel within ``timeout`` (default ``stop_timeout``),
        unmount the power-cut filesystems, drop data."""
        writer = self._nodes[0].proc if self._nodes else None
        stop_all(self.processes, self.stop_timeout if timeout is None else timeout)
        if self._cds is not None:  # node 1 wrote the class archive as it exited...
            if writer is not None and writer.returncode == -signal.SIGKILL:
                # ...unless it was killed, perhaps half-way through the writing
                self._cds.discard()
            else:
                self._cds.keep()
            self._cds = None
        self._powercut.stop()
        for path in self._scratch:
            shutil.rmtree(path, ignore_errors=True)
            discard_cleanup_path(path)
        self._scratch = []
        for group in self._cgroups:
            if group.remove():
                discard_cleanup_path(group.path)
        self._cgroups = []
        self._nodes = []
