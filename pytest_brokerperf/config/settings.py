"""Command line, environment and ini settings → one frozen :class:`Settings`, validated once.

Precedence, highest first (``None`` means "not set here", never a falsy test)::

    command line  >  BROKERPERF_<NAME> environment variable  >  brokerperf_<name> ini key
                  >  built-in default

``--kafka-home`` has one more fallback between the ini key and the default: the plain
``KAFKA_HOME`` environment variable, used only when it names an existing directory (it
belongs to other tools, so a stale value there must not break a pytest run).

Every option is described once, in :data:`OPTIONS` (:mod:`pytest_brokerperf.config.options`,
re-exported here); the plugin registers flags and ini keys from that table and
``docs/reference/options.md`` documents it. Raw values are parsed by
:mod:`pytest_brokerperf.config.parsers`. An invalid value
raises :class:`~pytest_brokerperf.core.errors.ConfigError` naming the value, where it came
from and what would be valid; the plugin turns that into ``pytest.UsageError``.

This module imports only the standard library (it is imported when pytest loads the
plugin, including for ``pytest --help``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.config.options import (
    _RUN_ID_RE,
    AUTO_PROVISION,
    DEFAULT_GENERATORS,
    INCONCLUSIVE_MODES,
    OPTIONS,
    PROFILE_NAMES,
    PROFILES,
    PROVISION_MODES,
    REMOTE_MAX_BYTES,
    REMOTE_MAX_RATE,
    RUN_ID_ENV,
    OptionSpec,
    ProfileSpec,
)
from pytest_brokerperf.config.parsers import (
    _PARSERS,
    _remote_flags_given,
    _resolve_path,
    _Source,
    _unset,
)
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.redaction import Secret
from pytest_brokerperf.core.run_names import new_run_id

if TYPE_CHECKING:
    import pytest

    from pytest_brokerperf.config.fault_spec import FaultSpec

__all__ = [
    "INCONCLUSIVE_MODES",
    "OPTIONS",
    "PROFILES",
    "PROFILE_NAMES",
    "PROVISION_MODES",
    "OptionSpec",
    "ProfileSpec",
    "Settings",
    "new_run_id",
]


# --------------------------------------------------------------------------- settings

#: Each setting's built-in default, taken from :data:`OPTIONS` (the one place defaults are
#: written); ``dir`` defaults become relative paths (``resolve`` anchors them at the cwd).
_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        spec.field: Path(spec.default)
        if spec.kind == "dir" and isinstance(spec.default, str)
        else spec.default
        for spec in OPTIONS
    }
)


def _default(name: str) -> Any:
    """The :data:`OPTIONS` default of ``Settings.<name>`` (a KeyError names a missing row)."""
    return _DEFAULTS[name]


@dataclass(frozen=True)
class Settings:
    """Every pytest-brokerperf setting of one session, resolved and validated.

    Build it with :meth:`from_pytest_config` (the plugin does, once, in
    ``pytest_configure``; fixtures read it from ``config.stash[SETTINGS_KEY]``) or, without
    pytest, with :meth:`resolve`. Times are seconds, rates msg/s, paths absolute.
    ``period``/``duration``/``warmup``/``rate`` are the explicit overrides (``None`` =
    the profile decides, see :attr:`profile_spec`).
    """

    brokers: tuple[str, ...] = _default("brokers")
    #: as requested
    provision: str = _default("provision")
    provision_effective: str = AUTO_PROVISION  # what "auto" became
    #: why "auto" became what it did (set by :meth:`with_auto_resolved`; None before)
    auto_reason: str | None = None
    #: --brokerperf-image: (kind, image reference) pairs, sorted; () = the defaults
    images: tuple[tuple[str, str], ...] = _default("images")
    nodes: int = _default("nodes")
    profile: str = _default("profile")
    #: --brokerperf-durability; () = driver-defined
    durability: tuple[int, ...] = _default("durability")
    #: --brokerperf-fault; () = no fault (one test per fault otherwise)
    faults: tuple[FaultSpec, ...] = _default("faults")
    results_dir: Path = _default("results_dir")
    workload: Path | None = _default("workload")
    #: --brokerperf-lenient: unknown workload keys are ignored (recorded), not refused
    lenient: bool = _default("lenient")
    driver: Path | None = _default("driver")
    #: --brokerperf-slo file
    slo: Path | None = _default("slo")
    keep_topics: bool = _default("keep_topics")
    inconclusive: str = _default("inconclusive")
    #: percent of the machine's CPU time (--brokerperf-max-steal)
    max_steal: float = _default("max_steal")
    #: host-noise windows measured again (--brokerperf-noise-retries)
    noise_retries: int = _default("noise_retries")
    period: float | None = _default("period")
    duration: float | None = _default("duration")
    warmup: float | None = _default("warmup")
    #: the once-per-session broker warm-up (--brokerperf-broker-warmup); None: the profile's
    broker_warmup: float | None = _default("broker_warmup")
    rate: float | None = _default("rate")
    workers: int | None = _default("workers")
    #: --brokerperf-executor: local worker processes or a Spark barrier stage
    executor: str = _default("executor")
    #: --brokerperf-spark-master (None: local[N], N the generators)
    spark_master: str | None = _default("spark_master")
    #: --brokerperf-generators (None: DEFAULT_GENERATORS under spark; unused locally)
    generators: int | None = _default("generators")
    #: --brokerperf-env label, not the process environment
    env: str = _default("env")
    #: --brokerperf-report formats
    report: tuple[str, ...] = _default("report")
    #: --brokerperf-baseline: a results directory or a stored run (number, name, last, all)
    baseline: str | None = _default("baseline")
    #: --brokerperf-storage, --brokerperf-autosave, --brokerperf-save
    storage: Path = _default("storage")
    autosave: bool = _default("autosave")
    save: str | None = _default("save")
    #: --brokerperf-compare-across-env
    compare_across_env: bool = _default("compare_across_env")
    #: --brokerperf-fail-on budgets (validated)
    fail_on: str | None = _default("fail_on")
    kafka_version: str = _default("kafka_version")
    kafka_home: Path | None = _default("kafka_home")
    pulsar_version: str = _default("pulsar_version")
    allow_xdist: bool = _default("allow_xdist")
    #: --kafka-bootstrap: a remote Kafka cluster
    kafka_bootstrap: str | None = _default("kafka_bootstrap")
    #: client properties file (secrets: never recorded)
    kafka_config: Path | None = _default("kafka_config")
    #: --pulsar-url: a remote Pulsar cluster
    pulsar_url: str | None = _default("pulsar_url")
    pulsar_admin_url: str | None = _default("pulsar_admin_url")
    #: client.conf-style file (secrets: never recorded)
    pulsar_config: Path | None = _default("pulsar_config")
    #: --rabbitmq-url: a remote RabbitMQ (may hold secrets)
    #: every credential-bearing value is a Secret (repr masked; .reveal() for the client)
    rabbitmq_url: tuple[Secret, ...] = _default("rabbitmq_url")
    dry_run: bool = _default("dry_run")
    #: as given; see effective_max_bytes
    max_bytes: int | None = _default("max_bytes")
    #: (value, "msg/s" | "B/s"), as given
    max_rate: tuple[float, str] | None = _default("max_rate")
    #: as given; see owner_effective
    owner: str | None = _default("owner")
    allow_cluster_changes: bool = _default("allow_cluster_changes")
    #: --brokerperf-broker-memory: each local node's memory cgroup limit in bytes
    broker_memory: int | None = _default("broker_memory")
    #: --brokerperf-tls: local brokers serve TLS listeners and clients use them
    tls: bool = _default("tls")
    prometheus: tuple[Secret, ...] = _default("prometheus")
    broker_metrics: bool = _default("broker_metrics")
    #: --brokerperf-powercut-fs as given; see powercut_effective
    powercut_fs: bool = _default("powercut_fs")
    #: --brokerperf-ladder, msg/s ascending
    ladder: tuple[float, ...] | None = _default("ladder")
    rate_discovery: bool = _default("rate_discovery")
    #: auto | refresh | off
    calibration: str = _default("calibration")
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

    def with_auto_resolved(self, decide: Callable[[Settings], tuple[str, str]]) -> Settings:
        """``auto`` decided for this machine by ``decide`` (the plugin passes
        :func:`.broker_session.decide_auto`: containers when an engine answers with each broker's
        image, else processes), which returns the mode and why; unchanged for any other
        mode. Kept apart from :meth:`resolve`, which reads no machine state, and handed in
        by the caller, so that settings never look up a broker or ask a Docker engine."""
        if self.provision != "auto" or self.provision_effective == "remote":
            return self
        mode, reason = decide(self)
        return replace(self, provision_effective=mode, auto_reason=reason)

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
    def powercut_effective(self) -> bool:
        """Local nodes on the power-cut filesystem: the flag, or a power-cut fault asked
        for with --brokerperf-fault (a marker alone needs the flag: the session's broker
        starts before any test's marker is read)."""
        return self.powercut_fs or any(f.action == "power-cut" for f in self.faults)

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
            elif f.name == "faults":
                value = [fault.text() for fault in value]
            elif isinstance(value, tuple):
                value = [v.shown() if isinstance(v, Secret) else v for v in value]
            elif isinstance(value, Secret):
                value = value.shown()
            out[f.name] = value
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
                "with: give --brokerperf-baseline DIR (earlier runs' --brokerperf-results) or a "
                "stored run (a number, a name, last or all; see --brokerperf-autosave)"
            )
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
        if values.get("broker_memory") is not None and effective == "remote":
            raise ConfigError(
                f"--brokerperf-broker-memory (from {sources['broker_memory']}) caps the memory "
                "of brokers this plugin starts; a remote cluster's memory is its operators': "
                "drop the flag, or run against a local broker")
        _check_executor(values, sources)
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


