"""Settings resolution without pytest: precedence, parsing, validation messages."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.config.settings import (
    OPTIONS,
    PROFILES,
    ProfileSpec,
    Settings,
    new_run_id,
)
from pytest_brokerperf.core.errors import ConfigError

RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")


def resolve(
    cli: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    ini: dict[str, Any] | None = None,
    **kw: Any,
) -> Settings:
    return Settings.resolve(cli or {}, env or {}, ini or {}, **kw)


def error_of(**kw: Any) -> str:
    with pytest.raises(ConfigError) as exc:
        resolve(**kw)
    return str(exc.value)


# --------------------------------------------------------------------------- defaults


def test_defaults(tmp_path: Path) -> None:
    s = resolve(cwd=tmp_path)
    assert s.brokers == ("kafka",)
    assert (s.provision, s.provision_effective, s.provision_display) == (
        "auto", "process", "auto(process)"
    )
    assert s.nodes == 1
    assert s.profile == "smoke"
    assert s.results_dir == tmp_path / "brokerperf-results"
    assert s.run_dir == tmp_path / "brokerperf-results" / s.run_id
    assert (s.workload, s.driver, s.slo) == (None, None, None)
    assert s.keep_topics is False
    assert s.inconclusive == "fail"
    assert (s.period, s.duration, s.warmup, s.rate, s.workers) == (None,) * 5
    assert s.env == "local"
    assert s.kafka_version == "4.3.1"
    assert s.kafka_home is None
    assert s.allow_xdist is False
    assert RUN_ID.match(s.run_id)
    assert s.sources["nodes"] == "default"
    assert s.sources["run_id"] == "generated"


def test_settings_are_frozen() -> None:
    s = resolve()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.nodes = 3  # type: ignore[misc]


def test_as_dict_is_json_safe() -> None:
    import json

    d = resolve(cli={"brokerperf_broker": "kafka,pulsar"}).as_dict()
    assert d["brokers"] == ["kafka", "pulsar"]
    assert isinstance(d["results_dir"], str)
    assert d["sources"]["broker"] == "--broker"
    json.dumps(d)


# --------------------------------------------------------------------------- precedence

PRECEDENCE = [
    # name, cli value, env value, ini value, default, field, expected (cli, env, ini)
    ("nodes", "4", "3", "2", 1, "nodes", (4, 3, 2)),
    ("profile", "omb", "standard", "standard", "smoke", "profile", ("omb", "standard", "standard")),
    ("broker", "pulsar", "rabbitmq", "tansu,kafka", ("kafka",), "brokers",
     (("pulsar",), ("rabbitmq",), ("tansu", "kafka"))),
    ("keep_topics", False, "yes", "1", False, "keep_topics", (False, True, True)),
    ("rate", "50k", "2000", 100, None, "rate", (50_000.0, 2000.0, 100.0)),
    ("period", "500ms", "2", "1m", None, "period", (0.5, 2.0, 60.0)),
    ("env", "ci", "laptop", "lab", "local", "env", ("ci", "laptop", "lab")),
    ("inconclusive", "warn", "fail", "warn", "fail", "inconclusive", ("warn", "fail", "warn")),
]


@pytest.mark.parametrize(
    ("name", "cli", "env", "ini", "default", "attr", "expected"),
    PRECEDENCE,
    ids=[p[0] for p in PRECEDENCE],
)
def test_precedence_cli_env_ini_default(
    name: str, cli: Any, env: str, ini: Any, default: Any, attr: str, expected: tuple[Any, ...]
) -> None:
    dest = f"brokerperf_{name}"
    env_name = f"BROKERPERF_{name.upper()}"
    all_three = resolve(cli={dest: cli}, env={env_name: env}, ini={dest: ini})
    assert getattr(all_three, attr) == expected[0]
    assert getattr(resolve(env={env_name: env}, ini={dest: ini}), attr) == expected[1]
    assert getattr(resolve(ini={dest: ini}), attr) == expected[2]
    assert getattr(resolve(), attr) == default


def test_false_and_zero_from_the_command_line_are_not_unset() -> None:
    # None sentinels, never `or`: an explicit False (--no-...) beats env and ini.
    s = resolve(
        cli={"brokerperf_keep_topics": False, "brokerperf_warmup": "0"},
        env={"BROKERPERF_KEEP_TOPICS": "true", "BROKERPERF_WARMUP": "30"},
    )
    assert s.keep_topics is False
    assert s.warmup == 0.0
    assert s.sources["keep_topics"] == "--brokerperf-keep-topics"


def test_blank_env_and_ini_values_are_unset() -> None:
    s = resolve(env={"BROKERPERF_NODES": "  "},
                ini={"brokerperf_nodes": "", "brokerperf_rate": None})
    assert s.nodes == 1
    assert s.rate is None


def test_sources_name_where_each_value_came_from(tmp_path: Path) -> None:
    s = resolve(
        cli={"brokerperf_nodes": "3"},
        env={"BROKERPERF_PROFILE": "standard"},
        ini={"brokerperf_env": "lab"},
        ini_path=tmp_path / "pytest.ini",
    )
    assert s.sources["nodes"] == "--brokerperf-nodes"
    assert s.sources["profile"] == "BROKERPERF_PROFILE environment variable"
    assert s.sources["env"] == "brokerperf_env in pytest.ini"
    assert s.sources["broker"] == "default"


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("0", False), ("true", True), ("False", False), ("YES", True),
     ("no", False), (" on ", True), ("off", False), (True, True), (False, False)],
)
def test_bool_parsing(raw: Any, expected: bool) -> None:
    if isinstance(raw, str):
        assert resolve(env={"BROKERPERF_ALLOW_XDIST": raw}).allow_xdist is expected
    assert resolve(ini={"brokerperf_allow_xdist": raw}).allow_xdist is expected


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("90", 90.0), ("1.5", 1.5), ("250ms", 0.25), ("2m", 120.0), ("2min", 120.0),
     ("1h", 3600.0), ("30s", 30.0), (45, 45.0), (0.5, 0.5)],
)
def test_seconds_parsing(raw: Any, seconds: float) -> None:
    assert resolve(cli={"brokerperf_duration": raw}).duration == seconds


@pytest.mark.parametrize(
    ("raw", "rate"), [("5000", 5000.0), ("50k", 50_000.0), ("1.5M", 1_500_000.0), (12, 12.0),
                      ("200 msg/s", 200.0)],
)
def test_rate_parsing(raw: Any, rate: float) -> None:
    assert resolve(cli={"brokerperf_rate": raw}).rate == rate


def test_broker_list_is_normalised_and_deduplicated() -> None:
    s = resolve(cli={"brokerperf_broker": " Kafka, pulsar,,kafka ,RabbitMQ"})
    assert s.brokers == ("kafka", "pulsar", "rabbitmq")
    assert resolve(ini={"brokerperf_broker": ["redpanda", "automq"]}).brokers == (
        "redpanda", "automq"
    )


def test_every_known_broker_is_accepted() -> None:
    known = brokers.names()  # the registry is the one list of broker kinds
    assert resolve(cli={"brokerperf_broker": ",".join(known)}).brokers == known


def test_workers_accepts_auto() -> None:
    assert resolve(cli={"brokerperf_workers": "auto"}).workers is None
    assert resolve(cli={"brokerperf_workers": "3"}).workers == 3


def test_provision_records_requested_and_effective_mode() -> None:
    s = resolve(env={"BROKERPERF_PROVISION": "container"})
    assert (s.provision, s.provision_effective, s.provision_display) == (
        "container", "container", "container"
    )


# --------------------------------------------------------------------------- paths


def test_files_must_exist_and_resolve_relative_to_their_source(tmp_path: Path) -> None:
    cwd = tmp_path / "here"
    inidir = tmp_path / "proj"
    cwd.mkdir()
    inidir.mkdir()
    (cwd / "w.yaml").write_text("name: w\n")
    (inidir / "d.yaml").write_text("name: d\n")
    (inidir / "slo.yaml").write_text("[]\n")
    s = resolve(
        cli={"brokerperf_workload": "w.yaml"},
        ini={"brokerperf_driver": "d.yaml", "brokerperf_slo": "slo.yaml",
             "brokerperf_results": "out"},
        cwd=cwd,
        ini_path=inidir / "pyproject.toml",
    )
    assert s.workload == cwd / "w.yaml"
    assert s.driver == inidir / "d.yaml"
    assert s.slo == inidir / "slo.yaml"
    assert s.results_dir == inidir / "out"


def test_missing_workload_file_is_reported(tmp_path: Path) -> None:
    msg = error_of(cli={"brokerperf_workload": "nope.yaml"}, cwd=tmp_path)
    assert "'nope.yaml'" in msg
    assert "--brokerperf-workload" in msg
    assert str(tmp_path / "nope.yaml") in msg
    assert "does not exist" in msg


def test_a_directory_is_not_a_workload_file(tmp_path: Path) -> None:
    assert "is a directory" in error_of(env={"BROKERPERF_WORKLOAD": str(tmp_path)})


def test_results_must_not_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert "is not a directory" in error_of(cli={"brokerperf_results": "f"}, cwd=tmp_path)


def test_kafka_home_falls_back_to_plain_kafka_home(tmp_path: Path) -> None:
    s = resolve(env={"KAFKA_HOME": str(tmp_path)})
    assert s.kafka_home == tmp_path.resolve()
    assert s.sources["kafka_home"] == "KAFKA_HOME environment variable"
    # A stale KAFKA_HOME (it belongs to other tools) is ignored, not an error ...
    assert resolve(env={"KAFKA_HOME": str(tmp_path / "gone")}).kafka_home is None
    # ... but everything named BROKERPERF_* / --kafka-home is checked, and wins.
    other = tmp_path / "other"
    other.mkdir()
    assert resolve(cli={"brokerperf_kafka_home": str(other)},
                   env={"KAFKA_HOME": str(tmp_path)}).kafka_home == other
    assert "not an existing directory" in error_of(
        env={"BROKERPERF_KAFKA_HOME": str(tmp_path / "gone")}
    )


# --------------------------------------------------------------------------- messages

INVALID = [
    # (where, key, raw, fragments expected in the message)
    ("cli", "nodes", "0", ["'0'", "--brokerperf-nodes", "integer >= 1",
                           "--brokerperf-nodes=3"]),
    ("env", "nodes", "two", ["'two'", "BROKERPERF_NODES environment variable",
                             "integer >= 1", "BROKERPERF_NODES=3, or unset it"]),
    ("ini", "nodes", "-1", ["'-1'", "brokerperf_nodes in pytest.ini/pyproject.toml",
                            "integer >= 1", "remove the key"]),
    ("env", "provision", "docker", ["'docker'", "BROKERPERF_PROVISION",
                                    "auto, process, container, remote"]),
    ("ini", "profile", "fast", ["'fast'", "brokerperf_profile", "smoke, standard, omb"]),
    ("cli", "broker", "kafak,pulsar", ["'kafka'?", "--broker",
                                       "kafka, pulsar, rabbitmq, tansu, redpanda, automq"]),
    ("env", "broker", " , ", ["BROKERPERF_BROKER", "at least one broker"]),
    ("env", "keep_topics", "maybe", ["'maybe'", "BROKERPERF_KEEP_TOPICS",
                                     "1/0, true/false, yes/no"]),
    ("cli", "inconclusive", "ignore", ["'ignore'", "--brokerperf-inconclusive", "fail, warn"]),
    ("cli", "period", "0", ["'0'", "--brokerperf-period", "> 0"]),
    ("env", "duration", "soon", ["'soon'", "BROKERPERF_DURATION", "seconds > 0"]),
    ("ini", "warmup", "-5", ["'-5'", "brokerperf_warmup", ">= 0"]),
    ("cli", "rate", "fast", ["'fast'", "--brokerperf-rate", "msg/s > 0"]),
    ("cli", "workers", "0", ["'0'", "--brokerperf-workers", ">= 1 or auto"]),
    ("env", "env", "my lab", ["'my lab'", "BROKERPERF_ENV", "letters, digits"]),
    ("cli", "kafka_version", "latest", ["'latest'", "--kafka-version", "4.3.1"]),
    ("cli", "max_steal", "0", ["'0'", "--brokerperf-max-steal", "0 < PERCENT <= 100"]),
    ("env", "max_steal", "lots", ["'lots'", "BROKERPERF_MAX_STEAL", "e.g. 5 or 5%"]),
    ("ini", "noise_retries", "-1", ["'-1'", "brokerperf_noise_retries", "integer >= 0"]),
]


def test_steal_limit_and_noise_retries() -> None:
    assert (resolve().max_steal, resolve().noise_retries) == (5.0, 1)
    s = resolve(cli={"brokerperf_max_steal": "12.5%", "brokerperf_noise_retries": "0"})
    assert (s.max_steal, s.noise_retries) == (12.5, 0)
    assert resolve(ini={"brokerperf_max_steal": 100}).max_steal == 100.0


@pytest.mark.parametrize(("where", "key", "raw", "fragments"), INVALID,
                         ids=[f"{w}-{k}-{r}" for w, k, r, _ in INVALID])
def test_invalid_values_name_value_source_and_choices(
    where: str, key: str, raw: str, fragments: list[str]
) -> None:
    if where == "cli":
        msg = error_of(cli={f"brokerperf_{key}": raw})
    elif where == "env":
        msg = error_of(env={f"BROKERPERF_{key.upper()}": raw})
    else:
        msg = error_of(ini={f"brokerperf_{key}": raw})
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


def test_ini_source_names_the_ini_file(tmp_path: Path) -> None:
    msg = error_of(ini={"brokerperf_nodes": "0"}, ini_path=tmp_path / "tox.ini")
    assert "brokerperf_nodes in tox.ini" in msg
    msg = error_of(ini={"brokerperf_nodes": "0"}, ini_overrides={"brokerperf_nodes"})
    assert "from -o brokerperf_nodes:" in msg
    assert "pass e.g. -o brokerperf_nodes=3" in msg


def test_cli_wins_even_over_an_invalid_env_value() -> None:
    # validation is of the value that wins; a shadowed value is not looked at
    assert resolve(cli={"brokerperf_nodes": "2"}, env={"BROKERPERF_NODES": "zero"}).nodes == 2


# --------------------------------------------------------------------------- run id


def test_run_id_format() -> None:
    import datetime as dt

    rid = new_run_id(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC))
    assert rid.startswith("20260102-030405-")
    assert RUN_ID.match(rid)
    assert new_run_id() != new_run_id()


def test_run_id_env_override_and_validation() -> None:
    s = resolve(env={"BROKERPERF_RUN_ID": "nightly-42"})
    assert s.run_id == "nightly-42"
    assert s.sources["run_id"] == "BROKERPERF_RUN_ID environment variable"
    assert resolve(env={"BROKERPERF_RUN_ID": "x"}, run_id="from-controller").run_id == (
        "from-controller"
    )
    msg = error_of(env={"BROKERPERF_RUN_ID": "../etc"})
    assert "'../etc'" in msg and "BROKERPERF_RUN_ID" in msg


# --------------------------------------------------------------------------- profiles


def test_profile_table() -> None:
    smoke, standard, omb = PROFILES["smoke"], PROFILES["standard"], PROFILES["omb"]
    assert (smoke.warmup_s, smoke.measure_s, smoke.period_s, smoke.tailread_rate,
            smoke.broker_warmup_s) == (10, 15, 1, 1000, 15)
    assert (standard.warmup_s, standard.measure_s, standard.period_s,
            standard.tailread_rate, standard.broker_warmup_s) == (60, 120, 10, 5000, 60)
    assert omb.from_workload and not omb.warmup_until_steady
    assert (omb.period_s, omb.broker_warmup_s) == (10, 60)
    assert smoke.warmup_until_steady and not smoke.from_workload


def test_profile_spec_follows_the_profile_setting() -> None:
    assert resolve().profile_spec is PROFILES["smoke"]
    assert resolve(cli={"brokerperf_profile": "omb"}).profile_spec.name == "omb"
    # overrides stay on Settings; the spec is the table entry
    s = resolve(cli={"brokerperf_duration": "5"})
    assert s.profile_spec.measure_s == 15 and s.duration == 5


def test_with_workload_fills_omb_only() -> None:
    omb = PROFILES["omb"].with_workload(warmup_s=600, measure_s=1800, rate=128000,
                                         period_s=1.0)
    assert (omb.warmup_s, omb.measure_s, omb.tailread_rate, omb.period_s) == (
        600, 1800, 128000, 1.0
    )
    assert PROFILES["omb"].with_workload(warmup_s=1, measure_s=2, rate=3).period_s == 10
    smoke = PROFILES["smoke"]
    assert smoke.with_workload(warmup_s=600, measure_s=1800, rate=1) is smoke
    assert isinstance(omb, ProfileSpec)


# --------------------------------------------------------------------------- table


def test_option_table_is_consistent() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    assert len({o.flag for o in OPTIONS}) == len(OPTIONS)
    for o in OPTIONS:
        assert o.field in fields, o
        assert o.dest == o.ini == f"brokerperf_{o.name}"
        assert o.env == f"BROKERPERF_{o.name.upper()}"
        assert o.flag == "--broker" or o.flag.startswith(("--brokerperf-", "--kafka-",
                                                          "--pulsar-", "--rabbitmq-"))
        if o.kind not in ("file", "existing_dir", "budgets"):  # the documented example is valid
            resolve(cli={o.dest: o.example, **_EXAMPLE_NEEDS.get(o.name, {})})


#: options whose example is valid only beside another option
_EXAMPLE_NEEDS: dict[str, dict[str, str]] = {
    "generators": {"brokerperf_executor": "spark"},
}


# ----------------------------------------------------------------- one source of defaults

_DERIVED_FIELDS = {"provision_effective", "auto_reason", "run_id", "sources"}


def test_every_settings_field_has_one_option_row_and_back() -> None:
    settings_fields = {f.name for f in dataclasses.fields(Settings)} - _DERIVED_FIELDS
    option_fields = [spec.field for spec in OPTIONS]
    assert len(option_fields) == len(set(option_fields)), "two option rows set one field"
    assert settings_fields == set(option_fields)


def test_settings_defaults_agree_with_the_option_table() -> None:
    by_name = {f.name: f for f in dataclasses.fields(Settings)}
    disagree = []
    for spec in OPTIONS:
        want = spec.default
        if spec.kind == "dir" and isinstance(want, str):
            want = Path(want)
        got = by_name[spec.field].default
        if got is dataclasses.MISSING or got != want or type(got) is not type(want):
            disagree.append(f"{spec.field}: Settings {got!r} vs {spec.flag} {want!r}")
    assert not disagree, "defaults written twice disagree:\n" + "\n".join(disagree)


def test_resolving_nothing_gives_the_bare_settings(tmp_path: Path) -> None:
    resolved = Settings.resolve({}, {}, {}, cwd=tmp_path, run_id="r1")
    bare = Settings(run_id="r1", results_dir=tmp_path / "brokerperf-results",
                    storage=tmp_path / ".brokerperf")
    assert resolved == bare
