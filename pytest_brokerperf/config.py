"""Command line, environment and ini settings → one frozen :class:`Settings`, validated once.

Precedence, highest first (``None`` means "not set here", never a falsy test)::

    command line  >  BROKERPERF_<NAME> environment variable  >  brokerperf_<name> ini key
                  >  built-in default

``--kafka-home`` has one more fallback between the ini key and the default: the plain
``KAFKA_HOME`` environment variable, used only when it names an existing directory (it
belongs to other tools, so a stale value there must not break a pytest run).

Every option is described once, in :data:`OPTIONS`; the plugin registers flags and ini
keys from that table and ``docs/reference/options.md`` documents it. An invalid value
raises :class:`~pytest_brokerperf.errors.ConfigError` naming the value, where it came
from and what would be valid; the plugin turns that into ``pytest.UsageError``.

This module imports only the standard library (it is imported when pytest loads the
plugin, including for ``pytest --help``).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import math
import os
import re
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from pytest_brokerperf.errors import ConfigError
from pytest_brokerperf.versions import KAFKA_DEFAULT_VERSION, PULSAR_DEFAULT_VERSION

if TYPE_CHECKING:
    import pytest

__all__ = [
    "INCONCLUSIVE_MODES",
    "KNOWN_BROKERS",
    "OPTIONS",
    "PROFILES",
    "PROFILE_NAMES",
    "PROVISION_MODES",
    "OptionSpec",
    "ProfileSpec",
    "Settings",
    "new_run_id",
]

KNOWN_BROKERS: Final = ("kafka", "pulsar", "rabbitmq", "tansu", "redpanda", "automq")
PROVISION_MODES: Final = ("auto", "process", "container", "remote")
PROFILE_NAMES: Final = ("smoke", "standard", "omb")
INCONCLUSIVE_MODES: Final = ("fail", "warn")

#: What ``--brokerperf-provision=auto`` resolves to today.
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
    "existing_dir", "label", "version", "hostports", "bytes", "maxrate", "owner", "urls",
    "rates", "url", "amqpurls", "levels", "percent", "count", "formats", "budgets",
    "images",
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
        metavar="NAMES", what="broker list", example="kafka,pulsar", choices=KNOWN_BROKERS,
        help="brokers to run scenarios against, comma-separated; known: "
        + ", ".join(KNOWN_BROKERS),
    ),
    OptionSpec(
        name="provision", field="provision", flag="--brokerperf-provision", kind="choice",
        default="auto", metavar="MODE", what="provisioning mode", example="process",
        choices=PROVISION_MODES,
        help="how brokers come to exist: auto (currently process), process (local "
        "JVM/Erlang processes), container (testcontainers), remote (an existing cluster)",
    ),
    OptionSpec(
        name="image", field="images", flag="--brokerperf-image", kind="images", default=(),
        metavar="KIND=REF[,...]", what="container image", example="kafka=apache/kafka:4.3.1",
        default_text="brokerperf/<kind>:<version> (built by ci/docker.sh), else the "
        "official image of that version",
        help="the container image per broker kind for --brokerperf-provision=container, "
        "comma-separated KIND=REF pairs (never pulled: the image must be on the engine)",
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
        name="baseline", field="baseline", flag="--brokerperf-baseline", kind="existing_dir",
        default=None, metavar="DIR", what="baseline directory", example="brokerperf-baseline",
        default_text="none",
        help="earlier runs' results (at least 3 runs per cell) that --brokerperf-fail-on "
        "compares each test with; aggregated with Spark at session start",
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


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class _Source:
    """Where a raw value came from, for messages and relative paths."""

    kind: Literal["cli", "env", "ini", "override", "default"]
    label: str
    base_dir: Path

    def fix(self, spec: OptionSpec) -> str:
        if self.kind == "cli":
            return f"pass e.g. {spec.flag}={spec.example}"
        if self.kind == "env":
            return f"set e.g. {spec.env}={spec.example}, or unset it"
        if self.kind == "ini":
            return f"set e.g. {spec.ini} = {spec.example}, or remove the key"
        if self.kind == "override":
            return f"pass e.g. -o {spec.ini}={spec.example}"
        return "this is a bug in pytest-brokerperf's defaults"


def _invalid(spec: OptionSpec, raw: object, src: _Source, requirement: str) -> ConfigError:
    return ConfigError(
        f"invalid {spec.what} {raw!r} from {src.label}: {requirement}; {src.fix(spec)}."
    )


def _did_you_mean(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _one_of(spec: OptionSpec, raw: object, value: str, src: _Source) -> str:
    norm = value.strip().lower()
    if norm in spec.choices:
        return norm
    raise _invalid(
        spec, raw, src,
        f"expected one of {', '.join(spec.choices)}{_did_you_mean(norm, spec.choices)}",
    )


def _as_text(spec: OptionSpec, raw: object, src: _Source) -> str:
    if isinstance(raw, str):
        return raw
    raise _invalid(spec, raw, src, "expected a string")


def _parse_brokers(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    items: list[str]
    if isinstance(raw, str):
        items = raw.split(",")
    elif isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
        items = list(raw)
    else:
        raise _invalid(spec, raw, src, "expected a comma-separated list of brokers")
    names: list[str] = []
    for item in items:
        name = item.strip().lower()
        if not name:
            continue
        if name not in KNOWN_BROKERS:
            raise _invalid(
                spec, raw, src,
                f"unknown broker {name!r}{_did_you_mean(name, KNOWN_BROKERS)}; "
                f"known brokers are {', '.join(KNOWN_BROKERS)}",
            )
        if name not in names:
            names.append(name)
    if not names:
        raise _invalid(spec, raw, src, "expected at least one broker")
    return tuple(names)


def _parse_choice(spec: OptionSpec, raw: object, src: _Source) -> str:
    return _one_of(spec, raw, _as_text(spec, raw, src), src)


def _parse_integer(spec: OptionSpec, raw: object, src: _Source, minimum: int) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*[+-]?\d+\s*", raw):
        value = int(raw)
    if value is None or value < minimum:
        raise _invalid(spec, raw, src, f"expected an integer >= {minimum}")
    return value


def _parse_int(spec: OptionSpec, raw: object, src: _Source) -> int:
    return _parse_integer(spec, raw, src, 1)


def _parse_count(spec: OptionSpec, raw: object, src: _Source) -> int:
    return _parse_integer(spec, raw, src, 0)


def _parse_workers(spec: OptionSpec, raw: object, src: _Source) -> int | None:
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return None
    try:
        return _parse_int(spec, raw, src)
    except ConfigError:
        raise _invalid(spec, raw, src, "expected an integer >= 1 or auto") from None


_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _parse_seconds(spec: OptionSpec, raw: object, src: _Source) -> float:
    allow_zero = spec.name == "warmup"
    requirement = (
        f"expected a number of seconds {'>= 0' if allow_zero else '> 0'} "
        "(optionally with a unit: 500ms, 90s, 2m, 1h)"
    )
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _SECONDS_RE.match(raw)):
        unit = (m["unit"] or "s").lower()
        value = float(m["num"]) * _UNIT_SECONDS[unit]
    if value is None or not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise _invalid(spec, raw, src, requirement)
    return value


def _parse_percent(spec: OptionSpec, raw: object, src: _Source) -> float:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*%?\s*", raw)):
        value = float(m[1])
    if value is None or not math.isfinite(value) or not 0 < value <= 100:
        raise _invalid(spec, raw, src, "expected a percentage 0 < PERCENT <= 100, e.g. 5 or 5%")
    return value


def _parse_rate(spec: OptionSpec, raw: object, src: _Source) -> float:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _RATE_RE.match(raw)):
        mult = {"k": 1e3, "K": 1e3, "M": 1e6}.get(m["mult"] or "", 1.0)
        value = float(m["num"]) * mult
    if value is None or not math.isfinite(value) or value <= 0:
        raise _invalid(spec, raw, src, "expected a rate in msg/s > 0, e.g. 5000 or 50k")
    return value


def _parse_bool(spec: OptionSpec, raw: object, src: _Source) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        norm = raw.strip().lower()
        if norm in _TRUE:
            return True
        if norm in _FALSE:
            return False
    raise _invalid(spec, raw, src, "expected a boolean: 1/0, true/false, yes/no")


def _resolve_path(raw: str, src: _Source) -> Path:
    path = Path(os.path.expandvars(raw.strip())).expanduser()
    if not path.is_absolute():
        path = src.base_dir / path
    return Path(os.path.normpath(path))


def _parse_dir(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    if not text.strip():
        raise _invalid(spec, raw, src, "expected a directory path")
    path = _resolve_path(text, src)
    if path.exists() and not path.is_dir():
        raise _invalid(spec, raw, src, f"{path} exists and is not a directory")
    return path


def _parse_file(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    if not text.strip():
        raise _invalid(spec, raw, src, "expected a file path")
    path = _resolve_path(text, src)
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise _invalid(spec, raw, src, f"{path} {problem}; expected an existing file")
    return path


def _parse_existing_dir(spec: OptionSpec, raw: object, src: _Source) -> Path:
    text = _as_text(spec, raw, src)
    path = _resolve_path(text, src) if text.strip() else None
    if path is None or not path.is_dir():
        raise _invalid(spec, raw, src, f"{path} is not an existing directory")
    return path


def _parse_label(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _LABEL_RE.match(text):
        raise _invalid(
            spec, raw, src,
            "expected 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return text


def _parse_formats(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    items = [x.strip().lower() for x in _as_text(spec, raw, src).split(",") if x.strip()]
    if not items:
        raise _invalid(spec, raw, src, f"expected one or more of {', '.join(spec.choices)}")
    for item in items:
        if item not in spec.choices:
            raise _invalid(spec, raw, src, f"{item!r} is not one of {', '.join(spec.choices)}"
                           f"{_did_you_mean(item, spec.choices)}")
    return tuple(dict.fromkeys(items))


def _parse_budgets(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    from pytest_brokerperf.report.gates import parse_fail_on  # light: no pyspark

    try:
        parse_fail_on(text)
    except ConfigError as exc:
        raise _invalid(spec, raw, src, str(exc)) from None
    return text


def _parse_version(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _VERSION_RE.match(text):
        raise _invalid(spec, raw, src, "expected a release version like 4.3.1 or 3.9.0")
    return text


_HOSTPORT_RE: Final = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(\d{1,5})$")
_BYTES_RE: Final = re.compile(
    r"^\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[KMGT]i?B|kB|B)?\s*$"
)
_BYTE_UNITS: Final = {
    "B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
    "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4,
}
_OWNER_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def _parse_hostports(spec: OptionSpec, raw: object, src: _Source) -> str:
    items = [x.strip() for x in _as_text(spec, raw, src).split(",") if x.strip()]
    if not items:
        raise _invalid(spec, raw, src, "expected HOST:PORT[,HOST:PORT...]")
    for item in items:
        m = _HOSTPORT_RE.match(item)
        if m is None or not 0 < int(m.group(1)) < 65536:
            raise _invalid(
                spec, raw, src, f"{item!r} is not HOST:PORT with a port from 1 to 65535"
            )
    return ",".join(items)


def _parse_bytes(spec: OptionSpec, raw: object, src: _Source) -> int:
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str) and (m := _BYTES_RE.match(raw)):
        value = float(m["num"]) * _BYTE_UNITS[m["unit"] or "B"]
    if value is None or not math.isfinite(value) or value < 1:
        raise _invalid(
            spec, raw, src, "expected a size >= 1 byte, e.g. 500MB, 2GiB or 1000000 (bytes)"
        )
    return int(value)


def _parse_maxrate(spec: OptionSpec, raw: object, src: _Source) -> tuple[float, str]:
    """``(value, "msg/s")`` or ``(bytes per second, "B/s")``."""
    if isinstance(raw, str) and raw.strip().endswith("/s") and "B" in raw:
        size = raw.strip()[:-2]
        m = _BYTES_RE.match(size)
        if m is not None and m["unit"]:
            value = float(m["num"]) * _BYTE_UNITS[m["unit"]]
            if math.isfinite(value) and value > 0:
                return (value, "B/s")
        raise _invalid(spec, raw, src, "expected a byte rate > 0 such as 20MiB/s or 50MB/s")
    try:
        return (_parse_rate(spec, raw, src), "msg/s")
    except ConfigError:
        raise _invalid(
            spec, raw, src, "expected msg/s (5000, 50k) or a byte rate (20MiB/s)"
        ) from None


def _parse_owner(spec: OptionSpec, raw: object, src: _Source) -> str:
    text = _as_text(spec, raw, src).strip()
    if not _OWNER_RE.match(text):
        raise _invalid(
            spec, raw, src,
            "expected 1-64 letters, digits, '.', '_', '@' or '-', starting with a letter or "
            "digit",
        )
    return text


def _parse_urls(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    from urllib.parse import urlsplit

    if isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in _as_text(spec, raw, src).split(",")]
    urls = tuple(x for x in items if x)
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _invalid(spec, raw, src, f"{url!r} is not an http:// or https:// URL")
    return urls


_IMAGE_REF_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$")


def _parse_images(spec: OptionSpec, raw: object, src: _Source) -> tuple[tuple[str, str], ...]:
    """``kafka=REF,pulsar=REF`` → ``(("kafka", REF), ...)``; one image per broker kind."""
    if isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in _as_text(spec, raw, src).split(",")]
    images: dict[str, str] = {}
    for item in (x for x in items if x):
        kind, sep, ref = (part.strip() for part in item.partition("="))
        kind = kind.lower()
        if not sep or not ref:
            raise _invalid(spec, raw, src, f"{item!r} is not KIND=IMAGE (e.g. "
                           "kafka=apache/kafka:4.3.1)")
        if kind not in KNOWN_BROKERS:
            raise _invalid(spec, raw, src,
                           f"unknown broker {kind!r}{_did_you_mean(kind, KNOWN_BROKERS)}; "
                           f"known brokers are {', '.join(KNOWN_BROKERS)}")
        if not _IMAGE_REF_RE.match(ref):
            raise _invalid(spec, raw, src, f"{ref!r} is not an image reference "
                           "(repository[:tag] or repository@sha256:digest, lower case)")
        if kind in images:
            raise _invalid(spec, raw, src, f"two images for {kind!r}")
        images[kind] = ref
    return tuple(sorted(images.items()))


def _parse_url(spec: OptionSpec, raw: object, src: _Source) -> str:
    """One URL whose scheme is one of ``spec.choices``."""
    from urllib.parse import urlsplit

    url = _as_text(spec, raw, src).strip()
    parts = urlsplit(url)
    if parts.scheme not in spec.choices or not parts.hostname:
        schemes = " or ".join(f"{c}://" for c in spec.choices)
        raise _invalid(spec, raw, src, f"expected a {schemes} URL with a host")
    return url.rstrip("/")


def _parse_amqp_urls(spec: OptionSpec, raw: object, src: _Source) -> tuple[str, ...]:
    """Comma-separated ``amqp://`` / ``amqps://`` URIs; messages never quote a password."""
    from urllib.parse import urlsplit

    if isinstance(raw, list | tuple):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in _as_text(spec, raw, src).split(",")]
    uris = tuple(x for x in items if x)
    if not uris:
        raise ConfigError(f"invalid {spec.what} from {src.label}: expected amqp://HOST:PORT "
                          f"URIs; {src.fix(spec)}.")
    for uri in uris:
        try:
            parts = urlsplit(uri)
            ok = parts.scheme in ("amqp", "amqps") and bool(parts.hostname)
            _ = parts.port
        except ValueError:
            ok = False
        if not ok:
            shown = uri.split("@", 1)[-1]  # never echo credentials
            raise ConfigError(f"invalid {spec.what} from {src.label}: {shown!r} is not an "
                              f"amqp:// or amqps:// URI with a host; {src.fix(spec)}.")
    return uris


