"""One broker node in a container: the lifecycle every broker's container mode shares.

In the spirit of testcontainers' ``DockerContainer`` plus a wait strategy: a broker
package says *what* to run (:meth:`ContainerNode.plan`: image candidates, environment,
published ports, mounts) and *when it is ready* (:meth:`ContainerNode.wait_ready`); this
base does the rest the same way for every broker:

- refuses without an engine (the test skips with the reason), removes what killed
  sessions left behind, resolves the image (never pulled);
- one container network per session, labelled with the run id and pytest's pid, so a
  SIGKILLed session's containers are found and removed (:mod:`.containers`);
- ports published on loopback only; CPU set (``--cpuset-cpus``) and memory limit set as
  in process mode, so both modes measure the same broker;
- the container's log attached to any start-up failure, and everything removed on stop,
  on failure, and at interpreter exit.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, LocalProcesses
from pytest_brokerperf.brokers.node_control import register_control, unregister_control
from pytest_brokerperf.brokers.provision import containers
from pytest_brokerperf.brokers.provision.container_watch import unwatch_container, watch_container
from pytest_brokerperf.brokers.provision.ports import LOOPBACK
from pytest_brokerperf.core.errors import ProvisionError
from pytest_brokerperf.metrics.cpus import CpuAffinity, allowed_cpus, default_broker_cpus

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

__all__ = ["ContainerNode", "ContainerPlan", "configure_reaper", "failure_text"]

LOG_TAIL_LINES = 40


@dataclass
class ContainerPlan:
    """What one node's container runs: everything :meth:`ContainerNode.plan` decides."""

    alias: str  # the node's name (and hostname) on the session's container network
    env: dict[str, str]
    #: container port -> host port, published on loopback
    ports: dict[int, int]
    #: host path -> (container path, mode)
    volumes: dict[str, tuple[str, str]] = field(default_factory=dict)
    memory_mb: int | None = None
    hostname: str | None = None
    #: the container's command (None: the image's own)
    command: list[str] | None = None
    #: an image reference already resolved for this container (None: the node's image;
    #: a service the node needs beside it, such as AutoMQ's object store, has its own)
    image: str | None = None


def configure_reaper(client: Any) -> str:
    """Ryuk where its image is on the engine; otherwise our own labels and atexit."""
    from docker.errors import ImageNotFound
    from testcontainers.core.config import testcontainers_config as config

    if config.ryuk_disabled:
        return "none: Ryuk disabled (TESTCONTAINERS_RYUK_DISABLED)"
    try:
        client.images.get(config.ryuk_image)
    except ImageNotFound:
        config.ryuk_disabled = True
        return (f"none: {config.ryuk_image} is not on the engine; containers are removed "
                "at session end, and by the next session when pytest was killed")
    return f"ryuk ({config.ryuk_image})"


def failure_text(container: DockerContainer, headline: str) -> str:
    """``headline`` and the last lines of the container's log."""
    try:
        wrapped = container.get_wrapped_container()
        logs = wrapped.logs(tail=LOG_TAIL_LINES).decode("utf-8", "replace")
    except Exception as exc:  # the headline matters more than the logs
        logs = f"(container logs unavailable: {exc})"
    return f"{headline}\n--- last {LOG_TAIL_LINES} lines of the container's log ---\n{logs}"


def wait_for_log(container: DockerContainer, marker: bytes, deadline: float,
                 timeout_s: float, since: float | None = None) -> None:
    """Until the container's log shows ``marker`` (written after ``since``, a
    ``time.time()``, when given: a restarted container keeps its earlier log); an exit
    or the deadline is an error."""
    wrapped = container.get_wrapped_container()
    after = {"since": int(since)} if since is not None else {}
    while True:
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            code = (wrapped.attrs.get("State") or {}).get("ExitCode")
            raise ProvisionError(f"the container exited with code {code} during start-up")
        if marker in wrapped.logs(tail=200, **after):
            return
        if time.monotonic() > deadline:
            raise ProvisionError(f"no {marker.decode()!r} line within {timeout_s:.0f} s")
        time.sleep(0.3)


