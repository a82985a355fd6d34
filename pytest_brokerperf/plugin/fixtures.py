"""The fixtures pytest-brokerperf provides; heavy imports stay inside the bodies.

* ``brokerperf_settings`` (session): the validated
  :class:`~pytest_brokerperf.config.settings.Settings`.
* ``broker_durability`` (session): the test's durability level, ``None`` unless
  ``--brokerperf-durability`` or ``@pytest.mark.durability`` parametrize it (ids ``-d1``).
* ``broker`` (session, parametrized by ``--broker`` and the level): a started, warmed
  :class:`~pytest_brokerperf.brokers.endpoint.BrokerEndpoint` whose ``durability`` is the
  level. Processes come from one session-wide :class:`_BrokerProcesses`, keyed by
  (kind, the broker-wide part of the level): Kafka and RabbitMQ keep one process for
  every level (a level is per topic / queue), Pulsar restarts its standalone for another
  level (bookie journal). One broker at a time, stopped when the next one is needed and
  at session end (also on errors and Ctrl-C).
* ``brokerperf`` (function): the scenario API, ``brokerperf.run(TailRead())``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf.core.errors import BrokerUnavailable, ClusterUnreachable
from pytest_brokerperf.plugin.broker_key import ProcessKey, ServerSettings, study_server_settings
from pytest_brokerperf.plugin.stash import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType, ManagedBroker
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.fault_spec import FaultSpec
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.plugin.runner import BrokerPerf

__all__ = [
    "broker", "broker_durability", "broker_fault", "brokerperf", "brokerperf_session_info",
    "brokerperf_settings",
]


@pytest.fixture(scope="session")
def brokerperf_settings(request: pytest.FixtureRequest) -> Settings:
    """The session's validated settings (flags > env > ini > defaults)."""
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def brokerperf_session_info(brokerperf_settings: Settings) -> dict[str, Any]:
    """Facts measured once per session for every manifest: machine, clock, versions."""
    from pytest_brokerperf.metrics import sysstats
    from pytest_brokerperf.results.record import git_sha, library_versions

    return {
        "git_sha": git_sha(),
        "libraries": library_versions(),
        "machine": sysstats.machine_info(),
        "clock": sysstats.clock_info(),
        "broker_warmup": {},
        "provision": {"requested": brokerperf_settings.provision,
                      "effective": brokerperf_settings.provision_effective,
                      "reason": brokerperf_settings.auto_reason},
    }


@pytest.fixture(scope="session")
def broker_durability(request: pytest.FixtureRequest) -> int | None:
    """This test's durability level 1-4; None = the driver file's settings as they are.

    ``--brokerperf-durability`` and ``@pytest.mark.durability`` parametrize it (see
    :mod:`pytest_brokerperf.brokers.durability` for what a level means on each broker),
    indirectly: levelled and unlevelled tests then share this one fixture, so a change
    of level also re-makes the session-scoped ``broker`` that depends on it (a direct
    parametrization is a second fixture, and ``broker`` would keep the other's level).
    """
    level: int | None = getattr(request, "param", None)
    return level


@pytest.fixture
def broker_fault() -> FaultSpec | None:
    """This test's fault (``--brokerperf-fault``, ``@pytest.mark.fault``); None = none.

    The tail-read scenario injects it in its measured window on a local broker
    (docs/reference/faults.md).
    """
    return None


