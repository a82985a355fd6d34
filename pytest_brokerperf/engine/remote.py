"""A generator task's side of the cluster executor: connect back, say where it runs, run
the worker loop.

A cluster task (one of a Spark barrier stage's, ``plugin/spark_executor.py``) calls
:func:`run_task` with the coordinator's address and the run's secret. The channel is a
``multiprocessing.connection`` connection, authenticated by HMAC challenge and response
with that secret both ways before anything is unpickled; the coordinator refuses any
other. The task then says who and where it is (:class:`TaskHello`), receives its
:class:`~pytest_brokerperf.engine.worker.WorkerAssignment` and runs
:func:`~pytest_brokerperf.engine.worker.worker_main`, the loop a local worker process
runs, until the coordinator closes it.
"""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import dataclass
from multiprocessing.connection import Client
from typing import Any

from pytest_brokerperf.engine.clock import ClockIdentity
from pytest_brokerperf.engine.executor import TaskHello
from pytest_brokerperf.engine.worker import WorkerAssignment, worker_main

__all__ = ["TaskHello", "TaskVersions", "run_task"]


@dataclass(frozen=True)
class TaskVersions:
    """The task's broker client, read once its driver is unpickled (second message)."""

    client: str | None
    client_version: str | None


def run_task(address: tuple[str, int], authkey: bytes, task: int,
             executor_id: str = "?") -> int:
    """Connect to the coordinator, run the worker loop; the task index back."""
    conn = Client(address, authkey=authkey)
    try:
        conn.send(TaskHello(task=task, host=socket.gethostname(), executor_id=executor_id,
                            pid=os.getpid(), python=platform.python_version(),
                            identity=ClockIdentity.here()))
        assignment: WorkerAssignment = conn.recv()
        desc: dict[str, Any] = {}
        try:
            desc = assignment.driver.describe()
        except Exception:  # versions are a nicety, never a task failure
            desc = {}
        conn.send(TaskVersions(client=desc.get("client"),
                               client_version=desc.get("client_version")))
        worker_main(conn, assignment)
    finally:
        conn.close()
    return task