class ContainerNode:
    """Broker nodes in containers on one network of their own; subclasses plan and wait.

    One node unless :meth:`plans` returns more (a cluster on the session's network).
    ``cpus``: as process mode (``None`` = the last CPU when there are several, ``set()``
    = no pinning; every node gets the same set, as process mode's nodes do);
    ``run_id`` labels containers and network for cleanup.
    """

    kind: ClassVar[str]

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 cpus: set[int] | None = None, start_timeout: float = 120.0) -> None:
        self.workdir = workdir
        self.run_id = run_id
        self.requested_image = image
        self.cpus = cpus
        self.start_timeout = start_timeout
        self._containers: list[DockerContainer] = []
        self._support: list[DockerContainer] = []
        self._network: Network | None = None
        self._plans: list[ContainerPlan] = []
        self._serving_endpoint: BrokerEndpoint | None = None
        #: ``time.time()`` of the latest node restart: readiness reads the log after it
        self.log_since: float | None = None
        #: each container's memory limit in bytes from --brokerperf-broker-memory (None:
        #: the plan's own, heap plus headroom); page cache counts against it
        self.memory_limit: int | None = None
        #: each node container's memory limit in bytes as started (for a death's OOM note)
        self._memory_bytes: int | None = None
        #: the support containers started, watched as the nodes are
        self._support_names: list[str] = []

    # -- what a broker package provides ---------------------------------------------------

    def image_candidates(self) -> tuple[str, ...]:
        """Images to try in order when ``--brokerperf-image`` names none."""
        raise NotImplementedError

    def plan(self) -> ContainerPlan:
        """A single node's container: alias, environment, ports, mounts, memory."""
        raise NotImplementedError

    def plans(self) -> list[ContainerPlan]:
        """Every node's container, in node order (one node: :meth:`plan`)."""
        return [self.plan()]

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """Return once clients on the host can use the node; raise ProvisionError if not."""
        raise NotImplementedError

    def start_containers(self, created: list[DockerContainer], plans: list[ContainerPlan],
                         deadline: float) -> None:
        """Start the containers in plan order (a deployment whose node needs a service
        prepared first, such as AutoMQ's buckets, starts them in its own order)."""
        for container in created:
            container.start()

    def support_plans(self) -> list[ContainerPlan]:
        """Containers the nodes need before they start (e.g. a metadata store), started
        and awaited first on the same network; not nodes: faults and samplers leave
        them alone. None by default."""
        return []

    def wait_support_ready(self, container: DockerContainer, plan: ContainerPlan,
                           deadline: float) -> None:
        """Return once the support container ``plan`` serves the nodes."""
        raise NotImplementedError

    def support_name(self, plan: ContainerPlan) -> str:
        """The container name of a support container (its alias in it)."""
        return f"brokerperf-{self.run_id}-{plan.alias}-{os.getpid()}"

    def wait_cluster_ready(self, started: list[DockerContainer], plans: list[ContainerPlan],
                           deadline: float) -> None:
        """Every node ready (a cluster adds its own check after the nodes' own)."""
        for container, plan in zip(started, plans, strict=True):
            self.wait_ready(container, plan, deadline)

    # -- the shared lifecycle -------------------------------------------------------------

    def broker_cpus(self) -> set[int] | None:
        if self.cpus is None:
            return default_broker_cpus()
        return set(self.cpus) or None

    def name_of(self, node: int) -> str:
        """The container name of node ``node`` (1-based)."""
        return f"brokerperf-{self.run_id}-{self.kind}-{node}-{os.getpid()}"

    @property
    def container_name(self) -> str:
        return self.name_of(1)

    def launch(self) -> tuple[list[ContainerPlan], dict[str, Any]]:
        """Start the containers and wait until they are ready; the plans and the
        manifest's common facts (containers, network, image, engine, CPU set, start-up)."""
        engine = containers.require_engine()
        began = time.monotonic()
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network

        client = containers.docker_client()
        try:
            removed = containers.remove_orphans(client)
            image = containers.resolve_image(client, self.kind, self.requested_image,
                                             self.image_candidates())
            reaper = configure_reaper(client)
        finally:
            client.close()
        labels = containers.run_labels(self.kind, self.run_id)
        support = self.support_plans()
        plans = self._plans = self.plans()
        cpus = self.broker_cpus()
        network = Network(docker_network_kw={"labels": labels})
        network.name = f"brokerperf-{self.run_id}-{os.getpid()}"
        network.create()
        self._network = network
        containers.track(self)
        # a SIGKILLed pytest runs no atexit hook: its watchdog removes these instead
        from pytest_brokerperf.brokers.provision.watchdog import track_containers

        track_containers(self.run_id)
        memory: str | None = None
        memory_bytes: int | None = None
        for node, plan in enumerate(plans, start=1):
            kwargs: dict[str, Any] = {"labels": labels}
            if self.memory_limit is not None:  # no swap either: a cold read stays one
                memory = kwargs["mem_limit"] = kwargs["memswap_limit"] = str(self.memory_limit)
                memory_bytes = self.memory_limit
            elif plan.memory_mb:
                memory = kwargs["mem_limit"] = f"{plan.memory_mb}m"
                memory_bytes = plan.memory_mb * 1024 * 1024
            if cpus:
                kwargs["cpuset_cpus"] = ",".join(map(str, sorted(cpus)))
            if plan.hostname:
                kwargs["hostname"] = plan.hostname
            container = (DockerContainer(plan.image or image.ref).with_name(self.name_of(node))
                         .with_envs(**plan.env).with_network(network)
                         .with_network_aliases(plan.alias).with_kwargs(**kwargs))
            if plan.command is not None:
                container = container.with_command(plan.command)
            for host_path, (path, mode) in plan.volumes.items():
                container = container.with_volume_mapping(host_path, path, mode)
            for port, host_port in plan.ports.items():
                # published on loopback only
                container.ports[f"{port}/tcp"] = (LOOPBACK, host_port)  # type: ignore[assignment]
            self._containers.append(container)
        for plan in support:
            helper = (DockerContainer(image.ref).with_name(self.support_name(plan))
                      .with_envs(**plan.env).with_network(network)
                      .with_network_aliases(plan.alias)
                      .with_kwargs(labels=labels, hostname=plan.hostname or plan.alias,
                                   **({"mem_limit": f"{plan.memory_mb}m"}
                                      if plan.memory_mb else {}),
                                   **({"cpuset_cpus": ",".join(map(str, sorted(cpus)))}
                                      if cpus else {})))
            if plan.command is not None:
                helper = helper.with_command(plan.command)
            for host_path, (path, mode) in plan.volumes.items():
                helper = helper.with_volume_mapping(host_path, path, mode)
            self._support.append(helper)
        launched = time.time()
        try:
            for helper, plan in zip(self._support, support, strict=True):
                helper.start()
                self.wait_support_ready(helper, plan, began + self.start_timeout)
            self.start_containers(list(self._containers), plans, began + self.start_timeout)
            self.wait_cluster_ready(list(self._containers), plans, began + self.start_timeout)
        except BaseException as exc:
            names = ", ".join(self.name_of(i) for i in range(1, len(plans) + 1))
            text = "\n".join(
                [failure_text(c, f"{self.kind} container {self.support_name(p)}")
                 for c, p in zip(self._support, support, strict=False)]
                + [failure_text(c, f"{self.kind} container {self.name_of(i)}")
                   for i, c in enumerate(self._containers, start=1)])
            text = (f"{self.kind} container(s) {names} ({image.ref}) did not become ready: "
                    f"{exc}\n{text}")
            self.stop()
            if isinstance(exc, ProvisionError | TimeoutError | OSError) or (
                    type(exc).__module__.startswith(("docker", "pika", "confluent_kafka"))):
                raise ProvisionError(text) from exc
            raise
        # from now on an exit nobody asked for fails the run (provision/container_watch.py)
        for node in range(1, len(plans) + 1):
            watch_container(self.name_of(node), f"{self.kind} node {node}", memory_bytes)
        self._memory_bytes = memory_bytes
        self._support_names = [self.support_name(plan) for plan in support]
        for plan in support:
            watch_container(self.support_name(plan),
                            f"{self.kind} support container {plan.alias}")
        pids: list[int] = []
        ids: list[str] = []
        cpuset: str | None = None
        for container in self._containers:
            wrapped = container.get_wrapped_container()
            wrapped.reload()
            state = wrapped.attrs.get("State") or {}
            cpuset = (wrapped.attrs.get("HostConfig") or {}).get("CpusetCpus") or None
            if state.get("Pid"):
                pids.append(int(state["Pid"]))
            ids.append(str(wrapped.id))
        available = allowed_cpus()
        info: dict[str, Any] = {
            "pids": pids,
            "container_ids": ids,
            "container_names": [self.name_of(i) for i in range(1, len(plans) + 1)],
            "aliases": [p.alias for p in plans],
            "support_containers": [self.support_name(p) for p in support],
            "network": network.name,
            "image": image.as_dict(),
            "image_labels": dict(image.labels),
            "engine": {"address": engine.address, "detail": engine.detail},
            "reaper": reaper,
            "orphans_removed": removed,
            "labels": labels,
            "memory_limit": memory,
            "memory_limit_bytes": memory_bytes,
            "cpu_affinity": {
                "broker_cpus": sorted(cpus) if cpus else None,
                "generator_cpus": sorted(available - cpus) if cpus else sorted(available),
                "nodes": {str(i): sorted(cpus) if cpus else None
                          for i in range(1, len(plans) + 1)},
                "cpuset_cpus": cpuset,
            },
            "started_at": launched,
            "ready_at": time.time(),
            "startup_s": round(time.monotonic() - began, 3),
            "workdir": str(self.workdir),
        }
        return plans, info

    @staticmethod
    def local_record(info: dict[str, Any]) -> LocalProcesses:
        """The typed record of what :meth:`launch` started (after a broker module has
        replaced ``info["pids"]`` by its runtime's host pids), for the endpoint's
        ``local``: /proc sampling, CPU layout and catch-up's storage reads use it."""
        aff = info.get("cpu_affinity") or {}
        broker = aff.get("broker_cpus")

        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in info.get(key) or ())

        return LocalProcesses(
            pids=tuple(int(p) for p in info.get("pids") or ()),
            log_files=strings("log_files"), gc_logs=strings("gc_logs"),
            data_dirs=strings("data_dirs"), config_files=strings("config_files"),
            metrics_urls=strings("metrics_urls"),
            cpu_affinity=CpuAffinity(
                broker_cpus=tuple(broker) if broker else None,
                generator_cpus=tuple(aff.get("generator_cpus") or ()),
                nodes={k: tuple(v) if v is not None else None
                       for k, v in (aff.get("nodes") or {}).items()}),
            started_at=float(info.get("started_at") or 0.0),
            ready_at=float(info.get("ready_at") or 0.0),
            startup_s=float(info.get("startup_s") or 0.0),
            workdir=info.get("workdir"),
            memory_limit_bytes=info.get("memory_limit_bytes"))

    def host_pids(self, command: str) -> list[int]:
        """Host pids of the containers' processes named ``command`` (e.g. the node's
        runtime under a launcher script), for /proc sampling; [] when none or stopped."""
        found: list[int] = []
        for container in self._containers:
            try:
                top = container.get_wrapped_container().top(ps_args="-o pid,comm")
            except Exception:  # the engine's answer is a nicety here, not a requirement
                continue
            titles = [str(t).upper() for t in top.get("Titles") or []]
            if "PID" not in titles or "COMMAND" not in titles:
                continue
            pid_at, comm_at = titles.index("PID"), titles.index("COMMAND")
            found += [int(row[pid_at]) for row in top.get("Processes") or []
                      if str(row[comm_at]) == command]
        return found

    def serving(self, endpoint: BrokerEndpoint) -> BrokerEndpoint:
        """Register the running cluster's node control for ``endpoint`` (faults);
        subclasses return their endpoint through this."""
        self._serving_endpoint = endpoint
        register_control(endpoint, self)
        return endpoint

    # -- node faults (pytest_brokerperf.brokers.node_control.NodeControl) -----------------------

    def node_count(self) -> int:
        return len(self._containers)

    def _wrapped(self, index: int) -> Any:
        if not 1 <= index <= len(self._containers):
            raise ProvisionError(f"{self.kind} containers: no node {index} (nodes 1.."
                                 f"{len(self._containers)})")
        wrapped = self._containers[index - 1].get_wrapped_container()
        wrapped.reload()
        return wrapped

    def node_pid(self, index: int) -> int | None:
        state = self._wrapped(index).attrs.get("State") or {}
        return int(state["Pid"]) if state.get("Running") and state.get("Pid") else None

    def kill_node(self, index: int) -> int:
        pid = self.node_pid(index) or 0
        unwatch_container(self.name_of(index))  # an exit the run asked for, not a death
        wrapped = self._wrapped(index)
        wrapped.kill(signal="SIGKILL")
        wrapped.wait(timeout=10)
        return pid

    def pause_node(self, index: int) -> int:
        pid = self.node_pid(index) or 0
        self._wrapped(index).pause()  # the cgroup freezer: every process of the node
        return pid

    def resume_node(self, index: int) -> None:
        self._wrapped(index).unpause()

    def stop_node(self, index: int, timeout: float) -> int | None:
        wrapped = self._wrapped(index)
        unwatch_container(self.name_of(index))  # an exit the run asked for, not a death
        if (wrapped.attrs.get("State") or {}).get("Paused"):
            wrapped.unpause()  # a frozen node cannot act on SIGTERM
        wrapped.stop(timeout=int(timeout))
        wrapped.reload()
        code = (wrapped.attrs.get("State") or {}).get("ExitCode")
        return int(code) if code is not None else None

    def start_node(self, index: int, timeout: float) -> int:
        """Start the stopped container again (its own data, ports and network alias)
        and wait until it serves, as at the first start."""
        self.log_since = time.time()
        wrapped = self._wrapped(index)
        wrapped.start()
        self.wait_ready(self._containers[index - 1], self._plans[index - 1],
                        time.monotonic() + timeout)
        watch_container(self.name_of(index), f"{self.kind} node {index}",
                        self._memory_bytes)  # serving again: a death now fails the run
        return self.node_pid(index) or 0

    def stop(self) -> None:
        """Remove the containers and their network; safe to call twice."""
        if self._serving_endpoint is not None:
            unregister_control(self._serving_endpoint)
            self._serving_endpoint = None
        containers.untrack(self)
        for node in range(1, len(self._containers) + 1):  # removal is not a death
            unwatch_container(self.name_of(node))
        for name in self._support_names:
            unwatch_container(name)
        self._support_names = []
        started, self._containers = self._containers, []
        support, self._support = self._support, []
        network, self._network = self._network, None
        self.forget()
        for container in [*started, *support]:
            with contextlib.suppress(Exception):  # never created, or gone already
                container.stop()  # docker rm -f, volumes included
        if network is not None:
            with contextlib.suppress(Exception):  # the labels let the next session remove it
                network.remove()

    def forget(self) -> None:
        """Drop what the subclass keeps about running nodes (its endpoint)."""
