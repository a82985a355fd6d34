"""Which brokers and provisioning modes a fault can run on, checked before any broker
starts (a usage error), not found out once one has been warmed up.

A power cut needs nodes whose durable directories are on the power-cut filesystem:
local processes of a broker whose ``BrokerType.power_cut_modes`` lists the mode (Kafka,
RabbitMQ and the Pulsar standalone; docs/reference/faults.md, "Limits"). A broker whose
one process holds every node (the Pulsar standalone) has node 1 only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_brokerperf.config.fault_spec import FaultSpec

__all__ = ["power_cut_problem"]


def power_cut_problem(spec: FaultSpec, kind: str, mode: str) -> str | None:
    """Why ``spec`` cannot strike a ``kind`` broker provisioned in ``mode``, with the
    fix; None when it can (or ``spec`` is no power cut)."""
    if spec.action != "power-cut":
        return None
    from pytest_brokerperf import brokers

    btype = brokers.get(kind)
    offered = btype.power_cut_modes
    if mode in offered:
        index = spec.node_index
        if btype.power_cut_one_process and index is not None and index > 1:
            same = spec.text().rsplit("/", 1)[0]
            return (f"fault {spec.text()}: there is no {kind} node {index} to cut: "
                    f"{btype.power_cut_one_process}. Fix: {same}/node-1 or {same}/all "
                    "(the same cut)")
        return None
    able = sorted(k for k in brokers.names() if brokers.get(k).power_cut_modes)
    if not offered:
        return (f"fault {spec.text()}: {kind} nodes cannot lose unsynced writes here (the "
                f"power cut is offered for {', '.join(able)} in process mode). Fix: "
                f"--broker={' or '.join(able)} --brokerperf-provision=process, or "
                f"kill-broker@{spec.at_s:g}s for {kind}")
    return (f"fault {spec.text()}: {kind} in {mode} mode cannot lose unsynced writes (its "
            f"nodes are not on the power-cut filesystem; offered in "
            f"{', '.join(offered)} mode). Fix: --brokerperf-provision="
            f"{offered[0]}, or kill-broker@{spec.at_s:g}s")
