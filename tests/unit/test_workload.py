"""Workload: OMB YAML in and out, OMB defaults, derived numbers, validation messages."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_brokerperf.core.errors import ConfigError, WorkloadError
from pytest_brokerperf.core.shipped import WORKLOADS_DIR, shipped_workload, shipped_workloads
from pytest_brokerperf.core.warnings import BrokerPerfWarning
from pytest_brokerperf.workload.fields import FIELDS
from pytest_brokerperf.workload.model import (
    PAYLOAD_HEADER_BYTES,
    KeyDistributor,
    Workload,
)

# OMB's workloads/*.yaml examples, field values only
OMB_EXAMPLES: dict[str, str] = {
    "backlog": """
name: Backlog for 200k rate 4 producers and 4 consumers on 1 topic / 100 partition
topics: 1
partitionsPerTopic: 100
messageSize: 1024
useRandomizedPayloads: true
randomBytesRatio: 0.5
randomizedPayloadPoolSize: 1000
subscriptionsPerTopic: 1
consumerPerSubscription: 4
producersPerTopic: 4
producerRate: 200000
consumerBacklogSizeGB: 512
testDurationMinutes: 5
""",
    "reassignment": """
name: 2-topic-1_4-partitions-4kb-4p4c-40_10m
topics: 2
partitionsPerTopic: 1
partitionsPerTopicList: [1, 4]
messageSize: 4096
subscriptionsPerTopic: 1
consumerPerSubscription: 4
producersPerTopic: 4
producersPerTopicList: [4, 1]
producerRate: 12800
consumerBacklogSizeGB: 0
warmupDurationMinutes: 0
testDurationMinutes: 40
logIntervalMillis: 1000
""",
    "catchup": """
name: 1-topic-1000-partitions-4kb-4p4c-800m-backlog-4096g
topics: 1
partitionsPerTopic: 1000
messageSize: 4096
subscriptionsPerTopic: 1
consumerPerSubscription: 4
producersPerTopic: 4
producerRate: 204800
consumerBacklogSizeGB: 4096
warmupDurationMinutes: 5
testDurationMinutes: 10
""",
    "autoscaling": """
