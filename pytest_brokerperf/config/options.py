"""Every pytest-brokerperf option, described once: flag, environment variable, ini key,
type, default and help (:data:`OPTIONS`), plus the run profiles (:data:`PROFILES`).

The plugin registers flags and ini keys from this table and ``docs/reference/options.md``
documents it; :mod:`pytest_brokerperf.config.parsers` turns raw values into typed ones and
:class:`pytest_brokerperf.config.settings.Settings` resolves them. Standard library only (imported
for ``pytest --help``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION, PULSAR_DEFAULT_VERSION

if TYPE_CHECKING:
    pass


#: --brokerperf-image names that are no broker: services container mode runs beside one
#: (``minio``: AutoMQ's object store)
SERVICE_IMAGES: Final = ("minio",)
PROVISION_MODES: Final = ("auto", "process", "container", "remote")
PROFILE_NAMES: Final = ("smoke", "standard", "omb")
INCONCLUSIVE_MODES: Final = ("fail", "warn")
EXECUTORS: Final = ("local", "spark")
#: generator tasks of a Spark run when --brokerperf-generators is not given
DEFAULT_GENERATORS: Final = 2

#: What ``--brokerperf-provision=auto`` stands for until the machine is asked
#: (``Settings.with_auto_resolved``: containers where an engine has the images).
AUTO_PROVISION: Final = "process"

#: Conservative caps against remote clusters (docs/how-to/remote.md); raise them with
#: --brokerperf-max-bytes / --brokerperf-max-rate.
REMOTE_MAX_BYTES: Final = 1024**3
REMOTE_MAX_RATE: Final = (10.0 * 1024**2, "B/s")

RUN_ID_ENV: Final = "BROKERPERF_RUN_ID"
_RUN_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LABEL_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VERSION_RE: Final = re.compile(r"^\d+\.\d+(\.\d+)?(-[A-Za-z0-9.]+)?$")
_SECONDS_RE: Final = re.compile(
    r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ms|s|sec|m|min|h)?\s*$", re.IGNORECASE
)
_RATE_RE: Final = re.compile(
    r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<mult>[kKM])?\s*(?:/s|msg/s)?\s*$"
)
_TRUE: Final = frozenset({"1", "true", "yes", "on", "y"})
_FALSE: Final = frozenset({"0", "false", "no", "off", "n"})


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class ProfileSpec:
    """How long and how hard a scenario runs under one ``--brokerperf-profile``.

    All times in seconds, ``tailread_rate`` in msg/s. With ``from_workload`` (the ``omb``
    profile) a scenario's warm-up, measured window and rate come *exactly* from its
    workload file (``warmupDurationMinutes``, ``testDurationMinutes``, ``producerRate``,
    and the period from ``logIntervalMillis`` when present) — see :meth:`with_workload`;
    the numbers stored here are then only fallbacks for runs without a workload file,
    such as the once-per-session broker warm-up. The explicit overrides
    (``--brokerperf-warmup``/``-duration``/``-rate``/``-period``, kept apart on
    :class:`Settings`) win over both.
    """

    name: str
    warmup_s: float  # warm-up cap; with warmup_until_steady=False the exact length
    measure_s: float  # measured window
    period_s: float  # stats period
    tailread_rate: float  # tail-read publish rate, msg/s
    broker_warmup_s: float  # once-per-session broker warm-up
    warmup_until_steady: bool  # warm-up may end early once the last periods are steady
    from_workload: bool  # durations and rate come from the workload file

    def with_workload(
        self,
        *,
        warmup_s: float,
        measure_s: float,
        rate: float,
        period_s: float | None = None,
    ) -> ProfileSpec:
        """This spec with durations, rate and period taken from a workload file.

        Only for ``from_workload`` profiles (omb); smoke and standard fix their own
        numbers and come back unchanged. ``period_s=None`` keeps the profile's period
        (the workload has no ``logIntervalMillis``).
        """
        if not self.from_workload:
            return self
        return replace(
            self,
            warmup_s=float(warmup_s),
            measure_s=float(measure_s),
            tailread_rate=float(rate),
            period_s=float(period_s) if period_s is not None else self.period_s,
        )


PROFILES: Final[Mapping[str, ProfileSpec]] = MappingProxyType(
    {
        "smoke": ProfileSpec(
            name="smoke", warmup_s=10.0, measure_s=15.0, period_s=1.0, tailread_rate=1000.0,
            broker_warmup_s=15.0, warmup_until_steady=True, from_workload=False,
        ),
        "standard": ProfileSpec(
            name="standard", warmup_s=60.0, measure_s=120.0, period_s=10.0,
            tailread_rate=5000.0, broker_warmup_s=60.0, warmup_until_steady=True,
            from_workload=False,
        ),
        # durations and rate from the workload file; these numbers are fallbacks only
        "omb": ProfileSpec(
            name="omb", warmup_s=60.0, measure_s=120.0, period_s=10.0, tailread_rate=5000.0,
            broker_warmup_s=60.0, warmup_until_steady=False, from_workload=True,
        ),
    }
)


# --------------------------------------------------------------------------- options

_Kind = Literal[
    "brokers", "choice", "int", "workers", "seconds", "rate", "bool", "dir", "file",
    "existing_dir", "label", "version", "hostports", "bytes", "memory", "maxrate", "owner", "urls",
    "rates", "url", "amqpurls", "levels", "percent", "count", "formats", "budgets",
    "images", "faults", "baseline_ref", "spark_master",
]


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its flag, environment variable, ini key, type and default."""

    name: str  # NAME in BROKERPERF_<NAME>, lower case
    field: str  # the Settings attribute
    flag: str
    kind: _Kind
    default: Any  # the typed default; None = unset / decided elsewhere
    metavar: str | None
    what: str  # a noun for messages: "node count"
    help: str
    example: str
    choices: tuple[str, ...] = ()
    default_text: str | None = None  # how --help and the docs show the default

    @property
    def dest(self) -> str:
        """argparse dest, identical to the ini key: ``brokerperf_<name>``."""
        return f"brokerperf_{self.name}"

    @property
    def ini(self) -> str:
        return f"brokerperf_{self.name}"

    @property
    def env(self) -> str:
        return f"BROKERPERF_{self.name.upper()}"

    @property
    def shown_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if isinstance(self.default, tuple):
            return ",".join(self.default)
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)

    @property
    def ini_type(self) -> Literal["int", "float", "bool", "string"]:
        """The native type a TOML ``[tool.pytest]`` table may use for this key."""
        if self.kind in ("int", "count"):
            return "int"
        if self.kind in ("seconds", "rate", "percent"):
            return "float"
        if self.kind == "bool":
            return "bool"
        return "string"


