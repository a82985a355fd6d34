"""One RabbitMQ node in a container (``--brokerperf-provision=container``).

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

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.rabbitmq.process import (
    SCHEDULER_FLAGS,
    CtlAccess,
    node_conf,
    read_alarms,
    render_conf,
)
from pytest_brokerperf.endpoint import BrokerEndpoint
from pytest_brokerperf.errors import ProvisionError
from pytest_brokerperf.provision.container_node import ContainerNode, ContainerPlan, wait_for_log
from pytest_brokerperf.provision.ports import LOOPBACK, free_ports

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


def container_conf(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """Process mode's ``rabbitmq.conf`` keys for a node in a container: the same
    watermark and limits, the image's own listener (5672 on every interface)."""
    conf = node_conf(AMQP_PORT, nodes=1, overrides=overrides)
    conf.pop("listeners.tcp.1", None)  # the image listens on 5672 (listeners.tcp.default)
    conf["log.console"] = "true"
    conf["log.console.level"] = "info"  # the readiness line is an info line
    return conf


class RabbitMQContainerCluster(ContainerNode):
    """One RabbitMQ node in a container on its own container network."""

    kind: ClassVar[str] = "rabbitmq"

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 cpus: set[int] | None = None, conf_overrides: dict[str, str] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.conf_overrides = dict(conf_overrides or {})
        self._endpoint: BrokerEndpoint | None = None
        self._version = "unknown"

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the RabbitMQ container is not running; call start() first")
        return self._endpoint

    @property
    def ctl(self) -> CtlAccess:
        """``rabbitmqctl`` inside the container, as root (both images allow it)."""
        return CtlAccess("", f"rabbit@{ALIAS}", {}, ("docker", "exec", self.container_name))

    def image_candidates(self) -> tuple[str, ...]:
        return default_images()

    def plan(self) -> ContainerPlan:
        conf_dir = self.workdir / "conf.d"
        conf_dir.mkdir(parents=True, exist_ok=True)
        conf_file = conf_dir / "90-brokerperf.conf"
        conf_file.write_text(render_conf(container_conf(self.conf_overrides)))
        conf_file.chmod(0o644)  # read by the rabbitmq user inside
        amqp, management = free_ports(2)
        env = {"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": " ".join(SCHEDULER_FLAGS)}
        return ContainerPlan(alias=ALIAS, hostname=ALIAS, env=env,
                             ports={AMQP_PORT: amqp, MANAGEMENT_PORT: management},
                             volumes={str(conf_file.resolve()): (CONF_PATH, "ro")})

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """The start-up log line, then an AMQP connection from the host."""
        import pika
        from pika.exceptions import AMQPError

        wait_for_log(container, b"Server startup complete", deadline, self.start_timeout)
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

    def start(self) -> BrokerEndpoint:
        """Start the node and wait until clients on the host can connect."""
        (plan,), info = self.launch()
        info.pop("image_labels", None)
        ctl = self.ctl
        try:
            status = ctl.json("rabbitmqctl", "status")
            alarms = read_alarms(ctl)
        except ProvisionError:
            self.stop()
            raise
        status = status if isinstance(status, dict) else {}
        amqp = plan.ports[AMQP_PORT]
        # the Erlang VM, not the launcher script that is the container's first process
        info["pids"] = self.host_pids("beam.smp") or info["pids"]
        info.update({
            "node_names": [ctl.node],
            "running_nodes": [ctl.node],
            "node_ports": [{"node": ctl.node, "amqp_port": amqp}],
            "in_network_url": f"amqp://{ALIAS}:{AMQP_PORT}",
            "management_url": f"http://{LOOPBACK}:{plan.ports[MANAGEMENT_PORT]}",
            "env": dict(plan.env),
            "erl_args": list(SCHEDULER_FLAGS),
            "erlang_version": status.get("erlang_version"),
            "conf": container_conf(self.conf_overrides),
            "alarms_at_start": alarms,
            "memory_high_watermark": status.get("vm_memory_high_watermark_setting"),
            "memory_limit_bytes": status.get("vm_memory_high_watermark_limit"),
            "disk_free_bytes": status.get("disk_free"),
            "disk_free_limit_bytes": status.get("disk_free_limit"),
            "ctl": ctl.as_info(),
            "storage": "disk, inside the container (removed with it)",
        })
        self._endpoint = BrokerEndpoint(
            kind="rabbitmq", bootstrap=f"amqp://{LOOPBACK}:{amqp}", mode="container", nodes=1,
            version=str(status.get("rabbitmq_version") or self._version), info=info)
        return self._endpoint

    def alarms(self) -> dict[str, Any]:
        """Memory and disk alarms in force now."""
        return read_alarms(self.ctl)

    def forget(self) -> None:
        self._endpoint = None

    def __repr__(self) -> str:
        state = self._endpoint.bootstrap if self._endpoint else "stopped"
        return f"<RabbitMQContainerCluster {state}>"