def _check_executor(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """The executor's options agree with each other and with this machine, before any
    broker starts: generators only on Spark, Spark importable, enough task slots."""
    executor = values["executor"]
    generators, master = values.get("generators"), values.get("spark_master")
    if executor == "local":
        if generators is not None:
            raise ConfigError(
                f"--brokerperf-generators (from {sources['generators']}) sets the Spark "
                "tasks of --brokerperf-executor=spark; local runs spread their load over "
                "--brokerperf-workers processes: drop it, or add --brokerperf-executor=spark")
        return
    if values.get("workers") is not None:
        raise ConfigError(
            f"--brokerperf-workers (from {sources['workers']}) counts local worker "
            "processes; a --brokerperf-executor=spark run counts its tasks with "
            "--brokerperf-generators: use that instead")
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise ConfigError(
            f"--brokerperf-executor=spark (from {sources['executor']}) needs PySpark in this "
            "Python (the report extra: pip install 'pytest-brokerperf[report]')")
    n = generators if generators is not None else DEFAULT_GENERATORS
    slots = _master_slots(master)
    if slots is not None and n > slots:
        raise ConfigError(
            f"--brokerperf-generators={n} (from {sources['generators']}) needs {n} task "
            f"slots at once (one barrier stage), and Spark master {master!r} (from "
            f"{sources['spark_master']}) has {slots}: fewer generators, or a larger master")


def _master_slots(master: str | None) -> int | None:
    """Task slots a local master has (None: a cluster's, unknown before it is asked)."""
    import re

    if master is None:
        return None
    if m := re.fullmatch(r"local-cluster\[(\d+),(\d+),\d+\]", master):
        return int(m.group(1)) * int(m.group(2))
    if m := re.fullmatch(r"local\[(\d+)(,\d+)?\]", master):
        return int(m.group(1))
    if master == "local":
        return 1
    return None
