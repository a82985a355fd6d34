"""A broker container that exits mid-run fails the run, named; a planned outage does not
(pytest_brokerperf/brokers/provision/container_watch.py), on injected engine reads and clock."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.provision import container_watch as cw
from pytest_brokerperf.brokers.provision.container_node import ContainerNode, ContainerPlan
from pytest_brokerperf.brokers.provision.container_watch import (
    REMOVED,
    ContainerState,
    DeathTracker,
    WatchedContainer,
    check_watched_containers,
    death_text,
    state_of,
    unwatch_container,
    watch_container,
)
from pytest_brokerperf.core.errors import BrokerDied
from tests.support.engine import death_mid_run

RUNNING = ContainerState(running=True, status="running", exit_code=0, pid=42)
KILLED = ContainerState(running=False, status="exited", exit_code=137)
PAUSED = ContainerState(running=True, status="paused", exit_code=0, pid=42)


class Engine:
    """What a fake engine says of each container, and how often it was asked."""

    def __init__(self) -> None:
        self.states: dict[str, ContainerState] = {}
        self.asked = 0

    def inspect(self, name: str) -> ContainerState:
        self.asked += 1
        return self.states.get(name, REMOVED)

    @staticmethod
    def logs(name: str, lines: int) -> str:
        return f"[{name}] started\n[{name}] last words"


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Engine:
    """A fresh session watch reading the fake engine, polling every 50 ms."""
    fake = Engine()
    watch = cw._Watch()
    watch.inspect, watch.logs, watch.interval_s = fake.inspect, fake.logs, 0.05
    monkeypatch.setattr(cw, "_watch", watch)
    yield fake
    for name in list(watch.tracker.watched):
        unwatch_container(name)


# -- the rules ------------------------------------------------------------------------

def test_a_running_or_paused_container_is_not_dead() -> None:
    t = DeathTracker()
    t.watch(WatchedContainer("k1", "kafka node 1", since=10.0))
    t.observe("k1", 11.0, RUNNING)
    assert t.dead() == []
    t.observe("k1", 12.0, PAUSED)  # pause-broker: frozen, not gone
    assert t.dead() == []
    t.observe("k1", 13.0, KILLED)
    assert [(c.name, s.exit_code) for c, s in t.dead()] == [("k1", 137)]


def test_a_read_asked_before_the_watch_began_never_counts() -> None:
    """A planned restart: the node was unwatched, a read saw it exited, it came back and
    was watched again; that stale read must not fail the run."""
    t = DeathTracker()
    t.watch(WatchedContainer("k1", "kafka node 1", since=10.0))
    t.unwatch("k1")  # kill_node / stop_node
    t.observe("k1", 11.0, KILLED)  # during the outage: not watched, ignored
    t.watch(WatchedContainer("k1", "kafka node 1", since=14.0))  # start_node: serving
    t.observe("k1", 13.5, KILLED)  # asked before the re-watch, answered after
    assert t.dead() == []
    t.observe("k1", 15.0, KILLED)
    assert len(t.dead()) == 1


def test_an_older_read_never_replaces_a_newer_one() -> None:
    t = DeathTracker()
    t.watch(WatchedContainer("k1", "kafka node 1", since=0.0))
    t.observe("k1", 2.0, KILLED)
    t.observe("k1", 1.0, RUNNING)  # asked earlier, answered later
    assert len(t.dead()) == 1


def test_unwatching_forgets_a_death_already_seen() -> None:
    t = DeathTracker()
    t.watch(WatchedContainer("k1", "kafka node 1", since=0.0))
    t.observe("k1", 1.0, KILLED)
    t.unwatch("k1")  # teardown removes it: not the run's concern any more
    assert t.dead() == []


def test_state_of_reads_docker_inspect() -> None:
    attrs: dict[str, Any] = {"State": {"Status": "exited", "Running": False, "Paused": False,
                                       "OOMKilled": True, "Pid": 0, "ExitCode": 137,
                                       "Error": ""}}
    assert state_of(attrs) == ContainerState(running=False, status="exited", exit_code=137,
                                             oom_killed=True, error="", pid=None)
    assert state_of({}).running is False


def test_death_text_names_container_exit_code_oom_and_log() -> None:
    c = WatchedContainer("brokerperf-x-kafka-1-9", "kafka node 1", since=5.0,
                         memory_limit_bytes=1536 * 1024**2)
    text = death_text(c, ContainerState(False, "exited", 137, oom_killed=True), "boom", 65.0)
    assert text.startswith("broker container brokerperf-x-kafka-1-9 (kafka node 1) exited "
                           "during the run (exit code 137: killed by SIGKILL, OOMKilled=true)"
                           " after 60.0 s watched")
    assert "OOM killer" in text and "1,536 MiB" in text and "--brokerperf-broker-memory" in text
    assert text.endswith("(docker logs --tail 30 brokerperf-x-kafka-1-9):\nboom")
    plain = death_text(c, ContainerState(False, "exited", 3), "", 6.0)
    assert "(exit code 3, OOMKilled=false)" in plain and "OOM killer" not in plain
    assert "removed: the engine no longer knows it" in death_text(c, REMOVED, "", 6.0)


# -- the session's watch --------------------------------------------------------------

def test_check_raises_with_the_log_tail_once_the_poll_saw_the_exit(engine: Engine) -> None:
    engine.states["k1"] = RUNNING
    watch_container("k1", "kafka node 1")
    cw._watch.poll_once()
    check_watched_containers()  # running: nothing
    engine.states["k1"] = KILLED
    cw._watch.poll_once()
    with pytest.raises(BrokerDied, match=r"broker container k1 \(kafka node 1\) exited during "
                       r"the run \(exit code 137: killed by SIGKILL, OOMKilled=false\)") as info:
        check_watched_containers()
    assert str(info.value).endswith("[k1] started\n[k1] last words")


def test_an_engine_that_does_not_answer_says_nothing_of_the_broker(engine: Engine) -> None:
    def broken(name: str) -> ContainerState:
        raise ConnectionError("engine gone")

    cw._watch.inspect = broken
    watch_container("k1", "kafka node 1")
    cw._watch.poll_once()
    check_watched_containers()


def test_the_thread_polls_while_something_is_watched_and_ends_after(engine: Engine) -> None:
    engine.states["k1"] = RUNNING
    watch_container("k1", "kafka node 1")
    thread = cw._watch._thread
    assert thread is not None and thread.is_alive()
    deadline = time.monotonic() + 10
    while engine.asked < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.asked >= 2  # it polls again and again, not once
    unwatch_container("k1")
    thread.join(5)
    assert not thread.is_alive() and cw._watch._thread is None
    check_watched_containers()


def test_a_killed_container_stops_a_run_mid_window(engine: Engine) -> None:
    """The coordinator's between-period check sees it: the run stops long before its 60 s
    window ends, naming the container."""
    engine.states["brokerperf-r-kafka-1-1"] = RUNNING
    watch_container("brokerperf-r-kafka-1-1", "kafka node 1")
    died = death_mid_run(
        lambda: engine.states.__setitem__("brokerperf-r-kafka-1-1", KILLED), "cdeath")
    msg = str(died)
    assert "broker container brokerperf-r-kafka-1-1 (kafka node 1)" in msg
    assert "exit code 137" in msg and "last words" in msg
    assert died.partial is not None  # what was measured until then, for the record


# -- the planned outages of container faults ------------------------------------------

class FakeWrapped:
    """A docker-py ``Container`` as far as ContainerNode's node faults use it."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name
        engine.states[name] = RUNNING

    @property
    def attrs(self) -> dict[str, Any]:
        st = self.engine.states[self.name]
        return {"State": {"Running": st.running, "Pid": st.pid, "ExitCode": st.exit_code,
                          "Paused": st.status == "paused", "Status": st.status}}

    def reload(self) -> None:
        pass

    def kill(self, signal: str) -> None:
        self.engine.states[self.name] = KILLED

    def wait(self, timeout: float) -> None:
        pass

    def stop(self, timeout: int) -> None:
        self.engine.states[self.name] = ContainerState(False, "exited", 143)

    def start(self) -> None:
        self.engine.states[self.name] = RUNNING