def _redact_userinfo(uri: str) -> str:
    """``amqp://user:***@host:port/vhost``: the password of a URI never reaches results."""
    scheme, sep, rest = uri.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return uri
    userinfo, _, host = rest.partition("@")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in userinfo else uri


def _remote_flags_given(values: dict[str, Any], sources: Mapping[str, str],
                        provision: str) -> bool:
    """Check every broker kind's remote-cluster flags (its package declares them, see
    :class:`~pytest_brokerperf.brokers.base.RemoteFlags`); True when some name a cluster.

    A cluster address contradicts a local provisioning mode; remote mode needs the address
    of every selected broker; a client config needs its address.
    """
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.base import flag_of

    remote = False
    seen: dict[int, str] = {}
    for name in brokers.names():
        kind = brokers.get(name)
        flags = kind.remote_flags
        if flags is None or id(flags) in seen:
            continue
        seen[id(flags)] = name
        given = [f for f in flags.address if values.get(f) not in (None, "", ())]
        if given:
            if provision not in ("auto", "remote"):
                raise ConfigError(
                    f"{flag_of(given[0])} (from {sources[given[0]]}) names a remote "
                    f"cluster, but --brokerperf-provision is {provision!r} (from "
                    f"{sources['provision']}); drop one of them, or pass "
                    "--brokerperf-provision=remote.")
            kind.complete_remote(values)
            remote = True
            continue
        if provision == "remote":
            users = [b for b in values["brokers"] if brokers.get(b).remote_flags is flags]
            if users:
                raise ConfigError(
                    "--brokerperf-provision=remote needs the cluster's address for "
                    f"{users[0]}: {flags.needs}.")
        cfg = flags.client_config
        if cfg is not None and values.get(cfg) is not None:
            raise ConfigError(
                f"{flag_of(cfg)} (from {sources[cfg]}) is the client config of a remote "
                f"cluster; it needs {flags.client_config_needs} (local brokers take no "
                "client config).")
    return remote


