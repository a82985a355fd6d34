"""What every broker's container mode shares: the engine probe, images, labels, cleanup.

Broker packages start their containers with testcontainers' generic ``DockerContainer``
(``brokers/kafka/container.py``); this module holds what is not broker-specific:

- :func:`engine_status`: does a Docker engine answer? A plain ``GET /_ping`` on the
  engine's socket, standard library only, so the report header can say it without
  importing the Docker SDK.
- :func:`resolve_image`: the image a broker runs, which must already be on the engine
  (nothing is pulled: the machines this project runs on reach no image registry); a
  missing one is an error naming the image and how to provide it.
- :func:`run_labels` and :func:`remove_orphans`: every container and network carries the
  run id and the pytest process id, so what a killed session left behind is removed by
  the next container-mode session (or ``brokerperf cleanup --local``); Ryuk, testcontainers'
  reaper, runs only where its image is on the engine.
- :func:`track` / an ``atexit`` hook: containers still running when pytest exits are
  removed, Ctrl-C included.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from pytest_brokerperf.core.errors import BrokerUnavailable, ProvisionError

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "LABEL_KIND",
    "LABEL_PID",
    "LABEL_RUN_ID",
    "EngineStatus",
    "ImageInfo",
    "docker_client",
    "engine_status",
    "image_on_engine",
    "remove_orphans",
    "remove_run",
    "require_engine",
    "resolve_image",
    "run_labels",
    "track",
    "untrack",
]

DEFAULT_SOCKET = "/var/run/docker.sock"
LABEL_RUN_ID = "org.brokerperf.run-id"
LABEL_PID = "org.brokerperf.pid"
LABEL_HOST = "org.brokerperf.host"
LABEL_KIND = "org.brokerperf.kind"

ENGINE_ADVICE = (
    "start one (bash ci/docker.sh installs docker.io and starts dockerd as root), or use "
    "--brokerperf-provision=process (local processes, no Docker needed)")


@dataclass(frozen=True)
class EngineStatus:
    """Whether a Docker engine answers, where, and why not."""

    answers: bool
    address: str  # unix:///var/run/docker.sock or DOCKER_HOST
    detail: str  # "API ping OK" or the error


def engine_address(env: dict[str, str] | None = None) -> str:
    """``DOCKER_HOST``, else the default socket (what the Docker SDK uses too)."""
    env = dict(os.environ) if env is None else env
    return env.get("DOCKER_HOST", "").strip() or f"unix://{DEFAULT_SOCKET}"


def _engine_get(path: str, timeout_s: float, address: str) -> str:
    """The status line of ``GET path`` on the engine's API (unix:// or tcp://); OSError
    when nothing answers, ValueError for an address scheme that is not probed."""
    parts = urlsplit(address)
    if parts.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            sock.connect(parts.path)
        except OSError:
            sock.close()
            raise
    elif parts.scheme in ("tcp", "http"):
        sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 2375),
                                        timeout=timeout_s)
    else:
        raise ValueError(f"scheme {parts.scheme!r} is not probed")
    with sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        head = sock.recv(256).decode("latin-1", "replace")
    return head.splitlines()[0] if head else "(no answer)"


def engine_status(timeout_s: float = 1.0, address: str | None = None) -> EngineStatus:
    """``GET /_ping`` on the engine's socket (unix:// or tcp://; TLS is not probed)."""
    address = address or engine_address()
    try:
        status_line = _engine_get("/_ping", timeout_s, address)
    except ValueError as exc:
        return EngineStatus(False, address, str(exc))
    except OSError as exc:
        return EngineStatus(False, address, f"{type(exc).__name__}: {exc}")
    if " 200 " in status_line + " ":
        return EngineStatus(True, address, "API ping OK")
    return EngineStatus(False, address, f"ping answered {status_line!r}")


def image_on_engine(ref: str, timeout_s: float = 2.0, address: str | None = None) -> bool:
    """Whether the engine has image ``ref`` (``GET /images/REF/json``; standard library
    only, so deciding ``--brokerperf-provision=auto`` imports no Docker SDK)."""
    from urllib.parse import quote

    try:
        line = _engine_get(f"/images/{quote(ref, safe='')}/json", timeout_s,
                           address or engine_address())
    except (OSError, ValueError):
        return False
    return " 200 " in line + " "


def require_engine() -> EngineStatus:
    """The engine's status, or BrokerUnavailable (the test skips) naming why."""
    status = engine_status()
    if not status.answers:
        raise BrokerUnavailable(
            f"--brokerperf-provision=container needs a Docker engine, and none answers at "
            f"{status.address} ({status.detail}); {ENGINE_ADVICE}")
    return status


