"""The pytest process (coordinator and broker-metrics sampler) is pinned to the
generator's CPUs during a load session, every thread of it, and restored afterwards;
the layout the brokers are placed by still sees every allowed CPU."""

from __future__ import annotations

import os
import threading

import pytest

from pytest_brokerperf.metrics.cpus import allowed_cpus, cpu_layout, pinned_coordinator

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="needs at least 2 CPUs to pin to one")


def _masks() -> dict[int, set[int]]:
    """Every thread's CPU mask; a thread of an earlier test that ends meanwhile is left out."""
    masks = {}
    for t in os.listdir("/proc/self/task"):
        try:
            masks[int(t)] = os.sched_getaffinity(int(t))
        except ProcessLookupError:
            continue
    return masks


@needs_two
def test_every_thread_is_pinned_and_restored() -> None:
    stop = threading.Event()
    sampler = threading.Thread(target=stop.wait, daemon=True)  # a thread started before
    sampler.start()
    before = _masks()
    try:
        with pinned_coordinator([CPUS[0]]) as pinned:
            assert pinned == (CPUS[0],)
            assert all(m == {CPUS[0]} for m in _masks().values())
            # brokers started meanwhile (a fault's restart) are laid out on every CPU
            assert allowed_cpus() == set(CPUS)
            late = threading.Thread(target=stop.wait, daemon=True)  # inherits the pin
            late.start()
        after = _masks()
        for tid, mask in before.items():
            assert after[tid] == mask
        assert after[late.native_id] == set(CPUS)  # widened again
    finally:
        stop.set()


def test_no_cpus_means_no_pin() -> None:
    before = _masks()
    with pinned_coordinator(None) as pinned:
        assert pinned is None
        after = _masks()  # threads of earlier tests may end meanwhile: compare the rest
        assert {t: m for t, m in before.items() if t in after} == \
            {t: m for t, m in after.items() if t in before}


def test_the_layout_names_a_pinned_coordinator() -> None:
    note = cpu_layout([1], [0], coordinator=[0])["note"]
    assert note is not None and "(the pytest process, pinned) share CPUs [0] with the " \
        "generator" in note
    assert "share CPUs [1] with the broker" not in note  # off the broker's CPU


@needs_two
def test_a_loopback_run_records_the_coordinators_pin() -> None:
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
    from pytest_brokerperf.engine.coordinator import run_workload
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.workload.model import Workload

    wl = Workload(name="pin", topics=1, partitions_per_topic=1, message_size=128,
                  subscriptions_per_topic=1, producers_per_topic=1,
                  consumer_per_subscription=1, producer_rate=500, test_duration_minutes=1,
                  warmup_duration_minutes=0)
    plan = RunPlan(rate=500, period_s=0.5, warmup_max_s=0.5, measure_s=1.0, workers=1,
                   topic_prefix="pin", generator_cpus=(CPUS[0],))
    before = os.sched_getaffinity(0)
    out = run_workload(LoopbackDriver(partitions=1), wl, plan, payloads=wl.payloads(None, seed=1))
    assert out.coordinator_cpus == (CPUS[0],)
    assert os.sched_getaffinity(0) == before
