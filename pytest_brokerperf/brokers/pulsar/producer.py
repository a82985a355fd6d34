"""Pulsar producer: sends without blocking the pacer, stamps acks on the C++ callback
thread and hands them to the engine on the sending thread (see
:mod:`pytest_brokerperf.brokers.pulsar.driver` for the design).
"""

from __future__ import annotations

import collections
import time
from functools import partial as _partial
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.brokers.driver import (
    AckCallback,
    ErrorCallback,
    QueueFull,
    batch_ack,
)
from pytest_brokerperf.brokers.pulsar.client import (
    _FULL_RESULTS,
    _get_ident,
    _mono,
    _with_enums,
)
from pytest_brokerperf.core.errors import DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.pulsar.client import ClientSource

#: Fewer acks than this at one service() go to the engine one call each: numpy's
#: per-call cost makes a smaller batch dearer than the calls it saves.
ACK_BATCH_MIN = 16


class _PulsarProducer:
    """One pulsar-client producer; acks handed to the engine from :meth:`service`."""

    def __init__(
        self,
        driver: ClientSource,
        topic: str,
        client_id: str,
        on_ack: AckCallback,
        on_error: ErrorCallback,
    ) -> None:
        import _pulsar

        self._driver = driver
        self._on_ack = on_ack
        self._on_acks = batch_ack(on_ack)
        self._on_error = on_error
        self._client = driver._acquire_client()
        full = driver.full_topic(topic)
        cfg = driver.config
        self._builder: Any = getattr(_pulsar, "MessageBuilder", None)
        try:
            partitions = self._open(full, _with_enums(cfg.producer_kwargs(producer_name=None)))
        except Exception as exc:
            driver._release_client()
            raise DriverError(f"creating a Pulsar producer on {full} failed: {exc}") from exc
        self.client_id = client_id
        self.partitions = partitions
        self._limit = cfg.max_outstanding(partitions)
        self._mem_limit = 0 if cfg.synchronous else cfg.memory_limit_bytes()
        self._done: collections.deque[tuple[bytes, int, int]] = collections.deque()
        self._failed: collections.deque[tuple[bytes, str]] = collections.deque()
        self._delivered = self._make_delivered()
        self._sent = 0
        self._completed = 0
        self._bytes = 0
        self._send_tid = 0
        self._rejected = ""
        self._closed = False

    def _open(self, full: str, kwargs: dict[str, Any]) -> int:
        """Create the client producer(s) on ``full``; its partition count."""
        self._p = self._client.create_producer(full, **kwargs)
        raw = getattr(self._p, "_producer", None)
        # The wrapper's send_async type-checks ten optional arguments per call; the
        # binding underneath takes a built message directly (~2 µs less per message).
        self._raw_send = (raw.send_async if raw is not None and self._builder is not None
                          else None)
        return len(self._client.get_topic_partitions(full))

    def _close_producers(self) -> None:
        self._p.close()

    def _make_delivered(self) -> Any:
        """The one function behind every send callback of this producer. It runs on a C++
        I/O thread holding the GIL, so it does the least it can: stamp the time and
        append (value, sent, ack) to a deque."""
        done = self._done.append
        mono = _mono
        fail = self._fail

        def delivered(value: bytes, sent_ns: int, res: Any, _msg_id: Any) -> None:
            if int(res) == 0:
                done((value, sent_ns, mono()))
            else:
                fail(value, res)

        return delivered

    def _callback(self, value: bytes, sent_ns: int) -> Any:
        """The send callback of one message handed to the client at ``sent_ns``: a
        ``partial`` of the shared function, two GC-tracked objects per message where a
        closure made five (each pending message keeps its callback alive, and the
        cyclic GC walks them all: up to 17 % of the worker's time at max rate)."""
        return _partial(self._delivered, value, sent_ns)

    def _fail(self, value: bytes, res: Any) -> None:
        text = str(res).rsplit(".", 1)[-1]
        if text in _FULL_RESULTS and _get_ident() == self._send_tid:
            self._rejected = text  # refused synchronously inside send_async
        else:
            self._failed.append((value, text))

    def _room(self, values: list[bytes]) -> int:
        """How many of ``values`` fit under the driver's own limits (message count and
        clientMemoryLimitMB), in order; at least one when nothing is outstanding."""
        outstanding = self._sent - self._completed
        take = len(values)
        if self._limit:
            take = min(take, max(0, self._limit - outstanding))
        if self._mem_limit and take:
            room = self._mem_limit - self._bytes
            n = 0
            for v in values[:take]:
                room -= len(v)
                if room < 0 and (n or outstanding):
                    break
                n += 1
            take = n
        return take

    def send(self, value: bytes, key: bytes | None) -> None:
        outstanding = self._sent - self._completed
        if self._limit and outstanding >= self._limit:
            raise QueueFull(f"{outstanding} messages unacknowledged (limit {self._limit})")
        if self._mem_limit and outstanding and self._bytes + len(value) > self._mem_limit:
            raise QueueFull(f"{self._bytes} bytes pending (clientMemoryLimitMB)")
        self._send_tid = _get_ident()
        cb = self._callback(value, _mono())
        if self._raw_send is not None:
            mb = self._builder().content(value)
            if key is not None:
                mb.partition_key(key.decode("utf-8", "replace"))
            self._raw_send(mb.build(), cb)
        else:
            self._p.send_async(
                value, cb, partition_key=None if key is None else key.decode("utf-8", "replace")
            )
        if self._rejected:
            why, self._rejected = self._rejected, ""
            raise QueueFull(f"pulsar-client refused the message: {why}")
        self._sent += 1
        self._bytes += len(value)

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        """:meth:`send` for a batch, in order, in one Python call from the engine: how many
        were taken before the driver's limits or the client refused one (the rest are the
        engine's to hand again after a :meth:`service`)."""
        if self._raw_send is None:  # a binding without MessageBuilder: one by one
            for i, v in enumerate(values):
                try:
                    self.send(v, None if keys is None else keys[i])
                except QueueFull:
                    return i
            return len(values)
        take = self._room(values)
        if not take:
            return 0
        self._send_tid = _get_ident()
        raw, builder, callback, mono = self._raw_send, self._builder, self._callback, _mono
        taken = 0
        nbytes = 0
        for i in range(take):
            v = values[i]
            mb = builder().content(v)
            if keys is not None and keys[i] is not None:
                mb.partition_key(keys[i].decode("utf-8", "replace"))  # type: ignore[union-attr]
            raw(mb.build(), callback(v, mono()))
            if self._rejected:  # refused inside send_async: not sent, not counted
                self._rejected = ""
                break
            taken += 1
            nbytes += len(v)
        self._sent += taken
        self._bytes += nbytes
        return taken

    def service(self) -> None:
        done = self._done
        n = len(done)  # the C++ threads only append, so n are there to take
        if n:
            pop = done.popleft
            items = [pop() for _ in range(n)]
            on_acks = self._on_acks
            if on_acks is not None and n >= ACK_BATCH_MIN:
                values, sent_ns, ack_ns = zip(*items, strict=True)
                nbytes = sum(map(len, values))
                on_acks(list(values), list(ack_ns), sent_ns=list(sent_ns))
            else:
                on_ack = self._on_ack
                nbytes = 0
                for value, sent, ack in items:
                    on_ack(value, ack - sent, sent)
                    nbytes += len(value)
            self._completed += n
            self._bytes -= nbytes
        failed = self._failed
        while failed:
            value, why = failed.popleft()
            self._completed += 1
            self._bytes -= len(value)
            self._on_error(value, f"Pulsar send failed: {why}")

    def queue_depth(self) -> int:
        return self._sent - self._completed

    def flush(self, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while True:
            self.service()
            depth = self.queue_depth()
            if depth == 0 or time.monotonic() >= deadline:
                return depth
            time.sleep(0.001)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(5.0)
            self._close_producers()
        finally:
            self._driver._release_client()


# -- consumer ----------------------------------------------------------------------------
