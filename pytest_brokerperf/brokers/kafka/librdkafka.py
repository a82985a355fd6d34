"""Java Kafka client properties -> librdkafka (confluent-kafka) settings: the names
that differ are translated, Java-only ones dropped, and every change noted so results
say what the client really ran with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

_SECRET_WORDS = ("password", "secret", "jaas", "token", "key.pem", "private")

# --------------------------------------------------------------------------------------
# Java -> librdkafka
# --------------------------------------------------------------------------------------

#: Java client property -> (librdkafka name or None to drop, reason). Names that are the
#: same in both (acks, linger.ms, batch.size, max.partition.fetch.bytes, ...) are absent.
JAVA_TO_LIBRDKAFKA: dict[str, tuple[str | None, str]] = {
    "key.serializer": (None, "the harness sends raw bytes; librdkafka has no serializers"),
    "value.serializer": (None, "the harness sends raw bytes; librdkafka has no serializers"),
    "key.deserializer": (None, "the harness reads raw bytes; librdkafka has no deserializers"),
    "value.deserializer": (None, "the harness reads raw bytes; librdkafka has no deserializers"),
    "default.api.timeout.ms": (
        None,
        "Java-only API-call timeout; librdkafka uses per-call timeouts set by the harness",
    ),
    "max.block.ms": (
        None,
        "Java-only; librdkafka produce() never blocks, a full queue is counted as back-pressure",
    ),
    "max.poll.records": (None, "Java-only; the harness chooses the consume() batch size"),
    "partitioner.class": (None, "Java class; librdkafka's default partitioner is used"),
    "interceptor.classes": (None, "Java classes cannot run in librdkafka"),
    "metric.reporters": (None, "Java classes cannot run in librdkafka"),
    "auto.include.jmx.reporter": (None, "Java-only (JMX)"),
    "ssl.truststore.location": (
        None,
        "librdkafka cannot read JKS trust stores; convert to PEM and set ssl.ca.location",
    ),
    "ssl.truststore.password": (None, "JKS trust store setting; librdkafka needs ssl.ca.location"),
    "ssl.truststore.type": (None, "JKS trust store setting; librdkafka needs ssl.ca.location"),
    "ssl.keystore.type": (None, "librdkafka's ssl.keystore.location is always PKCS#12"),
    "buffer.memory": ("queue.buffering.max.kbytes", "bytes converted to KiB"),
    "max.request.size": ("message.max.bytes", "librdkafka's request/message size limit"),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", "renamed"),
    "send.buffer.bytes": ("socket.send.buffer.bytes", "renamed; Java -1 (OS default) -> 0"),
    "receive.buffer.bytes": (
        "socket.receive.buffer.bytes",
        "renamed; Java -1 (OS default) -> 0",
    ),
    "partition.assignment.strategy": (
        "partition.assignment.strategy",
        "Java assignor class names mapped to librdkafka assignor names",
    ),
    "sasl.jaas.config": ("sasl.username", "username/password taken from the JAAS line"),
}

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

#: librdkafka's upper limits for settings OMB files exceed (CONFIGURATION.md ranges).
_LIBRDKAFKA_MAX = {
    "request.timeout.ms": 900000,
    "linger.ms": 900000,
    "queue.buffering.max.ms": 900000,
}

_PRODUCER_ONLY = frozenset(
    {
        "acks",
        "request.required.acks",
        "linger.ms",
        "queue.buffering.max.ms",
        "batch.size",
        "batch.num.messages",
        "compression.type",
        "compression.codec",
        "compression.level",
        "enable.idempotence",
        "enable.gapless.guarantee",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "retries",
        "message.send.max.retries",
        "request.timeout.ms",
        "transactional.id",
        "transaction.timeout.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "partitioner",
        "sticky.partitioning.linger.ms",
    }
)
_CONSUMER_ONLY = frozenset(
    {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "max.partition.fetch.bytes",
        "fetch.message.max.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "partition.assignment.strategy",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "check.crcs",
        "enable.partition.eof",
    }
)

_JAAS_RE = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s;]+))""")


def translate(props: Mapping[str, str], role: str) -> tuple[dict[str, str], list[str]]:
    """librdkafka settings for one client ``role`` (producer|consumer|admin) plus notes."""
    out: dict[str, str] = {}
    notes: list[str] = []
    for key, value in props.items():
        new_key, new_value = key, value
        if key in JAVA_TO_LIBRDKAFKA:
            target, reason = JAVA_TO_LIBRDKAFKA[key]
            if target is None:
                notes.append(f"{role}: dropped {key}={value} ({reason})")
                continue
            if key == "buffer.memory":
                try:
                    new_value = str(max(1, math.ceil(int(value) / 1024)))
                except ValueError:
                    notes.append(f"{role}: dropped {key}={value} (not a number of bytes)")
                    continue
            elif key in ("send.buffer.bytes", "receive.buffer.bytes") and value.strip() == "-1":
                new_value = "0"
            elif key == "partition.assignment.strategy":
                names = [_ASSIGNORS.get(c.strip(), c.strip()) for c in value.split(",")]
                unknown = [n for n in names if "." in n]
                if unknown:
                    notes.append(
                        f"{role}: dropped {key}={value} (no librdkafka assignor for {unknown})"
                    )
                    continue
                new_value = ",".join(names)
            elif key == "sasl.jaas.config":
                fields = {
                    m.group(1): next(g for g in m.groups()[1:] if g is not None)
                    for m in _JAAS_RE.finditer(value)
                }
                if "username" not in fields:
                    notes.append(f"{role}: dropped sasl.jaas.config (no username= in it)")
                    continue
                out["sasl.username"] = fields["username"]
                if "password" in fields:
                    out["sasl.password"] = fields["password"]
                notes.append(f"{role}: sasl.jaas.config -> sasl.username, sasl.password")
                continue
            new_key = target
            if new_key != key or new_value != value:
                notes.append(f"{role}: {key}={value} -> {new_key}={new_value} ({reason})")
        elif key == "auto.offset.reset" and value.strip() == "none":
            new_value = "error"
            notes.append(f"{role}: auto.offset.reset=none -> error (librdkafka's name)")
        elif key == "ssl.endpoint.identification.algorithm" and value.strip() == "":
            new_value = "none"
            notes.append(f"{role}: ssl.endpoint.identification.algorithm='' -> none")
        wrong = _CONSUMER_ONLY if role != "consumer" else _PRODUCER_ONLY
        if role == "admin":
            wrong = _CONSUMER_ONLY | _PRODUCER_ONLY
        if new_key in wrong:
            notes.append(f"{role}: {new_key}={new_value} not passed (not a {role}-client setting)")
            continue
        limit = _LIBRDKAFKA_MAX.get(new_key)
        if limit is not None and new_value.strip().isdigit() and int(new_value) > limit:
            notes.append(f"{role}: {new_key}={new_value} capped at {limit} (librdkafka's maximum)")
            new_value = str(limit)
        if "{zone.id}" in new_value:
            notes.append(
                f"{role}: {new_key} contains OMB's {{zone.id}} placeholder (a JVM property in "
                "OMB); it is passed literally"
            )
        out[new_key] = new_value
    return out, notes


def _redact(settings: Mapping[str, str]) -> dict[str, str]:
    return {
        k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in settings.items()
    }
