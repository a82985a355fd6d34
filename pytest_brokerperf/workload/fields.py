"""OMB workload keys: Python attribute, OMB key, kind, example and origin of each field.

Shared by :class:`pytest_brokerperf.workload.model.Workload` (key names, output) and its declared
model (:mod:`pytest_brokerperf.workload.file_model`, the types); this module imports nothing
heavy, so the workload class can be imported without pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["FIELDS", "JAVA_INT_MAX", "JAVA_LONG_MAX", "MAX_MESSAGE_SIZE", "MAX_PARTITIONS",
           "MAX_TOPICS", "KeyDistributor", "WorkloadField"]

from pytest_brokerperf.core.files import JAVA_INT_MAX

#: Java's ``Long.MAX_VALUE``: OMB's workload keys are Java ints and longs
JAVA_LONG_MAX = 2**63 - 1


class KeyDistributor(StrEnum):
    """OMB ``keyDistributor`` values (``KeyDistributorType.java``)."""

    NO_KEY = "NO_KEY"
    KEY_ROUND_ROBIN = "KEY_ROUND_ROBIN"
    RANDOM_NANO = "RANDOM_NANO"


# --------------------------------------------------------------------------------------
# Field table: OMB key, Python attribute, kind, example for error messages, origin
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadField:
    attr: str
    key: str
    kind: str  # str | int | long | num | ratio | bool | enum | int_list | rate_list
    example: str
    origin: str = "main"  # main | automq | confluent
    #: the largest value a run can use, and why (a declared bound: refused at load time,
    #: before any broker starts, instead of crashing the engine or the client mid-run)
    maximum: int | None = None
    why_max: str = ""


#: A message's largest size: above every broker's default message limit (Kafka ~1 MiB,
#: Pulsar 5 MiB, RabbitMQ 16-128 MiB) and what one payload pool can hold in memory.
MAX_MESSAGE_SIZE = 64 * 1024 * 1024
#: Partitions of one topic: more than a test can create in its set-up time (Kafka's
#: controller creates a few thousand a second), and the client libraries' own limits.
MAX_PARTITIONS = 100_000
MAX_TOPICS = 10_000


FIELDS: tuple[WorkloadField, ...] = (
    WorkloadField("name", "name", "str", '"my workload"'),
    WorkloadField("topics", "topics", "int", "1", maximum=MAX_TOPICS,
                  why_max="the harness creates and deletes every topic in the test's time"),
    WorkloadField("partitions_per_topic", "partitionsPerTopic", "int", "16",
                  maximum=MAX_PARTITIONS,
                  why_max="more than a test can create, and than the clients accept"),
    WorkloadField("key_distributor", "keyDistributor", "enum", "NO_KEY"),
    WorkloadField("message_size", "messageSize", "int", "1024", maximum=MAX_MESSAGE_SIZE,
                  why_max="64 MiB: above every broker's default message limit, and a "
                          "payload pool of larger messages would not fit in memory"),
    WorkloadField("use_randomized_payloads", "useRandomizedPayloads", "bool", "false"),
    WorkloadField("random_bytes_ratio", "randomBytesRatio", "ratio", "0.5"),
    WorkloadField("randomized_payload_pool_size", "randomizedPayloadPoolSize", "int", "1000"),
    WorkloadField("payload_file", "payloadFile", "str", '"payload/payload-1Kb.data"'),
    WorkloadField("subscriptions_per_topic", "subscriptionsPerTopic", "int", "1"),
    WorkloadField("producers_per_topic", "producersPerTopic", "int", "1"),
    WorkloadField("consumer_per_subscription", "consumerPerSubscription", "int", "1"),
    WorkloadField("producer_rate", "producerRate", "int", "10000"),
    WorkloadField("consumer_backlog_size_gb", "consumerBacklogSizeGB", "num", "0"),
    WorkloadField("backlog_drain_ratio", "backlogDrainRatio", "ratio", "1.0"),
    WorkloadField("test_duration_minutes", "testDurationMinutes", "num", "5"),
    WorkloadField("warmup_duration_minutes", "warmupDurationMinutes", "num", "1"),
    WorkloadField(
        "partitions_per_topic_list", "partitionsPerTopicList", "int_list", "[1, 4]", "automq",
        maximum=MAX_PARTITIONS,
        why_max="more than a test can create, and than the clients accept",
    ),
    WorkloadField(
        "producers_per_topic_list", "producersPerTopicList", "int_list", "[4, 1]", "automq"
    ),
    WorkloadField(
        "producer_rate_list", "producerRateList", "rate_list", "[[0, 1000], [5, 2000]]", "automq"
    ),
    WorkloadField("log_interval_millis", "logIntervalMillis", "int", "10000", "automq"),
    WorkloadField("random_topic_names", "randomTopicNames", "bool", "true", "automq"),
    WorkloadField("consumer_only", "consumerOnly", "bool", "false", "confluent"),
)
