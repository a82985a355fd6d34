"""Checks of the user's input that run before any broker starts.

A run that would fail on its input should fail in a second with a usage error (exit
code 4), not after a broker was started and warmed up: the results directory must be
writable, the workload, driver and SLO files named by flags must load, and a fault must
be one the selected brokers offer in the provisioning mode. Called once per
session, after collection, only when a selected test runs a scenario.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.errors import BrokerPerfError

if TYPE_CHECKING:
    from pytest_brokerperf.config import Settings

__all__ = ["preflight_problems"]


def _results_dir_problem(path: Path) -> tuple[str | None, list[Path]]:
    """Why ``path`` cannot hold the run's artefacts, or None; and the directories the
    check created (missing ones are created: removed again if the run is refused)."""
    probe = path / f".brokerperf-write-check-{os.getpid()}"
    missing = [d for d in (path, *path.parents) if not d.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        return (f"--brokerperf-results={path}: the results directory cannot be written "
                f"({type(exc).__name__}: {exc.strerror or exc}); nothing was started. Fix: "
                "give a directory this user can create and write"), missing
    return None, missing


def _memory_cap_problems(settings: Settings, limit: int) -> list[str]:
    """A node memory limit below what a selected broker needs, or no cgroup to put it in."""
    from pytest_brokerperf import brokers
    from pytest_brokerperf.errors import ConfigError
    from pytest_brokerperf.provision.cgroups import check_memory_limit, memory_cap_problem

    where = f" (from {settings.sources.get('broker_memory', 'default')})"
    problems = []
    for kind in settings.brokers:
        broker = brokers.get(kind)
        try:
            check_memory_limit(limit, broker.memory_floor(), kind)
        except ConfigError as exc:
            problems.append(f"{exc}{where}")
    if settings.provision_effective == "process":
        problem = memory_cap_problem()
        if problem:
            problems.append(f"{problem}{where}")
    return problems


def preflight_problems(settings: Settings, scenarios: Iterable[str] = ()) -> list[str]:
    """Every problem found in the run's input, each naming the flag, file and fix.

    ``scenarios``: the scenario kinds (marker names) of the selected tests that run the
    workload file; a file one of them cannot run as written (a backlog under ``-m
    tailread``) is refused here, not after the broker started.
    """

    problems: list[str] = []
    created: list[Path] = []
    if not settings.dry_run:
        problem, created = _results_dir_problem(Path(settings.results_dir))
        if problem:
            problems.append(problem)
    if settings.workload is not None:
        from pytest_brokerperf.workload import Workload

        path = Path(settings.workload)
        try:
            with warnings.catch_warnings():  # keys --brokerperf-lenient ignores: the
                warnings.simplefilter("ignore")  # scenario that loads it warns, once
                wl = Workload.from_yaml(path, lenient=settings.lenient)
            wl.payloads(path.parent, seed=0)  # a payload file that is missing or wrong
        except (BrokerPerfError, OSError) as exc:
            problems.append(f"--brokerperf-workload={path}: {exc}")
        else:
            from pytest_brokerperf.scenario_library.base import workload_refusals

            for kind in sorted(set(scenarios)):
                problems.extend(f"--brokerperf-workload={path} (selected {kind} tests): "
                                f"{problem}" for problem in workload_refusals(kind, wl))
    if settings.driver is not None:
        from pytest_brokerperf import brokers

        for kind in settings.brokers:
            try:
                brokers.get(kind).check_driver_file(Path(settings.driver))
            except (BrokerPerfError, OSError) as exc:
                problems.append(f"--brokerperf-driver={settings.driver} (as the {kind} "
                                f"driver file): {exc}")
    if settings.broker_memory is not None and not settings.dry_run:
        problems.extend(_memory_cap_problems(settings, settings.broker_memory))
    if settings.faults:
        from pytest_brokerperf.faults.offered import power_cut_problem

        for fault in settings.faults:
            for kind in settings.brokers:
                problem = power_cut_problem(fault, kind, settings.provision_effective)
                if problem:
                    problems.append(f"--brokerperf-fault={fault.text()}: {problem}")
    if settings.kafka_config is not None:
        from pytest_brokerperf.brokers.kafka.remote import check_client_config

        try:
            check_client_config(settings)
        except (BrokerPerfError, OSError) as exc:
            problems.append(f"--kafka-config={settings.kafka_config}: {exc}")
    if settings.slo is not None:
        from pytest_brokerperf import slo

        try:
            slo.load_slo_file(Path(settings.slo))
        except (BrokerPerfError, OSError) as exc:
            problems.append(f"--brokerperf-slo={settings.slo}: {exc}")
    if problems:  # refused: nothing is left behind, not even an empty results directory
        for d in created:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()
    return problems
