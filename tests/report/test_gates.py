"""Regression gates: grammar, direction, exact trip points, noise floor, missing cells.

Pure Python: cells are built directly, no Spark.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.report.gates import (
    MIN_BASELINE_RUNS,
    evaluate,
    exit_code,
    noise_floor,
    parse_fail_on,
)
from pytest_brokerperf.report.model import (
    CellKey,
    CellStats,
    Figures,
    InvalidRecord,
    LatencyStats,
    RateStats,
)

KEY = CellKey("kafka", "tailread", "message_size=1024 rate=1000.0", "d1", "none", "ci")
OTHER = CellKey("pulsar", "tailread", "message_size=1024 rate=1000.0", "d1", "none", "ci")


def figures(p99_us: float | None, ack: float | None) -> Figures:
    lat = LatencyStats(count=100_000, values={"p99": p99_us, "p50": None})
    return Figures(latency={"e2e_response": lat},
                   rates={"ack_rate": RateStats(1, ack, None, ack, ack)})


def cell(p99_us: float | None = 1000.0, ack: float | None = 1000.0, *,
         runs: list[tuple[float | None, float | None]] | None = None, key: CellKey = KEY,
         valid: int | None = None) -> CellStats:
    runs = runs if runs is not None else [(p99_us, ack)] * MIN_BASELINE_RUNS
    run_figs = {f"run{i}": figures(p, a) for i, (p, a) in enumerate(runs)}
    n_valid = len(runs) if valid is None else valid
    invalid = () if n_valid else (InvalidRecord("run0", "t", 1, "host-noise", ("steal",)),)
    return CellStats(key=key, records=max(len(runs), 1), valid=n_valid, runs=len(runs),
                     figures=figures(p99_us, ack), run_figures=run_figs if n_valid else {},
                     p99_spread=None, invalid=invalid)


# --------------------------------------------------------------------------- grammar


def test_grammar_accepts_pytest_benchmark_style_items() -> None:
    b = parse_fail_on("e2e_response.p99:+15%, ack_rate:-10%,publish_response.p99.9:2ms")
    assert [x.metric for x in b] == ["e2e_response.p99", "ack_rate", "publish_response.p99.9"]
    assert b[0].higher_is_worse and b[0].relative == Fraction(15, 100)
    assert not b[1].higher_is_worse and b[1].relative == Fraction(1, 10)
    assert b[2].absolute == 2000 and b[2].relative is None
    # the sign may be left out; repeated flags add up
    b2 = parse_fail_on(["e2e_response.p99:15%", "ack_rate:10%"])
    assert b2[0].higher_is_worse and not b2[1].higher_is_worse
    assert parse_fail_on("e2e_response.p99:500")[0].absolute == 500  # µs by default
    assert parse_fail_on("ack_rate:-250")[0].absolute == 250  # msg/s


@pytest.mark.parametrize(("expr", "needle"), [
    ("ack_rate:+10%", "write 'ack_rate:-10%'"),
    ("e2e_response.p99:-15%", "write 'e2e_response.p99:+15%'"),
    ("e2e_response.p42:+5%", "unknown metric 'e2e_response.p42'"),
    ("latency:+5%", "unknown metric 'latency'"),
    ("e2e_response.p99", "is not METRIC:"),
    ("e2e_response.p99:+x%", "is not METRIC:"),
    ("ack_rate:-5ms", "is a rate"),
    ("  ,  ", "--fail-on is empty"),
])
def test_grammar_errors_name_the_item(expr: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fail_on(expr)
    assert needle in str(info.value)


# --------------------------------------------------------------------------- trip points


@pytest.mark.parametrize(("observed", "status"), [
    (1150.0, "pass"),  # exactly +15 %: the limit itself passes
    (1151.0, "regression"),
    (1000.0, "pass"),
    (500.0, "pass"),  # faster is never a regression
])
def test_latency_budget_trips_exactly_at_its_limit(observed: float, status: str) -> None:
    [g] = evaluate({KEY: cell(observed)}, {KEY: cell(1000.0)},
                   parse_fail_on("e2e_response.p99:+15%"))
    assert g.status == status
    assert g.limit == 1150.0 and g.noise_floor == 0.0 and g.baseline_runs == 3


@pytest.mark.parametrize(("observed", "status"), [
    (900.0, "pass"),  # exactly -10 %
    (899.9999, "regression"),
    (5000.0, "pass"),  # more throughput is never a regression
])
def test_rate_budget_is_direction_aware(observed: float, status: str) -> None:
    [g] = evaluate({KEY: cell(ack=observed)}, {KEY: cell(ack=1000.0)},
                   parse_fail_on("ack_rate:-10%"))
    assert g.status == status


def test_absolute_budget_in_milliseconds() -> None:
    budgets = parse_fail_on("e2e_response.p99:+2ms")
    assert evaluate({KEY: cell(3000.0)}, {KEY: cell(1000.0)}, budgets)[0].status == "pass"
    assert evaluate({KEY: cell(3001.0)}, {KEY: cell(1000.0)},
                    budgets)[0].status == "regression"


def test_a_percentage_of_a_float_baseline_is_exact() -> None:
    # 0.1 is not a binary fraction: the limit is computed exactly, so the largest float
    # at or below base * 11/10 passes and the next float up trips
    base = 123.7
    exact = Fraction(base) * Fraction(11, 10)
    at = float(exact)
    if Fraction(at) > exact:
        at = math.nextafter(at, 0.0)
    above = math.nextafter(at, math.inf)
    budgets = parse_fail_on("e2e_response.p99:+10%")
    assert evaluate({KEY: cell(at)}, {KEY: cell(base)}, budgets)[0].status == "pass"
    assert evaluate({KEY: cell(above)}, {KEY: cell(base)}, budgets)[0].status == "regression"


# --------------------------------------------------------------------------- noise floor


def test_noise_floor_is_two_relative_standard_deviations() -> None:
    floor, n = noise_floor([900.0, 1000.0, 1100.0])
    assert n == 3 and floor == pytest.approx(0.2)
    assert noise_floor([1000.0, 1000.0]) == (None, 2)
    assert noise_floor([1000.0, None, 1000.0, 1000.0]) == (0.0, 3)


def test_a_budget_inside_the_baseline_noise_does_not_trip() -> None:
    noisy = cell(1000.0, runs=[(900.0, 1000.0), (1000.0, 1000.0), (1100.0, 1000.0)])
    budgets = parse_fail_on("e2e_response.p99:+5%")
    g = evaluate({KEY: cell(1190.0)}, {KEY: noisy}, budgets)[0]
    assert g.status == "pass" and g.noise_floor == pytest.approx(0.2)
    assert g.limit == pytest.approx(1200.0)
    assert "noise floor 20.0%" in g.message and "budget +5%" in g.message
    assert evaluate({KEY: cell(1201.0)}, {KEY: noisy}, budgets)[0].status == "regression"


def test_fewer_than_three_baseline_runs_is_inconclusive() -> None:
    base = cell(1000.0, runs=[(1000.0, 1000.0), (1000.0, 1000.0)])
    [g] = evaluate({KEY: cell(5000.0)}, {KEY: base}, parse_fail_on("e2e_response.p99:+15%"))
    assert g.status == "inconclusive" and "2 valid run(s)" in g.message
    assert exit_code([g]) == 3


# --------------------------------------------------------------------------- missing cells


def test_missing_cells_never_pass_silently() -> None:
    budgets = parse_fail_on("e2e_response.p99:+15%")
    results = evaluate({KEY: cell(1000.0)}, {OTHER: cell(1000.0, key=OTHER)}, budgets)
    assert {(g.cell.broker, g.status) for g in results} == {
        ("kafka", "no-baseline"), ("pulsar", "missing")}
    assert exit_code(results) == 3


def test_undersampled_or_invalid_current_cell_is_inconclusive() -> None:
    budgets = parse_fail_on("e2e_response.p99:+15%")
    [g] = evaluate({KEY: cell(None)}, {KEY: cell(1000.0)}, budgets)
    assert g.status == "inconclusive" and "n/a in this run" in g.message
    [g] = evaluate({KEY: cell(1000.0, valid=0)}, {KEY: cell(1000.0)}, budgets)
    assert g.status == "inconclusive" and "host-noise" in g.message


def test_exit_code_precedence() -> None:
    budgets = parse_fail_on("e2e_response.p99:+15%")
    regress = evaluate({KEY: cell(2000.0)}, {KEY: cell(1000.0)}, budgets)
    missing = evaluate({}, {OTHER: cell(key=OTHER)}, budgets)
    ok = evaluate({KEY: cell(1000.0)}, {KEY: cell(1000.0)}, budgets)
    assert exit_code(regress + missing) == 1
    assert exit_code(missing + ok) == 3
    assert exit_code(ok) == 0


def test_another_machine_under_the_default_label_is_refused_unless_asked() -> None:
    from pytest_brokerperf.report.gates import same_environment
    from pytest_brokerperf.report.model import machine_label

    def cells(env: str, machine: str) -> dict[CellKey, CellStats]:
        key = CellKey("kafka", "tailread", "rate=1000", "d1", "none", env)
        figs = Figures(latency={}, rates={})
        return {key: CellStats(key=key, records=1, valid=1, runs=1, figures=figs,
                               run_figures={}, p99_spread=None, machines=(machine,))}

    a, b = machine_label("CPU A", 2), machine_label("CPU B", 4)
    assert a == "CPU A × 2 cpus"
    kw = {"source": "--baseline", "fix": "--across-env"}
    assert same_environment(cells("local", a), "local", across=False, machines={a}, **kw)
    with pytest.raises(ConfigError) as info:
        same_environment(cells("local", b), "local", across=False, machines={a}, **kw)
    msg = str(info.value)
    assert "another machine (CPU B × 4 cpus); this run is on CPU A × 2 cpus" in msg
    assert "--across-env" in msg
    assert same_environment(cells("local", b), "local", across=True, machines={a}, **kw)
    # a chosen label vouches for its machines
    assert same_environment(cells("ci", b), "ci", across=False, machines={a}, **kw)
