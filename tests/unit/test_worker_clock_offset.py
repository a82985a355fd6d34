"""A worker on another clock (a Spark task in another time namespace) moves the stamps a
driver takes itself onto the coordinator's clock, like its own: publish latency, delay and
response are then the same figures as on the coordinator's clock."""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterator

import numpy as np
import pytest

from pytest_brokerperf.core import header
from pytest_brokerperf.engine import worker
from pytest_brokerperf.engine.delivery import AckLedger

OFFSET_NS = 5_000_000_000  # this worker's CLOCK_MONOTONIC runs 5 s ahead


@pytest.fixture
def shifted() -> Iterator[None]:
    worker.set_clock_offset(OFFSET_NS)
    yield
    worker.set_clock_offset(0)


def _worker() -> worker.Worker:
    w = worker.Worker.__new__(worker.Worker)
    w.pub_counters = worker._Counters()
    w.ack_ledger = AckLedger()
    w._pub_local = {n: array("q") for n in worker._Buffers.NAMES}
    return w


def _value(seq: int, intended: int, sent: int) -> bytes:
    return header.pack(header.MAGIC, header.VERSION, header.KIND_DATA, 1, seq, intended,
                       sent) + b"x" * 16


@pytest.mark.usefixtures("shifted")
def test_driver_stamps_on_the_raw_clock_are_moved_onto_the_coordinators() -> None:
    w = _worker()
    on_ack = w._ack_callback()
    raw = time.monotonic_ns()
    here = raw - OFFSET_NS  # the coordinator's clock, as the worker's own stamps are
    # one by one: the driver's own send stamp (raw), its latency
    on_ack(_value(0, here - 2_000_000, here - 1_000_000), 3_000_000, raw - 1_000_000)
    # a batch: raw ack stamps per message and raw send stamps
    on_ack.many([_value(1, here - 2_000_000, here)], np.array([raw + 4_000_000]),
                sent_ns=np.array([raw - 1_000_000]))
    # a batch acknowledged at one raw moment
    on_ack.many([_value(2, here - 2_000_000, here - 1_000_000)], raw + 4_000_000)
    loc = w._pub_local
    assert list(loc["publish_delay"]) == [1_000, 1_000, 1_000]  # sent - intended, µs
    assert list(loc["publish_latency"]) == [3_000, 5_000, 5_000]  # ack - sent
    assert list(loc["publish_response"]) == [4_000, 6_000, 6_000]  # ack - intended
