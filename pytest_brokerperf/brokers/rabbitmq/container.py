"""RabbitMQ in containers, one node or three (``--brokerperf-provision=container``).

Configured through the official ``rabbitmq`` image's contract, so the local build
(``brokerperf/rabbitmq:3.10``, Debian's package, made by ``ci/docker.sh``) and the
official management image run the same way:

- configuration files in ``/etc/rabbitmq/conf.d/``: this module mounts
  ``90-brokerperf.conf`` with process mode's settings (:func:`.process.node_conf`: memory
  watermark, disk limit), so both modes measure the same broker;
- ``RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS`` carries the scheduler flags of process mode
  (:data:`.process.SCHEDULER_FLAGS`);
- the node is ``rabbit@<hostname>``; the hostname is the node's alias on the session's
  container network (``rabbitmq-1``), so ``amqp://rabbitmq-1:5672`` reaches it from other
  containers there, and 5672 is published on a free loopback port for the host;
- ``rabbitmqctl`` runs inside the container (``docker exec``), so queue types, policies
  and alarms are read back as in process mode;
- ready when the log says ``Server startup complete`` and an AMQP connection from the
  host opens.

No memory limit is set: process mode has none, and RabbitMQ 3.10 sizes its memory alarm
from the host's memory, not a container's limit (a limit below the watermark would
OOM-kill the node instead of raising the alarm).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.provision.container_node import (
    ContainerNode,
    ContainerPlan,
    wait_for_log,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.brokers.rabbitmq.process import (
    SCHEDULER_FLAGS,
    CtlAccess,
    node_conf,
    read_alarms,
    render_conf,
)
from pytest_brokerperf.core.errors import ConfigError, ProvisionError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

__all__ = ["AMQP_PORT", "MANAGEMENT_PORT", "RabbitMQContainerCluster", "container_conf",
           "default_images"]

AMQP_PORT = 5672
MANAGEMENT_PORT = 15672
CONF_PATH = "/etc/rabbitmq/conf.d/90-brokerperf.conf"
ALIAS = "rabbitmq-1"
DEFAULT_START_TIMEOUT_S = 120.0


def default_images() -> tuple[str, ...]:
    """The local build first (``ci/docker.sh``), then the official management image."""
    return ("brokerperf/rabbitmq:3.10", "rabbitmq:3.10-management")


def container_conf(overrides: dict[str, str] | None = None, *, nodes: int = 1
                   ) -> dict[str, str]:
    """Process mode's ``rabbitmq.conf`` keys for a node in a container: the same
    watermark, limits and partition handling, the image's own listener (5672 on every
    interface)."""
    conf = node_conf(AMQP_PORT, nodes=nodes, overrides=overrides)
    conf.pop("listeners.tcp.1", None)  # the image listens on 5672 (listeners.tcp.default)
    conf["log.console"] = "true"
    conf["log.console.level"] = "info"  # the readiness line is an info line
    return conf


class RabbitMQContainerCluster(ContainerNode):
    """One RabbitMQ node, or a cluster of three, in containers on their own network.

    Three nodes share one Erlang cookie (a file mounted into each) and are clustered as
    process mode clusters its nodes (``stop_app`` / ``join_cluster`` / ``start_app``,
    then ``await_online_nodes``); they are a topology check (one machine).
    """

    kind: ClassVar[str] = "rabbitmq"

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 nodes: int = 1, cpus: set[int] | None = None,
                 conf_overrides: dict[str, str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        if isinstance(nodes, bool) or nodes not in (1, 3):
            raise ConfigError(f"nodes must be 1 or 3 in container mode, got {nodes!r}")
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.nodes = nodes
        self.conf_overrides = dict(conf_overrides or {})
        self._endpoint: BrokerEndpoint | None = None
        self._version = "unknown"

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the RabbitMQ container is not running; call start() first")
        return self._endpoint

    @staticmethod
    def alias_of(node: int) -> str:
        return f"rabbitmq-{node}"

    @property
    def ctl(self) -> CtlAccess:
        """``rabbitmqctl`` inside node 1's container, as root (both images allow it);
        ``node=`` reaches the others over Erlang distribution on the session's network."""
        return CtlAccess("", f"rabbit@{ALIAS}", {}, ("docker", "exec", self.container_name))

    def image_candidates(self) -> tuple[str, ...]:
        return default_images()

    def plans(self) -> list[ContainerPlan]:
        conf_dir = self.workdir / "conf.d"
        conf_dir.mkdir(parents=True, exist_ok=True)
        conf_file = conf_dir / "90-brokerperf.conf"
        conf_file.write_text(render_conf(container_conf(self.conf_overrides, nodes=self.nodes)))
        conf_file.chmod(0o644)  # read by the rabbitmq user inside
        volumes = {str(conf_file.resolve()): (CONF_PATH, "ro")}
        if self.nodes > 1:  # one cookie for the cluster (the image makes one per node)
            cookie = self.workdir / "erlang.cookie"
            cookie.unlink(missing_ok=True)
            cookie.write_text(secrets.token_hex(20).upper())
            cookie.chmod(0o400)
            volumes[str(cookie.resolve())] = ("/var/lib/rabbitmq/.erlang.cookie", "rw")
        env = {"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": " ".join(SCHEDULER_FLAGS)}
        plans = []
        for node in range(1, self.nodes + 1):
            amqp, management = free_ports(2)
            plans.append(ContainerPlan(
                alias=self.alias_of(node), hostname=self.alias_of(node), env=dict(env),
                ports={AMQP_PORT: amqp, MANAGEMENT_PORT: management}, volumes=dict(volumes)))
        return plans

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """The start-up log line, then an AMQP connection from the host."""
        import pika
        from pika.exceptions import AMQPError

        wait_for_log(container, b"Server startup complete", deadline, self.start_timeout,
                     since=self.log_since)
        url = f"amqp://{LOOPBACK}:{plan.ports[AMQP_PORT]}/%2F"
        seen = "no answer"
        while time.monotonic() < deadline:
            try:
                conn = pika.BlockingConnection(pika.URLParameters(url))
            except (AMQPError, OSError) as exc:
                seen = f"{type(exc).__name__}: {exc}"
                time.sleep(0.3)
                continue
            props = conn._impl.server_properties or {}
            version = props.get("version", b"unknown")
            self._version = version.decode() if isinstance(version, bytes) else str(version)
            conn.close()
            return
        raise ProvisionError(f"no AMQP connection from the host to {url}: {seen}")

    def wait_cluster_ready(self, started: list[DockerContainer], plans: list[ContainerPlan],
                           deadline: float) -> None:
        """Every node up, then nodes 2..N joined to node 1 and all of them online."""
        super().wait_cluster_ready(started, plans, deadline)
        if self.nodes == 1:
            return
        ctl, first = self.ctl, f"rabbit@{self.alias_of(1)}"
        for node in range(2, self.nodes + 1):
            for args in (("stop_app",), ("join_cluster", first), ("start_app",)):
                left = max(10.0, deadline - time.monotonic())
                ctl.check("rabbitmqctl", *args, node=f"rabbit@{self.alias_of(node)}",
                          timeout=left)
        left = max(10.0, deadline - time.monotonic())
        ctl.check("rabbitmqctl", "await_online_nodes", str(self.nodes), "--timeout",
                  str(int(left)), timeout=left + 15)

    def start(self) -> BrokerEndpoint:
        """Start the nodes and wait until clients on the host can connect to each."""
        plans, info = self.launch()
        info.pop("image_labels", None)
        ctl = self.ctl
        try:
            status = ctl.json("rabbitmqctl", "status")
            alarms = read_alarms(ctl)
            cluster = ctl.json("rabbitmqctl", "cluster_status")
        except ProvisionError:
            self.stop()
            raise
        status = status if isinstance(status, dict) else {}
        running = sorted(cluster.get("running_nodes", [])) if isinstance(cluster, dict) else []
        names = [f"rabbit@{p.alias}" for p in plans]
        # the Erlang VMs, not the launcher scripts that are the containers' first processes
        info["pids"] = self.host_pids("beam.smp") or info["pids"]
        info.update({
            "node_names": names,
            "running_nodes": running,
            "node_ports": [{"node": n, "amqp_port": p.ports[AMQP_PORT]}
                           for n, p in zip(names, plans, strict=True)],
            "in_network_url": ",".join(f"amqp://{p.alias}:{AMQP_PORT}" for p in plans),
            "management_url": f"http://{LOOPBACK}:{plans[0].ports[MANAGEMENT_PORT]}",
            "env": dict(plans[0].env),
            "erl_args": list(SCHEDULER_FLAGS),
            "erlang_version": status.get("erlang_version"),
            "conf": container_conf(self.conf_overrides, nodes=self.nodes),
            "alarms_at_start": alarms,
            "memory_high_watermark": status.get("vm_memory_high_watermark_setting"),
            "memory_limit_bytes": status.get("vm_memory_high_watermark_limit"),
            "disk_free_bytes": status.get("disk_free"),
            "disk_free_limit_bytes": status.get("disk_free_limit"),
            "storage": "disk, inside the containers (removed with them)",
        })
        self._endpoint = BrokerEndpoint(
            kind="rabbitmq",
            bootstrap=",".join(f"amqp://{LOOPBACK}:{p.ports[AMQP_PORT]}" for p in plans),
            mode="container", nodes=self.nodes, topology_check=self.nodes > 1,
            version=str(status.get("rabbitmq_version") or self._version), info=info,
            control=ctl, local=self.local_record(info))
        return self.serving(self._endpoint)

    def alarms(self) -> dict[str, Any]:
        """Memory and disk alarms in force now."""
        return read_alarms(self.ctl)

    def forget(self) -> None:
        self._endpoint = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<RabbitMQContainerCluster {state}>"
