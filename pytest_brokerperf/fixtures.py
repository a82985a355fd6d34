"""The fixtures pytest-brokerperf provides; heavy imports stay inside the bodies.

* ``brokerperf_settings`` (session): the validated :class:`~pytest_brokerperf.config.Settings`.
* ``broker`` (session, parametrized by ``--broker``): a started, warmed
  :class:`~pytest_brokerperf.endpoint.BrokerEndpoint`; one broker at a time, stopped
  when the next kind is needed and at session end (also on errors and Ctrl-C).
* ``brokerperf`` (function): the scenario API, ``brokerperf.run(TailRead())``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_brokerperf._stash import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings
    from pytest_brokerperf.endpoint import BrokerEndpoint
    from pytest_brokerperf.runner import BrokerPerf

__all__ = ["broker", "brokerperf", "brokerperf_session_info", "brokerperf_settings"]


@pytest.fixture(scope="session")
def brokerperf_settings(request: pytest.FixtureRequest) -> Settings:
    """The session's validated settings (flags > env > ini > defaults)."""
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture(scope="session")
def brokerperf_session_info(brokerperf_settings: Settings) -> dict[str, Any]:
    """Facts measured once per session for every manifest: machine, clock, versions."""
    from pytest_brokerperf.metrics import sysstats
    from pytest_brokerperf.results import git_sha, library_versions

    return {
        "git_sha": git_sha(),
        "libraries": library_versions(),
        "machine": sysstats.machine_info(),
        "clock": sysstats.clock_info(),
        "broker_warmup": {},
    }


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest,
    broker_kind: str,
    brokerperf_settings: Settings,
    brokerperf_session_info: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[BrokerEndpoint]:
    """A running, warmed broker of ``broker_kind`` (skips with the reason if unavailable)."""
    from pytest_brokerperf.errors import BrokerUnavailable
    from pytest_brokerperf.provision import start_broker
    from pytest_brokerperf.warmup import warm_broker

    if brokerperf_settings.dry_run:  # nothing is started or created
        from pytest_brokerperf.provision.remote import dry_run_endpoint

        yield dry_run_endpoint(broker_kind, brokerperf_settings)
        return
    workdir = tmp_path_factory.mktemp(f"broker-{broker_kind}")
    try:
        managed = start_broker(broker_kind, brokerperf_settings, workdir)
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        if managed.endpoint.mode == "remote":
            # A running cluster someone else owns: no extra load, no local data dir.
            brokerperf_session_info["broker_warmup"][broker_kind] = {
                "skipped": "remote cluster: already running; no warm-up load is sent"}
            yield managed.endpoint
            return
        if brokerperf_session_info.get("fsync_probe") is None:
            from pathlib import Path

            from pytest_brokerperf.metrics.sysstats import fsync_probe

            dirs = managed.endpoint.info.get("data_dirs") or [str(workdir)]
            brokerperf_session_info["fsync_probe"] = fsync_probe(Path(dirs[0]).parent)
        brokerperf_session_info["broker_warmup"][broker_kind] = warm_broker(
            managed.endpoint, brokerperf_settings
        )
        yield managed.endpoint
    finally:
        managed.stop()


@pytest.fixture
def brokerperf(
    request: pytest.FixtureRequest,
    broker: BrokerEndpoint,
    brokerperf_settings: Settings,
    brokerperf_session_info: dict[str, Any],
) -> BrokerPerf:
    """Run scenarios on this test's broker: ``brokerperf.run(TailRead())``."""
    from pytest_brokerperf.runner import BrokerPerf

    return BrokerPerf(request, broker, brokerperf_settings, brokerperf_session_info)
