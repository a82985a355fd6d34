"""``--brokerperf-executor=spark``: the run's generators as one Spark barrier stage.

:class:`SparkGenerators` is the engine's ``WorkerLauncher`` for a cluster. Per load
session it opens a listener on a random port with a fresh 32-byte secret, starts one
barrier stage of N tasks (``sc.parallelize(range(N), N).barrier().mapPartitions``: all N
start together or none does) in a background thread of this process, the driver, and
waits for each task to connect back. The listener's handshake is
``multiprocessing.connection``'s HMAC challenge and response with that secret, both
ways, before anything is unpickled: a connection without it is refused and logged.
Each task then runs :func:`pytest_brokerperf.engine.remote.run_task`, the worker loop a
local worker process runs, until the coordinator closes it; the coordinator in this
process drives it exactly as it drives a local process (``engine/workers.py``).

The SparkSession is started once per pytest session (quietly, as the report starts
its own: ``report/spark.py``), with this package shipped to the executors with
``addPyFile``, and stopped when the session ends.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, Listener
from typing import Any

from pytest_brokerperf.core.errors import DriverError
from pytest_brokerperf.engine.executor import ExecutorReport, TaskInfo
from pytest_brokerperf.engine.remote import TaskHello, TaskVersions
from pytest_brokerperf.engine.worker import WorkerAssignment
from pytest_brokerperf.engine.workers import RemoteWorker, WorkerHandle

__all__ = ["SparkGenerators", "task_function"]

log = logging.getLogger("pytest_brokerperf.spark")

#: how long the N tasks have to start and connect back (executors may need to start)
CONNECT_TIMEOUT_S = 120.0
#: how long a finished session's stage has to end once its tasks were told to close
STOP_TIMEOUT_S = 10.0


def task_function(address: tuple[str, int], secret: bytes
                  ) -> Callable[[Iterator[int]], Iterator[int]]:
    """What each barrier task runs: wait for the whole stage, connect back, work."""

    def run(_: Iterator[int]) -> Iterator[int]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        ctx.barrier()  # every task of the stage is running
        part = ctx.partitionId()
        executor = os.environ.get("SPARK_EXECUTOR_ID") or ""
        try:
            executor = executor or ctx.getTaskInfos()[part].address
        except Exception:  # an older pyspark without task infos
            executor = executor or "?"
        from pytest_brokerperf.engine.remote import run_task

        yield run_task(address, secret, part, executor)

    return run


class _Stage:
    """One load session's barrier stage: its listener, job thread and connections."""

    def __init__(self, spark: Any, n: int, advertise: str) -> None:
        self.n = n
        self.secret = secrets.token_bytes(32)
        self.listener = Listener(("0.0.0.0", 0), authkey=self.secret)
        self.address = (advertise, int(self.listener.address[1]))
        self.group = f"brokerperf-generators-{secrets.token_hex(4)}"
        self.error: str | None = None
        self.done = threading.Event()
        self.refused = 0
        self._conns: queue.Queue[Connection] = queue.Queue()
        self._sc = spark.sparkContext
        self._job = threading.Thread(target=self._run_job, name=self.group, daemon=True)
        self._accept = threading.Thread(target=self._accept_loop,
                                        name=f"{self.group}-accept", daemon=True)

    def job_error(self) -> str | None:
        """Why the stage ended (None while it runs)."""
        if not self.done.is_set():
            return None
        return self.error or "the Spark generator stage ended"

    def start(self) -> None:
        self._accept.start()
        self._job.start()

    def _run_job(self) -> None:
        sc = self._sc
        try:
            sc.setJobGroup(self.group, "brokerperf load generators", interruptOnCancel=True)
            rdd = sc.parallelize(range(self.n), self.n)
            rdd.barrier().mapPartitions(task_function(self.address, self.secret)).collect()
        except BaseException as exc:  # the stage failed: a task, an executor, a host
            text = str(exc).strip().splitlines()
            self.error = " ".join(line.strip() for line in text[:3])[:600] or repr(exc)
        finally:
            self.done.set()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except AuthenticationError as exc:
                self.refused += 1
                log.warning("brokerperf spark executor: refused a connection without the "
                            "run's secret (%s)", exc)
                print(f"brokerperf: refused a generator connection without the run's "
                      f"secret ({exc})", file=sys.stderr)
                continue
            except (OSError, EOFError):
                return  # the listener was closed
            self._conns.put(conn)

    def accept(self, timeout_s: float) -> Connection:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self._conns.get(timeout=0.2)
            except queue.Empty:
                pass
            if self.done.is_set():
                raise DriverError(
                    "the Spark generator stage ended before its tasks connected back: "
                    f"{self.error or 'no error reported'}")
            if time.monotonic() > deadline:
                raise DriverError(
                    f"the Spark generator stage's {self.n} tasks did not all connect back "
                    f"to {self.address[0]}:{self.address[1]} within {timeout_s:.0f} s (a "
                    "barrier stage needs N free task slots at once; can the executors "
                    "reach this host?)")

    def close_listener(self) -> None:
        """Stop accepting: later connections are refused by the kernel. Closing the
        socket alone does not wake a thread blocked in accept() (which would take one
        more connection); shutting it down first does."""
        import contextlib

        sock = getattr(getattr(self.listener, "_listener", None), "_socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.listener.close()
        if self._accept.is_alive():
            self._accept.join(5)

    def stop(self) -> None:
        self.close_listener()
        self.done.wait(STOP_TIMEOUT_S)
        if not self.done.is_set():
            self._sc.cancelJobGroup(self.group)
            self.done.wait(STOP_TIMEOUT_S)


class SparkGenerators:
    """The engine's ``WorkerLauncher`` on a Spark master (one instance per pytest
    session; one barrier stage per load session)."""

    kind = "spark"

    def __init__(self, master: str | None, generators: int, *, verbose: bool = False,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.master = master or f"local[{generators}]"
        self.generators = generators
        self.verbose = verbose
        self.connect_timeout_s = connect_timeout_s
        self._quiet: Any = None
        self._spark: Any = None
        self._stage: _Stage | None = None
        self._tasks: list[TaskInfo] = []
        self.app_id: str | None = None

    # -- the SparkSession, once per pytest session ------------------------------------
    def session(self) -> Any:
        if self._spark is None:
            from pytest_brokerperf.report.spark import QuietSpark

            # executors run this Python (the same numpy, clients and package version)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            self._quiet = QuietSpark(self.master, verbose=self.verbose,
                                     app="brokerperf-generators", ship=True)
            self._spark = self._quiet.start()
            self.app_id = self._spark.sparkContext.applicationId
        return self._spark

    def shutdown(self) -> None:
        """Stop the SparkSession (the pytest session ends)."""
        if self._stage is not None:
            self._stage.stop()
            self._stage = None
        if self._quiet is not None:
            self._quiet.stop()
            self._quiet = None
            self._spark = None

    # -- WorkerLauncher --------------------------------------------------------------
    def launch(self, assignments: list[WorkerAssignment]) -> list[WorkerHandle]:
        spark = self.session()
        n = len(assignments)
        advertise = (spark.sparkContext.getConf().get("spark.driver.host")
                     or socket.gethostname())
        self._await_slots(spark, n)
        stage = self._stage = _Stage(spark, n, advertise)
        stage.start()
        by_task = {a.worker_id: a for a in assignments}
        handles: list[WorkerHandle] = []
        self._tasks = []
        try:
            while len(handles) < n:
                conn = stage.accept(self.connect_timeout_s)
                hello = conn.recv()
                if not isinstance(hello, TaskHello) or hello.task not in by_task:
                    conn.close()
                    raise DriverError(f"a generator task said {hello!r}, not its index")
                conn.send(by_task[hello.task])
                versions = conn.recv()
                if not isinstance(versions, TaskVersions):
                    versions = TaskVersions(client=None, client_version=None)
                info = TaskInfo(task=hello.task, host=hello.host,
                                executor_id=hello.executor_id, pid=hello.pid,
                                python=hello.python, identity=hello.identity,
                                client=versions.client,
                                client_version=versions.client_version)
                self._tasks.append(info)
                handles.append(RemoteWorker(conn, info, stage.job_error))
        except BaseException:
            for h in handles:
                h.close()
            self.stop()
            raise
        stage.close_listener()  # every task is in: nobody else may connect
        handles.sort(key=lambda h: h.id)
        self._tasks.sort(key=lambda t: t.task)
        return handles

    def _await_slots(self, spark: Any, n: int) -> None:
        """Wait (bounded) until the application's executors offer ``n`` task slots at
        once: a barrier stage submitted before is refused by Spark's check and retried
        only every 15 s (``spark.scheduler.barrier.maxConcurrentTasksCheck.interval``)."""
        deadline = time.monotonic() + self.connect_timeout_s
        slots = -1
        while True:
            try:
                jsc = spark.sparkContext._jsc.sc()
                slots = int(jsc.maxNumConcurrentTasks(
                    jsc.resourceProfileManager().defaultResourceProfile()))
            except Exception:  # another Spark's internals: let the stage's check decide
                return
            if slots >= n:
                return
            if time.monotonic() > deadline:
                raise DriverError(
                    f"Spark master {self.master} offers {slots} task slots after "
                    f"{self.connect_timeout_s:.0f} s; the generators' barrier stage needs "
                    f"{n} at once: fewer --brokerperf-generators, or more workers")
            time.sleep(0.2)

    def stop(self) -> None:
        """The session's workers are closed: wait for its stage to end (cancel it if it
        does not within STOP_TIMEOUT_S)."""
        stage, self._stage = self._stage, None
        if stage is not None:
            stage.stop()

    def report(self) -> ExecutorReport:
        return ExecutorReport(kind="spark", master=self.master, app_id=self.app_id,
                              tasks=list(self._tasks))
