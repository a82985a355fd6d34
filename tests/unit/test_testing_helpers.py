"""``pytest_brokerperf.testing``: helpers for tests built on result records."""

import pytest

from pytest_brokerperf.testing import skip_if_host_noise


def _noise(**extra):
    return {"test_id": "t.py::test_x", "verdict": {"status": "host-noise", "details": {}},
            **extra}


def test_a_valid_record_is_left_to_the_test():
    skip_if_host_noise([{"verdict": {"status": "valid"}},
                        {"verdict": {"status": "generator-bound"}}])


def test_a_window_record_names_its_steal_and_retries():
    rec = _noise(noise_retries=[{}, {}])
    rec["verdict"]["details"]["host_steal_share"] = 0.2049
    with pytest.raises(pytest.skip.Exception, match=r"t\.py::test_x: hypervisor steal 20\.5% "
                       r"after 2 re-measurement"):
        skip_if_host_noise([rec])


def test_a_ladder_record_names_the_steal_of_the_rung_the_host_stopped():
    rec = _noise(ladder={"noise_retries": [{}], "rungs": [
        {"host_steal_share": 0.01}, {"host_steal_share": 0.154}]})
    with pytest.raises(pytest.skip.Exception, match=r"steal 15\.4% after 1 re-measurement"):
        skip_if_host_noise([rec])


def test_the_discarded_windows_note_counts_each_kind():
    from pytest_brokerperf.judge.verdict import discarded_windows_note

    note = discarded_windows_note([
        {"status": "host-noise", "host_steal_share": 0.291},
        {"status": "unsteady", "host_steal_share": 0.004},
        {"status": "host-noise", "host_steal_share": 0.062},
    ])
    assert note == ("3 measured window(s) discarded and measured again: 2 as host-noise "
                    "(hypervisor steal 29.1%, hypervisor steal 6.2%; --brokerperf-noise-retries)"
                    "; 1 as unsteady (catching up a stall from before the window); see "
                    "noise_retries")


def test_a_window_voided_by_other_processes_says_so_not_steal_0() -> None:
    """The host-noise of other processes on the generator's CPUs showed as "steal 0.0%"
    in the progress line and the note: no reason at all, to a reader."""
    from pytest_brokerperf.judge.verdict import (
        HOST_NOISE,
        Remeasure,
        Verdict,
        discarded_windows_note,
    )

    reasons = ["other processes used 61% of the generator's CPUs while its workers waited "
               "on a run queue 35% of the window: ..."]
    v = Verdict(status=HOST_NOISE, flags=[HOST_NOISE], reasons=reasons,
                details={"host_steal_share": 0.0, "other_process_cpu_share": 0.61})
    why = Remeasure(noise_retries=1).why(v, warmup_steady=True, warmup_cap_s=30)
    assert why is not None and why.startswith(
        "host-noise (other processes 61% of the generator's CPUs): measuring again")
    note = discarded_windows_note([{"status": HOST_NOISE, "host_steal_share": 0.0,
                                    "other_process_cpu_share": 0.61, "reasons": reasons}])
    assert "(other processes 61% of the generator's CPUs;" in note and "0.0%" not in note
