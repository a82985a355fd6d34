"""Memory cgroups around local brokers (--brokerperf-broker-memory): hierarchy detection
for cgroup v1 and v2 on a fake tree, limits written, refusals, and — where this machine
allows — a real process started inside a real cgroup and the cgroup gone afterwards."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.provision.cgroups import (
    MemoryCgroup,
    MemoryHierarchy,
    check_memory_limit,
    find_memory_hierarchy,
    join_argv,
    memory_cap_problem,
)
from pytest_brokerperf.brokers.provision.process import ManagedProcess, _oom_note
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError
from pytest_brokerperf.plugin.preflight import preflight_problems
from pytest_brokerperf.scenario_library.catchup import memory_available

MIB = 1024 * 1024


def _proc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proc-cgroup"
    path.write_text(text)
    return path


def test_v1_memory_hierarchy_is_the_memory_controllers_path(tmp_path: Path) -> None:
    (tmp_path / "memory" / "ci" / "job").mkdir(parents=True)
    proc = _proc(tmp_path, "5:cpu,cpuacct:/ci\n4:memory:/ci/job\n0::/\n")
    assert find_memory_hierarchy(tmp_path, proc) == MemoryHierarchy(1, tmp_path / "memory/ci/job")


def test_v2_memory_hierarchy_needs_the_memory_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    proc = _proc(tmp_path, "0::/user.slice/session\n")
    found = find_memory_hierarchy(tmp_path, proc)
    assert found == MemoryHierarchy(2, tmp_path / "user.slice/session")
    assert (found.limit_file, found.usage_file) == ("memory.max", "memory.current")
    (tmp_path / "cgroup.controllers").write_text("cpu io pids\n")
    with pytest.raises(ConfigError, match="no memory cgroup controller is mounted"):
        find_memory_hierarchy(tmp_path, proc)


def test_no_cgroups_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read .*--brokerperf-broker-memory"):
        find_memory_hierarchy(tmp_path, tmp_path / "missing")


def test_v1_create_writes_the_limit(tmp_path: Path) -> None:
    group = MemoryCgroup.create(MemoryHierarchy(1, tmp_path), "node-1", 1536 * MIB)
    assert (tmp_path / "node-1" / "memory.limit_in_bytes").read_text() == str(1536 * MIB)
    assert group.procs_file == tmp_path / "node-1" / "cgroup.procs"
    assert group.as_dict() == {"path": str(tmp_path / "node-1"), "cgroup_version": 1,
                               "limit_bytes": 1536 * MIB}


def test_v2_create_delegates_the_memory_controller_and_writes_memory_max(
        tmp_path: Path) -> None:
    (tmp_path / "cgroup.subtree_control").write_text("")
    MemoryCgroup.create(MemoryHierarchy(2, tmp_path), "node-1", 2 * 1024 * MIB)
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory"
    assert (tmp_path / "node-1" / "memory.max").read_text() == str(2 * 1024**3)


def test_v2_without_delegation_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot enable the memory controller.*Delegate=yes"):
        MemoryCgroup.create(MemoryHierarchy(2, tmp_path / "absent"), "node-1", 512 * MIB)


def test_oom_kills_are_read_from_either_version(tmp_path: Path) -> None:
    v1 = MemoryCgroup(MemoryHierarchy(1, tmp_path), tmp_path, 512 * MIB)
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert v1.oom_kills() == 2
    v2 = MemoryCgroup(MemoryHierarchy(2, tmp_path), tmp_path, 512 * MIB)
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert v2.oom_kills() == 1


def test_a_capped_brokers_death_by_oom_kill_says_so(tmp_path: Path) -> None:
    group = MemoryCgroup(MemoryHierarchy(1, tmp_path), tmp_path, 1536 * MIB)
    proc = ManagedProcess(["true"], log_file=tmp_path / "log", cgroup=group)
    (tmp_path / "memory.oom_control").write_text("oom_kill 0\n")
    assert _oom_note(proc) == ""
    (tmp_path / "memory.oom_control").write_text("oom_kill 1\n")
    note = _oom_note(proc)
    assert "OOM killer ended it" in note and "1,536 MiB" in note
    assert "--brokerperf-broker-memory" in note


def test_a_limit_below_the_floor_is_refused() -> None:
    check_memory_limit(1536 * MIB, 1408 * MIB, "kafka")
    with pytest.raises(ConfigError, match=r"=1,024MiB is below the 1,408 MiB one node of kafka"):
        check_memory_limit(1024 * MIB, 1408 * MIB, "kafka")


def test_the_floor_is_the_heap_plus_the_jvms_own_memory() -> None:
    assert brokers.get("kafka").memory_floor() == 1024 * MIB + 384 * MIB
    assert brokers.get("pulsar").memory_floor() == 1024 * MIB + 640 * MIB
    assert brokers.get("rabbitmq").memory_floor() == 256 * MIB


def test_join_argv_becomes_the_command_inside_the_cgroup(tmp_path: Path) -> None:
    argv = join_argv(tmp_path / "cgroup.procs", ["java", "-Xmx1g", "Kafka"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3:] == [str(tmp_path / "cgroup.procs"),
                                                         "java", "-Xmx1g", "Kafka"]


def test_the_page_cache_available_is_capped_by_the_broker_limit() -> None:
    host = memory_available()
    assert host is not None and host > 0
    assert memory_available(64 * MIB) == 64 * MIB
    assert memory_available(1 << 60) == host


def test_a_broker_memory_cap_on_a_remote_cluster_is_refused() -> None:
    with pytest.raises(ConfigError, match="caps the memory of brokers this plugin starts"):
        Settings.resolve({"brokerperf_broker_memory": "2GiB",
                          "brokerperf_kafka_bootstrap": "127.0.0.1:9092"}, {}, {})


def test_a_broker_that_cannot_be_capped_in_a_mode_is_unavailable(tmp_path: Path) -> None:
    settings = Settings.resolve({"brokerperf_broker_memory": "2GiB"}, {}, {})
    with pytest.raises(BrokerUnavailable, match="cannot cap redpanda in container mode"):
        brokers.get("redpanda").start("container", settings, tmp_path)


def test_preflight_names_the_floor_for_each_selected_broker() -> None:
    settings = Settings.resolve({"brokerperf_broker_memory": "700MiB",
                                 "brokerperf_broker": "kafka,rabbitmq"}, {}, {})
    problems = [p for p in preflight_problems(replace(settings, dry_run=True))]
    assert problems == []  # a dry run starts nothing
    problems = preflight_problems(replace(settings, results_dir=Path("/tmp/bp-cgroup-test")))
    floors = [p for p in problems if "is below" in p]
    assert len(floors) == 1 and "one node of kafka" in floors[0]


_REAL = memory_cap_problem()


@pytest.mark.skipif(_REAL is not None, reason=f"no memory cgroup can be made here: {_REAL}")
def test_a_process_starts_inside_a_real_cgroup_which_is_removed_after(tmp_path: Path) -> None:
    group = MemoryCgroup.create(find_memory_hierarchy(), "brokerperf-unit-test", 64 * MIB)
    try:
        assert (group.path / group.hierarchy.limit_file).read_text().strip() == str(64 * MIB)
        proc = ManagedProcess(["sleep", "30"], log_file=tmp_path / "log", cgroup=group).start()
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                text = Path(f"/proc/{proc.pid}/cgroup").read_text()
                if "brokerperf-unit-test" in text:
                    break
                time.sleep(0.05)
            assert f"/{group.path.name}" in text
            assert str(proc.pid) in group.procs_file.read_text().split()
            assert "sleep" in Path(f"/proc/{proc.pid}/cmdline").read_text()
        finally:
            proc.stop(timeout=5)
        assert group.remove()
        assert not group.path.exists()
    finally:
        group.remove()