OPTIONS: Final[tuple[OptionSpec, ...]] = (
    OptionSpec(
        name="broker", field="brokers", flag="--broker", kind="brokers", default=("kafka",),
        metavar="NAMES", what="broker list", example="kafka,pulsar",
        # the names come from the broker registry (pytest_brokerperf.brokers), the one
        # list of broker kinds: the plugin adds them to the help text
        help="brokers to run scenarios against, comma-separated",
    ),
    OptionSpec(
        name="provision", field="provision", flag="--brokerperf-provision", kind="choice",
        default="auto", metavar="MODE", what="provisioning mode", example="process",
        choices=PROVISION_MODES,
        help="how brokers come to exist: auto (containers when a Docker engine answers "
        "with each broker's image, else processes), process (local JVM/Erlang processes), "
        "container (testcontainers), remote (an existing cluster)",
    ),
    OptionSpec(
        name="image", field="images", flag="--brokerperf-image", kind="images", default=(),
        metavar="KIND=REF[,...]", what="container image", example="kafka=apache/kafka:4.3.1",
        default_text="brokerperf/<kind>:<version> (built by ci/docker.sh), else the "
        "official image of that version",
        help="the container image per broker kind for --brokerperf-provision=container, "
        "comma-separated KIND=REF pairs (never pulled: the image must be on the engine); "
        "minio=REF names AutoMQ's object store",
    ),
    OptionSpec(
        name="nodes", field="nodes", flag="--brokerperf-nodes", kind="int", default=1,
        metavar="N", what="node count", example="3",
        help="broker nodes per cluster (an integer >= 1; several nodes on one host are "
        "a topology check)",
    ),
    OptionSpec(
        name="profile", field="profile", flag="--brokerperf-profile", kind="choice",
        default="smoke", metavar="NAME", what="profile", example="standard",
        choices=PROFILE_NAMES,
        help="run length: smoke (10 s warm-up cap, 15 s measured), standard (60 s, 120 s), "
        "omb (durations and rate exactly from the workload file)",
    ),
    OptionSpec(
        name="durability", field="durability", flag="--brokerperf-durability", kind="levels",
        default=(), metavar="LEVELS", what="durability levels", example="1,2",
        default_text="none: the driver file's settings as they are (driver-defined)",
        help="durability levels 1-4 to run every broker scenario at, comma-separated or all "
        "(1: sync replication + fsync, 2: sync replication + page cache, 3: async "
        "replication + fsync, 4: async replication + page cache); test ids get -d1, -d2",
    ),
    OptionSpec(
        name="fault", field="faults", flag="--brokerperf-fault", kind="faults",
        default=(), metavar="FAULTS", what="faults", example="kill-broker@5s",
        default_text="none",
        help="faults to inject in the tail-read scenario's measured window, one test each, "
        "comma-separated: ACTION@AT[:DURATION][/TARGET] with ACTION kill-broker, "
        "pause-broker, restart-broker or power-cut, e.g. kill-broker@5s:10s, "
        "pause-broker@5s:3s/node-2, power-cut@5s, power-cut@5s:2s/all (every node at "
        "once; local brokers only; test ids get -kill, -pause, -restart, -powercut, "
        "-powercut-all)",
    ),
    OptionSpec(
        name="results", field="results_dir", flag="--brokerperf-results", kind="dir",
        default="brokerperf-results", metavar="DIR", what="results directory",
        example="brokerperf-results",
        help="where result artefacts go; each run writes DIR/<run id>/",
    ),
    OptionSpec(
        name="workload", field="workload", flag="--brokerperf-workload", kind="file",
        default=None, metavar="PATH", what="workload file", example="workloads/tail.yaml",
        default_text="the scenario's own", help="OMB workload YAML to run (must exist)",
    ),
    OptionSpec(
        name="lenient", field="lenient", flag="--brokerperf-lenient", kind="bool",
        default=False, metavar=None, what="lenient-workload switch", example="true",
        help="ignore unknown keys in the workload file (a newer OMB's keys) with a warning "
        "and list them in the record's workload.ignored_keys, instead of refusing the file",
    ),
    OptionSpec(
        name="driver", field="driver", flag="--brokerperf-driver", kind="file",
        default=None, metavar="PATH", what="driver file", example="drivers/kafka.yaml",
        default_text="the shipped driver of each broker",
        help="OMB driver YAML with client and topic settings (must exist)",
    ),
    OptionSpec(
        name="slo", field="slo", flag="--brokerperf-slo", kind="file", default=None,
        metavar="PATH", what="SLO file", example="ci/slo.yaml", default_text="none",
        help="SLO file applied in addition to @pytest.mark.slo (must exist)",
    ),
    OptionSpec(
        name="keep_topics", field="keep_topics", flag="--brokerperf-keep-topics",
        kind="bool", default=False, metavar=None, what="keep-topics switch", example="true",
        help="keep the topics a scenario created instead of deleting them",
    ),
    OptionSpec(
        name="inconclusive", field="inconclusive", flag="--brokerperf-inconclusive",
        kind="choice", default="fail", metavar="MODE", what="inconclusive mode",
        example="warn", choices=INCONCLUSIVE_MODES,
        help="what an invalid measurement does to its test: fail (with an INCONCLUSIVE: "
        "reason) or warn (pass with a warning)",
    ),
    OptionSpec(
        name="max_steal", field="max_steal", flag="--brokerperf-max-steal", kind="percent",
        default=5.0, metavar="PERCENT", what="steal-time limit", example="10",
        default_text="5",
        help="hypervisor steal time (percent of the machine's CPU time, from /proc/stat) "
        "at or above which a measured window is host-noise: INCONCLUSIVE, never a figure; "
        "0 < PERCENT <= 100 (100 turns the check off)",
    ),
    OptionSpec(
        name="noise_retries", field="noise_retries", flag="--brokerperf-noise-retries",
        kind="count", default=1, metavar="N", what="host-noise retries", example="2",
        help="how many times a measured window judged host-noise (see "
        "--brokerperf-max-steal) is measured again before the test reports it; an integer "
        ">= 0 (0: report the first window). Each throughput rung gets as many",
    ),
    OptionSpec(
        name="period", field="period", flag="--brokerperf-period", kind="seconds",
        default=None, metavar="SECONDS", what="stats period", example="5",
        default_text="the profile's: 1 s smoke, 10 s otherwise",
        help="length of one stats period, seconds > 0 (units s, ms, m, h accepted)",
    ),
    OptionSpec(
        name="duration", field="duration", flag="--brokerperf-duration", kind="seconds",
        default=None, metavar="SECONDS", what="measured duration", example="60",
        default_text="the profile's",
        help="measured window, seconds > 0; overrides the profile (and the workload file "
        "under --brokerperf-profile=omb)",
    ),
    OptionSpec(
        name="warmup", field="warmup", flag="--brokerperf-warmup", kind="seconds",
        default=None, metavar="SECONDS", what="warm-up duration", example="30",
        default_text="the profile's",
        help="warm-up window (a cap: it ends early once steady), seconds >= 0; 0 disables",
    ),
    OptionSpec(
        name="broker_warmup", field="broker_warmup", flag="--brokerperf-broker-warmup",
        kind="seconds", default=None, metavar="SECONDS", what="broker warm-up duration",
        example="0", default_text="the profile's: 15 s smoke, 60 s otherwise",
        help="the once-per-session broker warm-up load before the first scenario, seconds "
        ">= 0; 0 skips it (the record says so: the first scenario meets a cold JVM, whose "
        "own warm-up then absorbs the JIT)",
    ),
    OptionSpec(
        name="rate", field="rate", flag="--brokerperf-rate", kind="rate", default=None,
        metavar="MSG_PER_S", what="publish rate", example="5000",
        default_text="the profile's or the workload's",
        help="publish rate override in msg/s, > 0 (suffix k or M accepted: 50k)",
    ),
    OptionSpec(
        name="workers", field="workers", flag="--brokerperf-workers", kind="workers",
        default=None, metavar="N", what="worker count", example="2", default_text="auto",
        help="load-generator worker processes, an integer >= 1 or auto",
    ),
    OptionSpec(
        name="executor", field="executor", flag="--brokerperf-executor", kind="choice",
        default="local", metavar="NAME", what="generator executor", example="spark",
        choices=EXECUTORS,
        help="where the load generators run: local (worker processes on this machine) or "
        "spark (one Spark barrier stage of --brokerperf-generators tasks on "
        "--brokerperf-spark-master, each connected back to this process)",
    ),
    OptionSpec(
        name="spark_master", field="spark_master", flag="--brokerperf-spark-master",
        kind="spark_master", default=None, metavar="URL", what="Spark master",
        example="spark://host:7077", default_text="local[N] (N: the generators)",
        help="the Spark master the generators (--brokerperf-executor=spark) run on, in "
        "Spark's own spelling, passed through: local[N], local-cluster[N,cores,MiB], "
        "spark://host:port, yarn, k8s://https://host:port; brokerperf report reads the "
        "same environment variable",
    ),
    OptionSpec(
        name="generators", field="generators", flag="--brokerperf-generators", kind="int",
        default=None, metavar="N", what="generator task count", example="2",
        default_text="2 with --brokerperf-executor=spark",
        help="generator tasks (hosts) of a --brokerperf-executor=spark run: the workload's "
        "producers and consumers are spread over them as over local workers",
    ),
    OptionSpec(
        name="env", field="env", flag="--brokerperf-env", kind="label",
        default="local", metavar="LABEL", what="environment label", example="ci-2core",
        help="environment label that SLO selectors and baselines are keyed by "
        "(letters, digits, '.', '_', '-')",
    ),
    OptionSpec(
        name="report", field="report", flag="--brokerperf-report", kind="formats",
        default=(), metavar="FORMATS", what="report formats", example="html,markdown",
        choices=("html", "markdown", "csv"), default_text="none (no Spark report)",
        help="at session end, aggregate this run's results with Spark (the report extra) "
        "into <results>/<run id>/report.html, summary.md, cells.csv; comma-separated",
    ),
    OptionSpec(
        name="baseline", field="baseline", flag="--brokerperf-baseline", kind="baseline_ref",
        default=None, metavar="DIR|RUN", what="baseline", example="all",
        default_text="none",
        help="earlier runs' results (at least 3 runs per cell) that --brokerperf-fail-on "
        "compares each test with: a results directory, or runs saved in "
        "--brokerperf-storage for this --brokerperf-env: a number (0003), a name, last or "
        "all; aggregated with Spark at session start",
    ),
    OptionSpec(
        name="storage", field="storage", flag="--brokerperf-storage", kind="dir",
        default=".brokerperf", metavar="DIR", what="storage directory",
        example=".brokerperf", default_text=".brokerperf",
        help="where saved runs are kept, one directory per --brokerperf-env label (the "
        "machine class for the default label local), as pytest-benchmark's "
        "--benchmark-storage",
    ),
    OptionSpec(
        name="autosave", field="autosave", flag="--brokerperf-autosave", kind="bool",
        default=False, metavar=None, what="autosave switch", example="true",
        help="save this session's result records in --brokerperf-storage as the next "
        "numbered run (NNNN_<run id>), as pytest-benchmark's --benchmark-autosave",
    ),
    OptionSpec(
        name="save", field="save", flag="--brokerperf-save", kind="label", default=None,
        metavar="NAME", what="saved run name", example="before-upgrade", default_text="none",
        help="save this session's result records in --brokerperf-storage as NNNN_NAME, a "
        "baseline --brokerperf-baseline=NAME names later",
    ),
    OptionSpec(
        name="compare_across_env", field="compare_across_env",
        flag="--brokerperf-compare-across-env", kind="bool", default=False, metavar=None,
        what="cross-environment comparison switch", example="true",
        help="compare with a baseline from another --brokerperf-env label (refused by "
        "default: a figure from another machine class is no baseline)",
    ),
    OptionSpec(
        name="fail_on", field="fail_on", flag="--brokerperf-fail-on", kind="budgets",
        default=None, metavar="EXPR", what="regression budgets",
        example="e2e_response.p99:+15%,ack_rate:-10%", default_text="none",
        help="fail a test whose figures regress beyond these budgets against "
        "--brokerperf-baseline (docs/reference/report.md), e.g. "
        "'e2e_response.p99:+15%,ack_rate:-10%'",
    ),
    OptionSpec(
        name="kafka_version", field="kafka_version", flag="--kafka-version", kind="version",
        default=KAFKA_DEFAULT_VERSION, metavar="VERSION", what="Kafka version",
        example=KAFKA_DEFAULT_VERSION,
        help="Apache Kafka version the process provisioner runs",
    ),
    OptionSpec(
        name="kafka_home", field="kafka_home", flag="--kafka-home", kind="existing_dir",
        default=None, metavar="PATH", what="Kafka home", example="/opt/kafka",
        default_text="$KAFKA_HOME if it is a directory, else download",
        help="an unpacked Kafka distribution to use instead of downloading one",
    ),
    OptionSpec(
        name="pulsar_version", field="pulsar_version", flag="--pulsar-version",
        kind="version", default=PULSAR_DEFAULT_VERSION, metavar="VERSION",
        what="Pulsar version", example=PULSAR_DEFAULT_VERSION,
        help="Apache Pulsar 4.x version the process provisioner runs (standalone, from "
        "Maven Central jars)",
    ),
    OptionSpec(
        name="allow_xdist", field="allow_xdist", flag="--brokerperf-allow-xdist", kind="bool",
        default=False, metavar=None, what="allow-xdist switch", example="true",
        help="let scenario tests run inside pytest-xdist workers (numbers will suffer)",
    ),
    # -- remote clusters and their safety; docs/how-to/remote.md -----------
    OptionSpec(
        name="kafka_bootstrap", field="kafka_bootstrap", flag="--kafka-bootstrap",
        kind="hostports", default=None, metavar="HOST:PORT[,...]",
        what="Kafka bootstrap servers", example="broker1:9092,broker2:9092",
        default_text="none: start a local Kafka",
        help="an existing Kafka cluster to run against; implies --brokerperf-provision=remote",
    ),
    OptionSpec(
        name="kafka_config", field="kafka_config", flag="--kafka-config", kind="file",
        default=None, metavar="PATH", what="Kafka client config file",
        example="client.properties", default_text="none",
        help="Java-style client properties (security.protocol, sasl.*, ssl.*) for the "
        "remote cluster; never written to results or logs",
    ),
    OptionSpec(
        name="pulsar_url", field="pulsar_url", flag="--pulsar-url", kind="url",
        default=None, metavar="URL", what="Pulsar service URL",
        example="pulsar://broker1:6650", choices=("pulsar", "pulsar+ssl"),
        default_text="none: start a local Pulsar",
        help="an existing Pulsar cluster's binary-protocol URL (pulsar:// or pulsar+ssl://); "
        "implies --brokerperf-provision=remote",
    ),
    OptionSpec(
        name="pulsar_admin_url", field="pulsar_admin_url", flag="--pulsar-admin-url",
        kind="url", default=None, metavar="URL", what="Pulsar admin URL",
        example="http://broker1:8080", choices=("http", "https"),
        default_text="--pulsar-url's host on port 8080 (8443 with TLS)",
        help="the remote Pulsar cluster's web service (admin REST API) URL; alone it "
        "implies --pulsar-url on the same host (port 6650, 6651 with TLS)",
    ),
    OptionSpec(
        name="pulsar_config", field="pulsar_config", flag="--pulsar-config", kind="file",
        default=None, metavar="PATH", what="Pulsar client config file",
        example="client.conf", default_text="none",
        help="Pulsar client.conf-style properties (authPlugin, authParams, tls*) for the "
        "remote cluster; never written to results or logs",
    ),
    OptionSpec(
        name="rabbitmq_url", field="rabbitmq_url", flag="--rabbitmq-url", kind="amqpurls",
        default=(), metavar="URI[,URI]", what="RabbitMQ AMQP URIs",
        example="amqp://bench:PASSWORD@mq1:5672/%2F",
        default_text="none: start a local RabbitMQ",
        help="an existing RabbitMQ cluster's AMQP URIs (amqp:// or amqps://, credentials "
        "and vhost in the URI), comma-separated; implies --brokerperf-provision=remote",
    ),
    OptionSpec(
        name="dry_run", field="dry_run", flag="--brokerperf-dry-run", kind="bool",
        default=False, metavar=None, what="dry-run switch", example="true",
        help="print each scenario's plan (topics, bytes, peak rate, duration, config "
        "changes) and skip it: nothing is started or created",
    ),
    OptionSpec(
        name="max_bytes", field="max_bytes", flag="--brokerperf-max-bytes", kind="bytes",
        default=None, metavar="SIZE", what="byte cap", example="5GiB",
        default_text="1GiB against a remote cluster, no cap locally",
        help="refuse a scenario that would produce more payload bytes than this "
        "(units B, KB, MB, GB, KiB, MiB, GiB, TiB)",
    ),
    OptionSpec(
        name="max_rate", field="max_rate", flag="--brokerperf-max-rate", kind="maxrate",
        default=None, metavar="RATE", what="rate cap", example="50MiB/s",
        default_text="10MiB/s against a remote cluster, no cap locally",
        help="refuse a scenario whose peak publish rate exceeds this: msg/s (5000, 50k) "
        "or bytes/s (20MiB/s)",
    ),
    OptionSpec(
        name="owner", field="owner", flag="--brokerperf-owner", kind="owner", default=None,
        metavar="NAME", what="owner", example="alice@ci",
        default_text="user@host",
        help="who owns the topics a run creates; their names start with bp-<owner>-",
    ),
    OptionSpec(
        name="allow_cluster_changes", field="allow_cluster_changes",
        flag="--brokerperf-allow-cluster-changes", kind="bool", default=False, metavar=None,
        what="allow-cluster-changes switch", example="true",
        help="allow cluster-wide changes (broker configs, throttles, reassigning what the "
        "run did not create) on a remote cluster",
    ),
    OptionSpec(
        name="broker_memory", field="broker_memory", flag="--brokerperf-broker-memory",
        kind="memory", default=None, metavar="SIZE", what="broker memory limit",
        example="1536MiB", default_text="none: brokers use what the host has",
        help="cap each local broker node's memory, page cache included (a memory cgroup "
        "around the process; the container's limit in container mode), so a backlog larger "
        "than the cap is read from disk: a cold catch-up (units MiB, GiB)",
    ),
    OptionSpec(
        name="tls", field="tls", flag="--brokerperf-tls", kind="bool", default=False,
        metavar=None, what="TLS switch", example="true",
        help="start local brokers with TLS listeners (a CA and server certificate made per "
        "run) and connect every client over TLS: Kafka SSL, RabbitMQ amqps; process mode "
        "only (docs/reference/tls.md); a remote cluster's TLS is set in --kafka-config or "
        "an amqps:// --rabbitmq-url",
    ),
    OptionSpec(
        name="prometheus", field="prometheus", flag="--brokerperf-prometheus", kind="urls",
        default=(), metavar="URL[,URL]", what="Prometheus URLs",
        example="http://broker1:7071/metrics", default_text="none",
        help="broker metrics endpoints (Prometheus text format) scraped every stats period",
    ),
    OptionSpec(
        name="broker_metrics", field="broker_metrics", flag="--brokerperf-broker-metrics",
        kind="bool", default=True, metavar=None, what="broker-metrics switch",
        example="false",
        help="sample broker-side metrics every stats period (a JMX exporter agent on local "
        "Kafka, /proc of local broker processes, --brokerperf-prometheus URLs)",
    ),
    OptionSpec(
        name="powercut_fs", field="powercut_fs", flag="--brokerperf-powercut-fs",
        kind="bool", default=False, metavar=None, what="power-cut filesystem switch",
        example="true",
        help="put each local Kafka or RabbitMQ node's data directory on a FUSE filesystem "
        "that can forget "
        "what the node never fsynced, so a power-cut fault loses what a real one would "
        "(needs the faults extra and libfuse2; on by itself when --brokerperf-fault asks "
        "for power-cut)",
    ),
    # -- the throughput scenario (docs/explanation/throughput.md) ------------------------
    OptionSpec(
        name="ladder", field="ladder", flag="--brokerperf-ladder", kind="rates", default=None,
        metavar="RATES", what="throughput ladder", example="5k,10k,20k",
        default_text="the profile's: Confluent's 10k..1M msg/s x0.2 (smoke) or x1",
        help="the throughput scenario's fixed target rates in msg/s, comma-separated "
        "(k and M suffixes); climbed in ascending order until a rung is not sustainable",
    ),
    OptionSpec(
        name="rate_discovery", field="rate_discovery", flag="--brokerperf-rate-discovery",
        kind="bool", default=False, metavar=None, what="rate-discovery switch",
        example="true",
        help="run the throughput scenario as OMB's producerRate: 0 rate discovery (3 s "
        "control loop) instead of the ladder; results are labelled omb-rate-discovery",
    ),
    OptionSpec(
        name="calibration", field="calibration", flag="--brokerperf-calibration",
        kind="choice", default="auto", metavar="MODE", what="calibration mode",
        example="refresh", choices=("auto", "refresh", "off"),
        help="per-process generator ceilings for the throughput scenario: auto (cached per "
        "machine and version, measured when missing), refresh (measure again), off",
    ),
)

OPTIONS_BY_NAME: Final[Mapping[str, OptionSpec]] = MappingProxyType({o.name: o for o in OPTIONS})
