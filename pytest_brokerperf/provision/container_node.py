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

from pytest_brokerperf.errors import ProvisionError
from pytest_brokerperf.provision import containers
from pytest_brokerperf.provision.cpus import default_broker_cpus
from pytest_brokerperf.provision.ports import LOOPBACK

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
                 timeout_s: float) -> None:
    """Until the container's log shows ``marker``; an exit or the deadline is an error."""
    wrapped = container.get_wrapped_container()
    while True:
        wrapped.reload()
        if wrapped.status in ("exited", "dead"):
            code = (wrapped.attrs.get("State") or {}).get("ExitCode")
            raise ProvisionError(f"the container exited with code {code} during start-up")
        if marker in wrapped.logs(tail=200):
            return
        if time.monotonic() > deadline:
            raise ProvisionError(f"no {marker.decode()!r} line within {timeout_s:.0f} s")
        time.sleep(0.3)


class ContainerNode:
    """One broker node in a container on its own network; subclasses plan and wait.

    ``cpus``: as process mode (``None`` = the last CPU when there are several, ``set()``
    = no pinning); ``run_id`` labels the container and network for cleanup.
    """

    kind: ClassVar[str]

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 cpus: set[int] | None = None, start_timeout: float = 120.0) -> None:
        self.workdir = workdir
        self.run_id = run_id
        self.requested_image = image
        self.cpus = cpus
        self.start_timeout = start_timeout
        self._container: DockerContainer | None = None
        self._network: Network | None = None

    # -- what a broker package provides ---------------------------------------------------

    def image_candidates(self) -> tuple[str, ...]:
        """Images to try in order when ``--brokerperf-image`` names none."""
        raise NotImplementedError

    def plan(self) -> ContainerPlan:
        """The node's container: alias, environment, ports, mounts, memory."""
        raise NotImplementedError

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        """Return once clients on the host can use the node; raise ProvisionError if not."""
        raise NotImplementedError

    # -- the shared lifecycle -------------------------------------------------------------

    def broker_cpus(self) -> set[int] | None:
        if self.cpus is None:
            return default_broker_cpus()
        return set(self.cpus) or None

    @property
    def container_name(self) -> str:
        return f"brokerperf-{self.run_id}-{self.kind}-1-{os.getpid()}"

    def launch(self) -> tuple[ContainerPlan, dict[str, Any]]:
        """Start the container and wait until it is ready; the plan and the manifest's
        common facts (container, network, image, engine, CPU set, start-up time)."""
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
        plan = self.plan()
        cpus = self.broker_cpus()
        name = self.container_name
        network = Network(docker_network_kw={"labels": labels})
        network.name = f"brokerperf-{self.run_id}-{os.getpid()}"
        network.create()
        self._network = network
        kwargs: dict[str, Any] = {"labels": labels}
        if plan.memory_mb:
            kwargs["mem_limit"] = f"{plan.memory_mb}m"
        if cpus:
            kwargs["cpuset_cpus"] = ",".join(map(str, sorted(cpus)))
        if plan.hostname:
            kwargs["hostname"] = plan.hostname
        container = (DockerContainer(image.ref).with_name(name).with_envs(**plan.env)
                     .with_network(network).with_network_aliases(plan.alias)
                     .with_kwargs(**kwargs))
        if plan.command is not None:
            container = container.with_command(plan.command)
        for host_path, (path, mode) in plan.volumes.items():
            container = container.with_volume_mapping(host_path, path, mode)
        for port, host_port in plan.ports.items():
            # published on loopback only
            container.ports[f"{port}/tcp"] = (LOOPBACK, host_port)  # type: ignore[assignment]
        self._container = container
        containers.track(self)
        launched = time.time()
        try:
            container.start()
            self.wait_ready(container, plan, began + self.start_timeout)
        except BaseException as exc:
            text = failure_text(container, f"{self.kind} container {name} ({image.ref}) did "
                                f"not become ready: {exc}")
            self.stop()
            if isinstance(exc, ProvisionError | TimeoutError | OSError) or (
                    type(exc).__module__.startswith(("docker", "pika", "confluent_kafka"))):
                raise ProvisionError(text) from exc
            raise
        wrapped = container.get_wrapped_container()
        wrapped.reload()
        state = wrapped.attrs.get("State") or {}
        host_config = wrapped.attrs.get("HostConfig") or {}
        available = set(os.sched_getaffinity(0))
        info: dict[str, Any] = {
            "pids": [int(state["Pid"])] if state.get("Pid") else [],
            "container_ids": [wrapped.id],
            "container_names": [name],
            "network": network.name,
            "image": image.as_dict(),
            "image_labels": dict(image.labels),
            "engine": {"address": engine.address, "detail": engine.detail},
            "reaper": reaper,
            "orphans_removed": removed,
            "labels": labels,
            "memory_limit": kwargs.get("mem_limit"),
            "cpu_affinity": {
                "broker_cpus": sorted(cpus) if cpus else None,
                "generator_cpus": sorted(available - cpus) if cpus else sorted(available),
                "nodes": {"1": sorted(cpus) if cpus else None},
                "cpuset_cpus": host_config.get("CpusetCpus") or None,
            },
            "started_at": launched,
            "ready_at": time.time(),
            "startup_s": round(time.monotonic() - began, 3),
            "workdir": str(self.workdir),
        }
        return plan, info

    def host_pids(self, command: str) -> list[int]:
        """Host pids of the container's processes named ``command`` (e.g. the node's
        runtime under a launcher script), for /proc sampling; [] when none or stopped."""
        if self._container is None:
            return []
        try:
            top = self._container.get_wrapped_container().top(ps_args="-o pid,comm")
        except Exception:  # the engine's answer is a nicety here, not a requirement
            return []
        titles = [str(t).upper() for t in top.get("Titles") or []]
        if "PID" not in titles or "COMMAND" not in titles:
            return []
        pid_at, comm_at = titles.index("PID"), titles.index("COMMAND")
        return [int(row[pid_at]) for row in top.get("Processes") or []
                if str(row[comm_at]) == command]

    def stop(self) -> None:
        """Remove the container and its network; safe to call twice."""
        containers.untrack(self)
        container, self._container = self._container, None
        network, self._network = self._network, None
        self.forget()
        if container is not None:
            with contextlib.suppress(Exception):  # never created, or gone already
                container.stop()  # docker rm -f, volumes included
        if network is not None:
            with contextlib.suppress(Exception):  # the labels let the next session remove it
                network.remove()

    def forget(self) -> None:
        """Drop what the subclass keeps about a running node (its endpoint)."""
