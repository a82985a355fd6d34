"""pytest hooks of pytest-brokerperf: options, markers, broker matrix, xdist guard, summary.

Hooks only. Nothing heavy is imported here (no broker clients, numpy, hdrh, yaml,
testcontainers or pyspark): ``pytest --help``, ``--collect-only`` and ``-k`` must work
without them and must never start a broker. Settings live in
:mod:`pytest_brokerperf.config`, the summary table in :mod:`.summary`, the fixtures in
:mod:`.fixtures` (imported at the end so pytest finds them on this plugin module).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.durability import LEVELS, level_id
from pytest_brokerperf.config.settings import OPTIONS, OptionSpec, Settings
from pytest_brokerperf.core.errors import BrokerPerfError, ConfigError
from pytest_brokerperf.plugin.junit import note_failure, record_stop, track_test
from pytest_brokerperf.plugin.stash import (
    ARTEFACTS_KEY,
    GATE_KEY,
    OWN_WORKLOAD_KEY,
    SETTINGS_KEY,
    SUMMARY_ROWS_KEY,
)

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.config.fault_spec import FaultSpec
    from pytest_brokerperf.scenario_library.study_cases import StudyCase

#: Fixtures that make a test a performance scenario (refused inside xdist workers).
SCENARIO_FIXTURES = frozenset({"broker_kind", "broker_type", "broker", "brokerperf",
                               "broker_durability"})

#: The scenario markers: each names the scenario kind its tests run.
SCENARIO_MARKERS = ("tailread", "throughput", "catchup", "mixed", "reassign", "soak")

MARKERS = (
    "tailread: tail-read latency scenario (fixed-rate publishing, tailing consumers)",
    "throughput: maximum sustainable throughput scenario",
    "catchup: catch-up read scenario (backlog built while consumers are paused, then "
    "drained while producers go on)",
    "mixed: mixed workload scenario (a tailing subscription, then a second subscription "
    "from the earliest position catching up while producers and the tail go on; "
    "deselected on brokers without an earliest-position reader)",
    "reassign: partition reassignment scenario (a loaded single-replica partition moved "
    "with its data to another broker while the load goes on; deselected on brokers "
    "without a partition mover)",
    "soak: soak scenario (a tail read held at a moderate rate, 10 minutes by default, "
    "failing when a worker's or local broker's memory, open files or threads grow "
    "without bound)",
    "own_workload: this test runs its own parameters, not the --brokerperf-workload "
    "file (a variant of its scenario's plain test); deselected, like study and sweep "
    "cases, when a workload file is given",
    "broker(*names): run this test only for these brokers "
    "(known: {known}); a test none of whose brokers is selected "
    "by --broker is deselected",
    'slo(*exprs): SLO expressions for this test, e.g. @pytest.mark.slo("e2e_response.p99 '
    '< 50 ms")',
    "durability(*levels): run this test at these durability levels (1: sync replication + "
    "fsync, 2: sync replication + page cache, 3: async replication + fsync, 4: async "
    "replication + page cache), overriding --brokerperf-durability; ids read test[kafka-d1]",
    'fault(*specs): inject these faults in the tail-read measured window, one test each, '
    'e.g. @pytest.mark.fault("kill-broker@5s", "pause-broker@5s:3s"), overriding '
    "--brokerperf-fault; ids read test[kafka-d1-kill]",
    "study(name, table): set by pytest-brokerperf on every case of a published study (a "
    "StudyCase parameter whose table the study publishes); run one study with "
    "-m \"study(name='streamnative')\", one table with "
    "-m \"study(name='confluent', table='figure 2')\", every study with -m study",
)


# --------------------------------------------------------------------------- options


def _flag_help(spec: OptionSpec) -> str:
    env = spec.env + (" or KAFKA_HOME" if spec.name == "kafka_home" else "")
    known = f"; known: {', '.join(brokers.names())}" if spec.kind == "brokers" else ""
    text = f"{spec.help}{known}. Default: {spec.shown_default}; env {env}; ini {spec.ini}."
    return text.replace("%", "%%")  # argparse formats help with %


def _ini_help(spec: OptionSpec) -> str:
    return f"{spec.help}. Default: {spec.shown_default}; {spec.flag} and {spec.env} win."


def _ini_type(spec: OptionSpec) -> Any:
    """``int | str``-style unions on pytest >= 9.2, so native TOML values are accepted
    while invalid strings still reach our own validation (and its better messages)."""
    if spec.ini_type == "string" or pytest.version_tuple < (9, 2):
        return "string"
    native: dict[str, Any] = {"int": int, "float": float, "bool": bool}
    return native[spec.ini_type] | str


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("brokerperf", "message-broker performance scenarios")
    for spec in OPTIONS:
        kwargs: dict[str, Any] = {"dest": spec.dest, "default": None, "help": _flag_help(spec)}
        if spec.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["metavar"] = spec.metavar
            if spec.kind == "choice":
                kwargs["choices"] = spec.choices
        group.addoption(spec.flag, **kwargs)
        parser.addini(spec.ini, _ini_help(spec), type=_ini_type(spec), default=None)


# --------------------------------------------------------------------------- configure


def pytest_configure(config: pytest.Config) -> None:
    known = ", ".join(brokers.names())  # the registry: the one list of broker kinds
    for line in MARKERS:
        config.addinivalue_line("markers", line.replace("{known}", known))
    config.stash[SUMMARY_ROWS_KEY] = []
    try:
        settings = Settings.from_pytest_config(config)
        if not getattr(config.option, "help", False):
            from pytest_brokerperf.plugin.broker_session import decide_auto

            settings = settings.with_auto_resolved(decide_auto)  # containers or processes
    except ConfigError as exc:
        if getattr(config.option, "help", False):
            return  # `pytest --help` must work even with a broken setting
        from pytest_brokerperf.plugin.junit import write_early_xml

        write_early_xml(config, f"pytest-brokerperf: {exc}")
        raise pytest.UsageError(f"pytest-brokerperf: {exc}") from exc
    config.stash[SETTINGS_KEY] = settings


def pytest_sessionstart(session: pytest.Session) -> None:
    """``--brokerperf-fail-on``: aggregate the baseline once (Spark), before any test."""
    config = session.config
    settings = config.stash.get(SETTINGS_KEY, None)
    if (settings is None or not settings.fail_on or settings.dry_run
            or config.getoption("collectonly", False) or _xdist_worker(config) is not None):
        return
    from pytest_brokerperf.report.session import load_gate

    try:
        gate = load_gate(settings)
    except ImportError as exc:
        raise pytest.UsageError(
            f"pytest-brokerperf: --brokerperf-fail-on needs the report extra ({exc}): "
            "pip install 'pytest-brokerperf[report]'") from exc
    except BrokerPerfError as exc:
        raise pytest.UsageError(f"pytest-brokerperf: --brokerperf-baseline: {exc}") from exc
    if gate is not None:
        config.stash[GATE_KEY] = gate


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: one run id for the whole session."""
    settings = node.config.stash.get(SETTINGS_KEY, None)
    if settings is not None:
        node.workerinput["brokerperf_run_id"] = settings.run_id


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return None
    from pytest_brokerperf.plugin.broker_session import provision_reason
    from pytest_brokerperf.plugin.summary import _display_path

    results = _display_path(settings.results_dir, config.invocation_params.dir)
    reason = provision_reason(settings)
    return [
        f"brokerperf: brokers={','.join(settings.brokers)} "
        f"provision={settings.provision_display} nodes={settings.nodes} "
        + (f"durability={','.join(map(str, settings.durability))} "
           if settings.durability else "")
        + f"profile={settings.profile} results={results} run_id={settings.run_id}"
        + (" DRY-RUN" if settings.dry_run else ""),
        *([f"brokerperf: {reason}"] if reason else []),
    ]