@dataclass
class _BrokerProcesses:
    """The session's broker processes: one running at a time, keyed by what needs a restart.

    pytest would tear a session fixture down whenever any of its parameters changes; a
    Kafka broker must not restart because the next test wants another per-topic level,
    so the process outlives the ``broker`` fixture and is replaced only when the key
    (kind, the broker kind's ``restart_key`` of the level, a study case's broker
    settings) changes. A start that failed is remembered for its key, so later tests
    skip (or error) at once.
    """

    settings: Settings
    session_info: dict[str, Any]
    tmp_path_factory: pytest.TempPathFactory
    key: ProcessKey | None = None
    current: ManagedBroker | None = None
    failed: dict[ProcessKey, Exception] = field(default_factory=dict)

    def get(self, broker_type: BrokerType, level: int | None,
            server: ServerSettings = ()) -> BrokerEndpoint:
        kind = broker_type.name
        key = (kind, broker_type.restart_key(level), server)
        if key in self.failed:
            raise self.failed[key]
        if self.key == key and self.current is not None:
            return self.current.endpoint
        self.stop()
        suffix = (f"-d{key[1]}" if key[1] is not None else "") + ("-tuned" if server else "")
        workdir = self.tmp_path_factory.mktemp(f"broker-{kind}{suffix}")
        try:
            managed = broker_type.start(self.settings.provision_effective, self.settings,
                                        workdir, key[1], server=dict(server))
        except Exception as exc:
            self.failed[key] = exc
            raise
        self.key, self.current = key, managed
        try:
            self._warm(broker_type, managed, workdir)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.failed[key] = exc
            self.stop()
            raise
        return managed.endpoint

    def _warm(self, broker_type: BrokerType, managed: ManagedBroker, workdir: Path) -> None:
        info, kind = self.session_info, broker_type.name
        if managed.endpoint.mode == "remote":
            # A running cluster someone else owns: no extra load, no local data dir.
            info["broker_warmup"][kind] = {
                "skipped": "remote cluster: already running; no warm-up load is sent"}
            return
        if info.get("fsync_probe") is None:
            from pytest_brokerperf.metrics.sysstats import fsync_probe

            dirs = managed.endpoint.processes_record().data_dirs or (str(workdir),)
            info["fsync_probe"] = fsync_probe(Path(dirs[0]).parent)
        from pytest_brokerperf.plugin.warmup import warm_broker

        info["broker_warmup"][kind] = warm_broker(managed.endpoint, self.settings,
                                                  broker_type)

    def stop(self) -> None:
        managed, self.current, self.key = self.current, None, None
        if managed is not None:
            managed.stop()


@pytest.fixture(scope="session")
def _brokerperf_processes(
    request: pytest.FixtureRequest,
    brokerperf_settings: Settings,
    brokerperf_session_info: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[_BrokerProcesses]:
    """The session's broker processes; whatever still runs is stopped at session end.
    Jars fetched on a broker's first use say so on the terminal, as they go."""
    from pytest_brokerperf.brokers.provision import maven

    processes = _BrokerProcesses(brokerperf_settings, brokerperf_session_info,
                                 tmp_path_factory)
    maven.progress_to(_terminal_lines(request.config))
    try:
        yield processes
    finally:
        maven.progress_to(None)
        processes.stop()


def _terminal_lines(config: pytest.Config) -> Callable[[str], None]:
    """Write a line to the terminal past pytest's output capture (a broker's start runs
    in a fixture, whose output pytest would hold until the test ends)."""

    def write(line: str) -> None:
        tr = config.pluginmanager.getplugin("terminalreporter")
        capman = config.pluginmanager.getplugin("capturemanager")
        if tr is None:
            return
        with capman.global_and_fixture_disabled() if capman is not None \
                else contextlib.nullcontext():
            tr.write_line(line)

    return write


def _at_level(endpoint: BrokerEndpoint, level: int | None) -> BrokerEndpoint:
    """The endpoint as this test sees it: ``durability`` is the test's level."""
    if endpoint.durability == level:
        return endpoint
    return replace(endpoint, durability=level)


@pytest.fixture(scope="session")
def broker_type(broker_kind: str) -> BrokerType:
    """The test's broker kind as the registry's :class:`BrokerType`, looked up once here
    from the name ``--broker`` gave; everything after it (start, driver, capabilities)
    is asked of this object."""
    from pytest_brokerperf import brokers

    return brokers.get(broker_kind)


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest,
    broker_type: BrokerType,
    broker_durability: int | None,
    brokerperf_settings: Settings,
    _brokerperf_processes: _BrokerProcesses,
) -> BrokerEndpoint:
    """A running, warmed broker of ``broker_type`` at ``broker_durability`` (skips with
    the reason if the broker, or that level on it, is unavailable here).

    A remote cluster the user named that does not answer is no skip: the session stops
    with pytest's usage-error exit code (4), so a CI gate pointed at it cannot go green.

    A study case with broker settings of its own (``StudyCase.server_settings``) runs on
    a broker started with them: ``brokerperf`` hands that one to the case (this fixture,
    session-wide, is the broker of the first test that asked for it).
    """
    settings = brokerperf_settings
    # the test being set up (a session fixture's request names the session): its study
    # case's settings, so a session whose first test is tuned starts the tuned broker
    first = getattr(request, "_pyfuncitem", None)
    server = () if settings.remote else study_server_settings(first)
    return _provisioned(request, broker_type, broker_durability, settings,
                        _brokerperf_processes, server)


