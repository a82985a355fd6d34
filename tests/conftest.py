"""The project's own test settings, kept to the project's tests.

Provisioning: the tests run local processes unless they ask for another mode (below).

Warnings are errors here (a warning in the plugin is a bug to fix), but only for the
tests under ``tests/``: set in ``pyproject.toml`` they would also apply to
``pytest scenarios ...`` run from a checkout — the shipped suite users run — where a
typo'd workload key must warn, and ``--brokerperf-inconclusive=warn`` must stay a
warning, exactly as they do outside a checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

# numpy loads once per process: an in-process pytester run that imported it first would
# have it dropped from sys.modules afterwards (pytester restores the module table), and
# the next import fails ("cannot load module more than once per process"). Loaded here,
# it outlives every in-process run, whichever test file runs alone.
import numpy  # noqa: F401
import pytest

HERE = Path(__file__).parent

# The project's tests say which provisioning mode they measure: `auto` means local
# processes here, and tests of containers ask for them (--brokerperf-provision=container).
# Left to the machine, `auto` would move every process-mode test into containers on an
# engine holding the images (as in CI). Children (pytester subprocesses) inherit it.
os.environ.setdefault("BROKERPERF_AUTO_PROVISION", "process")

# The summary's full layout, whatever runs the tests (a terminal, CI's pipe, an xdist
# worker): its narrower layouts are tested on purpose in tests/plugin/test_summary_width.py.
os.environ.setdefault("COLUMNS", "200")


def _own_cpu_lane() -> None:
    """Under xdist (ci/test.sh runs the tests without a broker with ``-n 2``) each worker
    runs on a CPU of its own, like ``taskset -c N``: what a test measures of the generator's
    CPUs (other processes' share, calibration, steal) is its own lane's, never the other
    worker's load. Subprocesses inherit the lane. Fewer CPUs than workers: no lanes."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    cpus = sorted(os.sched_getaffinity(0))
    if worker.startswith("gw") and 1 < count <= len(cpus):
        os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


_own_cpu_lane()
# The report tests start Spark's JVM some fifteen times (each pytest session and CLI run
# in a subprocess starts its own), each for a few seconds of work on small inputs: the
# JIT's first tier only (C1) starts such a JVM in about half the time, and compiled code
# does the same work. SPARK_SUBMIT_OPTS reaches only the JVMs spark-submit starts (the
# brokers' JVMs keep their flags) and, unlike JAVA_TOOL_OPTIONS, prints nothing.
# Children inherit it; a developer's own setting wins.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


def _shared_class_archives() -> None:
    """pytester gives each inner session a HOME of its own, so a cache dir of its own:
    each would write its own class-data sharing archive (Spark's: 170 MB, 15 s) and
    none would read one. The archives (brokers/provision/cds.py) stay in the real cache
    dir, shared by every session; calibrations and run state stay per test."""
    from pytest_brokerperf.brokers.provision.cds import CDS_DIR_ENV, cds_dir

    os.environ.setdefault(CDS_DIR_ENV, str(cds_dir()))


_shared_class_archives()

#: One mark, its filters applied in order: every warning is an error, then
#: confluent-kafka's own deprecation warnings (not ours to fix) are ignored.
STRICT_WARNINGS = pytest.mark.filterwarnings(
    "error", "ignore::DeprecationWarning:confluent_kafka.*")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(STRICT_WARNINGS)


#: what an xdist worker sets in its environment (ci/test.sh runs the tests without a broker
#: with ``-n 2``, each worker on a CPU lane of its own: see _own_cpu_lane)
_XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _outside_xdist(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest session a test starts (pytester, in process or as a subprocess, or a
    subprocess of its own) is a session of its own, not an xdist worker: the worker's
    environment would make the plugin refuse every scenario in it. The worker itself
    keeps knowing it is one (xdist tells it through ``config.workerinput``)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in _XDIST_ENV:
            monkeypatch.delenv(name, raising=False)