# --------------------------------------------------------------------------- matrix


def _marker_brokers(node: pytest.Item) -> tuple[str, ...] | None:
    """The broker names of the closest ``@pytest.mark.broker``, validated; None if absent."""
    mark = node.get_closest_marker("broker")
    if mark is None:
        return None
    where = f"@pytest.mark.broker{mark.args!r} on {node.nodeid}"
    if mark.kwargs or not mark.args or not all(isinstance(a, str) for a in mark.args):
        raise ConfigError(
            f"{where}: expected one or more broker names as strings, "
            f'e.g. @pytest.mark.broker("kafka", "pulsar")'
        )
    names = tuple(a.strip().lower() for a in mark.args)
    unknown = [n for n in names if not brokers.is_known(n)]
    if unknown:
        raise ConfigError(
            f"{where}: unknown broker {unknown[0]!r}; known brokers are "
            f"{', '.join(brokers.names())}"
        )
    return names


def _marker_levels(node: pytest.Item) -> tuple[int, ...] | None:
    """The levels of the closest ``@pytest.mark.durability``, validated; None if absent."""
    mark = node.get_closest_marker("durability")
    if mark is None:
        return None
    where = f"@pytest.mark.durability{mark.args!r} on {node.nodeid}"
    ok = (not mark.kwargs and bool(mark.args)
          and all(isinstance(a, int) and not isinstance(a, bool) for a in mark.args))
    if not ok or any(a not in LEVELS for a in mark.args):
        bad = next((a for a in mark.args if a not in LEVELS), None) if ok else None
        what = f"{bad!r} is not a durability level; " if bad is not None else ""
        raise ConfigError(
            f"{where}: {what}expected one or more levels 1-4 as integers (1: sync "
            "replication + fsync, 2: sync replication + page cache, 3: async replication + "
            "fsync, 4: async replication + page cache), e.g. @pytest.mark.durability(1, 2)"
        )
    return tuple(sorted(set(mark.args)))