#: The durability levels, for messages (pytest_brokerperf.durability has the full table).
_LEVEL_NAMES: Final = (
    "1: sync replication + fsync, 2: sync replication + page cache, "
    "3: async replication + fsync, 4: async replication + page cache"
)


def _parse_levels(spec: OptionSpec, raw: object, src: _Source) -> tuple[int, ...]:
    """``1,2`` / ``all`` / a TOML int or list → ascending, de-duplicated levels 1-4."""
    items: list[object]
    if isinstance(raw, str):
        if raw.strip().lower() == "all":
            return (1, 2, 3, 4)
        items = [x.strip() for x in raw.split(",") if x.strip()]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise _invalid(spec, raw, src, f"expected levels 1-4 such as 1,2 or all ({_LEVEL_NAMES})")
    levels: set[int] = set()
    for item in items:
        level: int | None = None
        if isinstance(item, int) and not isinstance(item, bool):
            level = item
        elif isinstance(item, str) and re.fullmatch(r"[dD]?\d+", item.strip()):
            level = int(item.strip().lstrip("dD"))
        if level not in (1, 2, 3, 4):
            raise _invalid(
                spec, raw, src,
                f"{item!r} is not a durability level; expected 1, 2, 3 or 4 ({_LEVEL_NAMES}), "
                "comma-separated, or all",
            )
        levels.add(level)
    return tuple(sorted(levels))