name: auto-scaling
topics: 1
partitionsPerTopic: 256
messageSize: 4096
subscriptionsPerTopic: 1
consumerPerSubscription: 4
producersPerTopic: 4
producerRate: 19200
producerRateList: [[4,0,10240],[4,30,204800],[5,0,10240],[10,0,10240],[10,30,307200],[11,0,10240]]
warmupDurationMinutes: 30
testDurationMinutes: 1800
""",
}

GOOD: dict[str, Any] = {
    "name": "t",
    "topics": 1,
    "partitionsPerTopic": 4,
    "messageSize": 1024,
    "subscriptionsPerTopic": 1,
    "producersPerTopic": 1,
    "consumerPerSubscription": 1,
    "producerRate": 1000,
    "testDurationMinutes": 5,
}


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def good(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def load_error(tmp_path: Path, data: dict[str, Any]) -> str:
    path = write(tmp_path, yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(WorkloadError) as info:
        Workload.from_yaml(path)
    return str(info.value)


# ------------------------------------------------------------------ shipped files, round trips


def test_shipped_workloads_are_listed() -> None:
    assert set(shipped_workloads()) >= {
        "tail-read-smoke",
        "simple-workload",
        "max-rate-1-topic-16-partitions-1kb",
        "1-topic-100-partitions-1kb-4-producers-500k-rate",
    }


@pytest.mark.parametrize("name", shipped_workloads())
def test_shipped_workload_round_trips(name: str, tmp_path: Path) -> None:
    w = Workload.from_yaml(shipped_workload(name))
    assert Workload.from_dict(w.to_omb_dict()) == w
    out = w.to_yaml(tmp_path / f"{name}.yaml")
    # the written file is plain OMB: every key is an OMB key
    assert set(yaml.safe_load(out.read_text())) <= {f.key for f in FIELDS}
    # payloadFile is relative to the shipped dir; found through the shipped fallback
    assert Workload.from_yaml(out) == w
    assert all(len(p) == w.message_size for p in w.payloads())
    assert pickle.loads(pickle.dumps(w)) == w


def test_shipped_values_match_omb() -> None:
    simple = Workload.from_yaml(shipped_workload("simple-workload"))
    assert (simple.partitions_per_topic, simple.producer_rate, simple.test_duration_minutes) == (
        10,
        10000,
        5,
    )
    assert simple.warmup_duration_minutes == 1  # OMB default, not in the file
    maxrate = Workload.from_yaml(shipped_workload("max-rate-1-topic-16-partitions-1kb"))
    assert maxrate.producer_rate == 0 and maxrate.partitions_per_topic == 16
    confluent = Workload.from_yaml(
        shipped_workload("1-topic-100-partitions-1kb-4-producers-500k-rate.yaml")
    )
    assert confluent.total_producers == 4 and confluent.total_consumers == 4
    smoke = Workload.from_yaml(shipped_workload("tail-read-smoke"))
    assert (smoke.topics, smoke.partitions_per_topic, smoke.message_size) == (1, 4, 1024)
    assert (smoke.producer_rate, smoke.warmup_s, smoke.duration_s) == (1000, 60.0, 300.0)


def test_shipped_payload_is_1kib() -> None:
    path = WORKLOADS_DIR / "payload" / "payload-1Kb.data"
    assert path.stat().st_size == 1024


def test_unknown_shipped_workload_suggests() -> None:
    with pytest.raises(ConfigError, match="tail-read-smoke"):
        shipped_workload("tail-read-smok")


@pytest.mark.parametrize("name", sorted(OMB_EXAMPLES))
def test_omb_examples_round_trip(name: str, tmp_path: Path) -> None:
    w = Workload.from_yaml(write(tmp_path, OMB_EXAMPLES[name]))
    again = Workload.from_yaml(w.to_yaml(tmp_path / "again.yaml"))
    assert again == w
    assert Workload.from_dict(w.to_omb_dict()) == w
    # every key of the source comes back under the same name
    src = yaml.safe_load(OMB_EXAMPLES[name])
    out = w.to_omb_dict()
    for key, value in src.items():
        assert out[key] == value, key


# ------------------------------------------------------------------ defaults and types


def test_omb_defaults() -> None:
    w = Workload.from_dict(GOOD)
    assert w.key_distributor is KeyDistributor.NO_KEY
    assert w.warmup_duration_minutes == 1
    assert w.backlog_drain_ratio == 1.0
    assert w.consumer_backlog_size_gb == 0
    assert w.use_randomized_payloads is False
    assert w.random_bytes_ratio == 0.0
    assert w.payload_file is None
    assert w.log_interval_millis == 10000
    assert w.random_topic_names is True
    assert w.consumer_only is False
    assert w.partitions_per_topic_list is None


def test_dataclass_fields_match_table() -> None:
    attrs = [f.name for f in dataclasses.fields(Workload)
             if f.name not in ("source", "ignored_keys")]
    assert attrs == [f.attr for f in FIELDS]


def test_python_construction_and_replace() -> None:
    w = Workload(
        topics=2,
        partitions_per_topic=3,
        message_size=100,
        producers_per_topic=1,
        subscriptions_per_topic=1,
        consumer_per_subscription=2,
        producer_rate=500,
        test_duration_minutes=0.5,
        key_distributor="KEY_ROUND_ROBIN",  # type: ignore[arg-type]
        partitions_per_topic_list=[3, 5],  # type: ignore[arg-type]
    )
    assert w.key_distributor is KeyDistributor.KEY_ROUND_ROBIN
    assert w.partitions_per_topic_list == (3, 5)
    assert w.duration_s == 30.0
    hash(w)
    shorter = w.replace(test_duration_minutes=1, warmupDurationMinutes=0)
    assert (shorter.duration_s, shorter.warmup_s) == (60.0, 0.0)
    assert shorter.topics == 2
    with pytest.raises(WorkloadError, match="producersPerTopic"):
        w.replace(producers_per_topic=0)
    with pytest.raises(WorkloadError, match="Did you mean 'topics'"):
        w.replace(topic=3)


def test_integral_floats_coerced_like_jackson() -> None:
    w = Workload.from_dict(good(topics=1.0, producerRate=1000.0, testDurationMinutes=5.0))
    assert isinstance(w.topics, int) and isinstance(w.producer_rate, int)
    assert w.to_omb_dict()["testDurationMinutes"] == 5


def test_null_value_keeps_default() -> None:
    w = Workload.from_dict(good(warmupDurationMinutes=None, name=None))
    assert w.warmup_duration_minutes == 1 and w.name is None


def test_fractional_durations_and_backlog() -> None:
    w = Workload.from_dict(
        good(testDurationMinutes=0.25, warmupDurationMinutes=0.1, consumerBacklogSizeGB=0.0625)
    )
    assert w.duration_s == 15.0
    assert w.warmup_s == pytest.approx(6.0)
    assert w.backlog_bytes == 64 * 1024**2
    assert Workload.from_dict(w.to_omb_dict()) == w


# ------------------------------------------------------------------ derived numbers


def test_topology_numbers() -> None:
    w = Workload.from_dict(
        good(topics=3, producersPerTopic=2, subscriptionsPerTopic=2, consumerPerSubscription=4)
    )
    assert w.total_producers == 6
    assert w.total_subscriptions == 6
    assert w.total_consumers == 24
    assert w.expected_consume_rate == 2000.0
    assert w.total_partitions == 12
    assert [w.partitions_for_topic(i) for i in range(3)] == [4, 4, 4]
    with pytest.raises(IndexError):
        w.partitions_for_topic(3)


def test_automq_per_topic_lists() -> None:
    w = Workload.from_dict(yaml.safe_load(OMB_EXAMPLES["reassignment"]))
    assert [w.partitions_for_topic(i) for i in range(2)] == [1, 4]
    assert [w.producers_for_topic(i) for i in range(2)] == [4, 1]
    assert w.total_producers == 5
    assert w.total_partitions == 5
    # 12800 msg/s shared evenly by 5 producers: 4/5 into topic 0 ("40_10m")
    assert w.rate_for_topic(0) == pytest.approx(10240.0)
    assert w.rate_for_topic(1) == pytest.approx(2560.0)
    assert w.log_interval_s == 1.0 and w.warmup_s == 0.0


def test_backlog_threshold_like_omb() -> None:
    w = Workload.from_dict(yaml.safe_load(OMB_EXAMPLES["backlog"]))
    assert w.backlog_bytes == 512 * 2**30
    assert w.backlog_capacity_messages == 512 * 2**30 // 1024
    # ratio 1.0: drain to OMB's floor of 1000 messages
    assert w.drain_complete_threshold == 1000
    half = w.replace(backlog_drain_ratio=0.99)
    assert half.drain_complete_threshold == int(0.01 * (512 * 2**30 // 1024))
    # tiny backlog: the floor of 1000 wins
    small = w.replace(consumer_backlog_size_gb=0.001, backlog_drain_ratio=0.5)
    assert small.drain_complete_threshold == 1000
    none = Workload.from_dict(GOOD)
    assert none.backlog_capacity_messages == 0 and none.drain_complete_threshold == 1000


def test_describe_mentions_key_numbers() -> None:
    text = Workload.from_dict(GOOD).describe()
    assert "1000 msg/s" in text and "4 partitions" in text
    scheduled = Workload.from_dict(good(producerRateList=[[0, 10], [1, 20]])).describe()
    assert "rate schedule producerRateList (2 points)" in scheduled  # not the flat 1000


# ------------------------------------------------------------------ payloads


def test_randomized_payload_pool_is_random_prefix_and_zero_tail() -> None:
    w = Workload.from_dict(
        good(useRandomizedPayloads=True, randomBytesRatio=0.5, randomizedPayloadPoolSize=10)
    )
    pool = w.payloads(seed=7)
    assert len(pool) == 10
    assert all(len(p) == 1024 and p[512:] == bytes(512) for p in pool)
    assert len({p[:512] for p in pool}) == 10
    assert w.payloads(seed=7) == pool
    assert w.payloads(seed=8) != pool


def test_default_payload_is_seeded_random() -> None:
    w = Workload.from_dict(GOOD)
    (p,) = w.payloads(seed=1)
    assert len(p) == 1024 and p != bytes(1024)
    assert w.payloads(seed=1) == [p]


def test_payload_file_relative_to_yaml_dir_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wl" / "payload").mkdir(parents=True)
    (tmp_path / "wl" / "payload" / "p.data").write_bytes(b"a" * 64)
    (tmp_path / "payload").mkdir()
    (tmp_path / "payload" / "p.data").write_bytes(b"b" * 64)
    monkeypatch.chdir(tmp_path)
    path = write(
        tmp_path / "wl", yaml.safe_dump(good(messageSize=64, payloadFile="payload/p.data"))
    )
    w = Workload.from_yaml(path)
    assert w.payloads() == [b"a" * 64]
    assert w.payload_path() == tmp_path / "wl" / "payload" / "p.data"
    # an explicit base_dir replaces the YAML dir; CWD is the next place
    assert w.payloads(base_dir=tmp_path / "nowhere") == [b"b" * 64]


def test_payload_file_falls_back_to_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.data").write_bytes(b"c" * 40)
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    w = Workload.from_yaml(
        write(tmp_path / "conf", yaml.safe_dump(good(messageSize=40, payloadFile="p.data")))
    )
    assert w.payload_path() == tmp_path / "p.data"


def test_payload_length_mismatch(tmp_path: Path) -> None:
    (tmp_path / "p.data").write_bytes(b"x" * 1000)
    msg = load_error(tmp_path, good(payloadFile="p.data"))
    assert "Payload length mismatch" in msg
    assert "1000" in msg and "1024" in msg
    assert "w.yaml" in msg and "payloadFile" in msg and "'p.data'" in msg


def test_payload_file_missing_names_places_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    msg = load_error(tmp_path, good(payloadFile="payload/none.data"))
    assert "w.yaml:" in msg and "payloadFile" in msg and "payload/none.data" in msg
    assert "workload file's directory" in msg and "current directory" in msg


def test_randomized_payload_ignores_payload_file() -> None:
    w = Workload.from_dict(
        good(
            useRandomizedPayloads=True,
            randomizedPayloadPoolSize=2,
            payloadFile="does/not/exist.data",
        )
    )
    assert len(w.payloads()) == 2


# ------------------------------------------------------------------ validation errors


@pytest.mark.parametrize(
    ("changes", "key", "value_text", "fix_text"),
    [
        ({"topics": "ten"}, "topics", "'ten'", "without quotes"),
        ({"topics": 0}, "topics", "0", "topics: 1"),
        ({"topics": -1}, "topics", "-1", "topics: 1"),
        ({"partitionsPerTopic": 0}, "partitionsPerTopic", "0", "partitionsPerTopic: 1"),
        ({"producersPerTopic": 0}, "producersPerTopic", "0", "producersPerTopic: 1"),
        ({"subscriptionsPerTopic": -2}, "subscriptionsPerTopic", "-2", "Fix:"),
        (
            {"consumerPerSubscription": 0},
            "consumerPerSubscription",
            "0",
            "subscriptionsPerTopic: 0",
        ),
        ({"producerRate": -5}, "producerRate", "-5", "Fix:"),
        ({"messageSize": 16}, "messageSize", "16", "messageSize: 32"),
        ({"messageSize": 10.5}, "messageSize", "10.5", "without quotes"),
        ({"backlogDrainRatio": 1.5}, "backlogDrainRatio", "1.5", "Fix:"),
        ({"randomBytesRatio": -0.1}, "randomBytesRatio", "-0.1", "Fix:"),
        ({"keyDistributor": "ROUND_ROBIN"}, "keyDistributor", "'ROUND_ROBIN'", "KEY_ROUND_ROBIN"),
        ({"useRandomizedPayloads": "yes please"}, "useRandomizedPayloads", "'yes please'", "Fix:"),
        ({"testDurationMinutes": 0}, "testDurationMinutes", "0", "testDurationMinutes: 5"),
        ({"warmupDurationMinutes": -1}, "warmupDurationMinutes", "-1", "warmupDurationMinutes: 0"),
        ({"consumerBacklogSizeGB": -1}, "consumerBacklogSizeGB", "-1", "Fix:"),
        ({"partitionsPerTopicList": [1, 2]}, "partitionsPerTopicList", "[1, 2]", "exactly 1"),
        ({"topics": 2, "producersPerTopicList": [1]}, "producersPerTopicList", "[1]", "exactly 2"),
        (
            {"topics": 2, "partitionsPerTopicList": [1, 0]},
            "partitionsPerTopicList[1]",
            "[1, 0]",
            "at least 1",
        ),
        ({"producerRateList": [[1, 2, 3], [1, 2]]}, "producerRateList[1]", "[1, 2]", "Fix:"),
        ({"producerRateList": [[25, 0, 3]]}, "producerRateList[0]", "[25, 0, 3]", "Fix:"),
        ({"logIntervalMillis": 0}, "logIntervalMillis", "0", "Fix:"),
        ({"name": ["a"]}, "name", "['a']", "Fix:"),
        (
            {"useRandomizedPayloads": True, "randomizedPayloadPoolSize": 0},
            "randomizedPayloadPoolSize",
            "0",
            "randomizedPayloadPoolSize: 1000",
        ),
        (
            {"subscriptionsPerTopic": 0, "consumerPerSubscription": 0, "consumerBacklogSizeGB": 1},
            "consumerBacklogSizeGB",
            "1",
            "subscriptionsPerTopic: 1",
        ),
    ],
)
def test_validation_error_names_file_line_key_value_fix(
    tmp_path: Path, changes: dict[str, Any], key: str, value_text: str, fix_text: str
) -> None:
    msg = load_error(tmp_path, good(**changes))
    assert f"{tmp_path / 'w.yaml'}:" in msg  # file and line
    assert f"{key} = {value_text}" in msg
    assert "Fix:" in msg and fix_text in msg


def test_error_line_number_points_at_key(tmp_path: Path) -> None:
    text = "name: x\ntopics: 1\npartitionsPerTopic: 4\nmessageSize: 8\nproducersPerTopic: 1\n"
    with pytest.raises(WorkloadError, match=r"w\.yaml:4: messageSize = 8: "):
        Workload.from_yaml(write(tmp_path, text))


def test_error_for_key_missing_from_file_says_default(tmp_path: Path) -> None:
    text = "topics: 1\npartitionsPerTopic: 4\nmessageSize: 1024\n"
    with pytest.raises(WorkloadError) as info:
        Workload.from_yaml(write(tmp_path, text))
    assert "w.yaml: producersPerTopic = 0 (not in the file: OMB's default)" in str(info.value)


def test_header_size_is_explained(tmp_path: Path) -> None:
    msg = load_error(tmp_path, good(messageSize=PAYLOAD_HEADER_BYTES - 1))
    assert "32-byte header" in msg


def test_backlog_with_rate_discovery_is_omb_error(tmp_path: Path) -> None:
    msg = load_error(tmp_path, good(producerRate=0, consumerBacklogSizeGB=1))
    assert "Cannot probe producer sustainable rate when building backlog" in msg
    assert "producerRate = 0" in msg


def test_rate_discovery_alone_is_fine() -> None:
    assert Workload.from_dict(good(producerRate=0)).expected_consume_rate == 0.0


def test_broken_yaml_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "topics: 1\npartitionsPerTopic: [1, 2\nmessageSize: 1024\n")
    with pytest.raises(WorkloadError, match=r"w\.yaml:\d+:\d+: invalid YAML"):
        Workload.from_yaml(path)


def test_missing_and_empty_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="not found"):
        Workload.from_yaml(tmp_path / "absent.yaml")
    with pytest.raises(WorkloadError, match="empty"):
        Workload.from_yaml(write(tmp_path, "# nothing\n"))
    with pytest.raises(WorkloadError, match="mapping"):
        Workload.from_yaml(write(tmp_path, "- topics\n"))


def test_python_errors_name_attribute_too() -> None:
    with pytest.raises(WorkloadError) as info:
        Workload(topics=1, partitions_per_topic=0, message_size=1024, producers_per_topic=1)
    msg = str(info.value)
    assert "\n  <python>: partitionsPerTopic (Python: partitions_per_topic) = 0" in msg


def test_from_dict_source_is_used() -> None:
    with pytest.raises(WorkloadError, match=r"^cli: topics = 'x'"):
        Workload.from_dict(good(topics="x"), source="cli")


def test_redpanda_existing_topics_refused() -> None:
    with pytest.raises(WorkloadError, match="existingTopicList"):
        Workload.from_dict(good(existingTopicList=["a"]))


# ------------------------------------------------------------------ warnings


def test_unknown_key_is_refused_with_closest(tmp_path: Path) -> None:
    # the old code warned and ran the file's test without the key
    path = write(tmp_path, yaml.safe_dump(good(messageSzie=2048), sort_keys=False))
    with pytest.raises(WorkloadError) as info:
        Workload.from_yaml(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{len(GOOD) + 1}: messageSzie = 2048: unknown workload key")
    assert "did you mean 'messageSize'?" in msg
    assert "Fix: rename it to `messageSize`, or pass --brokerperf-lenient" in msg


def test_unknown_key_without_a_close_one_says_remove() -> None:
    with pytest.raises(WorkloadError, match=r"<python>: zzz = 1: unknown workload key; .*"
                       r"Fix: remove it, or pass --brokerperf-lenient"):
        Workload.from_dict(good(zzz=1))


def test_lenient_ignores_unknown_keys_and_lists_them(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump(good(newOmbKey=5, sampleRateMillis=1000),
                                          sort_keys=False))
    with pytest.warns(BrokerPerfWarning) as rec:
        w = Workload.from_yaml(path, lenient=True)
    msgs = [str(r.message) for r in rec]
    assert msgs[0].startswith(f"{path}:{len(GOOD) + 1}: newOmbKey = 5: unknown workload key")
    assert msgs[0].endswith("; ignored (--brokerperf-lenient).")
    assert "sampleRateMillis = 1000: Redpanda fork" in msgs[1]
    assert w.ignored_keys == ("newOmbKey", "sampleRateMillis")
    assert w == Workload.from_dict(GOOD)  # ignored keys take no part in equality
    assert w.replace(topics=2).ignored_keys == w.ignored_keys  # kept through replace


def test_lenient_still_refuses_existing_topic_lists() -> None:
    with pytest.raises(WorkloadError, match="existingTopicList"):
        Workload.from_dict(good(existingTopicList=["a"]), lenient=True)


def test_snake_case_key_is_refused_with_camel_case(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="did you mean 'producerRate'"):
        Workload.from_dict(good(producer_rate=5))


def test_fork_key_is_refused_as_not_implemented() -> None:
    with pytest.raises(WorkloadError, match=r"sampleRateMillis = 1000: Redpanda fork.*"
                       "does not implement it. Fix: remove the key"):
        Workload.from_dict(good(sampleRateMillis=1000))


def test_duplicate_key_warns(tmp_path: Path) -> None:
    text = yaml.safe_dump(GOOD, sort_keys=False) + "topics: 2\n"
    with pytest.warns(BrokerPerfWarning, match="'topics' appears twice"):
        w = Workload.from_yaml(write(tmp_path, text))
    assert w.topics == 2


def test_consumer_only_without_backlog_warns() -> None:
    with pytest.warns(BrokerPerfWarning, match="consumerOnly"):
        Workload.from_dict(good(consumerOnly=True))
    w = Workload.from_dict(good(consumerOnly=True, consumerBacklogSizeGB=1))
    assert w.to_omb_dict()["consumerOnly"] is True


# ------------------------------------------------------------------ lines of list items

_PER_TOPIC = (
    "name: per-topic\n"  # 1
    "topics: 2\n"  # 2
    "messageSize: 1024\n"  # 3
    "producersPerTopic: 1\n"  # 4
    "testDurationMinutes: 1\n"  # 5
    "partitionsPerTopicList:\n"  # 6
    "  - 4\n"  # 7
    "  - {second}\n"  # 8
)


def test_bad_list_entry_names_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, _PER_TOPIC.format(second="0"))
    with pytest.raises(WorkloadError, match=r"w\.yaml:8: partitionsPerTopicList\[1\] = \[4, 0\]"):
        Workload.from_yaml(path)


def test_wrong_type_in_a_list_names_the_entry_line_and_fix(tmp_path: Path) -> None:
    path = write(tmp_path, _PER_TOPIC.format(second="four"))
    with pytest.raises(
        WorkloadError,
        match=r"w\.yaml:8: partitionsPerTopicList\[1\] = 'four': expected a whole number, got "
        r"str\. Fix: write a number without quotes",
    ):
        Workload.from_yaml(path)


def test_rate_list_entry_names_its_own_line(tmp_path: Path) -> None:
    text = (
        "topics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\nproducersPerTopic: 1\n"
        "testDurationMinutes: 1\nproducerRateList:\n  - [0, 1000]\n  - [25, 0, 3]\n"
    )
    with pytest.raises(WorkloadError, match=r"w\.yaml:8: producerRateList\[1\] = \[25, 0, 3\]"):
        Workload.from_yaml(write(tmp_path, text))


def test_python_errors_name_the_attribute() -> None:
    with pytest.raises(
        WorkloadError, match=r"^<python>: messageSize \(Python: message_size\) = 'big': "
    ):
        Workload(**{**{f.attr: v for f, v in _good_attrs()}, "message_size": "big"})


def _good_attrs() -> list[tuple[Any, Any]]:
    w = Workload.from_dict(GOOD)
    return [(f, getattr(w, f.attr)) for f in FIELDS]


def test_record_params_carry_the_per_topic_lists() -> None:
    """AutoMQ's per-topic lists reach the record: partitions per topic, producers per
    topic, and the producers' total."""
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.scenario_library.base import base_params

    wl = Workload(name="lists", topics=2, partitions_per_topic=1, message_size=1024,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=1000,
                  test_duration_minutes=1, partitions_per_topic_list=(4, 1),
                  producers_per_topic_list=(3, 1))
    ep = BrokerEndpoint(kind="kafka", bootstrap="localhost:9092", mode="process")
    params = base_params(wl, ep, 1000.0)
    assert params["partitions"] == [4, 1]
    assert params["producers_per_topic"] == [3, 1]
    assert params["producers"] == 4
    plain = base_params(wl.replace(partitions_per_topic_list=None,
                                   producers_per_topic_list=None), ep, 1000.0)
    assert plain["partitions"] == 1 and "producers_per_topic" not in plain


