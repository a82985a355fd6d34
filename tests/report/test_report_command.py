"""``brokerperf report`` end to end: outputs, charts and the gate's exit codes.

A baseline of three runs (two brokers × two rates) and two candidate runs: one with an
injected +50 % latency regression on one cell (exit 1), one rerun of the baseline's
distributions with fresh samples (exit 0).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_brokerperf.plugin.cli import main as cli_main
from pytest_brokerperf.report.command import ReportOptions, run
from tests.support.records import SyntheticRun, synthetic_record, write_jsonl

BROKERS = {"kafka": 2000.0, "pulsar": 3000.0}  # e2e scale, µs
RATES = (1000.0, 2000.0)


def _write_run(root: Path, run_id: str, seed: int, slow: float = 1.0) -> None:
    rng = np.random.default_rng(seed)
    recs = []
    for broker, scale in BROKERS.items():
        for rate in RATES:
            factor = slow if (broker, rate) == ("kafka", 2000.0) else 1.0
            e2e = (rng.lognormal(np.log(scale * rate / 1000), 0.5, 20_000) * factor)
            samples = {"e2e_response": e2e.astype(np.int64),
                       "publish_response": (e2e / 2).astype(np.int64)}
            params = {**SyntheticRun().params, "rate": rate}
            recs.append(synthetic_record(SyntheticRun(
                run_id=run_id, test_id=f"t.py::test[{broker}-{rate:g}]", broker=broker,
                params=params, ack_rate=rate * (1 + rng.normal(0, 0.002)), env="ci"),
                samples))
    recs.append(synthetic_record(SyntheticRun(
        run_id=run_id, test_id="t.py::test[kafka-noisy]", status="generator-bound",
        reasons=("worker 0 CPU 97% >= 90%",), env="ci"),
        {"e2e_response": np.full(2000, 9_000_000, dtype=np.int64)}))
    write_jsonl(root / run_id / "results.jsonl", recs)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")
    for i in range(3):
        _write_run(root / "baseline", f"2026010{i + 1}-000000-base00", seed=i)
    _write_run(root / "regressed", "20260110-000000-cand01", seed=10, slow=1.5)
    _write_run(root / "rerun", "20260111-000000-cand02", seed=11)
    return {"baseline": root / "baseline", "regressed": root / "regressed",
            "rerun": root / "rerun", "out": root / "out"}


def _run(opts: ReportOptions) -> tuple[int, str]:
    err = io.StringIO()
    code = run(opts, out=io.StringIO(), err=err)
    return code, err.getvalue()


def test_injected_regression_trips_the_gate_and_outputs_are_written(
        spark: Any, dirs: dict[str, Path]) -> None:
    out = dirs["out"]
    code, err = _run(ReportOptions(
        dirs=[dirs["regressed"]], baseline=[dirs["baseline"]],
        fail_on=["e2e_response.p99:+15%,ack_rate:-10%"], html=out / "r.html",
        markdown=out / "r.md", csv=out / "r.csv"))
    assert code == 1, err
    assert "REGRESSION: kafka tailread" in err and "rate=2000.0" in err
    assert "1 regression" in err and "SLO" not in err
    md = (out / "r.md").read_text()
    assert "**Regression gate: REGRESSION**" in md and "SLO" not in md
    regressions = [line for line in md.splitlines() if line.startswith("| **regression**")]
    assert len(regressions) == 1 and "`e2e_response.p99`" in regressions[0]
    assert "generator-bound" in md and "worker 0 CPU 97%" in md  # shown with its reason

    rows = list(csv.DictReader(io.StringIO((out / "r.csv").read_text())))
    assert len(rows) == 4  # 2 brokers x 2 rates; the invalid record's cell has no figures
    assert {r["broker"] for r in rows} == set(BROKERS)
    assert all(int(r["e2e_response_count"]) == 20_000 for r in rows)

    page = (out / "r.html").read_text()
    # self-contained: inline SVG, nothing fetched
    assert "<svg" in page and "<script" not in page and "<link" not in page
    assert not re.search(r"""(src|href)=["']https?:""", page)
    figures = page.split("<figure")[1:]
    # e2e_response quantiles per rate (the only charted view recorded), curve, matrix
    assert len(figures) == 2 + 1 + 1
    for fig in figures:  # every chart: one series per broker, no more
        ids = re.findall(r'id="(series-[a-z0-9-]+)"', fig)
        assert ids and len(ids) == len(set(ids))
        assert {i.split("-")[1] for i in ids} <= set(BROKERS)
    matrix = next(f for f in figures if "series-kafka-0" in f)
    assert {"series-kafka-1", "series-pulsar-0", "series-pulsar-1"} <= set(
        re.findall(r'id="(series-[a-z0-9-]+)"', matrix))
    curve = next(f for f in figures if "acknowledged rate" in f)
    assert all(f'id="series-{b}"' in curve for b in BROKERS)


def test_rerun_of_the_baseline_passes(spark: Any, dirs: dict[str, Path]) -> None:
    code, err = _run(ReportOptions(dirs=[dirs["rerun"]], baseline=[dirs["baseline"]],
                                   fail_on=["e2e_response.p99:+15%", "ack_rate:-10%"],
                                   markdown=dirs["out"] / "rerun.md"))
    assert code == 0, err
    assert "**Regression gate: ok**" in (dirs["out"] / "rerun.md").read_text()


def test_usage_and_input_errors_exit_2(dirs: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    # judged before Spark starts
    assert _run(ReportOptions(dirs=[dirs["rerun"]], fail_on=["e2e_response.p99:+15%"]))[0] == 2
    code, err = _run(ReportOptions(dirs=[dirs["rerun"]], baseline=[dirs["baseline"]],
                                   fail_on=["ack_rate:+10%"]))
    assert code == 2 and "write 'ack_rate:-10%'" in err
    with pytest.raises(SystemExit) as info:
        cli_main(["report"])
    assert info.value.code == 2
    assert "DIR" in capsys.readouterr().err


def test_missing_directory_exits_2(spark: Any, tmp_path: Path) -> None:
    code, err = _run(ReportOptions(dirs=[tmp_path / "nope"]))
    assert code == 2 and "does not exist" in err
