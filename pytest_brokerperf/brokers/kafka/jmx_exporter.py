"""The Prometheus JMX exporter as a javaagent on local Kafka brokers (broker-side metrics).

Why an agent from Maven Central: Kafka's request-queue time, produce/fetch total time,
ISR shrinks and bytes in/out live in JMX only; the exporter's javaagent
(``io.prometheus.jmx:jmx_prometheus_javaagent``, one shaded jar, no dependencies) serves
them over HTTP in the Prometheus text format, so local brokers and remote clusters that
already run the same exporter are read by one parser (:mod:`pytest_brokerperf.metrics.broker`).

The config exports only the MBeans the harness reads (a scrape then costs the broker
well under a millisecond) with the exporter's default naming, lower-cased:
``kafka_network_requestmetrics_99thpercentile{name="TotalTimeMs",request="Produce"}``.
The exporter adds ``jvm_gc_collection_seconds_*`` and ``process_*`` on its own.
"""

from __future__ import annotations

from pathlib import Path

from pytest_brokerperf.brokers.provision.maven import Artifact, resolve_classpath

__all__ = [
    "JMX_EXPORTER_VERSION",
    "KAFKA_MBEANS",
    "agent_flag",
    "jmx_exporter_artifact",
    "render_config",
    "resolve_agent",
]

#: Newest release on Maven Central when this was written (1.x: ``includeObjectNames``).
JMX_EXPORTER_VERSION = "1.0.1"

#: The MBeans exported; the names :mod:`pytest_brokerperf.metrics.broker` understands.
KAFKA_MBEANS: tuple[str, ...] = (
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=FetchConsumer",
    "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=FetchFollower",
    "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=Produce",
    "kafka.network:type=RequestMetrics,name=RequestQueueTimeMs,request=FetchConsumer",
    "kafka.network:type=RequestChannel,name=RequestQueueSize",
    "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec",
    "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec",
    "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
    "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec",
    "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec",
    "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec",
    "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec",
)


def jmx_exporter_artifact(version: str = JMX_EXPORTER_VERSION) -> Artifact:
    return Artifact("io.prometheus.jmx", "jmx_prometheus_javaagent", version)


def resolve_agent(version: str = JMX_EXPORTER_VERSION, *, root: Path | None = None) -> Path:
    """The agent jar, resolved once into the Maven cache (``BrokerUnavailable`` without
    Maven, ``ProvisionError`` when Maven fails)."""
    artifact = jmx_exporter_artifact(version)
    lib = resolve_classpath("jmx-exporter", version, [artifact], root=root)
    return lib / artifact.jar_name


def render_config(mbeans: tuple[str, ...] = KAFKA_MBEANS) -> str:
    """The exporter's YAML config: only ``mbeans``, default naming, lower case."""
    lines = ["lowercaseOutputName: true", "lowercaseOutputLabelNames: true",
             "includeObjectNames:"]
    lines += [f'  - "{m}"' for m in mbeans]
    return "\n".join(lines) + "\n"


def agent_flag(jar: Path, host: str, port: int, config: Path) -> str:
    """``-javaagent:<jar>=<host>:<port>:<config>`` (the 1.x agent argument syntax)."""
    for p in (jar, config):
        if ":" in str(p) or "=" in str(p):
            raise ValueError(f"{p}: the javaagent argument cannot hold ':' or '=' in paths")
    return f"-javaagent:{jar}={host}:{port}:{config}"
