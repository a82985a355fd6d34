"""After a power cut: the harness messages RabbitMQ's streams still hold.

A stream is a log that consumers read without removing anything, so after the restart
every stream of the run's topics is read again from its first offset and its
(producer, sequence) pairs compared with what was confirmed
(:func:`pytest_brokerperf.brokers.readback.compare`). Quorum and classic queues delete
what was consumed: there is nothing to read again, and delivery accounting (confirmed,
never delivered, even after the restart) tells what the cut took. See
docs/reference/faults.md (``power-cut``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.readback import SeqBitmaps

__all__ = ["RabbitMQReadBack", "read_back_streams", "stream_names"]


class RabbitMQReadBack:
    """Streams read again from their first offset; None for queues, which delete what
    was consumed (delivery accounting then names what the cut took)."""

    def read_back(self, endpoint: BrokerEndpoint, topics: Sequence[str]
                  ) -> tuple[dict[int, int], int, bool] | None:
        return read_back_streams(endpoint, topics)

#: A stream read stops once no message came for this long (it has no end-of-log event).
IDLE_S = 2.0


def stream_names(rows: Sequence[Any], topics: Sequence[str]) -> list[str]:
    """The streams among ``rabbitmqctl list_queues name type`` rows that belong to
    ``topics`` (the driver names them ``<topic>-stream…``)."""
    return sorted(str(r["name"]) for r in rows
                  if isinstance(r, dict) and r.get("type") == "stream"
                  and any(str(r.get("name", "")).startswith(f"{t}-") for t in topics))


def read_back_streams(endpoint: BrokerEndpoint, topics: Sequence[str],
                      timeout_s: float | None = None
                      ) -> tuple[dict[int, int], int, bool] | None:
    """Every harness message in the streams of ``topics`` from their first offset:
    (producer id -> sequence bitmap, messages read, whether every stream went idle
    within the bound); None when the topics have no stream (queues: nothing to read
    again)."""
    from pytest_brokerperf.brokers.readback import READ_BACK_TIMEOUT_S, SeqBitmaps

    if timeout_s is None:
        timeout_s = READ_BACK_TIMEOUT_S
    from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess

    ctl = endpoint.control
    if not isinstance(ctl, CtlAccess):
        raise TypeError(f"the {endpoint.kind} endpoint at {endpoint.bootstrap} has no "
                        "rabbitmqctl access to list its streams (not started by this session)")
    rows = ctl.json("rabbitmqctl", "list_queues", "-q", "name", "type")
    streams = stream_names(rows if isinstance(rows, list) else [], topics)
    if not streams:
        return None
    seen = SeqBitmaps()
    deadline = time.monotonic() + timeout_s
    complete = all([_read_stream(endpoint, name, seen, deadline) for name in streams])
    return seen.present(), seen.read, complete


def _read_stream(endpoint: BrokerEndpoint, name: str, seen: SeqBitmaps,
                 deadline: float) -> bool:
    """One stream from its first offset into ``seen``; whether it was read to its end
    before ``deadline``. A stream whose replicas are still electing a leader after the
    restart refuses the consumer: tried again, through the next node, until then."""
    import pika

    from pytest_brokerperf.brokers.rabbitmq.connection import _params

    urls = endpoint.bootstrap.split(",")
    attempt = 0
    while True:
        try:
            # the endpoint's credentials and TLS (an amqps listener trusts the run's CA)
            conn = pika.BlockingConnection(_params(urls[attempt % len(urls)],
                                                   endpoint.client_config,
                                                   "brokerperf-readback", endpoint.tls))
            try:
                ch = conn.channel()
                ch.basic_qos(prefetch_count=1000)  # a stream consumer needs a prefetch
                for method, _props, body in ch.consume(
                        name, arguments={"x-stream-offset": "first"},
                        inactivity_timeout=IDLE_S):
                    if method is None:  # idle: the stream's end
                        return True
                    seen.add(body)
                    ch.basic_ack(method.delivery_tag)
                    if time.monotonic() > deadline:
                        return False
            finally:
                if conn.is_open:
                    conn.close()
        except pika.exceptions.AMQPError:
            attempt += 1
            if time.monotonic() > deadline:
                return False
            time.sleep(1.0)