def docker_client() -> DockerClient:
    """The Docker SDK's client (testcontainers depends on it)."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - testcontainers brings it
        raise BrokerUnavailable(
            "container mode needs the testcontainers package: pip install "
            "'pytest-brokerperf[containers]'") from exc
    return docker.from_env()


@dataclass(frozen=True)
class ImageInfo:
    """The image a broker container runs, as found on the engine."""

    ref: str
    id: str
    repo_digests: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    how_chosen: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "id": self.id, "repo_digests": list(self.repo_digests),
                "content_hash": self.labels.get("org.brokerperf.content-hash"),
                "how_chosen": self.how_chosen}


def resolve_image(client: DockerClient, kind: str, requested: str | None,
                  defaults: tuple[str, ...]) -> ImageInfo:
    """The first of ``requested`` (``--brokerperf-image``) or ``defaults`` on the engine.

    Nothing is pulled; a missing image raises ProvisionError naming what was looked
    for and the three ways to provide one.
    """
    from docker.errors import ImageNotFound

    candidates = (requested,) if requested else defaults
    for ref in candidates:
        try:
            image = client.images.get(ref)
        except ImageNotFound:
            continue
        attrs = image.attrs
        return ImageInfo(
            ref=ref, id=str(image.id), repo_digests=tuple(attrs.get("RepoDigests") or ()),
            labels=dict((attrs.get("Config") or {}).get("Labels") or {}),
            how_chosen=(f"--brokerperf-image={kind}={ref}" if requested
                        else "the first default on the engine: " + ", ".join(defaults)))
    looked = (f"{requested} (from --brokerperf-image)" if requested
              else " or ".join(defaults))
    raise ProvisionError(
        f"no {kind} image {looked} on the Docker engine, and images are never pulled; "
        f"provide one: `bash ci/docker.sh` builds brokerperf/{kind} locally, `docker load -i "
        f"FILE.tar` loads a saved one, or pass --brokerperf-image={kind}=REF naming an image "
        "the engine has (`docker images`)")


def run_labels(kind: str, run_id: str) -> dict[str, str]:
    """The labels every container and network of this session carries."""
    return {LABEL_RUN_ID: run_id, LABEL_PID: str(os.getpid()),
            LABEL_HOST: socket.gethostname(), LABEL_KIND: kind}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(client: DockerClient, *, dry_run: bool = False) -> list[str]:
    """Remove the containers and networks of sessions on this host whose pytest is gone
    (a SIGKILLed session cannot clean up after itself); their names. Found by label
    (run id, pytest pid, host), never by name; ``dry_run`` only lists them."""
    removed: list[str] = []
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL_PID}):
        labels = container.labels or {}
        try:
            pid = int(labels.get(LABEL_PID, ""))
        except ValueError:
            continue
        if labels.get(LABEL_HOST) != host or _pid_alive(pid):
            continue
        if not dry_run:
            container.remove(force=True, v=True)
        removed.append(container.name)
    for network in client.networks.list(filters={"label": LABEL_PID}):
        labels = network.attrs.get("Labels") or {}
        try:
            pid = int(labels.get(LABEL_PID, ""))
        except ValueError:
            continue
        if labels.get(LABEL_HOST) == host and not _pid_alive(pid):
            if not dry_run:
                network.remove()
            removed.append(network.name)
    return removed


def remove_run(client: DockerClient, run_id: str | None = None) -> list[str]:
    """Remove every pytest-brokerperf container and network (of ``run_id`` only, if given)."""
    selector = f"{LABEL_RUN_ID}={run_id}" if run_id else LABEL_RUN_ID
    removed: list[str] = []
    for container in client.containers.list(all=True, filters={"label": selector}):
        container.remove(force=True, v=True)
        removed.append(container.name)
    for network in client.networks.list(filters={"label": selector}):
        network.remove()
        removed.append(network.name)
    return removed


class _Stoppable(Protocol):
    def stop(self) -> None: ...


_live: list[_Stoppable] = []
_live_lock = threading.Lock()


def track(cluster: _Stoppable) -> None:
    """Stop ``cluster`` at interpreter exit if nobody stopped it before."""
    with _live_lock:
        _live.append(cluster)


def untrack(cluster: _Stoppable) -> None:
    with _live_lock:
        if cluster in _live:
            _live.remove(cluster)


@atexit.register
def _stop_tracked() -> None:
    with _live_lock:
        pending = list(_live)
    for cluster in pending:
        with contextlib.suppress(Exception):  # best effort at exit; the labels remain
            cluster.stop()
