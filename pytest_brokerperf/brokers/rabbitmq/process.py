"""RabbitMQ nodes as local Erlang processes, from Debian's ``rabbitmq-server`` package.

Why not the packaged service: ``/usr/sbin/rabbitmq-*`` are wrappers that ``su`` to the
``rabbitmq`` user (changing HOME and therefore the Erlang cookie) and the system node
owns 5672/15672/25672. So every node here runs ``/usr/lib/rabbitmq/bin/rabbitmq-server``
in the foreground as a :class:`ManagedProcess` (its own process group, pinned to the
broker CPU like the Kafka JVM) with a private everything:

* a HOME holding the cluster's ``.erlang.cookie`` (mode 0400), shared with the CLI;
* a private ``epmd`` started by us on a free loopback port (``ERL_EPMD_PORT``; nodes and
  CLI get ``-start_epmd false``), so no daemonised epmd outlives the session;
* node names ``rmqN@localhost``, AMQP and distribution ports, a CLI distribution port
  range, data (mnesia) and log directories, and an empty ``rabbitmq-env.conf`` so the
  system's ``/etc/rabbitmq`` files are never read;
* ``+sbwt none +sbwtdcpu none +sbwtdio none`` (RabbitMQ's runtime tuning guide: idle
  schedulers would otherwise spin and burn the generator's core) and distribution bound
  to 127.0.0.1.

Three nodes are clustered with ``stop_app``/``join_cluster``/``start_app`` and labelled a
topology check. Memory and disk alarm state is read at start and on demand
(:meth:`RabbitMQProcessCluster.alarms`): an alarm blocks publishers, which is
broker back-pressure.

Usage::

    with RabbitMQProcessCluster(nodes=1) as rmq:
        pika.BlockingConnection(pika.URLParameters(rmq.endpoint.bootstrap))
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import string
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, TlsClient
from pytest_brokerperf.brokers.provision.lifecycle import (
    LocalNode,
    Probe,
    ProcessCluster,
    StartFailure,
    ports_open,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_port, free_ports, port_open
from pytest_brokerperf.brokers.provision.process import ManagedProcess
from pytest_brokerperf.brokers.provision.tls import TlsMaterial, make_tls_material
from pytest_brokerperf.brokers.provision.watchdog import tagged_env
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError, ProvisionError

__all__ = [
    "RABBITMQ_BIN_DIR",
    "SCHEDULER_FLAGS",
    "CtlAccess",
    "RabbitMQProcessCluster",
    "RabbitTls",
    "node_conf",
    "parse_ctl_json",
    "rabbitmq_available",
]

RABBITMQ_BIN_DIR = Path("/usr/lib/rabbitmq/bin")
DEFAULT_START_TIMEOUT_S = 90.0
DEFAULT_STOP_TIMEOUT_S = 30.0
CTL_TIMEOUT_S = 60.0
#: Scheduler busy-wait off (RabbitMQ's runtime tuning guide) — passed explicitly even where the
#: package's rabbitmq-env already defaults to it, so the flags are visible in results.
SCHEDULER_FLAGS: tuple[str, ...] = ("+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none")
_DIST_LOOPBACK = ("-kernel", "inet_dist_use_interface", "{127,0,0,1}")
_CTL_PORT_RANGE = 10  # concurrent CLI invocations each need a distribution port


def rabbitmq_available(bin_dir: Path = RABBITMQ_BIN_DIR) -> str | None:
    """None when the package's scripts and ``epmd`` are usable here, else the reason."""
    missing = [n for n in ("rabbitmq-server", "rabbitmqctl")
               if not os.access(bin_dir / n, os.X_OK)]
    if missing:
        return (
            f"RabbitMQ is not installed ({', '.join(str(bin_dir / m) for m in missing)} "
            "missing). Install Debian's package: apt-get install -y rabbitmq-server "
            "(ci/setup.sh does this), or point --rabbitmq-url at a running broker"
        )
    if shutil.which("epmd") is None:
        return "epmd (Erlang port mapper, part of erlang-base) is not on PATH"
    return None


