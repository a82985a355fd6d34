"""A driver that knows when a message really left (pika: the socket write on its IO
thread) passes it to the engine: the hand-off to that thread becomes publish delay (the
client side's lateness), publish latency starts at the wire, publish response is
unchanged. Without it the engine uses the header's send time, as before."""

from __future__ import annotations

from pytest_brokerperf.core import header
from pytest_brokerperf.engine.worker import Worker
from tests.support.engine import publish_side

MS = 1_000_000


def _value(intended_ns: int, sent_ns: int) -> bytes:
    return header.pack(header.MAGIC, header.VERSION, header.KIND_DATA, 0, 0, intended_ns,
                       sent_ns) + b"x" * 16


def _views(w: Worker) -> tuple[int, int, int]:
    loc = w._pub_local
    return (loc["publish_latency"][0], loc["publish_delay"][0], loc["publish_response"][0])


def test_the_wire_send_time_moves_the_handoff_into_publish_delay() -> None:
    w = publish_side()
    # intended 1 ms, send() at 2 ms, written to the socket at 5 ms, acked 3 ms later
    w._ack_callback()(_value(1 * MS, 2 * MS), 3 * MS, 5 * MS)
    assert _views(w) == (3000, 4000, 7000)  # latency, delay, response in µs
    assert w.pub_counters.acked == 1


def test_without_a_wire_time_the_header_send_time_counts() -> None:
    w = publish_side()
    w._ack_callback()(_value(1 * MS, 2 * MS), 6 * MS)
    assert _views(w) == (6000, 1000, 7000)
