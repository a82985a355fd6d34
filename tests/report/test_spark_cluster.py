"""The report's Spark job on ``local-cluster[2,1,1024]``: executors are separate JVMs
with their own Python workers, as on a real cluster. The job must give exactly the
figures of local mode, and the executors must import the package the driver shipped
(``addPyFile``), not whatever their environment has.

Runs in a subprocess: a process holds one SparkSession, and the other report tests
share a ``local[2]`` one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.report import spark as job
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

CLUSTER_JOB = """
import json, sys
from pytest_brokerperf.report.spark import quick_jit, run_job, spark_session
spark = spark_session("local-cluster[2,1,1024]", app="brokerperf-cluster-test",
                      quick=quick_jit([sys.argv[1]]))


def executor_jit(_):
    # the JIT flag of the executor JVM this Python worker runs under
    import psutil
    p = psutil.Process()
    while p is not None and "java" not in p.name():
        p = p.parent()
    return p is not None and "-XX:TieredStopAtLevel=1" in p.cmdline()


try:
    result = run_job(spark, [sys.argv[1]])
    quick = spark.sparkContext.parallelize(range(4), 2).map(executor_jit).collect()
    where = spark.sparkContext.parallelize(range(4), 2).map(
        lambda _: __import__("pytest_brokerperf").__file__).collect()
    pids = spark.sparkContext.parallelize(range(4), 2).map(
        lambda _: __import__("os").getpid()).collect()
    cells = {str(k): {"p99": c.figures.metric("e2e_response.p99"), "records": c.records,
                      "p999": c.figures.metric("e2e_response.p99.9"),
                      "ack": c.figures.metric("ack_rate")} for k, c in result.cells.items()}
    print("RESULT " + json.dumps({"cells": cells, "where": where, "pids": pids,
                                  "quick": quick}))
finally:
    spark.stop()
"""


def _cells(result: Any) -> dict[str, dict[str, Any]]:
    return {str(k): {"p99": c.figures.metric("e2e_response.p99"), "records": c.records,
                     "p999": c.figures.metric("e2e_response.p99.9"),
                     "ack": c.figures.metric("ack_rate")} for k, c in result.cells.items()}


def test_the_job_on_separate_executor_processes_equals_local_mode(
        spark: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    recs = [synthetic_record(SyntheticRun(test_id=f"t{i}", durability_level=1 + i % 2),
                             {"e2e_response": rng.integers(100, 50_000, 3000)})
            for i in range(6)]
    write_jsonl(tmp_path / "results.jsonl", recs)
    local = _cells(job.run_job(spark, [tmp_path]))
    run = subprocess.run([sys.executable, "-c", CLUSTER_JOB, str(tmp_path)],
                         capture_output=True, text=True, timeout=600, check=False)
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None and "local-cluster" in run.stderr and "SPARK_HOME" in run.stderr:
        pytest.skip(f"local-cluster mode cannot start here: {run.stderr[-400:]}")
    assert line is not None, run.stderr[-3000:]
    got = json.loads(line.removeprefix("RESULT "))
    assert got["cells"] == local and len(local) == 2
    assert got["quick"] == [True] * 4  # a small input: the executors' JIT is C1 alone too
    # the executors' Python workers import the zip the driver shipped
    assert all(".zip" in w and "pytest_brokerperf" in w for w in got["where"]), got["where"]
    assert len(set(got["pids"])) >= 2  # two executors, two Python workers at least