def _provisioned(request: pytest.FixtureRequest, broker_type: BrokerType, level: int | None,
                 settings: Settings, processes: _BrokerProcesses,
                 server: ServerSettings) -> BrokerEndpoint:
    """The broker process for (kind, level, server settings), started if need be; skips
    (BrokerUnavailable) or stops the session (a named cluster unreachable)."""
    try:
        # refuse a level the cluster cannot offer before anything starts
        broker_type.check_offered(level, settings.nodes, remote=settings.remote)
        if settings.dry_run:  # nothing is started or created
            return _at_level(broker_type.dry_run_endpoint(settings), level)
        endpoint = processes.get(broker_type, level, server)
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    except ClusterUnreachable as exc:
        from pytest_brokerperf.plugin.junit import note_failure

        pytest.exit(note_failure(request.config, f"pytest-brokerperf: {exc}"),
                    returncode=pytest.ExitCode.USAGE_ERROR)
    return _at_level(endpoint, level)


def _this_tests_broker(request: pytest.FixtureRequest, broker: BrokerEndpoint,
                       broker_type: BrokerType, settings: Settings) -> BrokerEndpoint:
    """``broker``, or the process this test's study case needs when its broker
    settings differ from the running one's (the tuned cases of a group run after the
    others: one restart). An endpoint the plugin did not start (a conftest's own
    ``broker``, a dry run, a remote cluster) is used as it is."""
    processes: _BrokerProcesses = request.getfixturevalue("_brokerperf_processes")
    key = processes.key
    if settings.remote or settings.dry_run or key is None or key[0] != broker.kind:
        return broker
    server = study_server_settings(request.node)
    if key[2] == server:
        return broker
    level = request.getfixturevalue("broker_durability")
    return _provisioned(request, broker_type, level, settings, processes, server)


@pytest.fixture
def brokerperf(
    request: pytest.FixtureRequest,
    broker: BrokerEndpoint,
    broker_type: BrokerType,
    brokerperf_settings: Settings,
    brokerperf_session_info: dict[str, Any],
    broker_fault: FaultSpec | None,
) -> BrokerPerf:
    """Run scenarios on this test's broker: ``brokerperf.run(TailRead())``.

    A conftest that gives its own ``broker`` fixture (the plugin's tests give the
    in-process loopback) may hand an endpoint of another kind than ``--broker``: the
    endpoint's kind is then looked up instead."""
    from pytest_brokerperf.plugin.runner import BrokerPerf

    if broker.kind != broker_type.name:
        from pytest_brokerperf import brokers

        broker_type = brokers.get(broker.kind)
    else:
        broker = _this_tests_broker(request, broker, broker_type, brokerperf_settings)
    return BrokerPerf(request, broker, brokerperf_settings, brokerperf_session_info,
                      broker_type=broker_type, fault=broker_fault)