def _parse_rates(spec: OptionSpec, raw: object, src: _Source) -> tuple[float, ...]:
    """Comma-separated rates (``5k,10k,20k``) → ascending, de-duplicated msg/s."""
    items: list[object]
    if isinstance(raw, str):
        items = [x for x in raw.split(",") if x.strip()]
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise _invalid(spec, raw, src, "expected at least one rate, e.g. 5k,10k,20k")
    values: set[float] = set()
    for item in items:
        try:
            values.add(_parse_rate(spec, item, src))
        except ConfigError:
            raise _invalid(
                spec, raw, src, f"{item!r} is not a rate in msg/s > 0; expected e.g. 5k,10k,20k"
            ) from None
    return tuple(sorted(values))


_PARSERS: Final[Mapping[str, Callable[[OptionSpec, object, _Source], Any]]] = {
    "brokers": _parse_brokers,
    "choice": _parse_choice,
    "int": _parse_int,
    "workers": _parse_workers,
    "seconds": _parse_seconds,
    "percent": _parse_percent,
    "count": _parse_count,
    "rate": _parse_rate,
    "bool": _parse_bool,
    "dir": _parse_dir,
    "file": _parse_file,
    "existing_dir": _parse_existing_dir,
    "label": _parse_label,
    "version": _parse_version,
    "hostports": _parse_hostports,
    "bytes": _parse_bytes,
    "maxrate": _parse_maxrate,
    "owner": _parse_owner,
    "urls": _parse_urls,
    "rates": _parse_rates,
    "url": _parse_url,
    "amqpurls": _parse_amqp_urls,
    "levels": _parse_levels,
    "formats": _parse_formats,
    "budgets": _parse_budgets,
    "images": _parse_images,
}


