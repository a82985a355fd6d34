"""Integration tests run against real brokers the project starts: one session at a time.

Two sets of broker JVMs on a 2-core machine make each other miss start-up timeouts and
distort every figure, so the whole integration session holds an exclusive file lock
(also across separate pytest runs and xdist workers), and brokers that cannot be
provided here skip with the reason.

Shared brokers: a test that only needs *a* broker of a given shape (kind, nodes, heap)
asks for one of the fixtures in :data:`SHARED` instead of starting its own. The broker
starts at the first test that asks, serves every following test that asks too (the
tests of every file that asks are run next to each other), and stops — checked to leave
no process and no data directory — before the first test that does not ask, so two
brokers never run at once. A test may stop a shared broker itself (test_rabbitmq's
last test checks what a stop leaves); it is then the last to use it in its file.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from pytest_brokerperf.brokers.provision.maven import cache_root, resolve_kafka
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.judge.verdict import Verdict, assess

#: pytester gives each inner session a HOME of its own, hence a cache dir of its own: every
#: session would resolve the broker jars with Maven again (Kafka about 3 s, Pulsar's
#: 235 MB longer) and start its JVMs from a class path no class-data sharing archive fits.
#: The inner sessions use the real cache dir; each test that needs a cache of its own
#: sets BROKERPERF_CACHE_DIR itself, and calibrations have BROKERPERF_CALIBRATION_DIR.
os.environ.setdefault("BROKERPERF_CACHE_DIR", str(cache_root()))

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
    from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster
    from pytest_brokerperf.engine.plan import RunOutcome


@dataclass(frozen=True)
class SharedShape:
    """What a shared broker is: its kind, nodes and heap (the fixture's name is its key)."""

    kind: str
    nodes: int
    heap: str | None = None

    def cluster(self, tmp: pytest.TempPathFactory) -> KafkaProcessCluster | RabbitMQProcessCluster:
        if self.kind == "rabbitmq":
            from pytest_brokerperf.brokers.rabbitmq.process import (
                RabbitMQProcessCluster,
                rabbitmq_available,
            )

            reason = rabbitmq_available()
            if reason is not None:
                pytest.skip(reason)
            return RabbitMQProcessCluster(nodes=self.nodes, workdir=tmp.mktemp("rmq"))
        from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster

        assert self.kind == "kafka", self.kind
        return KafkaProcessCluster(nodes=self.nodes, **({"heap": self.heap} if self.heap else {}))


#: fixture name -> the broker it yields, shared by every test that asks for it
SHARED = {
    "kafka_one": SharedShape("kafka", 1),
    "kafka_three": SharedShape("kafka", 3, heap="512m"),
    "rmq": SharedShape("rabbitmq", 1),
}


@dataclass
class _Running:
    """A shared broker and what it started (read at its start: a stopped cluster has no
    endpoint), every one of which must be gone once it is stopped."""

    cluster: KafkaProcessCluster | RabbitMQProcessCluster
    pids: list[int]
    dirs: list[Path]


class SharedBrokers:
    """The shared brokers running now (at most one: see the module docstring)."""

    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}

    def get(self, name: str,
            tmp: pytest.TempPathFactory) -> KafkaProcessCluster | RabbitMQProcessCluster:
        if name in self._running and not self._running[name].cluster.alive():
            self.release(keep=set())  # a test stopped it (or a node): a fresh one
        if name not in self._running:
            self.release(keep=set())
            cluster = SHARED[name].cluster(tmp)
            cluster.start()  # a failed start stops what it started and raises
            info = cluster.endpoint.info
            pids = [*info["pids"], *([info["epmd_pid"]] if info.get("epmd_pid") else [])]
            self._running[name] = _Running(cluster, pids, [Path(d) for d in info["data_dirs"]])
        return self._running[name].cluster

    def release(self, keep: set[str]) -> None:
        """Stop every shared broker not in ``keep``; each must leave nothing behind."""
        for name in [n for n in self._running if n not in keep]:
            run = self._running.pop(name)
            run.cluster.stop()  # a no-op when a test stopped it already
            pids, dirs = run.pids, run.dirs
            alive = [p for p in pids if _alive(p)]
            left = [str(d) for d in dirs if d.exists()]
            assert not alive and not left, (
                f"shared broker {name} left processes {alive} and data directories {left}")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


