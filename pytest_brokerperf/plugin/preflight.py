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

from pytest_brokerperf.core.errors import BrokerPerfError

if TYPE_CHECKING:
    from pytest_brokerperf.config.settings import Settings

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
    from pytest_brokerperf.results.record import RECORD_RESERVE_BYTES, free_space

    need = 2 * RECORD_RESERVE_BYTES
    with contextlib.suppress(OSError):
        import shutil

        if shutil.disk_usage(path).free < need:
            return (f"--brokerperf-results={path}: {free_space(path)} on its filesystem; a "
                    f"run needs at least {need // 1024**2} MiB ({RECORD_RESERVE_BYTES // 1024**2}"
                    " MiB is held for each test's record.json from its start); nothing was "
                    "started. Fix: free space there, or give --brokerperf-results a directory "
                    "on a filesystem with room"), missing
    return None, missing


def _client_config_problems(settings: Settings) -> list[str]:
    """A remote client config file (``--kafka-config`` ...) each broker kind that takes
    one refuses, checked once per set of remote flags, whichever ``--broker`` runs."""
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.base import flag_of

    problems: list[str] = []
    seen: list[object] = []
    for name in brokers.names():
        btype = brokers.get(name)
        flags = btype.remote_flags
        if flags is None or flags.client_config is None or any(f is flags for f in seen):
            continue
        seen.append(flags)
        value = getattr(settings, flags.client_config, None)
        if value is None:
            continue
        try:
            btype.check_client_config(settings)
        except (BrokerPerfError, OSError) as exc:
            problems.append(f"{flag_of(flags.client_config)}={value}: {exc}")
    return problems


def _memory_cap_problems(settings: Settings, limit: int) -> list[str]:
    """A node memory limit below what a selected broker needs, or no cgroup to put it in."""
    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.provision.cgroups import check_memory_limit, memory_cap_problem
    from pytest_brokerperf.core.errors import ConfigError

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


def _session_window(settings: Settings) -> tuple[float, float] | None:
    """``(period_s, measure_s)`` of the session's fixed-rate window as the scenarios will
    resolve it (flags, else an OMB file's own under ``--brokerperf-profile=omb``, else the
    profile); None when a workload file that does not load decides it (reported apart)."""
    spec = settings.profile_spec
    period = settings.period
    measure = settings.duration
    if settings.profile == "omb" and settings.workload is not None:
        from pytest_brokerperf.workload.model import Workload

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wl = Workload.from_yaml(Path(settings.workload), lenient=settings.lenient)
        except (BrokerPerfError, OSError):
            return None
        if period is None and wl.log_interval_millis:
            period = wl.log_interval_millis / 1000.0
        if measure is None:
            measure = wl.duration_s
    return (float(period if period is not None else spec.period_s),
            float(measure if measure is not None else spec.measure_s))


def _fault_timing_problems(settings: Settings) -> list[str]:
    """A ``--brokerperf-fault`` timed outside the window: refused before any broker starts
    (it was refused only after the broker started and warmed up), and in a dry run."""
    from pytest_brokerperf.config.fault_spec import timing_problem

    window = _session_window(settings)
    if window is None:
        return []
    period_s, measure_s = window
    where = settings.sources.get("fault", "--brokerperf-fault")
    out = []
    for fault in settings.faults:
        problem = timing_problem(fault, period_s, measure_s)
        if problem:
            out.append(f"--brokerperf-fault={fault.text()} (from {where}): {problem}")
    return out


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
        from pytest_brokerperf.workload.model import Workload

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
        problems.extend(_fault_timing_problems(settings))
        from pytest_brokerperf.faults.offered import power_cut_problem

        for fault in settings.faults:
            for kind in settings.brokers:
                problem = power_cut_problem(fault, kind, settings.provision_effective)
                if problem:
                    problems.append(f"--brokerperf-fault={fault.text()}: {problem}")
    problems.extend(_client_config_problems(settings))
    if settings.tls:
        from pytest_brokerperf import brokers

        for kind in settings.brokers:
            problem = brokers.get(kind).tls_problem(settings, settings.provision_effective)
            if problem:
                problems.append(problem)
    if settings.slo is not None:
        from pytest_brokerperf.judge import slo

        try:
            slo.load_slo_file(Path(settings.slo))
        except (BrokerPerfError, OSError) as exc:
            problems.append(f"--brokerperf-slo={settings.slo}: {exc}")
    if problems:  # refused: nothing is left behind, not even an empty results directory
        for d in created:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()
    return problems
