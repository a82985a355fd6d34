"""What TLS costs: the same tail-read and throughput cases with and without TLS, per broker.

Runs the shipped scenarios through pytest on a local broker (process mode), once with
``--brokerperf-tls`` (the broker's TLS listener, the clients on it; docs/reference/tls.md)
and once without, alternating which side goes first from one repeat to the next so that
drift in the host's load and a warming page cache hit both. Every other setting is the
same on both sides and printed beside the figures. Prints per run the acknowledged rate,
publish and end-to-end response p50/p99 and the verdict (throughput: the ladder's highest
*sustainable* rung, never a rung the consumers did not keep up with), then per broker and
case the medians and what TLS changed. A figure, not a test: on a 2-core host TLS's
handshake and encryption share the cores with the broker and the generator, and the
spread between repeats is large.

The results stay in ``--out`` (``plain/`` and ``tls/``), so the report shows them side by
side, each cell's set-up naming ``tls`` (``brokerperf report OUT/tls --baseline OUT/plain
--across-tls --markdown -`` compares them cell by cell).

    flock /tmp/brokerperf-broker.lock python benchmarks/tls_cost.py \\
        --brokers kafka,rabbitmq [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: the two cases and their settings, the same on both sides
CASES: dict[str, list[str]] = {
    "tailread": ["-m", "tailread", "--brokerperf-rate=2000", "--brokerperf-warmup=10",
                 "--brokerperf-duration=20"],
    "throughput": ["-m", "throughput", "--brokerperf-ladder=2k,5k,10k,20k,40k",
                   "--brokerperf-warmup=5", "--brokerperf-duration=10"],
}
COMMON = ["--brokerperf-provision=process", "--brokerperf-profile=smoke",
          "--brokerperf-inconclusive=warn", "-k", "not study and not sweep and not limit",
          "-p", "no:cacheprovider", "-q"]


def run_once(broker: str, case: str, tls: bool, out: Path, repeat: int) -> dict[str, Any]:
    side = "tls" if tls else "plain"
    results = out / side
    before = _lines(results)
    with tempfile.TemporaryDirectory(prefix=f"bp-tls-{side}-") as tmp:
        cmd = [sys.executable, "-m", "pytest", str(REPO / "scenarios"), f"--broker={broker}",
               f"--brokerperf-results={results}", "--rootdir", tmp, *COMMON, *CASES[case],
               *(["--brokerperf-tls"] if tls else [])]
        run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=1800,
                             check=False)
    new = _lines(results)[len(before):]
    recs = [json.loads(x) for x in new if json.loads(x).get("scenario") == case]
    if not recs:
        raise SystemExit(f"{broker} {case} ({side}) wrote no record:\n{run.stdout[-3000:]}"
                         f"\n{run.stderr[-2000:]}")
    rec = recs[-1]
    lat = rec["latency"]
    top = (rec.get("throughput") or {}).get("highest_sustainable_rate_msg_s")

    def ms(view: str, q: str) -> float | None:
        v = (lat.get(view) or {}).get(f"{q}_us")
        return None if v is None else v / 1000

    return {"broker": broker, "case": case, "side": side, "repeat": repeat,
            "protocol": (rec.get("tls") or {}).get("protocol") or "plaintext",
            "msg_s": top if case == "throughput" else rec["ack_rate_msg_s"],
            "publish_p50_ms": ms("publish_response", "p50"),
            "publish_p99_ms": ms("publish_response", "p99"),
            "e2e_p50_ms": ms("e2e_response", "p50"), "e2e_p99_ms": ms("e2e_response", "p99"),
            "verdict": rec["verdict"]["status"]}


def _lines(results: Path) -> list[str]:
    path = results / "results.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def _fmt(v: object) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.2f}" if isinstance(v, float) else str(v)


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if r[key] is not None]
    return statistics.median(vals) if vals else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="kafka,rabbitmq")
    ap.add_argument("--cases", default="tailread,throughput")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None,
                    help="results directory (default: a new one under /tmp, printed)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bp-tls-cost-"))
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    print(f"settings, both sides: {' '.join(COMMON)}")
    for case in cases:
        print(f"  {case}: {' '.join(CASES[case])}")
    print("  TLS side: --brokerperf-tls (the broker's TLS listener; clients trust the "
          "run's CA, verify the host name)")
    rows: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for broker in brokers:
            for case in cases:
                for tls in ((False, True) if repeat % 2 == 0 else (True, False)):
                    row = run_once(broker, case, tls, out, repeat)
                    rows.append(row)
                    print("  ".join(f"{k}={_fmt(v)}" for k, v in row.items()), flush=True)
    print()
    print(f"{'broker':<9} {'case':<11} {'side':<14} {'msg/s':>9} {'pub p50':>8} "
          f"{'pub p99':>8} {'e2e p50':>8} {'e2e p99':>8}  verdicts")
    for broker in brokers:
        for case in cases:
            med: dict[str, dict[str, float | None]] = {}
            for side in ("plain", "tls"):
                mine = [r for r in rows if (r["broker"], r["case"], r["side"]) == (
                    broker, case, side)]
                med[side] = {k: _median(mine, k) for k in (
                    "msg_s", "publish_p50_ms", "publish_p99_ms", "e2e_p50_ms", "e2e_p99_ms")}
                label = side if side == "plain" else f"tls {mine[0]['protocol']}"
                verdicts = ",".join(sorted({str(r["verdict"]) for r in mine}))
                print(f"{broker:<9} {case:<11} {label:<14} "
                      + " ".join(f"{_fmt(med[side][k]):>8}" for k in med[side])
                      + f"  {verdicts}")
            change = []
            for k in med["plain"]:
                a, b = med["plain"][k], med["tls"][k]
                change.append("n/a" if not a or b is None else f"{(b - a) / a:+.0%}")
            print(f"{broker:<9} {case:<11} {'TLS change':<14} "
                  + " ".join(f"{c:>8}" for c in change))
    print(f"\nresults: {out}/plain and {out}/tls; side by side: brokerperf report "
          f"{out}/tls --baseline {out}/plain --across-tls --markdown -")


if __name__ == "__main__":
    main()