_SHARED = SharedBrokers()


def _shared_of(item: pytest.Item | None) -> set[str]:
    return set() if item is None else set(getattr(item, "fixturenames", ())) & SHARED.keys()


def _is_integration(item: pytest.Item) -> bool:
    return "tests/integration/" in item.nodeid.replace("\\", "/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the integration tests; run the files that share a broker next to each other
    (a file's place is that of the first file sharing its broker; order within a file
    and of every other file is kept)."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        if _is_integration(item):
            item.add_marker(pytest.mark.integration)
            modules.setdefault(item.path, []).append(item)
    first: dict[str, int] = {}
    rank: dict[Path, tuple[int, int]] = {}
    for i, (path, its) in enumerate(modules.items()):
        names = sorted(set().union(*(_shared_of(it) for it in its)))
        key = names[0] if names else None
        if key is not None:
            first.setdefault(key, i)
        rank[path] = (first[key] if key is not None else i, i)
    ordered = sorted(modules, key=rank.__getitem__)
    integration = [it for path in ordered for it in modules[path]]
    slots = iter(integration)
    items[:] = [next(slots) if _is_integration(it) else it for it in items]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop a shared broker the next test does not ask for (before it starts its own)."""
    _SHARED.release(keep=_shared_of(nextitem))


def pytest_sessionfinish() -> None:
    _SHARED.release(keep=set())


@pytest.fixture
def kafka_one(_broker_session_lock: None,
              tmp_path_factory: pytest.TempPathFactory) -> BrokerEndpoint:
    """A one-node local Kafka shared with every test that asks for it (never stopped or
    reconfigured by a test: topics are the test's own, under its own prefix)."""
    return _SHARED.get("kafka_one", tmp_path_factory).endpoint


@pytest.fixture
def kafka_three(_broker_session_lock: None,
                tmp_path_factory: pytest.TempPathFactory) -> BrokerEndpoint:
    """A three-node local Kafka (512 MiB heaps) shared with every test that asks for it."""
    return _SHARED.get("kafka_three", tmp_path_factory).endpoint


@pytest.fixture
def rmq(_broker_session_lock: None,
        tmp_path_factory: pytest.TempPathFactory) -> RabbitMQProcessCluster:
    """A one-node local RabbitMQ shared with every test that asks for it (queues and
    exchanges are the test's own, under its own prefix; skips where RabbitMQ is missing)."""
    from pytest_brokerperf.brokers.rabbitmq.process import RabbitMQProcessCluster

    cluster = _SHARED.get("rmq", tmp_path_factory)
    assert isinstance(cluster, RabbitMQProcessCluster)
    return cluster


@pytest.fixture(scope="session")
def _broker_session_lock() -> Iterator[None]:
    lock_path = cache_root() / ".integration-brokers.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as fh:
        deadline = time.monotonic() + 1800
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another process held {lock_path} for 30 minutes")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@pytest.fixture(scope="session", autouse=True)
def _shared_calibration_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One calibration cache per integration run (``$BROKERPERF_CALIBRATION_DIR``, unless
    set already): the first throughput session measures the loopback harness ceiling
    (``--brokerperf-calibration=refresh``, test_pulsar_scenarios), the later ones reuse
    it (``auto``, checked by :func:`check_calibration_reused`); never a user's cached
    figure from an earlier run."""
    from pytest_brokerperf.judge.calibration import CALIBRATION_DIR_ENV

    with pytest.MonkeyPatch.context() as mp:
        if not os.environ.get(CALIBRATION_DIR_ENV, "").strip():
            mp.setenv(CALIBRATION_DIR_ENV, str(tmp_path_factory.mktemp("calibration")))
        yield Path(os.environ[CALIBRATION_DIR_ENV])


@pytest.fixture(scope="session", autouse=True)
def _cold_brokers_for_functional_checks() -> Iterator[None]:
    """The pytest sessions these tests start skip the plugin's once-per-session broker
    warm-up (``BROKERPERF_BROKER_WARMUP=0``: 15 s per broker start, until steady and up to
    180 s on three nodes): they check functional truths (delivery, records, verdict logic,
    cleanup), and each scenario's own warm-up still runs until steady. A test whose
    subject is the warm-up or a warm cluster passes ``--brokerperf-broker-warmup``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BROKERPERF_BROKER_WARMUP", os.environ.get("BROKERPERF_BROKER_WARMUP", "0"))
        yield


def _harness_keys() -> list[dict[str, Any]]:
    """The keys of the harness ceilings the run's calibration cache holds now."""
    from pytest_brokerperf.judge.calibration import cache_path

    try:
        doc = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return []
    return [e["key"] for e in doc.values() if isinstance(e, dict) and e.get("target") == "harness"]


@pytest.fixture
def check_calibration_reused() -> Callable[[dict[str, Any]], None]:
    """Snapshot the run's cached harness ceilings now; the returned check asserts that a
    record whose harness key was among them used the cached figure (measured once per
    run), and one whose key was not measured it (an ``auto`` calibration)."""
    before = _harness_keys()

    def check(rec: dict[str, Any]) -> None:
        harness = rec["calibration"]["harness"]
        assert rec["calibration"]["mode"] == "auto", rec["calibration"]["mode"]
        assert harness["cached"] is (harness["key"] in before), (harness, before)
        if not harness["cached"]:
            assert harness["steps"], harness
    return check


@pytest.fixture(scope="session", autouse=True)
def _kafka_available(_broker_session_lock: None) -> None:
    """Skip (with the reason) where neither Maven nor KAFKA_HOME can provide Kafka."""
    try:
        resolve_kafka()
    except BrokerUnavailable as e:
        pytest.skip(str(e))


def _note(text: str) -> None:
    """Say (in the test's captured output) that the host, not the code, decided a check.
    Not a warning: the project's tests turn warnings into errors."""
    print(f"HOST-NOISE: {text}")


def _check_ladder(rec: dict[str, Any], broker: str) -> None:
    """A throughput record on a real broker: rungs measured and judged, the first (1k
    msg/s) sustained."""
    assert rec["broker"] == broker and rec["scenario"] == "throughput"
    lad = rec["ladder"]
    rungs = lad["rungs"]
    assert [r["target_rate_msg_s"] for r in rungs][:1] == [1000]
    assert lad["outcome"] in ("limit-found", "harness-limited", "limit-not-reached")
    if rungs[0]["limit"] == "host-noise":  # measured again, still robbed: honestly so
        assert lad["noise_retries"] and lad["outcome"] == "harness-limited", lad
        assert rec["verdict"]["status"] == "host-noise", rec["verdict"]
        _note(f"{broker} ladder: {rungs[0]['limit_reasons'][0]}")
    else:
        assert rungs[0]["status"] == "sustainable", rungs[0]
        assert rungs[0]["ack_ratio"] == pytest.approx(1.0, abs=0.05)
        assert lad["highest_sustainable_rate_msg_s"] >= 1000
    for r in rungs:
        if r["status"] == "refused":  # above what the workers can generate: never run
            assert r["limit"] == "generator" and r["limit_reasons"]
            continue
        assert r["latency_us"]["e2e_response"]["p50"] > 0 and r["worker_cpu_share"]
    assert [c["offered_rate_msg_s"] for c in lad["curve"]] == [  # refused rungs never ran
        r["target_rate_msg_s"] for r in rungs if r["status"] != "refused"]
    assert rec["delivery"]["lost"] == 0
    assert rec["calibration"]["driver"]["broker"] == broker


def _check_drained(rec: dict[str, Any]) -> None:
    """A catch-up record's ``drained`` SLO passed — or the host spoiled the window before
    the drain, and then no SLO was judged and the verdict says which signal."""
    verdict = rec["verdict"]
    if verdict["status"] in ("valid", "broker-backpressure"):
        assert {s["metric"]: s["status"] for s in rec["slo"]}["drained"] == "pass"
    else:
        assert rec["slo"] == [] and verdict["status"] in (
            "host-noise", "unsteady", "generator-bound", "rate-not-sustained",
            "consumer-bound"), verdict
        _note(f"{rec['test_id']}: {verdict['reasons'][0]}")


@pytest.fixture
def check_drained() -> Callable[..., None]:
    """Checks a catch-up record's ``drained`` SLO where it was judged."""
    return _check_drained


@pytest.fixture
def check_ladder() -> Callable[..., None]:
    """Checks a throughput record from a short ladder on a real broker."""
    return _check_ladder


#: statuses a fixed-rate window is measured again for, as the plugin does (host noise,
#: a stall still being caught up, a shortfall after a warm-up that never settled)
_AGAIN = ("host-noise", "unsteady")
_UNSETTLED = ("rate-not-sustained", "consumer-bound")


def _unsettled(out: RunOutcome, status: str) -> bool:
    return status in _UNSETTLED and not out.warmup_steady


def _measure_quietly(run: Callable[[int], RunOutcome], attempts: int = 2) -> RunOutcome:
    """``run(attempt)`` again while its measured window is host-noise, unsteady (a fresh
    broker's stall still being caught up) or short of its rate after a warm-up that never
    settled, as the plugin does; the last outcome either way."""
    for attempt in range(1, attempts + 1):
        out = run(attempt)
        status = assess(out).status
        if status not in _AGAIN and not _unsettled(out, status):
            break
    return out


def _expect_valid(out: RunOutcome) -> Verdict:
    """The run's verdict, which must be ``valid`` — or, measured again already, the
    harness's honest answer on a disturbed host (``host-noise``, ``unsteady``, or a
    shortfall after a warm-up that never settled): then a note, and the caller's timing
    checks must not apply."""
    v = assess(out)
    if v.status in _AGAIN or _unsettled(out, v.status):
        _note(f"timing checks not applicable ({v.status}): {v.reasons[0]}")
        return v
    assert v.status == "valid", v.reasons
    return v


@pytest.fixture
def measure_quietly() -> Callable[..., RunOutcome]:
    """``measure_quietly(run, attempts=2)``: measure again while the host is noisy."""
    return _measure_quietly


@pytest.fixture
def expect_valid() -> Callable[[RunOutcome], Verdict]:
    """``expect_valid(outcome)``: valid, or honestly host-noise (noted); the verdict."""
    return _expect_valid


def _valid_or_noise(rec: dict[str, Any]) -> tuple[str, str]:
    """A scenario record's verdict, which must be ``valid`` or — having been measured
    again as the plugin does — ``host-noise``; returns (status, summary SLO column)."""
    v = rec["verdict"]
    if v["status"] == "host-noise":
        assert rec["noise_retries"], "a host-noise window must be measured again first"
        # the hypervisor's steal, or other processes on the generator's CPUs
        assert ("steal time" in v["reasons"][0] or "other processes" in v["reasons"][0]) \
            and rec["slo"] == [], v
        _note(f"{rec['test_id']}: {v['reasons'][0]}")
        return "host-noise", "inconclusive"
    assert v["status"] == "valid", v
    return "valid", "pass"


@pytest.fixture
def valid_or_noise() -> Callable[[dict[str, Any]], tuple[str, str]]:
    """``valid_or_noise(record)`` → (status, SLO column): valid, or honestly host-noise."""
    return _valid_or_noise