def _marker_faults(node: pytest.Item) -> tuple[FaultSpec, ...] | None:
    """The faults of the closest ``@pytest.mark.fault``, validated; None if absent."""
    from pytest_brokerperf.faults import parse_fault

    mark = node.get_closest_marker("fault")
    if mark is None:
        return None
    where = f"@pytest.mark.fault{mark.args!r} on {node.nodeid}"
    if mark.kwargs or not mark.args or not all(isinstance(a, str) for a in mark.args):
        raise ConfigError(f"{where}: expected one or more fault strings, e.g. "
                          '@pytest.mark.fault("kill-broker@5s", "pause-broker@5s:3s")')
    return tuple(parse_fault(a, where) for a in mark.args)


def _parametrized_by_user(metafunc: pytest.Metafunc, argname: str) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if argname in names:
            return True
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``broker_kind`` over ``--broker`` (restricted by ``@pytest.mark.broker``)."""
    if "broker_kind" not in metafunc.fixturenames:
        return
    if _parametrized_by_user(metafunc, "broker_kind"):
        return
    settings = metafunc.config.stash.get(SETTINGS_KEY, None)
    brokers = list(settings.brokers) if settings is not None else ["kafka"]
    try:
        wanted = _marker_brokers(metafunc.definition)
    except ConfigError:
        wanted = None  # reported once, as a usage error, in pytest_collection_modifyitems
    if wanted is not None:
        # Nothing selected: keep the marker's own names; these items get deselected.
        brokers = [b for b in brokers if b in wanted] or list(dict.fromkeys(wanted))
    metafunc.parametrize("broker_kind", brokers, ids=brokers, scope="session")
    _parametrize_durability(metafunc, settings)
    _parametrize_fault(metafunc, settings)


def _parametrize_fault(metafunc: pytest.Metafunc, settings: Settings | None) -> None:
    """Parametrize ``broker_fault`` by the marker's faults, else the option's (function
    scope, last, so ids read ``test_x[kafka-d1-kill]``); none: the fixture gives None."""
    if "broker_fault" not in metafunc.fixturenames:
        return
    if _parametrized_by_user(metafunc, "broker_fault"):
        return
    try:
        faults = _marker_faults(metafunc.definition)
    except ConfigError:
        return  # reported once, as a usage error, in pytest_collection_modifyitems
    if faults is None:
        faults = settings.faults if settings is not None else ()
    if faults:
        from pytest_brokerperf.config.fault_spec import fault_ids

        metafunc.parametrize("broker_fault", list(faults), ids=fault_ids(faults))


def _parametrize_durability(metafunc: pytest.Metafunc, settings: Settings | None) -> None:
    """Parametrize ``broker_durability`` by the marker's levels, else the option's.

    Session scope, after ``broker_kind``, so ids read ``test_x[kafka-d1]``; without levels
    the ``broker_durability`` fixture gives None and ids stay ``test_x[kafka]``.
    """
    if "broker_durability" not in metafunc.fixturenames:
        return
    if _parametrized_by_user(metafunc, "broker_durability"):
        return
    try:
        levels = _marker_levels(metafunc.definition)
    except ConfigError:
        return  # reported once, as a usage error, in pytest_collection_modifyitems
    if levels is None:
        levels = settings.durability if settings is not None else ()
    if levels:
        # indirect: the fixture gives the level (see fixtures.broker_durability)
        metafunc.parametrize("broker_durability", list(levels), indirect=True,
                             ids=[level_id(lv) for lv in levels], scope="session")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark a published study's case ``study(name=..., table=...)`` as it is collected,
    before ``-m`` selects (so ``-m "study(name='automq')"`` runs one study). A case whose
    table the study does not publish (a sweep at a study's shape) is not marked. Only a
    test module that imported the study cases can hold one: collecting others imports
    nothing (no scenario, engine or numpy)."""
    study_case = _study_case_class()
    if study_case is None:
        return
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if isinstance(value, study_case) and _published_table(value.study, value.source):
            item.add_marker(pytest.mark.study(name=value.study, table=value.source))
            return


