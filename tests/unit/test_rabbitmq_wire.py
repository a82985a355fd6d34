"""The pika driver's burst publishes and delivery reader with real pika connections, over
a socket to a minimal AMQP 0-9-1 peer in a thread (no broker): what the producer writes
is decoded by pika on the other side, and what the peer delivers reaches the consumer
through a real ``BlockingConnection``.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from pika import frame, spec

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
from pytest_brokerperf.brokers.rabbitmq.driver import RabbitMQDriver

N = 300


class Peer:
    """Answers the handshake and the methods the driver sends; confirms every publish
    (``multiple=True``, once per read) and delivers ``to_deliver`` on ``basic.consume``."""

    def __init__(self, to_deliver: list[bytes]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.to_deliver = to_deliver
        self.published: list[tuple[str, bytes]] = []
        self.acks: list[tuple[int, bool]] = []
        self.done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        def send(ch: int, method: Any) -> None:
            s.sendall(frame.Method(ch, method).marshal())

        buf = s.recv(8)  # protocol header
        send(0, spec.Connection.Start(server_properties={"product": "peer", "capabilities": {
            "publisher_confirms": True, "basic.nack": True, "consumer_cancel_notify": True}},
                                      mechanisms="PLAIN", locales="en_US"))
        buf = b""
        content: dict[int, list[Any]] = {}  # channel -> [routing key, size, parts]
        published = 0
        while True:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            confirm_ch = 0
            while True:
                used, f = frame.decode_frame(buf)
                if f is None:
                    break
                buf = buf[used:]
                ch = f.channel_number
                if isinstance(f, frame.Header):
                    content[ch][1] = f.body_size
                    continue
                if isinstance(f, frame.Body):
                    c = content[ch]
                    c[2].append(f.fragment)
                    if sum(map(len, c[2])) >= c[1]:
                        self.published.append((c[0], b"".join(c[2])))
                        published += 1
                        confirm_ch = ch
                    continue
                if not isinstance(f, frame.Method):
                    continue
                m = f.method
                if isinstance(m, spec.Connection.StartOk):
                    send(0, spec.Connection.Tune(channel_max=64, frame_max=131072,
                                                 heartbeat=0))
                elif isinstance(m, spec.Connection.Open):
                    send(0, spec.Connection.OpenOk())
                elif isinstance(m, spec.Connection.Close):
                    send(0, spec.Connection.CloseOk())
                    s.close()
                    return
                elif isinstance(m, spec.Channel.Open):
                    send(ch, spec.Channel.OpenOk())
                elif isinstance(m, spec.Channel.Close):
                    send(ch, spec.Channel.CloseOk())
                elif isinstance(m, spec.Confirm.Select):
                    send(ch, spec.Confirm.SelectOk())
                elif isinstance(m, spec.Basic.Qos):
                    send(ch, spec.Basic.QosOk())
                elif isinstance(m, spec.Queue.Declare):
                    send(ch, spec.Queue.DeclareOk(queue=m.queue, message_count=0,
                                                  consumer_count=0))
                elif isinstance(m, spec.Queue.Bind):
                    send(ch, spec.Queue.BindOk())
                elif isinstance(m, spec.Basic.Publish):
                    content[ch] = [m.routing_key, 0, []]
                elif isinstance(m, spec.Basic.Cancel):
                    send(ch, spec.Basic.CancelOk(consumer_tag=m.consumer_tag))
                elif isinstance(m, spec.Basic.Ack):
                    self.acks.append((m.delivery_tag, m.multiple))
                elif isinstance(m, spec.Basic.Consume):
                    send(ch, spec.Basic.ConsumeOk(consumer_tag=m.consumer_tag))
                    props = spec.BasicProperties(delivery_mode=2)
                    s.sendall(b"".join(
                        frame.Method(ch, spec.Basic.Deliver(
                            consumer_tag=m.consumer_tag, delivery_tag=i + 1,
                            exchange="t", routing_key="0")).marshal()
                        + frame.Header(ch, len(body), props).marshal()
                        + frame.Body(ch, body).marshal()
                        for i, body in enumerate(self.to_deliver)))
            if confirm_ch:
                send(confirm_ch, spec.Basic.Ack(delivery_tag=published, multiple=True))

    def close(self) -> None:
        self.done.set()
        self.sock.close()


@pytest.fixture
def peer() -> Any:
    p = Peer([b"d%04d" % i + bytes(1000) for i in range(N)])
    yield p
    p.close()


def _driver(port: int, partitions: int = 2) -> RabbitMQDriver:
    ep = BrokerEndpoint(kind="rabbitmq", bootstrap=f"amqp://127.0.0.1:{port}", mode="process")
    cfg = RabbitMQDriverConfig(exchange_type="DIRECT", queue_type="QUORUM")
    return RabbitMQDriver(ep, cfg, topic_partitions={"t": partitions})


def test_burst_publishes_are_what_pika_reads_and_every_confirm_comes_back(peer: Peer) -> None:
    acked: list[bytes] = []
    batches: list[int] = []

    def on_ack(value: bytes, latency_ns: int | None, sent_ns: int | None = None) -> None:
        acked.append(value)

    def many(values: list[bytes], ack_ns: Any = None, *, latency_ns: Any = None,
             sent_ns: Any = None) -> None:
        batches.append(len(values))
        acked.extend(values)

    on_ack.many = many  # type: ignore[attr-defined]
    p = _driver(peer.port).producer("t", "p0", on_ack, lambda v, why: None)
    values = [b"m%04d" % i + bytes(1019) for i in range(N)]
    taken = 0
    while taken < N:
        taken += p.send_many(values[taken:taken + 128], None)
    assert p.flush(10) == 0
    assert p._frames is not None  # written by the burst path, not basic_publish
    p.close()
    assert [body for _, body in peer.published] == values  # each once, in order
    assert [rk for rk, _ in peer.published] == ["0", "1"] * (N // 2)
    assert acked == values and batches  # confirms of 16+ went as batches


def test_the_delivery_reader_feeds_a_real_blocking_connection(peer: Peer) -> None:
    c = _driver(peer.port, partitions=1).consumer("t", "s", "c0")  # one queue
    got: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + 10
    while len(got) < N and time.monotonic() < deadline:
        got += c.receive(500, 0.05)
    assert [body for body, _ in got] == peer.to_deliver
    impl = c._conn._impl
    assert impl._on_data_available.__self__.delivered == N  # the reader took them all
    deadline = time.monotonic() + 5
    while (not peer.acks or peer.acks[-1][0] != N) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert peer.acks[-1] == (N, True)  # acknowledged up to the last, multiple
    c.close()
