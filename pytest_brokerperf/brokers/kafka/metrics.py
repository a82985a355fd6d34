"""Kafka's broker metrics: request-time histograms, replication and I/O meters.

Read from the JMX exporter agent a local Kafka runs (:mod:`.jmx_exporter`) or from
``--brokerperf-prometheus`` URLs; names follow the Prometheus JMX exporter's default
naming, lower-cased, so any endpoint exposing them can be given.
"""

from __future__ import annotations

import math

from pytest_brokerperf.metrics.broker import (
    Series,
    process_figures,
    series_value,
)

__all__ = ["kafka_figures"]


#: (figure prefix, JMX ``name``, ``request``) of the Kafka request histograms read.
_REQUEST_HISTOGRAMS = (
    ("produce_total", "TotalTimeMs", "Produce"),
    ("fetch_total", "TotalTimeMs", "FetchConsumer"),
    ("follower_fetch_total", "TotalTimeMs", "FetchFollower"),
    ("produce_queue", "RequestQueueTimeMs", "Produce"),
    ("fetch_queue", "RequestQueueTimeMs", "FetchConsumer"),
)
_RM = "kafka_network_requestmetrics_"


def kafka_figures(series: Series) -> dict[str, float]:
    """The raw (cumulative or instantaneous) figures of one node from its exporter output.

    Names follow the JMX exporter's default naming, lower-cased (the shipped config);
    missing metrics are simply absent, so any Prometheus endpoint can be given.
    """
    fig: dict[str, float | None] = {}
    for prefix, jmx_name, request in _REQUEST_HISTOGRAMS:
        for stat, suffix in (("count", "count"), ("mean", "mean"), ("p50", "50thpercentile"),
                             ("p99", "99thpercentile"), ("p999", "999thpercentile")):
            fig[f"{prefix}_{stat}"] = series_value(series, _RM + suffix, name=jmx_name,
                                           request=request)
    meters = {
        "isr_shrinks_count": ("kafka_server_replicamanager_count", "IsrShrinksPerSec"),
        "isr_expands_count": ("kafka_server_replicamanager_count", "IsrExpandsPerSec"),
        "bytes_in_count": ("kafka_server_brokertopicmetrics_count", "BytesInPerSec"),
        "bytes_out_count": ("kafka_server_brokertopicmetrics_count", "BytesOutPerSec"),
        "messages_in_count": ("kafka_server_brokertopicmetrics_count", "MessagesInPerSec"),
        "replication_in_count": ("kafka_server_brokertopicmetrics_count",
                                 "ReplicationBytesInPerSec"),
        "under_replicated": ("kafka_server_replicamanager_value", "UnderReplicatedPartitions"),
        "request_queue_size": ("kafka_network_requestchannel_value", "RequestQueueSize"),
    }
    for key, (metric, name) in meters.items():
        # topic-less series only: BrokerTopicMetrics also exists per topic
        fig[key] = next((v for labels, v in series.get(metric, ())
                         if labels.get("name") == name and "topic" not in labels), None)
    out = {k: v for k, v in fig.items() if v is not None and math.isfinite(v)}
    return {**out, **process_figures(series)}
