"""One Spark driver JVM shared by many ``brokerperf report`` runs in subprocesses.

pyspark connects to a running JVM instead of starting one when ``PYSPARK_GATEWAY_PORT``
and ``PYSPARK_GATEWAY_SECRET`` are set (spark-submit starts Python drivers that way). A
report test that runs the command several times pays the JVM's start and its JIT warm-up
once: each run still creates, uses and stops a SparkContext of its own in that JVM.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

__all__ = ["shared_spark_jvm"]


@contextlib.contextmanager
def shared_spark_jvm() -> Iterator[tuple[dict[str, str], subprocess.Popen[bytes]]]:
    """Start a driver JVM (quiet, quick JIT, as a report's own); yield the environment
    that points a subprocess's pyspark at it, and the JVM's process; end it after."""
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    from pytest_brokerperf.report.spark import driver_java_options

    opts = " ".join(driver_java_options(None, verbose=False, quick=True))
    gateway = launch_gateway(SparkConf().set("spark.driver.extraJavaOptions", opts))
    proc: subprocess.Popen[bytes] = gateway.proc
    params = gateway.java_parameters
    env = {"PYSPARK_GATEWAY_PORT": str(params.port),
           "PYSPARK_GATEWAY_SECRET": str(params.auth_token)}
    try:
        yield env, proc
    finally:
        with contextlib.suppress(Exception):
            gateway.shutdown()
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # the JVM exits when its stdin closes
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
