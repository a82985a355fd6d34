"""A worker's publish side without a process: tests of ack paths (one call per message
against a driver's batch) compare what two of these recorded."""

from __future__ import annotations

from array import array

from pytest_brokerperf.engine.delivery import AckLedger
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.engine.worker import Worker, _Buffers, _Counters
from pytest_brokerperf.workload import Workload

__all__ = ["long_loopback_run", "publish_side"]


def publish_side() -> Worker:
    """A :class:`Worker` with only what its ack callback touches: counters, the ack
    ledger and the latency buffers (``w._ack_callback()`` then works)."""
    w = Worker.__new__(Worker)
    w.pub_counters = _Counters()
    w.ack_ledger = AckLedger()
    w._pub_local = {n: array("q") for n in _Buffers.NAMES}
    return w


def long_loopback_run(prefix: str) -> tuple[Workload, RunPlan]:
    """One loopback topic at 200 msg/s with a 60 s window: long enough that only a
    broker's death (which a test injects) can end it early."""
    wl = Workload(name="loopback", topics=1, partitions_per_topic=1, message_size=128,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=200, test_duration_minutes=1,
                  warmup_duration_minutes=0)
    plan = RunPlan(rate=200, period_s=0.5, warmup_max_s=0.0, measure_s=60.0, workers=1,
                   topic_prefix=prefix, probe_timeout_s=20)
    return wl, plan
