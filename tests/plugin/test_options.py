"""The plugin's options, ini keys, report header, xdist guard and terminal summary (pytester)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.config.settings import OPTIONS, PROFILES
from pytest_brokerperf.plugin.summary import SummaryRow, format_progress_line, format_table

HEAVY = (
    "confluent_kafka", "numpy", "hdrh", "pyspark", "testcontainers", "yaml", "pulsar", "pika",
)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference" / "options.md"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs must not see the outer session's brokerperf/xdist environment."""
    for name in list(os.environ):
        if (name.startswith(("BROKERPERF_", "PYTEST_XDIST_")) or name == "KAFKA_HOME") and (
                name != "BROKERPERF_AUTO_PROVISION"):
            monkeypatch.delenv(name)


SHOW_SETTINGS = """
import json, os

def test_show(brokerperf_settings):
    with open(os.environ["SETTINGS_OUT"], "w") as f:
        json.dump(brokerperf_settings.as_dict(), f)
"""


def settings_of(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> dict[str, Any]:
    """Run a session with ``args`` and return its resolved settings (as_dict)."""
    out = pytester.path / "settings.json"
    monkeypatch.setenv("SETTINGS_OUT", str(out))
    pytester.makepyfile(test_show=SHOW_SETTINGS)
    result = pytester.runpytest(*args, "test_show.py")
    result.assert_outcomes(passed=1)
    data: dict[str, Any] = json.loads(out.read_text())
    return data


# --------------------------------------------------------------------------- --help


def test_help_lists_every_option_env_var_and_ini_key(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    out = result.stdout.str()
    assert "message-broker performance scenarios:" in out
    for spec in OPTIONS:
        assert spec.flag in out, spec.flag
        assert f"{spec.ini} (" in out, spec.ini  # the ini section: "name (type):"
    # help texts wrap, so check env vars with whitespace removed
    flat = "".join(out.split())
    for spec in OPTIONS:
        assert spec.env in flat, spec.env
    assert "--no-brokerperf-keep-topics" in out
    result.stdout.fnmatch_lines(["*--brokerperf-nodes=N*", "*Default: 1; env*"])


BLOCKED_BOOT = f"""
import sys
for name in {HEAVY!r}:
    sys.modules[name] = None  # `import name` now raises ImportError
import pytest
code = pytest.main(sys.argv[1:])
loaded = [m for m in {HEAVY!r} if sys.modules.get(m) is not None]
print("HEAVY-LOADED:", loaded)
sys.exit(code)
"""


def test_help_and_collect_only_work_without_heavy_imports(pytester: pytest.Pytester) -> None:
    """Block confluent_kafka, numpy, hdrh, yaml, ... *before* pytest loads the plugin."""
    result = pytester.run(sys.executable, "-c", BLOCKED_BOOT, "--help")
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["*--brokerperf-profile=NAME*", "HEAVY-LOADED: []"])

    pytester.makepyfile(test_scen="def test_scenario(broker):\n    pass\n")
    result = pytester.run(sys.executable, "-c", BLOCKED_BOOT, "--collect-only", "-q",
                          "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["test_scen.py::test_scenario[[]kafka[]]", "HEAVY-LOADED: []"])


def test_help_works_with_a_broken_setting(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROKERPERF_NODES", "zero")
    assert pytester.runpytest("--help").ret == 0


# --------------------------------------------------------------------------- laziness

FIXTURE_RECORDER = """
import os

def pytest_fixture_setup(fixturedef, request):
    with open(os.environ["FIXTURES_OUT"], "a") as f:
        f.write(fixturedef.argname + "\\n")
"""

SCENARIO_FILE = """
def test_scenario(broker):
    raise AssertionError("the broker fixture must not run")

def test_api(brokerperf):
    raise AssertionError("the brokerperf fixture must not run")

def test_other():
    pass
"""


def _java_children() -> list[str]:
    import psutil

    return [
        p.name() for p in psutil.Process().children(recursive=True)
        if "java" in p.name().lower()
    ]


@pytest.mark.parametrize(
    ("args", "outcomes"),
    [
        (("--collect-only",), {}),
        (("-k", "test_other"), {"passed": 1, "deselected": 2}),
        (("-k", "nothing_matches"), {"deselected": 3}),
    ],
    ids=["collect-only", "k-other", "k-none"],
)
def test_collect_only_and_k_never_start_a_broker(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    outcomes: dict[str, int],
) -> None:
    record = pytester.path / "fixtures.txt"
    monkeypatch.setenv("FIXTURES_OUT", str(record))
    pytester.makeconftest(FIXTURE_RECORDER)
    pytester.makepyfile(test_scen=SCENARIO_FILE)
    before = _java_children()
    result = pytester.runpytest(*args)
    if outcomes:
        result.assert_outcomes(**outcomes)
    else:
        result.stdout.fnmatch_lines(["*3 tests collected*"])
    entered = record.read_text().split() if record.exists() else []
    assert not {"broker", "brokerperf", "broker_kind", "brokerperf_session_info"} & set(entered)
    assert _java_children() == before


# --------------------------------------------------------------------------- precedence


def test_header_line(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROKERPERF_AUTO_PROVISION", raising=False)  # auto, as users get it
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([
        "brokerperf: brokers=kafka provision=auto(*) nodes=1 profile=smoke "
        "results=brokerperf-results run_id=????????-??????-??????",
        "brokerperf: provision auto -> *",
    ])


@pytest.mark.parametrize(
    ("cli", "env", "ini", "expected"),
    [
        (True, True, True, "nodes=4 profile=omb"),
        (False, True, True, "nodes=3 profile=standard"),
        (False, False, True, "nodes=2 profile=standard"),
        (False, False, False, "nodes=1 profile=smoke"),
    ],
    ids=["cli", "env", "ini", "default"],
)
def test_precedence_cli_env_ini_default(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    cli: bool,
    env: bool,
    ini: bool,
    expected: str,
) -> None:
    if ini:
        pytester.makeini(
            "[pytest]\nbrokerperf_nodes = 2\nbrokerperf_profile = standard\n"
            "brokerperf_broker = pulsar\n"
        )
    if env:
        monkeypatch.setenv("BROKERPERF_NODES", "3")
        monkeypatch.setenv("BROKERPERF_BROKER", "rabbitmq,kafka")
    args = ["--brokerperf-nodes=4", "--brokerperf-profile", "omb", "--broker=tansu"] if cli else []
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    brokers = "tansu" if cli else "rabbitmq,kafka" if env else "pulsar" if ini else "kafka"
    result.stdout.fnmatch_lines([f"brokerperf: brokers={brokers} * {expected} *"])


def test_bool_and_numeric_precedence_through_pytest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini(
        "[pytest]\nbrokerperf_keep_topics = yes\nbrokerperf_rate = 2k\n"
        "brokerperf_results = from-ini\nbrokerperf_env = lab\n"
    )
    monkeypatch.setenv("BROKERPERF_RATE", "3000")
    s = settings_of(pytester, monkeypatch, "--no-brokerperf-keep-topics",
                    "--brokerperf-period=250ms")
    assert s["keep_topics"] is False  # an explicit CLI False beats ini yes
    assert s["rate"] == 3000.0  # env beats ini
    assert s["period"] == 0.25
    assert s["env"] == "lab"
    assert s["results_dir"] == str(pytester.path / "from-ini")  # relative to the ini file
    assert s["sources"]["keep_topics"] == "--brokerperf-keep-topics"
    assert s["sources"]["rate"] == "BROKERPERF_RATE environment variable"
    assert s["sources"]["env"] == "brokerperf_env in tox.ini"


def test_pyproject_ini_options(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyprojecttoml(
        "[tool.pytest.ini_options]\nbrokerperf_nodes = 3\nbrokerperf_allow_xdist = true\n"
        'brokerperf_broker = "kafka,pulsar"\n'
    )
    s = settings_of(pytester, monkeypatch)
    assert (s["nodes"], s["allow_xdist"], s["brokers"]) == (3, True, ["kafka", "pulsar"])


@pytest.mark.skipif(pytest.version_tuple < (9, 2), reason="typed ini keys need pytest 9.2")
def test_native_toml_types(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyprojecttoml(
        "[tool.pytest]\nbrokerperf_nodes = 3\nbrokerperf_keep_topics = true\n"
        'brokerperf_duration = 2.5\nbrokerperf_warmup = "1m"\n'
    )
    s = settings_of(pytester, monkeypatch)
    assert (s["nodes"], s["keep_topics"], s["duration"], s["warmup"]) == (3, True, 2.5, 60.0)


def test_override_ini_is_named_as_the_source(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest("-o", "brokerperf_nodes=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*invalid node count 0 from -o brokerperf_nodes:*pass e.g. -o brokerperf_nodes=3*"]
    )


def test_kafka_home_plain_env_fallback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAFKA_HOME", str(tmp_path))
    s = settings_of(pytester, monkeypatch)
    assert s["kafka_home"] == str(tmp_path.resolve())


# --------------------------------------------------------------------------- usage errors

USAGE_ERRORS = [
    # args, env, ini, fragments in stderr
    (["--brokerperf-nodes=0"], {}, "",
     ["'0'", "--brokerperf-nodes", "integer >= 1", "--brokerperf-nodes=3"]),
    ([], {"BROKERPERF_PROFILE": "fast"}, "",
     ["'fast'", "BROKERPERF_PROFILE environment variable", "smoke, standard, omb"]),
    ([], {}, "brokerperf_broker = kafak",
     ["'kafak'", "brokerperf_broker in tox.ini", "(did you mean 'kafka'?)",
      "kafka, pulsar, rabbitmq, tansu, redpanda, automq"]),
    (["--broker=kafka,nats"], {}, "",
     ["'kafka,nats'", "--broker", "unknown broker 'nats'", "kafka, pulsar, rabbitmq"]),
    ([], {"BROKERPERF_KEEP_TOPICS": "sometimes"}, "",
     ["'sometimes'", "BROKERPERF_KEEP_TOPICS", "1/0, true/false, yes/no"]),
    ([], {}, "brokerperf_inconclusive = ignore",
     ["'ignore'", "brokerperf_inconclusive in tox.ini", "fail, warn"]),
    (["--brokerperf-workload=missing.yaml"], {}, "",
     ["'missing.yaml'", "--brokerperf-workload", "does not exist"]),
    (["--brokerperf-rate=fast"], {}, "", ["'fast'", "--brokerperf-rate", "msg/s"]),
    # choices on the command line are argparse's job; its message names them too
    (["--brokerperf-provision=docker"], {}, "",
     ["*--brokerperf-provision*invalid choice: 'docker'*auto*process*container*remote*"]),
]


@pytest.mark.parametrize(("args", "env", "ini", "fragments"), USAGE_ERRORS,
                         ids=[f"e{i}" for i in range(len(USAGE_ERRORS))])
def test_invalid_values_are_usage_errors_naming_value_source_and_choices(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    ini: str,
    fragments: list[str],
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    for fragment in fragments:
        if "*" in fragment:
            result.stderr.fnmatch_lines([fragment])
        else:
            assert fragment in err, (fragment, err)


# --------------------------------------------------------------------------- xdist guard

XDIST_FILE = """
def test_unit():
    pass

def test_scenario(broker_kind):
    pass

def test_broker(broker):
    raise AssertionError("never reached")
"""


def test_scenarios_refuse_to_run_in_an_xdist_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = pytester.path / "fixtures.txt"
    monkeypatch.setenv("FIXTURES_OUT", str(record))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    pytester.makeconftest(FIXTURE_RECORDER)
    pytester.makepyfile(test_x=XDIST_FILE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*refuses to run a performance scenario inside pytest-xdist worker gw0*",
        "*shared 2-core machine*one broker per worker*results files concurrently*",
        "*-n 0*-p no:xdist*",
        "*--brokerperf-allow-xdist*",
    ])
    entered = record.read_text().split() if record.exists() else []
    assert "broker" not in entered and "broker_kind" not in entered


def test_allow_xdist_lets_scenarios_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    pytester.makepyfile("def test_scenario(broker_kind):\n    assert broker_kind == 'kafka'\n")
    result = pytester.runpytest_subprocess("--brokerperf-allow-xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


# --------------------------------------------------------------------------- summary


def _row(**kw: Any) -> SummaryRow:
    base: dict[str, Any] = dict(
        nodeid="scenarios/test_tailread.py::test_tailread[kafka]", broker="kafka",
        scenario="tailread", params="p=4 size=1KiB rate=1k", ack_rate=998.7, mib_s=0.97,
        pub_p50=1234.0, pub_p99=5678.0, pub_p999=123456.0, e2e_p50=None, e2e_p99=8000.0,
        e2e_p999=None, verdict="valid", slo="pass",
    )
    base.update(kw)
    return SummaryRow(**base)


def test_summary_table_renders_na_units_and_alignment() -> None:
    rows = [
        _row(),
        _row(nodeid="s/t.py::test_tailread[pulsar]", broker="pulsar", ack_rate=50000.2,
             mib_s=48.8, pub_p50=412.0, e2e_p50=600.0, e2e_p999=1_204_000.0,
             verdict="generator-bound", slo="inconclusive"),
        _row(ack_rate=None, mib_s=None, pub_p50=None, pub_p99=None, pub_p999=None,
             e2e_p99=None, slo="FAIL: e2e_response.p99"),
    ]
    group, header, *body = format_table(rows)
    assert "-- publish response ms --" in group and "-- e2e response ms --" in group
    for title in ("test", "broker", "scenario", "params", "ack msg/s", "MiB/s", "p50", "p99",
                  "p99.9", "verdict", "SLO"):
        assert title in header
    assert len(body) == 3
    # cells: test, broker, scenario, params (3 words), msg/s, MiB/s, 6 latencies, ...
    assert body[0].split()[6:14] == ["999", "0.97", "1.23", "5.68", "123", "n/a", "8.00", "n/a"]
    assert body[1].split()[6:14] == ["50,000", "48.8", "0.412", "5.68", "123", "0.600", "8.00",
                                     "1,204"]
    assert body[2].split()[6:14] == ["n/a"] * 8
    assert "FAIL: e2e_response.p99" in body[2]
    # every column starts at the same offset on every line: numbers right-aligned
    for title in ("MiB/s", "verdict"):
        col = header.index(title)
        if title == "verdict":
            assert all(line[col:].startswith(("valid", "generator-bound")) for line in body)
        else:
            end = col + len(title)
            assert all(line[end - 1] != " " and line[end] == " " for line in body)


def test_summary_of_no_rows_is_just_the_header() -> None:
    assert len(format_table([])) == 2


def test_progress_line() -> None:
    line = format_progress_line(
        7, "measure", target_rate=1000, publish_rate=999.6, consume_rate=1000.4, mib_s=0.98,
        publish_response_p99_us=3410, e2e_response_p99_us=None, backlog=12,
        label="kafka tailread",
    )
    assert line.startswith("brokerperf: kafka tailread #  7 measure")
    for part in ("sent 1,000/s (target 1,000)", "recv 1,000/s", "0.98 MiB/s",
                 "p99 publish 3.41 ms", "e2e n/a ms", "backlog 12"):
        assert part in line


SUMMARY_CONFTEST = """
import pytest
from pytest_brokerperf.plugin.stash import SUMMARY_ROWS_KEY
from pytest_brokerperf.plugin.summary import SummaryRow

@pytest.fixture
def add_row(request):
    def add(row):
        request.config.stash[SUMMARY_ROWS_KEY].append(row)
    return add
"""


def test_terminal_summary_section(pytester: pytest.Pytester,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the full layout (narrower: test_summary_width.py)
    pytester.makeconftest(SUMMARY_CONFTEST)
    pytester.makepyfile("""
        from pytest_brokerperf.plugin.summary import SummaryRow

        def test_a(add_row):
            add_row(SummaryRow("t.py::test_a[kafka]", "kafka", "tailread", "p=1", 1000.0,
                               0.98, 800.0, 2500.0, None, 900.0, 3000.0, None, "valid", "pass"))
    """)
    result = pytester.runpytest("--brokerperf-results=out")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*= brokerperf summary =*",
        "*-- publish response ms --*-- e2e response ms --*",
        "test*broker*scenario*params*ack msg/s*MiB/s*p50*p99*p99.9*p50*p99*p99.9*verdict*SLO",
        "t.py::test_a[[]kafka[]]*kafka*tailread*p=1*1,000*0.98*0.800*2.50*n/a*0.900*3.00*n/a"
        "*valid*pass",
        "1 scenario run: 1 valid*",
        "results written to out/????????-??????-??????",
    ])


def test_no_summary_without_rows(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest()
    assert "brokerperf summary" not in result.stdout.str()


def test_terminal_summary_never_raises(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SUMMARY_CONFTEST)
    pytester.makepyfile("def test_a(add_row):\n    add_row(object())\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["brokerperf: could not write the summary: *"])


# --------------------------------------------------------------------------- docs


def test_reference_docs_cover_every_option() -> None:
    text = DOCS.read_text()
    for spec in OPTIONS:
        for name in (spec.flag, spec.env, spec.ini):
            assert f"`{name}" in text, name
    for profile in PROFILES:
        assert f"`{profile}`" in text
    assert "BROKERPERF_RUN_ID" in text and "KAFKA_HOME" in text