def _study_case_class() -> type[StudyCase] | None:
    """``StudyCase`` when a test module imported the study cases (only then can a test be
    parametrized with one); None otherwise, importing nothing (no scenario, engine or
    numpy while collecting)."""
    cases = sys.modules.get("pytest_brokerperf.scenario_library.study_cases")
    return None if cases is None else cases.StudyCase


def _published_table(study: str, table: str) -> bool:
    from pytest_brokerperf.report import published

    return (study, table) in published.layouts()


@pytest.hookimpl(trylast=True)  # after pytest's own fixture-based reordering
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect tests whose ``broker`` marker or ``broker_kind`` is not selected; group
    durability-parametrized tests so a broker restarts only when it must."""
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    selected = set(settings.brokers)
    remaining: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    problems: list[str] = []
    for item in items:
        try:
            wanted = _marker_brokers(item)
            _marker_levels(item)
            _marker_faults(item)
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("broker_kind") if callspec is not None else None
        keep = True
        if wanted is not None and not selected.intersection(wanted):
            keep = False
        if kind is not None and (kind not in selected or (wanted and kind not in wanted)):
            keep = False
        (remaining if keep else deselected).append(item)
    if problems:
        raise pytest.UsageError(note_failure(config, "pytest-brokerperf: " + "\n".join(problems)))
    if settings.workload is not None:
        own = [i for i in remaining if _runs_own_workload(i)]
        if own:
            deselected += own
            remaining = [i for i in remaining if i not in own]
            config.stash[OWN_WORKLOAD_KEY] = len(own)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = remaining
    _apply_study_case_refusals(config, settings, items)
    remaining = list(items)
    if settings.profile == "omb" and settings.provision != "remote":
        _refuse_omb_cases(config, settings, remaining)
    if (not config.getoption("collectonly", False)
            and any(SCENARIO_FIXTURES.intersection(getattr(i, "fixturenames", ()))
                    for i in remaining)):
        # the user's input, checked before any broker starts (exit code 4 when bad)
        from pytest_brokerperf.plugin.preflight import preflight_problems

        kinds = {m for i in remaining
                 if SCENARIO_FIXTURES.intersection(getattr(i, "fixturenames", ()))
                 for m in SCENARIO_MARKERS if i.get_closest_marker(m) is not None}
        found = preflight_problems(settings, scenarios=kinds)
        if found:
            raise pytest.UsageError(note_failure(config, "pytest-brokerperf: " + "\n".join(found)))
    _group_by_broker_process(items, remote=settings.remote)


STUDY_DESELECTED_KEY = pytest.StashKey[list[str]]()


def _apply_study_case_refusals(config: pytest.Config, settings: Settings,
                               items: list[pytest.Item]) -> None:
    """Tests that do not apply to their item's broker kind are deselected, with the
    reason printed after collection: a scenario marker (or a study case's scenario)
    whose scenario ``needs`` a capability the kind lacks (a reassignment on Pulsar:
    ``BrokerType.capabilities``), and the study's case of another broker (its RabbitMQ
    case on Kafka). Study cases this setup cannot run (too few nodes, broker settings a
    local broker cannot take) are skipped with the reason. Before any broker starts."""
    study_case = _study_case_class()
    dropped: list[pytest.Item] = []
    reasons: list[str] = []
    remote = settings.provision == "remote"
    types: dict[str, BrokerType | None] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kind = params.get("broker_kind")
        if kind is None:
            continue
        if kind not in types:
            try:
                types[kind] = brokers.get(str(kind))
            except ConfigError:  # a kind the test parametrized itself: not the registry's
                types[kind] = None
        btype = types[kind]
        marked = [m for m in SCENARIO_MARKERS if item.get_closest_marker(m) is not None]
        why = None
        if marked and btype is not None:  # a scenario test imports the scenarios anyway
            from pytest_brokerperf.scenario_library import capability_refusal

            why = next((w for m in marked if (w := capability_refusal(btype, m))), None)
        if why is not None:
            dropped.append(item)
            reasons.append(f"{item.nodeid}: {why}")
            continue
        for value in params.values():
            if study_case is None or not isinstance(value, study_case):
                continue
            refusal = value.refusal(str(kind), nodes=settings.nodes, remote=remote,
                                    mode=settings.provision_effective)
            if refusal is None:
                continue
            action, why = refusal
            if action == "deselect":
                dropped.append(item)
                reasons.append(f"{item.nodeid}: {why}")
                break
            item.add_marker(pytest.mark.skip(reason=f"REFUSED before any broker started: "
                                             f"{why}"))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [i for i in items if id(i) not in gone]
        config.stash[STUDY_DESELECTED_KEY] = reasons


def _study_deselection_lines(config: pytest.Config) -> list[str]:
    """Which tests were deselected because they do not apply to their broker, and why."""
    reasons = config.stash.get(STUDY_DESELECTED_KEY, [])
    if not reasons:
        return []
    return ([f"brokerperf: {len(reasons)} test(s) deselected, they do not apply to their "
             "broker:"]
            + [f"  {r}" for r in reasons])


def _runs_own_workload(item: pytest.Item) -> bool:
    """A study or sweep case (a ``StudyCase`` parameter: its study's published numbers)
    or a test marked ``own_workload``: neither runs the ``--brokerperf-workload`` file."""
    if item.get_closest_marker("own_workload") is not None:
        return True
    study_case = _study_case_class()
    params = getattr(getattr(item, "callspec", None), "params", {})
    return study_case is not None and any(isinstance(v, study_case) for v in params.values())


def _own_workload_lines(config: pytest.Config) -> list[str]:
    """Why tests were deselected for a workload file (pytest only counts them)."""
    count = config.stash.get(OWN_WORKLOAD_KEY, 0)
    settings = config.stash.get(SETTINGS_KEY, None)
    if not count or settings is None:
        return []
    return [f"brokerperf: {count} study, sweep and variant test(s) deselected: they run "
            f"their own parameters, not --brokerperf-workload={settings.workload}, which "
            "runs once per scenario kind (in its plain test); run them without "
            "--brokerperf-workload"]


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """Say why tests were deselected (pytest only counts them): study cases that do not
    apply to a broker kind, and cases that would not run a ``--brokerperf-workload`` file."""
    return _study_deselection_lines(config) + _own_workload_lines(config)


def _refuse_omb_cases(config: pytest.Config, settings: Settings,
                      items: list[pytest.Item]) -> None:
    """Under ``--brokerperf-profile=omb``, skip study cases whose data cannot fit on the
    local broker's disk before any broker starts (the generator check needs the broker's
    CPU layout and runs in ``brokerperf.run_case``)."""
    import tempfile
    from pathlib import Path

    from pytest_brokerperf.scenario_library.study_cases import StudyCase, refusals

    base = Path(config.option.basetemp) if getattr(config.option, "basetemp", None) \
        else Path(tempfile.gettempdir())
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        for value in params.values():
            if isinstance(value, StudyCase):
                reasons = refusals(value.scaled("omb"), settings, nodes=settings.nodes,
                                   remote=False, data_dir=base, generator=None)
                if reasons:
                    item.add_marker(pytest.mark.skip(
                        reason=f"REFUSED under --brokerperf-profile=omb before any broker "
                        f"started: study case {value.study} {value.id}: "
                        + "; ".join(reasons)))


def _group_by_broker_process(items: list[pytest.Item], *, remote: bool) -> None:
    """Group broker tests by broker process: kinds in order of first appearance, within
    a kind by the level that needs its own process (driver-defined first, then 1-4),
    then by a study case's broker settings (none first); each group keeps its tests'
    order, and tests without a broker keep their place.

    Only where a process can differ: Kafka and RabbitMQ serve every level from one
    process, a Pulsar standalone serves one (bookie-wide journal), so ``[kafka-d1]``,
    ``[kafka-d2]`` share a broker and ``[pulsar-d1]``, ``[pulsar-d2]`` restart it once;
    a study case with bookie settings of its own gets a standalone of its own.
    """
    from pytest_brokerperf.plugin.broker_key import ProcessKey, process_key

    keys = {id(i): process_key(i, remote=remote) for i in items}
    tuned = any(k is not None and k[2] for k in keys.values())
    if not tuned and not any(
            "broker_durability" in getattr(getattr(i, "callspec", None), "params", {})
            for i in items):
        return
    groups: dict[str, dict[ProcessKey, list[pytest.Item]]] = {}
    for item in items:
        key = keys[id(item)]
        if key is not None:
            groups.setdefault(key[0], {}).setdefault(key, []).append(item)
    ordered: list[pytest.Item] = []
    for item in items:
        key = keys[id(item)]
        if key is None:
            ordered.append(item)
        elif key[0] in groups:
            by_process = groups.pop(key[0])
            for k in sorted(by_process, key=lambda k: (-1 if k[1] is None else k[1], k[2])):
                ordered += by_process[k]
    items[:] = ordered


# --------------------------------------------------------------------------- xdist guard


def _xdist_worker(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput.get("workerid", "?"))
    return os.environ.get("PYTEST_XDIST_WORKER") or None


def xdist_refusal(worker: str) -> str:
    return (
        f"pytest-brokerperf refuses to run a performance scenario inside pytest-xdist "
        f"worker {worker}.\n"
        "Why: xdist runs tests in parallel on one machine, typically a shared 2-core "
        "machine here: each worker would start its own session-scoped broker (one broker "
        "per worker) and its own load generators, all competing for the same cores, and "
        "the workers would write the same results files concurrently, so every latency "
        "and throughput figure would be wrong.\n"
        "Fix: run scenario tests without xdist, e.g. `pytest -n 0 scenarios` or "
        "`pytest -p no:xdist scenarios` (unit tests may keep using xdist). To override "
        "anyway, pass --brokerperf-allow-xdist (or BROKERPERF_ALLOW_XDIST=1)."
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail scenario tests inside xdist workers before any fixture (or broker) starts;
    then make the artefact directory of a test that runs scenarios."""
    track_test(item.config, item.nodeid, item.location)  # a stop inside it names it in XML
    if not SCENARIO_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return
    worker = _xdist_worker(item.config)
    settings = item.config.stash.get(SETTINGS_KEY, None)
    if worker is not None and not (settings is not None and settings.allow_xdist):
        pytest.fail(xdist_refusal(worker), pytrace=False)
    if (settings is not None and not settings.dry_run
            and "brokerperf" in getattr(item, "fixturenames", ())):
        from pytest_brokerperf.results.live import ReservedArtefacts
        from pytest_brokerperf.results.record import artefact_dir

        # before the broker fixture starts anything: a run killed at any point leaves
        # what it wrote in the directory its record would name
        path, attempt = artefact_dir(Path(settings.results_dir), settings.run_id,
                                     item.nodeid)
        item.stash[ARTEFACTS_KEY] = ReservedArtefacts(path, attempt)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Remove a reserved artefact directory no run used (a skipped test)."""
    reserved = item.stash.get(ARTEFACTS_KEY, None)
    if reserved is not None:
        reserved.release_if_unused()


@pytest.hookimpl(tryfirst=True)  # before pytest's junitxml writes its file
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A usage error or an interrupt becomes a named, failed test case in the JUnit XML."""
    record_stop(session, exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A SIGTERM a run turned into an interrupt: die of it now, the session being over."""
    from pytest_brokerperf.core.interrupts import redeliver_sigterm

    redeliver_sigterm()


# --------------------------------------------------------------------------- summary


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """The "brokerperf summary" table; never raises (a summary must not fail a session)."""
    try:
        from pytest_brokerperf.plugin.stash import DRY_RUN_PLANS_KEY

        plans = config.stash.get(DRY_RUN_PLANS_KEY, [])
        if plans:
            terminalreporter.section("brokerperf dry run: nothing was started or created")
            for lines in plans:
                for line in lines:
                    terminalreporter.write_line(line)
        rows = config.stash.get(SUMMARY_ROWS_KEY, [])
        if rows:
            from pytest_brokerperf.plugin.summary import write_summary

            write_summary(terminalreporter, rows)
        settings = config.stash.get(SETTINGS_KEY, None)
        if rows and settings is not None and settings.report:
            from pytest_brokerperf.report.session import session_report

            terminalreporter.section("brokerperf report")
            code, lines = session_report(settings)
            for line in lines:
                terminalreporter.write_line(line)
            if code == 2:
                terminalreporter.write_line("brokerperf report: no report (see above)")
        # saved after the report: a baseline of `all` or `last` never holds the run it judges
        if rows and settings is not None and (settings.autosave or settings.save):
            from pytest_brokerperf.report.session import save_session

            saved = save_session(settings)
            if saved:
                terminalreporter.write_line(saved)
    except Exception as exc:
        with contextlib.suppress(Exception):
            terminalreporter.write_line(f"brokerperf: could not write the summary: {exc!r}")


from pytest_brokerperf.plugin.fixtures import (  # noqa: E402,F401
    _brokerperf_processes,
    broker,
    broker_durability,
    broker_fault,
    broker_type,
    brokerperf,
    brokerperf_session_info,
    brokerperf_settings,
)