class FakeContainer:
    def __init__(self, wrapped: FakeWrapped) -> None:
        self.wrapped = wrapped

    def get_wrapped_container(self) -> FakeWrapped:
        return self.wrapped


class Node(ContainerNode):
    kind = "kafka"

    def wait_ready(self, container: Any, plan: ContainerPlan, deadline: float) -> None:
        pass


@pytest.mark.parametrize("fault", ["kill", "restart"])
def test_a_fault_that_stops_a_node_is_not_a_death(engine: Engine, tmp_path: Path,
                                                  fault: str) -> None:
    node = Node(workdir=tmp_path, run_id="r")
    name = node.name_of(1)
    node._containers = [FakeContainer(FakeWrapped(engine, name))]  # type: ignore[list-item]
    node._plans = [ContainerPlan(alias="kafka-1", env={}, ports={})]
    watch_container(name, "kafka node 1")
    if fault == "kill":
        node.kill_node(1)
    else:
        node.stop_node(1, 5.0)
    cw._watch.poll_once()
    check_watched_containers()  # the outage the run asked for
    assert name not in cw._watch.tracker.watched
    node.start_node(1, 5.0)  # serving again: watched again, its death fails the run
    cw._watch.poll_once()
    check_watched_containers()
    engine.states[name] = KILLED  # an exit nobody asked for
    cw._watch.poll_once()
    with pytest.raises(BrokerDied, match=name):
        check_watched_containers()
