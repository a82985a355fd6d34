"""A worker's publish side without a process: tests of ack paths (one call per message
against a driver's batch) compare what two of these recorded."""

from __future__ import annotations

from array import array
from collections.abc import Callable

from pytest_brokerperf.core.errors import BrokerDied
from pytest_brokerperf.engine.delivery import AckLedger
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.engine.worker import Worker, _Buffers, _Counters
from pytest_brokerperf.workload.model import Workload

__all__ = ["death_mid_run", "publish_side"]


def publish_side() -> Worker:
    """A :class:`Worker` with only what its ack callback touches: counters, the ack
    ledger and the latency buffers (``w._ack_callback()`` then works)."""
    w = Worker.__new__(Worker)
    w.pub_counters = _Counters()
    w.ack_ledger = AckLedger()
    w._pub_local = {n: array("q") for n in _Buffers.NAMES}
    return w


def death_mid_run(kill: Callable[[], object], prefix: str, after_s: float = 1.5
                  ) -> BrokerDied:
    """Run one loopback topic at 200 msg/s for a 60 s window, call ``kill`` (a test's
    broker death) ``after_s`` into it, and return the :class:`BrokerDied` that must end
    the run early (``pytest.fail`` if the run ended otherwise)."""
    import threading

    import pytest

    from pytest_brokerperf.brokers import harness_driver
    from pytest_brokerperf.engine.coordinator import run_workload

    wl = Workload(name="loopback", topics=1, partitions_per_topic=1, message_size=128,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=200, test_duration_minutes=1,
                  warmup_duration_minutes=0)
    plan = RunPlan(rate=200, period_s=0.5, warmup_max_s=0.0, measure_s=60.0, workers=1,
                   topic_prefix=prefix, probe_timeout_s=20)
    killer = threading.Timer(after_s, kill)
    killer.start()
    try:
        run_workload(harness_driver(1), wl, plan,
                     payloads=wl.payloads(None, seed=1))
    except BrokerDied as died:
        return died
    finally:
        killer.cancel()
    pytest.fail("the run went on to the end of its window: the death was not seen")