def test_every_problem_in_a_file_is_reported_at_once(tmp_path: Path) -> None:
    """A negative backlog and a drain ratio of 1.5 (and a typo'd key): all three, each
    with its line; validation used to stop at the first (issue 23, item 5)."""
    f = tmp_path / "two.yaml"
    f.write_text("name: two\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\n"
                 "subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\n"
                 "producerRate: 1000\nconsumerBacklogSizeGB: -1\nbacklogDrainRatio: 1.5\n"
                 "messageSzie: 3\ntestDurationMinutes: 1\n")
    with pytest.raises(WorkloadError) as info:
        Workload.from_yaml(f)
    lines = str(info.value).splitlines()
    assert lines[0] == f"3 problems in {f}:"
    assert any(x.startswith(f"  {f}:9: consumerBacklogSizeGB = -1: must not be negative")
               for x in lines)
    assert any(x.startswith(f"  {f}:10: backlogDrainRatio = 1.5: must be between 0.0 and 1.0")
               for x in lines)
    assert any(x.startswith(f"  {f}:11: messageSzie = 3: unknown workload key") for x in lines)


def test_every_type_error_is_reported_at_once(tmp_path: Path) -> None:
    f = tmp_path / "types.yaml"
    f.write_text("name: t\ntopics: one\npartitionsPerTopic: 1\nmessageSize: big\n"
                 "producersPerTopic: 1\ntestDurationMinutes: 1\n")
    with pytest.raises(WorkloadError) as info:
        Workload.from_yaml(f)
    msg = str(info.value)
    assert msg.startswith(f"2 problems in {f}:")
    assert f"{f}:2: topics = 'one'" in msg and f"{f}:4: messageSize = 'big'" in msg