@dataclass(frozen=True)
class RabbitTls:
    """A node's ``amqps`` listener: its port and the PEM files it serves (the key
    encrypted, ``password`` unlocking it). Only the node's own ``rabbitmq.conf`` gets the
    password: :func:`node_conf` writes it, the recorded ``info.conf`` is made without."""

    port: int
    material: TlsMaterial

    def conf(self) -> dict[str, str]:
        m = self.material
        return {
            "listeners.ssl.default": f"{LOOPBACK}:{self.port}",
            "ssl_options.cacertfile": str(m.ca_cert),
            "ssl_options.certfile": str(m.server_chain),
            "ssl_options.keyfile": str(m.server_key),
            "ssl_options.password": m.key_password.reveal(),
            # server authentication only, as the Kafka listener: clients bring no certificate
            "ssl_options.verify": "verify_none",
            "ssl_options.fail_if_no_peer_cert": "false",
        }


def node_conf(amqp_port: int, *, nodes: int, overrides: Mapping[str, str] | None = None,
              tls: RabbitTls | None = None) -> dict[str, str]:
    """``rabbitmq.conf`` (new-style) keys of one node; ``overrides`` merged last.

    ``tls``: an ``amqps`` listener besides the plain one (which the CLI-driven readiness
    check and a plaintext client still find)."""
    conf = {
        "listeners.tcp.1": f"{LOOPBACK}:{amqp_port}",
        # 3.10 defaults, written out so results show what the alarms trip at.
        "vm_memory_high_watermark.relative": "0.4",
        "disk_free_limit.absolute": "50MB",
        "log.file.level": "info",
        "log.console": "true",
        "log.console.level": "warning",
    }
    if nodes > 1:
        conf["cluster_partition_handling"] = "pause_minority"  # as OMB's deploy playbook
    if tls is not None:
        conf.update(tls.conf())
    for k, v in (overrides or {}).items():
        conf[str(k)] = str(v)
    return conf


def render_conf(conf: Mapping[str, str]) -> str:
    return "".join(f"{k} = {v}\n" for k, v in conf.items())


