"""How results reach the disk: whole ``results.jsonl`` lines, periods as they end, and
the partial outcome an interrupt leaves (loopback driver, no broker)."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver
from pytest_brokerperf.core.errors import RunInterrupted
from pytest_brokerperf.engine.coordinator import run_workload
from pytest_brokerperf.engine.plan import RunPlan
from pytest_brokerperf.results.record import append_jsonl
from pytest_brokerperf.workload.model import Workload


def _writer(path: str, who: int, n: int) -> None:
    for i in range(n):  # ~1 MiB lines: far beyond any pipe or buffer size
        append_jsonl(Path(path), {"who": who, "i": i, "pad": "x" * (1 << 20)})


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 6)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = [json.loads(x) for x in raw.splitlines()]
    assert sorted((x["who"], x["i"]) for x in lines) == [(w, i) for w in range(4)
                                                         for i in range(6)]


def test_a_torn_line_left_by_a_killed_writer_does_not_swallow_the_next_record(
        tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_jsonl(path, {"n": 1})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"n": 2, "cut": "sho')  # a writer killed mid-line
    append_jsonl(path, {"n": 3})
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"n": 1}
    assert lines[1] == '{"n": 2, "cut": "sho'  # stays a fragment of its own
    assert json.loads(lines[2]) == {"n": 3}


def test_a_record_that_cannot_be_encoded_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    append_jsonl(path, {"n": 1})
    with pytest.raises(ValueError):
        append_jsonl(path, {"n": float("nan")})
    assert path.read_text() == '{"n": 1}\n'


def _workload() -> Workload:
    return Workload(name="loopback", topics=1, partitions_per_topic=1, message_size=128,
                    subscriptions_per_topic=1, producers_per_topic=1,
                    consumer_per_subscription=1, producer_rate=200, test_duration_minutes=1,
                    warmup_duration_minutes=0)


def test_ctrl_c_in_the_measured_window_keeps_the_periods_completed_until_then() -> None:
    wl = _workload()
    plan = RunPlan(rate=200, period_s=0.25, warmup_max_s=0.5, measure_s=60.0, workers=1,
                   topic_prefix="interrupt", probe_timeout_s=20)
    seen: list[Any] = []

    def on_period(p: Any) -> None:
        seen.append(p)
        if p.phase == "measure" and p.index == 2:
            raise KeyboardInterrupt  # as Python's SIGINT handler raises it

    with pytest.raises(RunInterrupted) as info:
        run_workload(LoopbackDriver(partitions=1), wl, plan, payloads=wl.payloads(None, seed=1),
                     on_period=on_period)
    exc = info.value
    assert isinstance(exc, KeyboardInterrupt) and exc.signal_name == "SIGINT"
    assert isinstance(exc.__cause__, KeyboardInterrupt)
    partial = exc.partial
    assert [p.index for p in partial.periods] == [0, 1]  # the third never completed
    assert len(partial.warmup) == len([p for p in seen if p.phase == "warmup"])
    assert partial.measure_begin_time > partial.begin_time
    assert partial.ack_rate > 0 and partial.cumulative["e2e_response"].total_count > 0
    assert partial.delivery.acknowledged == 0  # never reconciled


def test_sigterm_in_the_window_is_the_same_interrupt(tmp_path: Path) -> None:
    import os
    import signal

    from pytest_brokerperf.core.interrupts import redeliver_sigterm, sigterm_interrupts

    wl = _workload()
    plan = RunPlan(rate=200, period_s=0.25, warmup_max_s=0.0, measure_s=60.0, workers=1,
                   topic_prefix="sigterm", probe_timeout_s=20)

    def on_period(p: Any) -> None:
        if p.index == 1:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    got: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with pytest.raises(RunInterrupted) as info, sigterm_interrupts():
            run_workload(LoopbackDriver(partitions=1), wl, plan,
                         payloads=wl.payloads(None, seed=1), on_period=on_period)
        assert info.value.signal_name == "SIGTERM"
        assert len(info.value.partial.periods) >= 1
        assert got == []  # turned into the interrupt, not handed on yet
        redeliver_sigterm()  # the session's end: the previous handler gets it
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_ctrl_c_while_a_record_is_written_waits_for_the_record() -> None:
    import os
    import signal

    from pytest_brokerperf.core.interrupts import signals_deferred

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    steps: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt), signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # room for the handler to run, were it installed
                steps.append("")
            steps.append("written")
        assert steps[-1] == "written"
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_ctrl_c_in_a_later_phase_keeps_its_periods_and_every_phase_before() -> None:
    from pytest_brokerperf.engine.coordinator import LoadSession
    from pytest_brokerperf.engine.plan import Rung
    from pytest_brokerperf.scenario_library.stopped import PhaseLog

    wl = _workload()
    plan = RunPlan(rate=200, period_s=0.25, warmup_max_s=0.0, measure_s=0.5, workers=1,
                   topic_prefix="phases", probe_timeout_s=20)

    def on_period(p: Any) -> None:
        if p.phase == "drain" and p.index == 1:
            raise KeyboardInterrupt  # as Python's SIGINT handler raises it

    log = PhaseLog()
    with LoadSession(LoopbackDriver(partitions=1), wl, plan,
                     payloads=wl.payloads(None, seed=1), on_period=on_period) as s:
        window = log.rung_done(s.run_rung(Rung(200, 0.0, 0.5)))
        log.phase_done(s.run_until("build", lambda t: t.get("acked", 0) > 0, 10))
        log.enter("the drain")
        with pytest.raises(RunInterrupted) as info:
            s.run_until("drain", lambda t: False, 30)  # never done: stopped by the interrupt
    partial = info.value.partial
    assert [(p.phase, p.index) for p in partial.periods] == [("drain", 0)]
    outcomes = log.outcomes(partial)
    assert outcomes is not None
    headline, session = outcomes
    assert headline is window  # the figures stay the completed window's
    phases = [p.phase for p in session.periods]
    assert phases[:2] == ["measure", "measure"] and phases[-1] == "drain"
    assert "build" in phases and session.warmup == []
    assert log.now == "the drain"
    # stopped before anything was measured: no record to write
    assert PhaseLog().outcomes(None) is None
