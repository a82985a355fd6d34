"""The PySpark job: read result directories, upgrade, de-duplicate, aggregate per cell.

Everything runs as native Spark SQL (no Python UDF), so executors need no copy of this
package and ``--master spark://...`` runs the same job on a cluster. Histograms are
merged from the records' sparse ``[counts index, count]`` pairs: explode, group by
(cell, view, index), sum; percentiles come from the merged counts with the same rank
rule as HdrHistogram_py (``max(int(q/100·n + 0.5), 1)``) and the fixed 3-digit layout's
closed-form bucket values, so they equal those of one histogram fed every raw sample.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.provision import cds as cds_archive
from pytest_brokerperf.brokers.provision.cds import ClassDataSharing
from pytest_brokerperf.metrics.hdr_layout import min_samples_for
from pytest_brokerperf.report.model import (
    FIGURE_STATUSES,
    PERCENTILE_NAMES,
    UNKNOWN,
    VIEWS,
    CellKey,
    CellStats,
    CurvePoint,
    Figures,
    InvalidRecord,
    LatencyStats,
    RateStats,
    ReportInputError,
    ReportResult,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "CURRENT_SCHEMA",
    "SUPPORTED_SCHEMAS",
    "LoadedRecords",
    "QuietSpark",
    "aggregate",
    "class_data_sharing",
    "driver_java_options",
    "figure_column",
    "find_result_files",
    "load_records",
    "quick_jit",
    "record_schema",
    "spark_session",
    "status_column",
    "tls_schema",
]

#: The record schema this job reads natively.
CURRENT_SCHEMA = "brokerperf.result/1"
#: Versions it can read, each upgraded to ``CURRENT_SCHEMA`` on read (see ``_upgrade``).
SUPPORTED_SCHEMAS = (CURRENT_SCHEMA,)
CELL = ("broker", "scenario", "params_key", "durability_key", "fault", "env", "nodes_key",
        "broker_version_key", "profile_key", "period_key", "provision_key", "tls_key",
        "driver_key",
        "driver_file_key", "driver_settings_key", "clients_key")
_RATES = {
    "ack_rate": "ack_rate_msg_s",
    "consume_rate": "consume_rate_msg_s",
    "publish_mib_s": "publish_mib_s",
    "consume_mib_s": "consume_mib_s",
    "max_sustainable_rate": "max_sustainable_rate",
}


# --------------------------------------------------------------------------- session

#: ``BROKERPERF_SPARK_QUICK_JIT=1|0``: force the driver's quick JIT on or off
QUICK_JIT_ENV = "BROKERPERF_SPARK_QUICK_JIT"
#: inputs up to this size get the quick JIT (:func:`quick_jit`)
QUICK_JIT_MAX_BYTES = 1 << 30
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def quick_jit(dirs: Sequence[str | Path]) -> bool:
    """Whether the driver JVM compiles with C1 alone (``-XX:TieredStopAtLevel=1``).

    A report job is short: on a few records most of its time goes to the JVM's JIT, whose
    C2 compiler threads take the cores the job needs. Measured here (2 cores): a job on 6
    records took 27-28 s with Java's default tiered JIT and 11-12 s with C1 alone; on
    20,000 records (317 MB) 50 s and 37 s. Above :data:`QUICK_JIT_MAX_BYTES` of input,
    where a long job repays C2's compilation, the default JIT stays. The figures a report
    computes do not depend on it.
    """
    forced = os.environ.get(QUICK_JIT_ENV, "").strip().lower()
    if forced in _ON:
        return True
    if forced in _OFF:
        return False
    if forced:
        raise ReportInputError(f"{QUICK_JIT_ENV}={forced!r} is neither 1 nor 0; unset it to "
                               "let the input's size decide")
    try:
        files = find_result_files(dirs)
    except ReportInputError:
        return True  # the job itself names the missing input
    return sum(f.stat().st_size for f in files) <= QUICK_JIT_MAX_BYTES


#: Spark's log4j 2 configuration when not verbose: errors only, to the console (which
#: :class:`QuietSpark` points at a log file).
_LOG4J2_ERRORS = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _quiet_log4j() -> str:
    """A log4j 2 file (errors only), written once per process and removed as it exits
    (the JVMs read it at their start); its path."""
    import atexit
    import tempfile

    path = Path(tempfile.gettempdir()) / f"brokerperf-log4j2-{os.getpid()}.properties"
    if not path.exists():
        path.write_text(_LOG4J2_ERRORS, encoding="utf-8")
        atexit.register(path.unlink, missing_ok=True)
    return str(path)


def class_data_sharing(*, write: bool) -> ClassDataSharing | None:
    """The driver JVM's class-data sharing archive (:mod:`~pytest_brokerperf.brokers.
    provision.cds`): Spark's start loads some 20,000 classes, which a small report
    spends more time on than on its data. None when off, or without pyspark's jars."""
    import shutil

    try:
        import pyspark
    except ImportError:
        return None
    home = os.environ.get("JAVA_HOME", "").strip()
    java = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if not java:
        return None
    jars = (Path(pyspark.__file__).parent / "jars").glob("*.jar")
    return cds_archive.class_data_sharing("spark-driver", java, jars, write=write,
                                          extra=(pyspark.__version__, sys.prefix))


def _quiet_log4j_option() -> str:
    return f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}"


def driver_java_options(cds: ClassDataSharing | None, *, verbose: bool,
                        quick: bool) -> list[str]:
    """A JVM's options: class-data sharing (the driver's), the quick JIT, errors-only
    logging."""
    opts = [] if cds is None else cds.flags()
    if quick:
        opts.append("-XX:TieredStopAtLevel=1")
    if not verbose:
        opts.append(_quiet_log4j_option())
    return opts


def spark_session(master: str | None = None, *, app: str = "brokerperf-report",
                  verbose: bool = True, cds: ClassDataSharing | None = None,
                  quick: bool = False) -> SparkSession:
    """A SparkSession: embedded ``local[*]`` by default, or ``master`` (spark://, yarn...).

    Quiet (no UI, no console progress bar: the caller prints its own progress line) and
    with few shuffle partitions, since cells and buckets are few. Not ``verbose``: the
    JVMs log errors only (log4j 2 from start-up on, driver and executors). ``quick``:
    the driver JVM compiles with C1 alone (:func:`quick_jit`).
    """
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.appName(app)
               .master(master or os.environ.get("BROKERPERF_SPARK_MASTER") or "local[*]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               # many small input splits: a 2-core machine keeps both cores busy to the
               # end of a pass instead of waiting on the last 128 MB split
               .config("spark.sql.files.maxPartitionBytes", str(16 * 2**20))
               .config("spark.sql.session.timeZone", "UTC")
               # records carry arrays of ~1000 buckets: small cached batches keep the
               # columnar cache's per-batch buffers far below the heap (default 10,000 rows)
               .config("spark.sql.inMemoryColumnarStorage.batchSize", "256")
               .config("spark.driver.memory",
                       os.environ.get("BROKERPERF_SPARK_DRIVER_MEMORY") or "2g"))
    local_dir = os.environ.get("BROKERPERF_SPARK_LOCAL_DIR")
    if local_dir:  # shuffle and spill files: a tmpfs spares a busy disk
        builder = builder.config("spark.local.dir", local_dir)
    if cds is None:
        cds = class_data_sharing(write=False)
    driver_opts = driver_java_options(cds, verbose=verbose, quick=quick)
    # executors in JVMs of their own (a cluster, local-cluster) run short jobs alike
    executor_opts = driver_java_options(None, verbose=verbose, quick=quick)
    if executor_opts:
        builder = builder.config("spark.executor.extraJavaOptions", " ".join(executor_opts))
    if driver_opts:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(driver_opts))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    chosen = master or os.environ.get("BROKERPERF_SPARK_MASTER") or "local[*]"
    if not chosen.startswith("local["):  # executors in other processes or machines
        ship_package(spark)
    return spark


def ship_package(spark: SparkSession) -> Path:
    """Zip this package and hand it to the executors (``addPyFile``), so any Python the
    job runs on them imports the same code as the driver; the zip's path."""
    import tempfile
    import zipfile

    root = Path(__file__).resolve().parents[1]  # pytest_brokerperf/, this module's package
    fd, name = tempfile.mkstemp(prefix="pytest_brokerperf-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                zf.write(path, str(path.relative_to(root.parent)))
    spark.sparkContext.addPyFile(name)
    import atexit

    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


class QuietSpark:
    """The report's own Spark: started quietly, stopped when the report is done.

    Not ``verbose``, the JVM (and the executors and Python workers it starts) gets a
    log file as its stderr and logs errors only, so its lines never interleave with the
    progress line or pytest's output; the file's path is printed when something fails.
    A session that was already running (a caller's) is used as is and left running; a
    JVM that was already running (``PYSPARK_GATEWAY_PORT``, as spark-submit sets it) gets
    a session of ours and is left running.
    ``quick``: the driver JVM's quick JIT (:func:`quick_jit`).
    """

    def __init__(self, master: str | None = None, *, verbose: bool = False,
                 quick: bool = False, app: str = "brokerperf-report",
                 ship: bool = False) -> None:
        self.master = master
        self.app = app
        #: ship this package to the executors whatever the master (the generators'
        #: tasks run its code; a local[N] master's Python workers import it too)
        self.ship = ship
        self.verbose = verbose
        self.quick = quick
        self.log: Path | None = None
        self._spark: SparkSession | None = None
        self._cds: ClassDataSharing | None = None

    def start(self) -> SparkSession:
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:  # a caller's session
            return spark_session(self.master, verbose=self.verbose, app=self.app)
        if SparkContext._gateway is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
            # A JVM someone else launched (spark-submit runs a Python driver this way):
            # its flags and its stderr are its own; the session is ours to stop, the
            # JVM is not ours to end.
            self._spark = spark_session(self.master, verbose=self.verbose, app=self.app)
            return self._spark
        # a JVM of our own: it may write the class-data archive later reports start from
        self._cds = (class_data_sharing(write=True) if SparkContext._gateway is None
                     else None)
        if self.verbose:
            self._spark = spark_session(self.master, verbose=True, cds=self._cds,
                                        quick=self.quick, app=self.app)
            return self._shipped(self._spark)
        import tempfile

        fd, name = tempfile.mkstemp(prefix="brokerperf-spark-", suffix=".log")
        self.log = Path(name)
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(fd, 2)  # the JVM started now inherits the log file as its stderr
        try:
            self._spark = spark_session(self.master, verbose=False, cds=self._cds,
                                        quick=self.quick, app=self.app)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(fd)
        return self._shipped(self._spark)

    def _shipped(self, spark: SparkSession) -> SparkSession:
        master = self.master or "local[*]"
        if self.ship and master.startswith("local["):  # spark_session ships the others
            ship_package(spark)
        return spark

    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the session this object started (none: nothing to do); its log file is
        removed unless ``keep_log`` (something failed and the path was printed)."""
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
            if self._cds is not None and self._cds.writing is not None:
                # the archive is written as the JVM exits; a JVM killed may have left half
                if _exit_gateway():
                    self._cds.keep()
                else:
                    self._cds.discard()
            self._cds = None
        if self.log is not None and not keep_log:
            self.log.unlink(missing_ok=True)


def _exit_gateway(timeout_s: float = 60.0) -> bool:
    """End the JVM pyspark started for this process (it exits when its stdin closes)
    and wait for it; the next session starts a new one. False if it had to be killed."""
    import subprocess

    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return False
    proc = getattr(gateway, "proc", None)
    exited = proc is not None
    with contextlib.suppress(Exception):
        gateway.shutdown()
    if proc is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            exited = False
    SparkContext._gateway = None
    SparkContext._jvm = None
    return exited


@contextlib.contextmanager
def progress(what: str, stream: Any = None) -> Iterator[None]:
    """A one-line ``brokerperf report: <what> ... 12 s`` ticker while Spark works."""
    out = stream if stream is not None else sys.stderr
    done = threading.Event()
    start = time.monotonic()
    tty = bool(getattr(out, "isatty", lambda: False)())

    def tick() -> None:
        while not done.wait(1.0):
            if tty:
                out.write(f"\rbrokerperf report: {what} ... {time.monotonic() - start:.0f} s")
                out.flush()

    out.write(f"brokerperf report: {what} ...")
    out.flush()
    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        done.set()
        thread.join()
        took = f"{'done' if ok else 'failed'} in {time.monotonic() - start:.1f} s"
        out.write(f"\rbrokerperf report: {what} ... {took}\n" if tty else f" {took}\n")
        out.flush()


# --------------------------------------------------------------------------- schema


def record_schema() -> StructType:
    """The explicit schema of the fields the report reads (everything else is skipped)."""
    from pyspark.sql import types as T

    d, s, long_, b = T.DoubleType(), T.StringType(), T.LongType(), T.BooleanType()

    def struct(**fields: Any) -> T.StructType:
        return T.StructType([T.StructField(k, v, True) for k, v in fields.items()])

    hist = struct(
        count=long_, min_us=d, max_us=d, mean_us=d, p50_us=d, p75_us=d, p95_us=d, p99_us=d,
        p999_us=d, p9999_us=d, clamped=long_, below_one_us=long_,
        sparse=T.ArrayType(T.ArrayType(long_)))
    curve_point = struct(
        offered_rate_msg_s=d, ack_rate_msg_s=d, sustainable=b, verdict=s,
        e2e_response_p99_us=d, publish_response_p99_us=d)
    return struct(
        schema=s, run_id=s, test_id=s, attempt=long_, broker=s, broker_version=s,
        provision=s, nodes=long_, topology_check=b, scenario=s,
        params=T.MapType(s, s), profile=s, env=s, driver=s,
        durability=struct(level=long_, label=s),
        begin_time=s, end_time=s, period_s=d, measured_s=d,
        target_rate_msg_s=d, ack_rate_msg_s=d, consume_rate_msg_s=d, publish_mib_s=d,
        consume_mib_s=d, send_errors=long_,
        latency=struct(**{v: hist for v in VIEWS}),
        verdict=struct(status=s, reasons=T.ArrayType(s)), run_status=s,
        throughput=struct(mode=s, highest_sustainable_rate_msg_s=d, limit=s, outcome=s),
        ladder=struct(curve=T.ArrayType(curve_point), knee=struct(rate_msg_s=d)),
        manifest=manifest_schema(),
        driver_file=s, driver_settings_sha256=s, tls=tls_schema(),
        _corrupt_record=s,
    )


def tls_schema() -> StructType:
    """The record's ``tls`` block as far as the cell key reads it."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField("on", T.BooleanType(), True),
                         T.StructField("protocol", T.StringType(), True)])


def manifest_schema() -> StructType:
    """The manifest fields cells are keyed by: the machine, the client libraries."""
    from pyspark.sql import types as T

    s, long_ = T.StringType(), T.LongType()

    def struct(**fields: Any) -> T.StructType:
        return T.StructType([T.StructField(k, v, True) for k, v in fields.items()])

    return struct(machine=struct(cpu_model=s, logical_cpus=long_),
                  driver=struct(client=s, client_version=s, librdkafka_version=s))


# --------------------------------------------------------------------------- input


def find_result_files(dirs: Sequence[str | Path]) -> list[Path]:
    """Every ``results.jsonl`` in or under the given directories (or the files themselves),
    as absolute paths."""
    files: list[Path] = []
    for raw in dirs:
        p = Path(raw)
        if p.is_file():
            files.append(p)
            continue
        if not p.is_dir():
            raise ReportInputError(f"result directory {str(p)!r} does not exist; give the "
                                   "--brokerperf-results directory of a run (or a parent)")
        found = sorted(p.rglob("results.jsonl"))
        if not found:
            raise ReportInputError(f"no results.jsonl in or under {str(p)!r}; give the "
                                   "--brokerperf-results directory of a run (or a parent)")
        files.extend(found)
    # absolute: Spark resolves a relative path against its JVM's directory, which is not
    # this process's when the JVM was started by someone else (spark-submit, a shared one)
    seen: set[Path] = set()
    unique = []
    for f in files:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(r)
    return unique


def _upgrade(df: DataFrame) -> DataFrame:
    """Bring every supported record version to the current one (defaults for absent fields).

    ``brokerperf.result/1`` is read as is; fields added to it later without a version
    bump (``attempt``, ``env``) get the value their absence meant.
    """
    from pyspark.sql import functions as F

    return (df
            .withColumn("attempt", F.coalesce(F.col("attempt"), F.lit(1)))
            .withColumn("env", F.coalesce(F.col("env"), F.lit("local")))
            .withColumn("params", F.coalesce(F.col("params"), F.create_map()))
            .withColumn("schema", F.lit(CURRENT_SCHEMA)))


@dataclass
class LoadedRecords:
    """The records of one side of a report, in the two shapes the job reads.

    ``meta``: one narrow row per kept record (no histogram arrays; de-duplicated, with
    the cell columns and ``_row``), cached. ``histograms``: the files again, lazily, as
    ``_row`` and the latency arrays only (so the JSON reader parses just those), joined
    to ``meta`` by ``_row`` when bucket counts are merged. Caching rows that carry
    ~1000-element arrays costs more than parsing them twice.
    """

    meta: DataFrame
    histograms: DataFrame


def load_records(spark: SparkSession, dirs: Sequence[str | Path], *,
                 run_id: str | None = None) -> tuple[LoadedRecords, ReportResult]:
    """Read, check versions, upgrade and de-duplicate (one pass over the files).

    Malformed lines (a write cut short) and records without a key are skipped with a
    warning; a record schema this job cannot read is an input error naming the file.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    files = find_result_files(dirs)
    raw = (spark.read.schema(record_schema())
           .option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", "_corrupt_record")
           .json([str(f) for f in files])
           .withColumn("_file", F.input_file_name())
           # the same id in both passes: same files, same splits, same line order
           .withColumn("_row", F.monotonically_increasing_id()))
    if run_id is not None:  # one run's records (the pytest session's own report)
        raw = raw.filter(F.col("_corrupt_record").isNotNull() | (F.col("run_id") == run_id))
    histograms = raw.select("_row", "latency")
    narrow = (raw.withColumn("_e2e_p99_us", F.col("latency.e2e_response.p99_us"))
              .drop("latency")
              .withColumn("_bad", F.col("_corrupt_record").isNotNull())
              .withColumn("_keyless", ~F.col("_bad") & (F.col("run_id").isNull()
                                                         | F.col("test_id").isNull()))
              .cache())
    ok = ~F.col("_bad") & ~F.col("_keyless")
    stats = narrow.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col("_bad").cast("int")).alias("bad"),
        F.sum(F.col("_keyless").cast("int")).alias("keyless"),
        F.slice(F.sort_array(F.collect_set(F.when(F.col("_bad"), F.col("_file")))), 1, 5)
        .alias("bad_files"),
        F.collect_set(F.when(ok, F.struct(
            F.coalesce(F.col("schema"), F.lit("<none>")).alias("v"), F.col("_file").alias("f"))
        )).alias("versions"),
        F.countDistinct(F.when(ok, F.struct("run_id", "test_id", "attempt"))).alias("keys"),
    ).first()
    assert stats is not None
    n, bad, keyless = int(stats["n"]), int(stats["bad"] or 0), int(stats["keyless"] or 0)
    result = ReportResult(cells={}, files=[str(f) for f in files], records_read=0,
                          duplicates_dropped=0, malformed_lines=bad)
    if bad:
        result.warnings.append(f"{bad} malformed line(s) skipped (a write cut short?) in "
                               f"{', '.join(stats['bad_files'])}")
    if keyless:
        result.warnings.append(f"{keyless} record(s) without run_id/test_id skipped")
    unknown = sorted((r["v"], r["f"]) for r in stats["versions"]
                     if r["v"] not in SUPPORTED_SCHEMAS)
    if unknown:
        narrow.unpersist()
        v, f = unknown[0]
        raise ReportInputError(
            f"record schema {v!r} in {f} is not one this report reads "
            f"({', '.join(SUPPORTED_SCHEMAS)}); use the pytest-brokerperf version that "
            "wrote it, or a newer one")
    result.records_read = n - bad - keyless
    if result.records_read == 0:
        narrow.unpersist()
        raise ReportInputError(f"no usable record in {', '.join(map(str, files))}")
    result.duplicates_dropped = result.records_read - int(stats["keys"])
    good = _upgrade(narrow.filter(ok))
    if result.duplicates_dropped:  # the latest write of a key wins (then the file name)
        w = Window.partitionBy("run_id", "test_id", "attempt").orderBy(
            F.col("end_time").desc_nulls_last(), F.col("_file"), F.col("_row"))
        good = (good.withColumn("_rank", F.row_number().over(w))
                .filter(F.col("_rank") == 1).drop("_rank"))
    meta = _with_cell(good.drop("_corrupt_record", "_bad", "_keyless")).cache()
    meta.count()
    narrow.unpersist()
    return LoadedRecords(meta=meta, histograms=histograms), result


def status_column() -> Column:
    """:func:`~pytest_brokerperf.report.model.record_status` in Spark: the verdict's
    status, but never ``valid`` for a run that did not complete (``run_status`` failed
    or interrupted: figures of the periods before the stop only)."""
    from pyspark.sql import functions as F

    verdict = F.col("verdict.status")
    run_status = F.col("run_status")
    stopped = run_status.isNotNull() & (run_status != "completed")
    return (F.when(stopped & (verdict.isNull() | verdict.isin(*FIGURE_STATUSES)), run_status)
            .otherwise(F.coalesce(verdict, F.lit("unknown"))))


def figure_column() -> Column:
    """Whether a row's ``status`` counts as a figure (:data:`~pytest_brokerperf.report.
    model.FIGURE_STATUSES`)."""
    from pyspark.sql import functions as F

    return F.col("status").isin(*FIGURE_STATUSES)


def _with_cell(df: DataFrame) -> DataFrame:
    """Add the cell columns: canonical params text, durability key, fault."""
    from pyspark.sql import functions as F

    params_key = F.expr(
        "array_join(array_sort(transform(filter(map_entries(params), "
        "e -> e.key NOT IN ('durability', 'fault')), "
        "e -> concat(e.key, '=', coalesce(e.value, 'null')))), ' ')")
    level = F.coalesce(F.col("durability.level").cast("string"),
                       F.col("params")["durability"])
    durability_key = F.when(level.isNull() | (level == "null"), F.lit("driver-defined")) \
        .otherwise(F.concat(F.lit("d"), level))
    machine = F.concat_ws(" × ", F.coalesce(F.col("manifest.machine.cpu_model"), F.lit("?")),
                          F.concat(F.coalesce(F.col("manifest.machine.logical_cpus")
                                              .cast("string"), F.lit("?")), F.lit(" cpus")))
    def known(col: Column) -> Column:  # model.UNKNOWN for absent or empty
        return F.when(col.isNull() | (col == ""), F.lit(UNKNOWN)).otherwise(col)

    drv = "manifest.driver."
    lib = F.col(drv + "librdkafka_version")
    clients = F.concat_ws(" ", F.col(drv + "client"), F.col(drv + "client_version"),
                          F.when(lib.isNotNull() & (lib != ""),
                                 F.concat(F.lit("librdkafka "), lib)))
    on = F.col("tls.on")
    tls_key = (F.when(on.isNull(), F.lit(UNKNOWN)).when(~on, F.lit("off"))
               .otherwise(F.coalesce(F.col("tls.protocol"), F.lit("on"))))  # model.tls_text
    return (df.withColumn("broker", F.coalesce(F.col("broker"), F.lit("?")))
            .withColumn("scenario", F.coalesce(F.col("scenario"), F.lit("?")))
            .withColumn("nodes_key", known(F.col("nodes").cast("string")))
            .withColumn("broker_version_key", known(F.col("broker_version")))
            .withColumn("profile_key", known(F.col("profile")))
            .withColumn("period_key", F.when(F.col("period_s").isNull(), F.lit(UNKNOWN))
                        .otherwise(F.concat(F.col("period_s").cast("string"), F.lit("s"))))
            .withColumn("provision_key", known(F.col("provision")))
            .withColumn("driver_key", known(F.col("driver")))
            .withColumn("driver_file_key", known(F.col("driver_file")))
            .withColumn("driver_settings_key", known(F.col("driver_settings_sha256")))
            .withColumn("clients_key", known(clients))
            .withColumn("tls_key", tls_key)
            .withColumn("params_key", params_key)
            .withColumn("durability_key", durability_key)
            .withColumn("fault", F.coalesce(F.col("params")["fault"], F.lit("none")))
            .withColumn("machine", machine)
            .withColumn("status", status_column())
            .withColumn("max_sustainable_rate",
                        F.col("throughput.highest_sustainable_rate_msg_s")))


# --------------------------------------------------------------------------- histograms


def _bucket_sql(index: str) -> tuple[str, str]:
    """SQL for a fixed-layout counts index: (sub-bucket value s, bucket shift b)."""
    b = f"CAST(greatest(shiftright({index}, 10) - 1, 0) AS INT)"
    s = f"CAST(CASE WHEN {index} < 2048 THEN {index} ELSE ({index} & 1023) + 1024 END AS BIGINT)"
    return s, b


def bucket_value(index: str) -> Column:
    """Highest equivalent value of a fixed-layout counts index (what percentiles report).

    3 significant digits, lowest 1 µs: ``b = max((i >> 10) - 1, 0)``,
    ``s = i < 2048 ? i : (i & 1023) + 1024``, value ``(s << b) + (1 << b) - 1``.
    """
    from pyspark.sql import functions as F

    s, b = _bucket_sql(index)
    return F.expr(f"shiftleft({s}, {b}) + shiftleft(CAST(1 AS BIGINT), {b}) - 1")


def _bucket_low_and_mid(index: str) -> tuple[Column, Column]:
    """Lowest and median equivalent values of a counts index (min and mean use these)."""
    from pyspark.sql import functions as F

    s, b = _bucket_sql(index)
    low = f"shiftleft({s}, {b})"
    return F.expr(low), F.expr(f"{low} + shiftright(shiftleft(CAST(1 AS BIGINT), {b}), 1)")


def merged_buckets(records: LoadedRecords, keys: Sequence[str]) -> DataFrame:
    """(keys..., view, idx, cnt): the sparse histograms of the ``valid`` records summed
    per bucket.

    The bucket rows (one per non-empty bucket of every view of every record: tens of
    millions for 100,000 records) are grouped by a 64-bit hash of ``keys`` and the view's
    number, not by the key strings, and named afterwards by a join with the small table
    of distinct keys. A hash shared by two keys is an error, never a silent merge.
    """
    from pyspark.sql import functions as F

    valid = records.meta.filter(figure_column())
    rows = valid.select("_row", F.xxhash64(*keys).alias("_k"))
    names = valid.select(F.xxhash64(*keys).alias("_k"), *keys).distinct()
    clash = names.groupBy("_k").count().filter(F.col("count") > 1).first()
    if clash is not None:  # pragma: no cover - 64-bit hashes of a few thousand keys
        raise ReportInputError(f"two matrix cells share the hash {clash['_k']}; report this")
    views = F.array(*[F.struct(F.lit(i).alias("v"),
                               F.col(f"latency.{v}.sparse").alias("sparse"))
                      for i, v in enumerate(VIEWS)])
    counts = (records.histograms.join(F.broadcast(rows), "_row")
              .select("_k", F.explode(views).alias("h"))
              .select("_k", F.col("h.v").alias("v"), F.explode("h.sparse").alias("b"))
              .select("_k", "v", F.col("b")[0].alias("idx"), F.col("b")[1].alias("cnt"))
              .groupBy("_k", "v", "idx").agg(F.sum("cnt").alias("cnt")))
    view_name = F.element_at(F.array(*[F.lit(v) for v in VIEWS]), F.col("v") + 1)
    return (counts.join(F.broadcast(names), "_k")
            .select(*keys, view_name.alias("view"), "idx", "cnt"))


def percentiles(buckets: DataFrame, keys: Sequence[str]) -> DataFrame:
    """(keys..., view, total, min, max, mean, p50 ... p99.99) from merged bucket counts.

    Rank as HdrHistogram_py: ``target = max(int(q * n / 100 + 0.5), 1)``; the value is
    that of the first bucket whose cumulative count reaches the target; ``None`` when
    ``n`` is below ``10 / (1 - q/100)``.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    g = [*keys, "view"]
    w = Window.partitionBy(*g).orderBy("idx").rowsBetween(Window.unboundedPreceding,
                                                          Window.currentRow)
    low, mid = _bucket_low_and_mid("idx")
    cum = (buckets.filter(F.col("cnt") > 0)
           .withColumn("cum", F.sum("cnt").over(w))
           .withColumn("total", F.sum("cnt").over(Window.partitionBy(*g))))
    aggs = [F.min(F.when(F.col("cum") >= F.greatest(
        (F.lit(q) * F.col("total") / 100 + 0.5).cast("long"), F.lit(1)), F.col("idx")))
        .alias(f"i_{i}") for i, (_, q) in enumerate(PERCENTILE_NAMES)]
    out = cum.groupBy(*g).agg(
        F.first("total").alias("total"),
        F.min(F.when(F.col("cnt") > 0, low)).alias("min"),
        F.max("idx").alias("i_max"),
        (F.sum(F.col("cnt").cast("decimal(38,0)") * mid) / F.first("total")).cast("double")
        .alias("mean"),
        *aggs)
    cols: list[Column | str] = [*g, "total", F.col("min").cast("double").alias("min"),
            bucket_value("i_max").cast("double").alias("max"), "mean"]
    for i, (name, q) in enumerate(PERCENTILE_NAMES):
        cols.append(F.when(F.col("total") >= min_samples_for(q),
                           bucket_value(f"i_{i}").cast("double")).alias(name))
    return out.select(*cols)


# --------------------------------------------------------------------------- aggregate


def _rate_stats(row: Any, name: str) -> RateStats:
    def val(suffix: str) -> float | None:
        x = row[f"{name}__{suffix}"]
        return None if x is None else float(x)

    return RateStats(n=int(row[f"{name}__n"] or 0), mean=val("mean"), stddev=val("sd"),
                     min=val("min"), max=val("max"))


def _rate_aggs() -> list[Column]:
    from pyspark.sql import functions as F

    aggs = []
    for name, col in _RATES.items():
        aggs += [F.count(col).alias(f"{name}__n"), F.avg(col).alias(f"{name}__mean"),
                 F.stddev_samp(col).alias(f"{name}__sd"), F.min(col).alias(f"{name}__min"),
                 F.max(col).alias(f"{name}__max")]
    return aggs


def cell_key(row: Any) -> CellKey:
    """The cell key of a row carrying the :data:`CELL` columns."""
    return CellKey(row["broker"], row["scenario"], row["params_key"] or "",
                   row["durability_key"], row["fault"], row["env"], nodes=row["nodes_key"],
                   broker_version=row["broker_version_key"], profile=row["profile_key"],
                   period=row["period_key"], provision=row["provision_key"],
                   driver=row["driver_key"], driver_file=row["driver_file_key"],
                   driver_settings=row["driver_settings_key"], clients=row["clients_key"],
                   tls=row["tls_key"])


_key = cell_key


def _latency(row: Any) -> LatencyStats:
    values: dict[str, float | None] = {name: row[name] for name, _ in PERCENTILE_NAMES}
    values.update(min=row["min"], max=row["max"], mean=row["mean"])
    return LatencyStats(count=int(row["total"]), values=values)


def aggregate(loaded: LoadedRecords, result: ReportResult) -> ReportResult:
    """Per-cell statistics (pooled and per run) into ``result.cells``; returns ``result``.

    Four Spark actions: merged-histogram percentiles (cells and runs in one union),
    counts and rate statistics (likewise), records left out of verdicts, ladder curves.
    """
    from pyspark.sql import functions as F

    cell = list(CELL)
    # Two passes over the files: the merged bucket counts per run (the only use of the
    # histogram arrays), and one narrow row per record for everything else; both small
    # enough to cache, unlike the records themselves.
    records = loaded.meta
    valid = records.filter(figure_column())
    per_run = merged_buckets(loaded, [*cell, "run_id"]).cache()
    pooled = (per_run.groupBy(*cell, "view", "idx").agg(F.sum("cnt").alias("cnt"))
              .withColumn("run_id", F.lit(None).cast("string")))
    lat_rows = percentiles(per_run.unionByName(pooled), [*cell, "run_id"]).collect()

    def cell_level(df: DataFrame) -> DataFrame:
        return df.groupBy(*cell).agg(
            *_rate_aggs(),
            F.count(F.lit(1)).alias("records"),
            F.sum(figure_column().cast("int")).alias("valid"),
            F.countDistinct("run_id").alias("runs"),
            F.sort_array(F.collect_set("machine")).alias("machines"),
            (F.stddev_samp("e2e_p99") / F.avg("e2e_p99")).alias("p99_cv"),
        ).withColumn("run_id", F.lit(None).cast("string"))

    valid_rates = records.select(
        *cell, "run_id", "status", "machine",
        F.when(figure_column(), F.col("_e2e_p99_us")).alias("e2e_p99"),
        *[F.when(figure_column(), F.col(c)).alias(c) for c in _RATES.values()])
    run_level = valid.groupBy(*cell, "run_id").agg(*_rate_aggs())
    agg_rows = (cell_level(valid_rates).unionByName(run_level, allowMissingColumns=True)
                .collect())
    invalid = (records.filter(~figure_column())
               .select(*cell, "run_id", "test_id", "attempt", "status",
                       F.coalesce(F.col("verdict.reasons"), F.array()).alias("reasons"))
               .orderBy("run_id", "test_id", "attempt").collect())
    ladders = (valid.filter(F.size(F.coalesce(F.col("ladder.curve"), F.array())) > 0)
               .select(*cell, "run_id", F.col("ladder.knee.rate_msg_s").alias("knee"),
                       F.explode("ladder.curve").alias("p")).collect())

    lat_by: dict[tuple[CellKey, str | None], dict[str, LatencyStats]] = defaultdict(dict)
    for r in lat_rows:
        lat_by[(_key(r), r["run_id"])][r["view"]] = _latency(r)
    cell_rows = {}
    runs_by_cell: dict[CellKey, dict[str, Figures]] = defaultdict(dict)
    for r in agg_rows:
        k = _key(r)
        if r["run_id"] is None:
            cell_rows[k] = r
        else:
            runs_by_cell[k][r["run_id"]] = Figures(
                latency=lat_by.get((k, r["run_id"]), {}),
                rates={name: _rate_stats(r, name) for name in _RATES})
    invalid_by_cell: dict[CellKey, list[InvalidRecord]] = defaultdict(list)
    for r in invalid:
        invalid_by_cell[_key(r)].append(InvalidRecord(
            r["run_id"], r["test_id"], int(r["attempt"]), r["status"], tuple(r["reasons"])))
    curve_by_cell: dict[CellKey, list[CurvePoint]] = defaultdict(list)
    for r in ladders:
        p = r["p"]
        curve_by_cell[_key(r)].append(CurvePoint(
            r["run_id"], p["offered_rate_msg_s"], p["ack_rate_msg_s"], p["e2e_response_p99_us"],
            p["publish_response_p99_us"], p["sustainable"], r["knee"]))

    for k, r in cell_rows.items():
        result.cells[k] = CellStats(
            key=k, records=int(r["records"]), valid=int(r["valid"]), runs=int(r["runs"]),
            figures=Figures(latency=lat_by.get((k, None), {}),
                            rates={name: _rate_stats(r, name) for name in _RATES}),
            run_figures=dict(sorted(runs_by_cell.get(k, {}).items())),
            p99_spread=None if r["p99_cv"] is None else float(r["p99_cv"]),
            invalid=tuple(invalid_by_cell.get(k, ())),
            machines=tuple(r["machines"]),
            curve=tuple(sorted(curve_by_cell.get(k, ()),
                               key=lambda p: (p.run_id, p.offered_rate or 0.0))),
        )
    return result


def run_job(spark: SparkSession, dirs: Sequence[str | Path], *,
            run_id: str | None = None) -> ReportResult:
    """Load and aggregate ``dirs`` (one side of a comparison), optionally one run only."""
    records, result = load_records(spark, dirs, run_id=run_id)
    try:
        return aggregate(records, result)
    finally:
        spark.catalog.clearCache()
