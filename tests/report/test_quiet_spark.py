"""``brokerperf report`` says what is missing before it starts anything, and Spark's own
log never mixes into its progress lines (errors only, into a log file removed after a
run that went well)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

REPO = Path(__file__).resolve().parents[2]


def _report(args: list[str], tmp: Path, pythonpath: list[Path],
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), str(REPO)]), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest_brokerperf.plugin.cli", "report", *args],
                          env=env, cwd=tmp, capture_output=True, text=True, timeout=600,
                          check=False)


def _results(tmp: Path) -> Path:
    e2e = np.arange(1, 3001, dtype=np.int64)
    write_jsonl(tmp / "res" / "results.jsonl",
                [synthetic_record(SyntheticRun(), {"e2e_response": e2e})])
    return tmp / "res"


def test_a_missing_pyspark_is_said_first_and_nothing_starts(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "pyspark").mkdir(parents=True)
    (fake / "pyspark" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'pyspark'\")\n")
    run = _report([str(_results(tmp_path)), "--markdown", "-"], tmp_path, [fake])
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["brokerperf report: No module named 'pyspark'; install the report "
                     "extra: pip install 'pytest-brokerperf[report]'"], lines
    assert "starting Spark" not in run.stderr


def _quiet_and_right(run: subprocess.CompletedProcess[str], tmp: Path) -> None:
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    # only the report's own progress lines, each whole (nothing of Spark's between)
    assert lines and all(line.startswith("brokerperf report: ") for line in lines), lines
    assert any(line.startswith("brokerperf report: starting Spark ... done in")
               for line in lines)
    assert "| kafka | tailread |" in run.stdout
    # its log removed after success, and the errors-only log4j file as the process exits
    assert not list(tmp.glob("brokerperf-*")), list(tmp.glob("brokerperf-*"))


def test_spark_logs_nothing_into_the_progress_and_leaves_no_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also with the class-data sharing archive: without one (a fresh directory), the
    report writes it as its JVM exits, and says nothing of it. (A damaged archive is
    ignored without a word: tests/integration/test_kafka_process.py, on a cheaper JVM.)"""
    pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
    from pytest_brokerperf.report.spark import class_data_sharing

    env = {"BROKERPERF_CACHE_DIR": str(tmp_path / "cache"), "BROKERPERF_CDS": "1",
           "BROKERPERF_CDS_DIR": str(tmp_path / "cache" / "cds")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cds = class_data_sharing(write=True)  # the same key as the report's own JVM
    assert cds is not None and cds.writing is not None
    res = _results(tmp_path)
    _quiet_and_right(_report([str(res), "--markdown", "-"], tmp_path, [], env), tmp_path)
    assert cds.archive.stat().st_size > 1_000_000  # the classes Spark's start loaded
    assert [p.name for p in cds.archive.parent.iterdir()] == [cds.archive.name]


def test_a_small_input_gets_the_quick_jit_a_large_one_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver JVM compiles with C1 alone for inputs up to QUICK_JIT_MAX_BYTES (a short
    job's time went to C2's compiler threads); the environment forces either way, and a
    value that is neither is refused naming it."""
    from pytest_brokerperf.report import spark
    from pytest_brokerperf.report.model import ReportInputError

    monkeypatch.delenv(spark.QUICK_JIT_ENV, raising=False)
    res = _results(tmp_path)
    assert spark.quick_jit([res]) is True
    monkeypatch.setattr(spark, "QUICK_JIT_MAX_BYTES", (res / "results.jsonl").stat().st_size - 1)
    assert spark.quick_jit([res]) is False
    monkeypatch.setenv(spark.QUICK_JIT_ENV, "1")
    assert spark.quick_jit([res]) is True
    monkeypatch.setattr(spark, "QUICK_JIT_MAX_BYTES", 1 << 30)
    monkeypatch.setenv(spark.QUICK_JIT_ENV, "off")
    assert spark.quick_jit([res]) is False
    monkeypatch.setenv(spark.QUICK_JIT_ENV, "maybe")
    with pytest.raises(ReportInputError, match="BROKERPERF_SPARK_QUICK_JIT='maybe'"):
        spark.quick_jit([res])
    monkeypatch.delenv(spark.QUICK_JIT_ENV)
    assert spark.quick_jit([tmp_path / "missing"]) is True  # the job names what is missing

    quick = spark.driver_java_options(None, verbose=True, quick=True)
    assert quick == ["-XX:TieredStopAtLevel=1"]
    assert spark.driver_java_options(None, verbose=True, quick=False) == []
    quiet = spark.driver_java_options(None, verbose=False, quick=False)
    assert len(quiet) == 1 and quiet[0].startswith("-Dlog4j2.configurationFile=file:")


def test_a_jvm_someone_else_started_is_used_and_left_running(tmp_path: Path) -> None:
    """Under ``PYSPARK_GATEWAY_PORT`` (spark-submit's way of starting a Python driver) the
    report runs in that JVM and leaves it running, also where it would otherwise write
    the class-data archive as its own JVM exits (a fresh archive directory here): the
    next report in the same JVM works. Relative paths are the report's, not the JVM's."""
    pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
    from tests.support.spark_jvm import shared_spark_jvm

    _results(tmp_path)
    env = {"BROKERPERF_CDS": "1", "BROKERPERF_CDS_DIR": str(tmp_path / "cds")}
    with shared_spark_jvm() as (gateway, jvm):
        for _ in range(2):
            # a path relative to the report's directory, not to the JVM's
            run = _report(["res", "--markdown", "-"], tmp_path, [], {**env, **gateway})
            assert run.returncode == 0, run.stderr
            assert "| kafka | tailread |" in run.stdout
            assert jvm.poll() is None, "the report ended a JVM it did not start"
    assert not (tmp_path / "cds").exists() or not list((tmp_path / "cds").iterdir())
