"""Pulsar producer with one send callback per *slice* (``sendCallbacks: perSlice``).

Why: pulsar-client calls a Python callback for every acknowledged message, from a C++
I/O thread that must take the GIL each time; measured on a 2-core VM that caps one
Python process near 45k msg/s (the bare client loop as much as the harness), while the
same loop with no callback on 99 of 100 messages sends 160k+ (docs/reference/pulsar.md).

How it stays truthful:

* One client producer per partition (``<topic>-partition-<i>``), so the driver knows
  which partition each message goes to. Unkeyed messages go round robin as the client's
  router sends them with batching: to one partition until a batch's worth
  (``batchingMaxBytes`` / ``batchingMaxMessages``) or a batching window
  (``batchingMaxPublishDelayMs`` x ``batchingPartitionSwitchFrequencyByPublishDelay``)
  is full, then the next; keyed messages to ``crc32(key) % partitions`` (the same key,
  the same partition). Each ``send_many`` call's run on one partition is a *slice*.
* Only a slice's last message carries a callback. A Pulsar producer completes its
  pending messages in send order (the broker acknowledges a producer's sequence ids in
  order, and a failure fails everything still pending), so that callback with ``Ok``
  means every earlier message on the partition is acknowledged, and its time is each of
  the slice's messages' ack time: exact when the slice went as one batch, otherwise
  later than the earlier batch's true ack (publish latency can only be overstated).
* A failed slice callback fails every message of the slice (and any earlier one still
  pending): those are reported as send errors, as they would be one by one.
* The driver keeps each partition's pending count under the client's own queue limit,
  so the client never refuses a message that has no callback to say so.
"""

from __future__ import annotations

import collections
import zlib
from functools import partial as _partial
from typing import Any

from pytest_brokerperf.brokers.driver import QueueFull
from pytest_brokerperf.brokers.pulsar.client import _FULL_RESULTS, _get_ident, _mono
from pytest_brokerperf.brokers.pulsar.producer import ACK_BATCH_MIN, _PulsarProducer

#: A slice's entry: (sequence of its callback, the values, each value's send stamp).
_Slice = tuple[int, list[bytes], list[int]]