def parse_ctl_json(text: str) -> Any:
    """The JSON document of ``rabbitmqctl … --formatter json`` output.

    The CLI may print banner lines ("Listing queues …") before the document even with
    ``-q`` on some commands; the first line that starts a JSON value begins it.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("[", "{")):
            return json.loads("\n".join(lines[i:]))
    raise ValueError(f"no JSON in rabbitmqctl output: {text[:300]!r}")


@dataclass(frozen=True)
class CtlAccess:
    """How to run the RabbitMQ CLI against a node this session started (picklable).

    The endpoint's ``control`` (recorded as ``info.ctl``), so the driver's admin can read
    queue types and arguments back and set policies. Holds paths and ports, never the
    cookie itself.
    """

    bin_dir: str
    node: str
    env: dict[str, str]
    #: what runs the CLI where the node is: ``("docker", "exec", NAME)`` for a node in a
    #: container (its ``bin_dir`` is then empty: the tool is found on the container's PATH)
    exec_prefix: tuple[str, ...] = ()

    def as_info(self) -> dict[str, Any]:
        """What the manifest records as ``info.ctl`` (paths, ports, names; never the cookie)."""
        return {"bin_dir": self.bin_dir, "node": self.node, "env": dict(self.env),
                "exec_prefix": list(self.exec_prefix)}

    def run(self, tool: str, *args: str, node: str | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run a CLI tool against ``node``. Without ``timeout`` (a query: the CLI answers
        in about a second) a CLI that hangs is killed after a third of CTL_TIMEOUT_S and
        run once more, for the rest: a CLI's own Erlang VM was seen to hang now and then
        while the node answered the next CLI at once. A caller's ``timeout`` (a wait the
        tool itself bounds, as ``await_startup --timeout``) gets one attempt."""
        # tagged like the nodes: should pytest die mid-call, the watchdog and
        # ``brokerperf cleanup --local`` find the CLI and whatever it started
        env = tagged_env(None)
        env.update(self.env)
        path = str(Path(self.bin_dir) / tool) if self.bin_dir else tool
        argv = [*self.exec_prefix, path, "-n", node or self.node, *args]
        attempts = ((CTL_TIMEOUT_S / 3, CTL_TIMEOUT_S * 2 / 3) if timeout is None
                    else (timeout,))
        for i, limit in enumerate(attempts):
            try:
                return subprocess.run(argv, capture_output=True, text=True, env=env,
                                      timeout=limit, check=False, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as e:
                if i + 1 < len(attempts):
                    continue
                total = sum(attempts)
                raise ProvisionError(
                    f"{' '.join(argv)} timed out after {total:.0f} s"
                    + (f" ({len(attempts)} attempts)" if len(attempts) > 1 else "")) from e
        raise AssertionError("unreachable")  # pragma: no cover

    def check(self, tool: str, *args: str, node: str | None = None,
              timeout: float | None = None) -> str:
        out = self.run(tool, *args, node=node, timeout=timeout)
        if out.returncode != 0:
            raise ProvisionError(
                f"{tool} -n {node or self.node} {' '.join(args)} failed (exit "
                f"{out.returncode}):\n{(out.stderr or out.stdout).strip()[-2000:]}"
            )
        return out.stdout

    def json(self, tool: str, *args: str, node: str | None = None,
             timeout: float | None = None) -> Any:
        return parse_ctl_json(self.check(tool, *args, "--formatter", "json", node=node,
                                         timeout=timeout))


@dataclass(kw_only=True)
class _Node(LocalNode):
    index: int
    amqp_port: int
    dist_port: int
    base: Path
    #: the ``amqps`` listener's port (``tls``); None without TLS
    amqps_port: int | None = None

    @property
    def mnesia(self) -> Path:
        return self.base / "mnesia"

    @property
    def log_dir(self) -> Path:
        return self.base / "log"

    @property
    def node_log(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def log_files(self) -> list[Path]:
        """The node's own log first, then its console output."""
        return [self.node_log, self.log_file]


class RabbitMQProcessCluster(ProcessCluster[_Node]):
    """One or three RabbitMQ nodes on loopback, testcontainers-style.

    ``cpus``: CPUs every node is pinned to; ``None`` = the last CPU when the machine has
    several (the load generator keeps the others), ``set()`` = no pinning.
    ``conf_overrides`` are extra ``rabbitmq.conf`` keys for every node.
    ``tls``: every node also serves ``amqps`` with a certificate for ``localhost`` and
    ``127.0.0.1`` from a CA made at start in ``<workdir>/tls`` (removed at stop); the
    endpoint's URIs are the ``amqps://`` ones and :attr:`BrokerEndpoint.tls` carries the CA.
    """

    kind: ClassVar[str] = "rabbitmq"
    bind_failure: ClassVar[re.Pattern[str]] = re.compile(
        r"eaddrinuse|Address already in use|could not bind|failed to start ranch listener",
        re.I)

    def __init__(
        self,
        nodes: int = 1,
        workdir: Path | None = None,
        cpus: set[int] | None = None,
        conf_overrides: dict[str, str] | None = None,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT_S,
        keep_logs: bool = False,
        bin_dir: Path = RABBITMQ_BIN_DIR,
        memory_limit: int | None = None,
        powercut_fs: bool = False,
        tls: bool = False,
    ) -> None:
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
        super().__init__(nodes=nodes, workdir=workdir, cpus=cpus, start_timeout=start_timeout,
                         stop_timeout=stop_timeout, keep_logs=keep_logs,
                         memory_limit=memory_limit, powercut_fs=powercut_fs)
        self.conf_overrides = dict(conf_overrides or {})
        self.bin_dir = Path(bin_dir)
        self._epmd: ManagedProcess | None = None
        self._epmd_port = 0
        self._ctl_ports = (0, 0)
        self._home: Path | None = None
        self.tls = tls
        self._tls: TlsMaterial | None = None

    def describe(self) -> str:
        return f"RabbitMQ ({self.nodes} node(s))"

    # -- properties ---------------------------------------------------------------------
    @property
    def epmd(self) -> ManagedProcess | None:
        return self._epmd

    @property
    def ctl(self) -> CtlAccess:
        """CLI access to node 1 (``ctl.run("rabbitmqctl", "list_queues")``)."""
        if not self._nodes or self._home is None:
            raise RuntimeError("RabbitMQProcessCluster is not running")
        return CtlAccess(str(self.bin_dir), self._nodes[0].name, self._ctl_env())

    # -- environment ---------------------------------------------------------------------
    def _common_env(self) -> dict[str, str]:
        assert self._workdir is not None and self._home is not None
        return {
            "HOME": str(self._home),
            "ERL_EPMD_PORT": str(self._epmd_port),
            "ERL_EPMD_ADDRESS": LOOPBACK,
            "RABBITMQ_CONF_ENV_FILE": str(self._workdir / "rabbitmq-env.conf"),
            "RABBITMQ_CTL_DIST_PORT_MIN": str(self._ctl_ports[0]),
            "RABBITMQ_CTL_DIST_PORT_MAX": str(self._ctl_ports[1]),
            "RABBITMQ_CTL_ERL_ARGS": "-start_epmd false",
            "LC_ALL": "C.UTF-8",
        }

    def _ctl_env(self) -> dict[str, str]:
        # The CLI makes sure an epmd runs by starting a short-lived ``erl -sname`` of its
        # own, which (without -start_epmd false) starts a detached ``epmd -daemon`` on the
        # session's port when ours is gone — as when the watchdog has just killed it
        # after a SIGKILL of pytest. ERL_FLAGS reaches that erl too: no daemon outlives us.
        return {**self._common_env(), "ERL_FLAGS": "-start_epmd false"}

    def erl_args(self) -> list[str]:
        return [*SCHEDULER_FLAGS, "-start_epmd", "false", *_DIST_LOOPBACK]

    def _node_env(self, node: _Node) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(self._common_env())
        env.update({
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_USE_LONGNAME": "false",
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(node.amqp_port),
            "RABBITMQ_DIST_PORT": str(node.dist_port),
            "RABBITMQ_BASE": str(node.base),
            "RABBITMQ_MNESIA_BASE": str(node.mnesia),
            "RABBITMQ_LOG_BASE": str(node.log_dir),
            "RABBITMQ_CONFIG_FILE": str(node.config_file),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(node.base / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(node.base / "rabbitmq.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": " ".join(self.erl_args()),
        })
        return env

    # -- lifecycle -----------------------------------------------------------------------
    def _prepare(self) -> None:
        reason = rabbitmq_available(self.bin_dir)
        if reason is not None:
            raise BrokerUnavailable(reason)

    def _init_workdir(self, workdir: Path) -> None:
        """A HOME with a fresh private Erlang cookie, and an empty ``rabbitmq-env.conf``."""
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        cookie = home / ".erlang.cookie"
        if cookie.exists():
            cookie.chmod(0o600)
        alphabet = string.ascii_uppercase
        cookie.write_text("".join(secrets.choice(alphabet) for _ in range(20)), encoding="ascii")
        cookie.chmod(0o400)
        self._home = home
        (workdir / "rabbitmq-env.conf").write_text("# empty: keeps /etc/rabbitmq out\n")

    def _ctl_port_range(self, exclude: set[int]) -> tuple[int, int]:
        for _ in range(50):
            base = free_port(exclude=exclude)
            ports = range(base, base + _CTL_PORT_RANGE)
            if base + _CTL_PORT_RANGE < 65536 and not exclude & set(ports) and all(
                not port_open(LOOPBACK, p, timeout=0.05) for p in ports
            ):
                return base, base + _CTL_PORT_RANGE - 1
        raise OSError("no free range of ports for the RabbitMQ CLI")

    def _layout(self, workdir: Path) -> list[_Node]:
        n = self.nodes
        self._tls = None
        if self.tls:  # a fresh CA per start; the directory goes at stop
            self._tls = make_tls_material(self.fresh_dir(workdir / "tls"))
        n_tls = n if self._tls is not None else 0
        ports = free_ports(2 * n + 1 + n_tls)
        tls_ports = ports[2 * n + 1:]
        self._epmd_port = ports[2 * n]
        self._ctl_ports = self._ctl_port_range(set(ports))
        nodes = []
        for i in range(n):
            base = workdir / f"rmq{i + 1}"
            name = f"rmq{i + 1}@localhost"
            node = _Node(index=i + 1, name=name, label=name,
                         title=f"RabbitMQ node {name}",
                         amqp_port=ports[2 * i], dist_port=ports[2 * i + 1], base=base,
                         amqps_port=tls_ports[i] if tls_ports else None,
                         data_dir=base / "mnesia", config_file=base / "rabbitmq.conf",
                         log_file=base / "log" / "stdout.log")
            self.fresh_dir(node.mnesia)  # fresh data every start
            node.log_dir.mkdir(parents=True, exist_ok=True)
            assert node.config_file is not None
            tls = (RabbitTls(node.amqps_port, self._tls)
                   if self._tls is not None and node.amqps_port is not None else None)
            node.config_file.write_text(
                render_conf(node_conf(node.amqp_port, nodes=n, overrides=self.conf_overrides,
                                      tls=tls)),
                encoding="utf-8")
            (base / "enabled_plugins").write_text("[].\n")
            (base / "advanced.config").write_text("[].\n")
            for old in node.log_dir.glob("*.log*"):
                old.unlink()
            nodes.append(node)
        return nodes

    def _launch(self, workdir: Path, deadline: float) -> None:
        self._nodes = self._layout(workdir)
        # the node's data directory: its metadata store and every quorum queue's WAL
        # and segment files (what a power cut must find fsynced)
        self._mount_powercut(workdir)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ERL_")}
        self._epmd = ManagedProcess(
            ["epmd", "-port", str(self._epmd_port), "-address", LOOPBACK],
            log_file=workdir / "epmd.log", name="epmd", env=env,
        ).start()
        while not port_open(LOOPBACK, self._epmd_port, timeout=0.2):
            if not self._epmd.alive():
                raise StartFailure(
                    f"epmd on port {self._epmd_port} exited with {self._epmd.returncode}:\n"
                    f"{self._epmd.log_tail()}", retry=True)
            if time.monotonic() > deadline:
                raise StartFailure(f"epmd did not listen on port {self._epmd_port}")
            time.sleep(0.05)
        for node in self._nodes:
            self._spawn(node, [str(self.bin_dir / "rabbitmq-server")], name=node.name,
                        env=self._node_env(node), cwd=node.base)
        self._wait_ready(deadline)
        if self.nodes > 1:
            self._join_cluster(deadline)

    def _check_alive(self) -> None:
        super()._check_alive()
        if self._epmd is not None and not self._epmd.alive():
            raise StartFailure(f"epmd exited with {self._epmd.returncode} during start-up")

    def _wait_ready(self, deadline: float) -> None:
        """AMQP port open on every node, then ``rabbitmqctl await_startup`` on each."""
        self.wait_until(ports_open([n.amqp_port for n in self._nodes], "AMQP ports",
                                   connect_timeout=0.3), deadline, interval=0.1)
        ctl = self.ctl
        for node in self._nodes:
            left = max(5.0, deadline - time.monotonic())
            out = ctl.run("rabbitmqctl", "await_startup", "--timeout", str(int(left)),
                          node=node.name, timeout=left + 15)
            if out.returncode != 0:
                self._check_alive()
                raise StartFailure(self._failure_text(
                    f"rabbitmqctl -n {node.name} await_startup failed (exit {out.returncode}): "
                    f"{(out.stderr or out.stdout).strip()[-1500:]}"))

    def _join_cluster(self, deadline: float) -> None:
        """``stop_app`` / ``join_cluster rmq1@localhost`` / ``start_app`` for nodes 2..N."""
        ctl = self.ctl
        first = self._nodes[0].name
        for node in self._nodes[1:]:
            for args in (("stop_app",), ("join_cluster", first), ("start_app",)):
                left = max(10.0, deadline - time.monotonic())
                out = ctl.run("rabbitmqctl", *args, node=node.name, timeout=left)
                if out.returncode != 0:
                    raise StartFailure(self._failure_text(
                        f"rabbitmqctl -n {node.name} {' '.join(args)} failed: "
                        f"{(out.stderr or out.stdout).strip()[-1500:]}"))
        left = max(10.0, deadline - time.monotonic())
        out = ctl.run("rabbitmqctl", "await_online_nodes", str(self.nodes), "--timeout",
                      str(int(left)), timeout=left + 15)
        if out.returncode != 0:
            raise StartFailure(self._failure_text(
                f"the {self.nodes} RabbitMQ nodes did not form one cluster: "
                f"{(out.stderr or out.stdout).strip()[-1500:]}"))

    def start_all(self, timeout: float) -> list[int]:
        """Start every (killed) node at once and wait until each has booted
        (``await_startup``: a node waits for its peers' metadata before it serves, so
        the nodes of a whole cluster cannot come back one at a time); the new pids."""
        pids = self.start_nodes(list(range(1, len(self._nodes) + 1)), timeout)
        self._wait_ready(time.monotonic() + timeout)
        return pids

    # -- inspection ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """``rabbitmqctl status`` of node 1 as a mapping."""
        data = self.ctl.json("rabbitmqctl", "status")
        return data if isinstance(data, dict) else {"status": data}

    def alarms(self) -> dict[str, Any]:
        """Memory and disk alarms in force now (``rabbitmq-diagnostics alarms``)."""
        return read_alarms(self.ctl)

    def cluster_nodes(self) -> list[str]:
        data = self.ctl.json("rabbitmqctl", "cluster_status")
        return sorted(data.get("running_nodes", [])) if isinstance(data, dict) else []

    def _node_probe(self, node: _Node) -> Probe:
        return ports_open([node.amqp_port], f"{node.label} AMQP port")

    def _make_endpoint(self, began: float) -> BrokerEndpoint:
        status = self.status()
        version = str(status.get("rabbitmq_version", "unknown"))
        ctl = self.ctl
        schedulers = ctl.check("rabbitmqctl", "eval", "erlang:system_info(schedulers_online).")
        running = self.cluster_nodes() if self.nodes > 1 else [self._nodes[0].name]
        alarms = self.alarms()
        local = self._local_record(began)
        info: dict[str, Any] = {
            **local.as_info(),
            "epmd_pid": self._epmd.pid if self._epmd is not None else None,
            "node_names": [n.name for n in self._nodes],
            "running_nodes": running,
            "node_ports": [{"node": n.name, "amqp_port": n.amqp_port,
                            "dist_port": n.dist_port,
                            **({"amqps_port": n.amqps_port} if n.amqps_port else {})}
                           for n in self._nodes],
            "epmd_port": self._epmd_port,
            "erlang_version": status.get("erlang_version"),
            "erl_args": self.erl_args(),
            "schedulers_online": schedulers.strip(),
            "conf": node_conf(self._nodes[0].amqp_port, nodes=self.nodes,
                              overrides=self.conf_overrides),
            "alarms_at_start": alarms,
            "memory_high_watermark": status.get("vm_memory_high_watermark_setting"),
            "memory_limit_bytes": status.get("vm_memory_high_watermark_limit"),
            "disk_free_bytes": status.get("disk_free"),
            "disk_free_limit_bytes": status.get("disk_free_limit"),
            "storage": "disk (mnesia, quorum and stream directories under data_dirs)",
        }
        plain = ",".join(f"amqp://{LOOPBACK}:{n.amqp_port}" for n in self._nodes)
        tls = None
        if self._tls is not None:
            tls = TlsClient(protocol="amqps", ca_file=str(self._tls.ca_cert), plaintext=plain,
                            server_names=self._tls.hosts)
        return BrokerEndpoint(
            kind="rabbitmq",
            bootstrap=(",".join(f"amqps://{LOOPBACK}:{n.amqps_port}" for n in self._nodes)
                       if tls is not None else plain),
            tls=tls,
            mode="process",
            nodes=self.nodes,
            version=version,
            topology_check=self.nodes > 1,
            control=ctl,
            info=info,
            local=local,
        )

    def _teardown(self, timeout: float | None = None) -> None:
        """SIGTERM every node (RabbitMQ shuts down cleanly on it), then epmd; drop data."""
        super()._teardown(timeout)
        if self._epmd is not None:
            self._epmd.stop(timeout=5.0)
            self._epmd = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<RabbitMQProcessCluster nodes={self.nodes} {state}>"


def read_alarms(ctl: CtlAccess) -> dict[str, Any]:
    """``{"memory": bool, "disk": bool, "raw": [...]}`` from ``rabbitmq-diagnostics alarms``."""
    try:
        raw = ctl.json("rabbitmq-diagnostics", "alarms")
    except (ProvisionError, ValueError) as e:
        return {"error": str(e)[:500]}
    items: Sequence[Any] = raw if isinstance(raw, list) else [raw]
    text = json.dumps(items)
    return {"memory": "memory" in text, "disk": "disk" in text, "raw": list(items)}
