"""benchmarks/harness_profile.py: py-spy's collapsed stacks read as shares per thread
and per innermost frame (what ``compare_native.py --profile`` prints). No py-spy needed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness_profile import summarise

_BOOT = "Thread._bootstrap (threading.py:1002)"
_PACE = "Worker._pace (/x/pytest_brokerperf/engine/worker.py:{})"
RAW = "\n".join([
    f"thread (0x7f01): pacer;{_BOOT};{_PACE.format(401)} 60",
    f"thread (0x7f01): pacer;{_BOOT};{_PACE.format(391)};"
    "_KafkaProducer.send_many (/x/kafka/driver.py:160) 20",
    "thread (0x7f02): brokerperf-kafka-poll-cmp-harness-max-0-123;"
    "_KafkaProducer._poll_loop (/x/kafka/driver.py:140);delivered (/x/kafka/driver.py:120) 15",
    "thread (0x7f03): consumer-c0;Worker._consume (/x/pytest_brokerperf/engine/worker.py:520) 5",
    "not a sample line",
])


def test_shares_per_thread_and_innermost_frame() -> None:
    s = summarise(RAW)
    assert s.samples == 100
    assert s.threads == [("pacer", 0.8), ("brokerperf-kafka-poll", 0.15), ("consumer", 0.05)]
    assert s.own[0] == ("Worker._pace (worker.py:401)", 0.6)
    assert s.own[1] == ("_KafkaProducer.send_many (driver.py:160)", 0.2)
    text = "\n".join(s.lines(top=2))
    assert "80.0%  pacer" in text and "delivered" not in text


def test_no_samples_is_said_not_a_division_by_zero() -> None:
    s = summarise("")
    assert s.samples == 0 and "no samples" in s.error
    assert "no samples" in s.lines()[0]


def test_cpu_and_run_queue_shares_are_printed_when_known() -> None:
    s = summarise(RAW)
    s.on_cpu, s.run_queue = 0.62, 0.35
    assert "on a CPU 0.62 of a core" in s.lines()[0] and "waiting for a CPU 0.35" in s.lines()[0]


def test_schedstat_of_this_process_counts_cpu_time() -> None:
    import os

    from harness_profile import schedstat

    run, wait = schedstat(os.getpid())
    assert run > 0 and wait >= 0