class _PulsarSliceProducer(_PulsarProducer):
    """One client producer per partition; a callback on each slice's last message."""

    def _open(self, full: str, kwargs: dict[str, Any]) -> int:
        if self._builder is None:
            raise RuntimeError("sendCallbacks: perSlice needs pulsar-client's MessageBuilder "
                               "binding (pulsar-client 3.x)")
        names = list(self._client.get_topic_partitions(full)) or [full]
        self._producers: list[Any] = []
        try:
            for name in names:
                self._producers.append(self._client.create_producer(name, **kwargs))
        except Exception:
            self._close_producers()
            raise
        self._raws = [p._producer.send_async for p in self._producers]
        prod = self._driver.config.producer
        self._per_limit = 0 if prod.pending_queue_size <= 0 else prod.pending_queue_size
        self._batch_bytes = max(1, prod.batching_max_bytes)
        self._batch_msgs = max(1, prod.batching_max_messages)
        self._pending: list[collections.deque[_Slice]] = [collections.deque() for _ in names]
        self._part_out = [0] * len(names)
        # unkeyed messages stay on one partition for a batching window or one batch's
        # worth, whichever ends first (the client's round-robin router with batching):
        # one partition per call would cut the batches down to the few messages due at
        # each pacer tick at low rates
        delay_ms = prod.batching_max_publish_delay_ms
        self._switch_ns = int(delay_ms * prod.batching_partition_switch_frequency_by_publish_delay
                              * 1_000_000)
        self._next = len(names) - 1  # the first window goes to partition 0
        self._run_n = 0  # messages sent in the current window
        self._run_start = 0  # when it began (monotonic ns; 0: none yet)
        self._seq = 0
        self._refused = ""
        return len(names)

    def _close_producers(self) -> None:
        for p in self._producers:
            p.close()

    def _make_delivered(self) -> Any:
        """The slice callback: on a C++ I/O thread with the GIL, stamp and append."""
        done = self._done.append
        mono = _mono

        def slice_done(part: int, seq: int, res: Any, _msg_id: Any) -> None:
            if int(res) != 0 and _get_ident() == self._send_tid:
                text = str(res).rsplit(".", 1)[-1]
                if text in _FULL_RESULTS:  # refused inside send_async
                    self._rejected = text
                    return
            done((part, seq, res, mono()))  # type: ignore[arg-type]

        return slice_done

    def send(self, value: bytes, key: bytes | None) -> None:
        self._refused = ""
        if not self.send_many([value], None if key is None else [key]):
            why = self._refused
            raise QueueFull(f"pulsar-client refused the message: {why}" if why else
                            f"{self.queue_depth()} messages unacknowledged (driver limits)")

    def send_many(self, values: list[bytes], keys: list[bytes | None] | None) -> int:
        take = self._room(values)
        if not take:
            return 0
        self._send_tid = _get_ident()
        nparts = len(self._raws)
        per = max(1, min(self._batch_msgs, self._batch_bytes // max(1, len(values[0]))))
        now = _mono()
        taken = i = 0
        full = 0  # partitions found at their queue limit in this call
        while i < take:
            unkeyed = keys is None or keys[i] is None
            if unkeyed and (self._run_n >= per or not self._run_start
                            or now - self._run_start >= self._switch_ns):
                self._next = self._next + 1 if self._next + 1 < nparts else 0
                self._run_n, self._run_start = 0, now
            end = min(take, i + (per - self._run_n if unkeyed else per))
            if keys is None:
                part, j = self._next, end
            else:
                part, j = self._keyed_run(keys, i, end, nparts)
            if self._per_limit:
                j = min(j, i + self._per_limit - self._part_out[part])
                if j <= i:
                    full += 1
                    if not unkeyed or full >= nparts:
                        break
                    self._run_n = per  # a full partition ends its window: the next one
                    continue
            n = self._send_slice(part, values, keys, i, j)
            taken += n
            if unkeyed:
                self._run_n += n
            if n < j - i:
                break
            i = j
        self._sent += taken
        return taken

    def _keyed_run(self, keys: list[bytes | None], i: int, end: int,
                   nparts: int) -> tuple[int, int]:
        """The partition of ``keys[i]`` and how far the run going there extends: unkeyed
        messages follow the rotation, a keyed one its key's hash."""
        def part_of(k: bytes | None) -> int:
            return self._next if k is None else zlib.crc32(k) % nparts

        part = part_of(keys[i])
        j = i + 1
        while j < end and (keys[j] is None) == (keys[i] is None) and part_of(keys[j]) == part:
            j += 1
        return part, j

    def _send_slice(self, part: int, values: list[bytes], keys: list[bytes | None] | None,
                    i: int, j: int) -> int:
        """Send ``values[i:j]`` to partition ``part``, a callback on the last only; how many
        the client took (all, or all but a last one it refused)."""
        raw, builder, mono = self._raws[part], self._builder, _mono
        vals = values[i:j]
        stamps: list[int] = []
        stamp = stamps.append
        if keys is None or keys[i] is None:
            for v in vals[:-1]:
                mb = builder().content(v).build()
                stamp(mono())
                raw(mb, None)
            mb = builder().content(vals[-1]).build()
        else:
            names = [k.decode("utf-8", "replace") for k in keys[i:j]]  # type: ignore[union-attr]
            for v, name in zip(vals[:-1], names, strict=False):
                mb = builder().content(v).partition_key(name).build()
                stamp(mono())
                raw(mb, None)
            mb = builder().content(vals[-1]).partition_key(names[-1]).build()
        seq = self._seq = self._seq + 1
        stamp(mono())
        raw(mb, _partial(self._delivered, part, seq))
        self._refused, self._rejected = self._rejected, ""
        if self._refused:  # the last was refused: the rest wait for the next callback here
            vals.pop()
            stamps.pop()
            seq = self._seq + 1
        if vals:
            self._pending[part].append((seq, vals, stamps))
            self._part_out[part] += len(vals)
            self._bytes += sum(map(len, vals))
        return len(vals)

    def service(self) -> None:
        done = self._done
        n = len(done)  # the C++ threads only append, so n are there to take
        if not n:
            return
        values: list[bytes] = []
        sent: list[int] = []
        acked: list[int] = []
        failed: list[tuple[bytes, str]] = []
        pending, part_out = self._pending, self._part_out
        pop = done.popleft
        for _ in range(n):
            part, seq, res, ack = pop()  # type: ignore[misc]
            ok = int(res) == 0
            why = "" if ok else str(res).rsplit(".", 1)[-1]
            queue = pending[part]
            while queue and queue[0][0] <= seq:
                _, vals, stamps = queue.popleft()
                part_out[part] -= len(vals)
                if ok:
                    values += vals
                    sent += stamps
                    acked += [ack] * len(vals)
                else:
                    failed += [(v, why) for v in vals]
        nbytes = sum(map(len, values))
        if values:
            on_acks = self._on_acks
            if on_acks is not None and len(values) >= ACK_BATCH_MIN:
                on_acks(values, acked, sent_ns=sent)
            else:
                on_ack = self._on_ack
                for value, s, a in zip(values, sent, acked, strict=True):
                    on_ack(value, a - s, s)
        for value, why in failed:
            nbytes += len(value)
            self._on_error(value, f"Pulsar send failed: {why}")
        self._completed += len(values) + len(failed)
        self._bytes -= nbytes
