"""Which brokers and modes a power cut runs on, and the broker-neutral pieces of it:
reports merged over filesystems, stream names for RabbitMQ's read-back, sequence bitmaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.powercut_nodes import merge_reports
from pytest_brokerperf.brokers.rabbitmq.readback import stream_names
from pytest_brokerperf.brokers.readback import SeqBitmaps
from pytest_brokerperf.config.fault_spec import parse_fault
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.header import KIND_DATA, MAGIC, VERSION, pack
from pytest_brokerperf.faults.offered import power_cut_problem
from pytest_brokerperf.faults.readback import compare
from pytest_brokerperf.plugin.preflight import preflight_problems

CUT = parse_fault("power-cut@5s", "test")


@pytest.mark.parametrize("kind", ["kafka", "rabbitmq", "pulsar"])
def test_kafka_rabbitmq_and_pulsar_process_nodes_take_a_power_cut(kind: str) -> None:
    assert power_cut_problem(CUT, kind, "process") is None


@pytest.mark.parametrize("target", ["node-1", "all", "leader"])
def test_the_pulsar_standalone_s_one_node_is_cut_as_node_1_or_all(target: str) -> None:
    assert power_cut_problem(parse_fault(f"power-cut@5s/{target}", "t"), "pulsar",
                             "process") is None


def test_pulsar_node_2_is_refused_naming_the_one_jvm_and_the_same_cut() -> None:
    problem = power_cut_problem(parse_fault("power-cut@5s:2s/node-2", "t"), "pulsar",
                                "process")
    assert problem is not None
    assert "power-cut@5s:2s/node-2" in problem and "no pulsar node 2" in problem
    assert "one standalone JVM" in problem and "every bookie" in problem
    assert "Fix: power-cut@5s:2s/node-1 or power-cut@5s:2s/all" in problem


def test_node_n_of_brokers_with_a_process_per_node_is_not_refused_here() -> None:
    assert power_cut_problem(parse_fault("power-cut@5s/node-3", "t"), "kafka",
                             "process") is None


def test_other_faults_are_not_this_check_s_business() -> None:
    assert power_cut_problem(parse_fault("kill-broker@5s", "t"), "pulsar", "container") is None


def test_tansu_is_refused_with_the_brokers_that_have_it_and_the_kill_instead() -> None:
    problem = power_cut_problem(CUT, "tansu", "process")
    assert problem is not None
    assert "tansu nodes cannot lose unsynced writes" in problem
    assert "--broker=kafka or pulsar or rabbitmq --brokerperf-provision=process" in problem
    assert "kill-broker@5s" in problem and "loopback" not in problem


def test_pulsar_containers_are_refused_with_process_mode_as_the_fix() -> None:
    problem = power_cut_problem(CUT, "pulsar", "container")
    assert problem is not None and "pulsar in container mode" in problem
    assert "--brokerperf-provision=process" in problem


def test_containers_are_refused_with_process_mode_as_the_fix() -> None:
    problem = power_cut_problem(CUT, "rabbitmq", "container")
    assert problem is not None and "rabbitmq in container mode" in problem
    assert "--brokerperf-provision=process" in problem


def test_preflight_refuses_the_power_cut_of_a_broker_without_it(tmp_path: Path) -> None:
    settings = Settings.resolve(
        {"brokerperf_broker": "tansu,pulsar,rabbitmq", "brokerperf_fault": "power-cut@5s",
         "brokerperf_provision": "process", "brokerperf_results": str(tmp_path)}, {}, {})
    found = [p for p in preflight_problems(settings) if "power-cut" in p]
    assert len(found) == 1 and found[0].startswith("--brokerperf-fault=power-cut@5s")
    assert "tansu nodes cannot" in found[0]


def test_preflight_refuses_a_pulsar_power_cut_of_node_2(tmp_path: Path) -> None:
    settings = Settings.resolve(
        {"brokerperf_broker": "pulsar", "brokerperf_fault": "power-cut@5s/node-2",
         "brokerperf_provision": "process", "brokerperf_results": str(tmp_path)}, {}, {})
    found = [p for p in preflight_problems(settings) if "power-cut" in p]
    assert len(found) == 1 and "no pulsar node 2" in found[0]


def test_reports_of_several_filesystems_add_up_and_keep_their_paths() -> None:
    merged = merge_reports([
        {"removed": ["/a"], "restored": [], "bytes_dropped": 3},
        {"removed": [], "restored": ["/b"], "bytes_dropped": 4}], "node-2")
    assert merged == {"bytes_dropped": 7, "removed": ["node-2/a"], "restored": ["node-2/b"]}


def test_stream_read_back_covers_the_run_s_streams_only() -> None:
    rows = [{"name": "t-1-stream-part-0", "type": "stream"},
            {"name": "t-1-sub-part-0", "type": "quorum"},
            {"name": "t-10-stream-part-0", "type": "stream"},
            {"name": "other-stream", "type": "stream"}, "junk"]
    assert stream_names(rows, ["t-1"]) == ["t-1-stream-part-0"]
    assert stream_names(rows, ["nothing"]) == []


def test_bitmaps_of_what_was_read_back_name_what_is_missing() -> None:
    seen = SeqBitmaps()
    for seq in (0, 1, 2, 9, 9):
        assert seen.add(pack(MAGIC, VERSION, KIND_DATA, 7, seq, 0, 0) + b"payload")
    assert not seen.add(b"not a harness message") and not seen.add(None)
    assert seen.read == 5
    acked = {7: sum(1 << s for s in range(12))}
    rb = compare(acked, seen.present(), seen.read)
    assert rb.missing == 8
    assert rb.missing_ranges == [{"producer": 7, "first": 3, "last": 8},
                                 {"producer": 7, "first": 10, "last": 11}]
