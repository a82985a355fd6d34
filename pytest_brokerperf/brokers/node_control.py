"""What a run may do to broker nodes this session started, and where to find it.

A provisioner that owns its nodes (local processes) registers itself for its endpoint's
address when it starts and unregisters when it stops; a fault run asks
:func:`control_for` and refuses when nothing is registered (a remote cluster is never
disrupted). Nodes are numbered from 1 in the order the provisioner started them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = ["NodeControl", "control_for", "register_control", "unregister_control"]


class NodeControl(Protocol):
    """Kill, pause, stop and start one node of a running local cluster (1-based index)."""

    def node_count(self) -> int:
        """How many nodes the cluster has."""
        ...

    def node_pid(self, index: int) -> int | None:
        """The node's current process id (None when it is not running)."""
        ...

    def kill_node(self, index: int) -> int:
        """SIGKILL the node's process group (its death does not fail the run); its pid."""
        ...

    def pause_node(self, index: int) -> int:
        """SIGSTOP the node's process group; its pid."""
        ...

    def resume_node(self, index: int) -> None:
        """SIGCONT the node's process group."""
        ...

    def stop_node(self, index: int, timeout: float) -> int | None:
        """Stop the node gracefully (SIGTERM, SIGKILL after ``timeout``); its exit status."""
        ...

    def start_node(self, index: int, timeout: float) -> int:
        """Start the stopped node again on its own data and ports and wait until it
        serves (ProvisionError after ``timeout``); its new pid."""
        ...


_lock = threading.Lock()
_controls: dict[str, NodeControl] = {}


def register_control(endpoint: BrokerEndpoint, control: NodeControl) -> None:
    with _lock:
        _controls[endpoint.bootstrap] = control


def unregister_control(endpoint: BrokerEndpoint) -> None:
    with _lock:
        _controls.pop(endpoint.bootstrap, None)


def control_for(endpoint: BrokerEndpoint) -> NodeControl | None:
    """The control of the cluster serving ``endpoint``; None when this session did not
    start it (remote clusters, containers) or it has stopped."""
    if endpoint.mode == "remote":
        return None
    with _lock:
        return _controls.get(endpoint.bootstrap)