def _unset(raw: object) -> bool:
    """None, or a blank string (an empty env var or ini value means "not set")."""
    return raw is None or (isinstance(raw, str) and not raw.strip())


def new_run_id(now: _dt.datetime | None = None) -> str:
    """A fresh run id, ``YYYYmmdd-HHMMSS-<6 hex>`` in UTC."""
    now = now or _dt.datetime.now(_dt.UTC)
    return f"{now.astimezone(_dt.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """Every pytest-brokerperf setting of one session, resolved and validated.

    Build it with :meth:`from_pytest_config` (the plugin does, once, in
    ``pytest_configure``; fixtures read it from ``config.stash[SETTINGS_KEY]``) or, without
    pytest, with :meth:`resolve`. Times are seconds, rates msg/s, paths absolute.
    ``period``/``duration``/``warmup``/``rate`` are the explicit overrides (``None`` =
    the profile decides, see :attr:`profile_spec`).
    """

    brokers: tuple[str, ...] = ("kafka",)
    provision: str = "auto"  # as requested
    provision_effective: str = AUTO_PROVISION  # what "auto" became
    #: --brokerperf-image: (kind, image reference) pairs, sorted; () = the defaults
    images: tuple[tuple[str, str], ...] = ()
    nodes: int = 1
    profile: str = "smoke"
    durability: tuple[int, ...] = ()  # --brokerperf-durability; () = driver-defined
    results_dir: Path = Path("brokerperf-results")
    workload: Path | None = None
    driver: Path | None = None
    slo: Path | None = None  # --brokerperf-slo file
    keep_topics: bool = False
    inconclusive: str = "fail"
    max_steal: float = 5.0  # percent of the machine's CPU time (--brokerperf-max-steal)
    noise_retries: int = 1  # host-noise windows measured again (--brokerperf-noise-retries)
    period: float | None = None
    duration: float | None = None
    warmup: float | None = None
    rate: float | None = None
    workers: int | None = None
    env: str = "local"  # --brokerperf-env label, not the process environment
    report: tuple[str, ...] = ()  # --brokerperf-report formats
    baseline: Path | None = None  # --brokerperf-baseline
    fail_on: str | None = None  # --brokerperf-fail-on budgets (validated)
    kafka_version: str = KAFKA_DEFAULT_VERSION
    kafka_home: Path | None = None
    pulsar_version: str = PULSAR_DEFAULT_VERSION
    allow_xdist: bool = False
    kafka_bootstrap: str | None = None  # --kafka-bootstrap: a remote Kafka cluster
    kafka_config: Path | None = None  # client properties file (secrets: never recorded)
    pulsar_url: str | None = None  # --pulsar-url: a remote Pulsar cluster
    pulsar_admin_url: str | None = None
    pulsar_config: Path | None = None  # client.conf-style file (secrets: never recorded)
    rabbitmq_url: tuple[str, ...] = ()  # --rabbitmq-url: a remote RabbitMQ (may hold secrets)
    dry_run: bool = False
    max_bytes: int | None = None  # as given; see effective_max_bytes
    max_rate: tuple[float, str] | None = None  # (value, "msg/s" | "B/s"), as given
    owner: str | None = None  # as given; see owner_effective
    allow_cluster_changes: bool = False
    prometheus: tuple[str, ...] = ()
    broker_metrics: bool = True
    ladder: tuple[float, ...] | None = None  # --brokerperf-ladder, msg/s ascending
    rate_discovery: bool = False
    calibration: str = "auto"  # auto | refresh | off
    run_id: str = field(default_factory=new_run_id)
    #: setting name (OptionSpec.name, plus "run_id") → where its value came from
    sources: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )

    # ------------------------------------------------------------------ derived

    @property
    def profile_spec(self) -> ProfileSpec:
        """The profile table entry of :attr:`profile` (overrides not applied)."""
        return PROFILES[self.profile]

    @property
    def run_dir(self) -> Path:
        """``<results>/<run id>``: where this session's artefacts go."""
        return self.results_dir / self.run_id

    @property
    def provision_display(self) -> str:
        """``auto(process)`` when auto was resolved, else the mode itself."""
        if self.provision == self.provision_effective:
            return self.provision
        return f"{self.provision}({self.provision_effective})"

    def image_for(self, kind: str) -> str | None:
        """The ``--brokerperf-image`` reference for broker ``kind`` (None: the default)."""
        return dict(self.images).get(kind)

    @property
    def remote(self) -> bool:
        """True when brokers are existing clusters named by flags (caps apply)."""
        return self.provision_effective == "remote"

    @property
    def effective_max_bytes(self) -> int | None:
        """The byte cap in force: the flag, else :data:`REMOTE_MAX_BYTES` when remote."""
        if self.max_bytes is not None:
            return self.max_bytes
        return REMOTE_MAX_BYTES if self.remote else None

    @property
    def effective_max_rate(self) -> tuple[float, str] | None:
        """The rate cap in force: the flag, else :data:`REMOTE_MAX_RATE` when remote."""
        if self.max_rate is not None:
            return self.max_rate
        return REMOTE_MAX_RATE if self.remote else None

    @property
    def owner_effective(self) -> str:
        """``--brokerperf-owner``, else ``user@host`` of this process."""
        if self.owner:
            return self.owner
        import getpass
        import socket

        try:
            user = getpass.getuser()
        except Exception:  # no user name in a bare container: still an owner
            user = f"uid{os.getuid()}"
        return f"{user}@{socket.gethostname().split('.')[0]}"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe view for manifests and results."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "sources":
                continue
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value)
            elif f.name == "images":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        out["rabbitmq_url"] = [_redact_userinfo(u) for u in self.rabbitmq_url]
        out["sources"] = dict(self.sources)
        return out

    # ------------------------------------------------------------------ building

    @classmethod
    def resolve(
        cls,
        cli: Mapping[str, object],
        env: Mapping[str, str],
        ini: Mapping[str, object],
        *,
        cwd: Path | None = None,
        ini_path: Path | None = None,
        run_id: str | None = None,
        ini_overrides: Collection[str] = (),
    ) -> Settings:
        """Resolve every setting: ``cli`` > ``env`` > ``ini`` > default.

        ``cli`` and ``ini`` are keyed by ``OptionSpec.dest`` / ``.ini`` (both
        ``brokerperf_<name>``), ``env`` by variable name (pass ``os.environ``); absent
        keys and ``None`` values mean unset, and so do blank env and ini values.
        Relative paths resolve against ``cwd`` (command line, environment, default) or
        the ini file's directory. ``run_id`` (e.g. handed to an xdist worker by its
        controller) wins over ``BROKERPERF_RUN_ID``; otherwise a fresh id is made.
        ``ini_overrides`` names the ini keys whose value came from ``-o/--override-ini``
        (so messages say so).
        Raises :class:`ConfigError` on the first invalid value.
        """
        base = cwd if cwd is not None else Path.cwd()
        ini_base = ini_path.parent if ini_path is not None else base
        ini_where = f"in {ini_path.name if ini_path is not None else 'pytest.ini/pyproject.toml'}"
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for spec in OPTIONS:
            candidates: list[tuple[object, _Source]] = [
                (cli.get(spec.dest), _Source("cli", spec.flag, base)),
                (
                    None if _unset(env.get(spec.env)) else env[spec.env],
                    _Source("env", f"{spec.env} environment variable", base),
                ),
                (
                    None if _unset(ini.get(spec.ini)) else ini[spec.ini],
                    _Source("override", f"-o {spec.ini}", base)
                    if spec.ini in ini_overrides
                    else _Source("ini", f"{spec.ini} {ini_where}", ini_base),
                ),
            ]
            value: Any = spec.default
            where = "default"
            for raw, src in candidates:
                if raw is not None:
                    value = _PARSERS[spec.kind](spec, raw, src)
                    where = src.label
                    break
            else:
                if spec.name == "kafka_home":
                    fallback = env.get("KAFKA_HOME")
                    if fallback and Path(fallback).expanduser().is_dir():
                        value = Path(fallback).expanduser().resolve()
                        where = "KAFKA_HOME environment variable"
                elif spec.kind == "dir" and isinstance(value, str):
                    value = _resolve_path(value, _Source("default", "default", base))
            values[spec.field] = value
            sources[spec.name] = where

        if values.get("fail_on") and values.get("baseline") is None:
            raise ConfigError(
                f"--brokerperf-fail-on (from {sources['fail_on']}) needs the runs to compare "
                "with: give --brokerperf-baseline DIR (earlier runs' --brokerperf-results)")
        if run_id is not None:
            sources["run_id"] = "xdist controller"
        elif not _unset(env.get(RUN_ID_ENV)):
            run_id = env[RUN_ID_ENV].strip()
            sources["run_id"] = f"{RUN_ID_ENV} environment variable"
        else:
            run_id = new_run_id()
            sources["run_id"] = "generated"
        if not _RUN_ID_RE.match(run_id):
            raise ConfigError(
                f"invalid run id {run_id!r} from {sources['run_id']}: it names a results "
                "directory, so use 1-128 letters, digits, '.', '_' or '-' starting with a "
                f"letter or digit; unset {RUN_ID_ENV} to get a generated one."
            )
        provision = values["provision"]
        effective = AUTO_PROVISION if provision == "auto" else provision
        if _remote_flags_given(values, sources, provision):
            effective = "remote"
        return cls(
            **values,
            provision_effective=effective,
            run_id=run_id,
            sources=MappingProxyType(sources),
        )

    @classmethod
    def from_pytest_config(cls, config: pytest.Config) -> Settings:
        """Resolve the settings of a pytest session (flags, ``os.environ``, ini file)."""
        cli = {spec.dest: config.getoption(spec.dest, default=None) for spec in OPTIONS}
        ini = {spec.ini: config.getini(spec.ini) for spec in OPTIONS}
        # -o/--override-ini values arrive through getini too; name them as such.
        overridden = {
            str(o).split("=", 1)[0].strip()
            for o in getattr(config.option, "override_ini", None) or ()
        }
        workerinput = getattr(config, "workerinput", None)
        run_id = workerinput.get("brokerperf_run_id") if isinstance(workerinput, dict) else None
        return cls.resolve(
            cli,
            os.environ,
            ini,
            cwd=Path(config.invocation_params.dir),
            ini_path=Path(config.inipath) if config.inipath is not None else None,
            run_id=run_id,
            ini_overrides=overridden,
        )
