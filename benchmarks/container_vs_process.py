"""The tail-read smoke scenario in process mode and in container mode, side by side.

Runs ``pytest scenarios -m tailread --broker=B`` with ``--brokerperf-provision=process``
and ``=container`` alternately (so drift in the host's load hits both), ``--repeats``
times each, and prints per run: the broker's start-up seconds, the acknowledged rate,
publish and end-to-end response p50/p99/p99.9 and the verdict; then the medians per mode.
A figure, not a test: on a 2-core host the run-to-run spread of p99 is large (see
docs/reference/containers.md). Needs a Docker engine and the local images
(``bash ci/docker.sh``).

    flock /tmp/brokerperf-broker.lock python benchmarks/container_vs_process.py \\
        --broker rabbitmq [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(broker: str, mode: str, extra: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"bp-{mode}-") as tmp:
        results = Path(tmp) / "res"
        subprocess.run(
            [sys.executable, "-m", "pytest", str(REPO / "scenarios"), "-m", "tailread",
             f"--broker={broker}", f"--brokerperf-provision={mode}",
             f"--brokerperf-results={results}", "-q", "-p", "no:cacheprovider",
             "--rootdir", tmp, *extra],
            cwd=tmp, capture_output=True, text=True, timeout=900, check=False)
        lines = (results / "results.jsonl").read_text().splitlines()
        rec = json.loads(lines[-1])
    lat = rec["latency"]
    return {
        "mode": mode,
        "startup_s": rec["manifest"]["broker"]["info"].get("startup_s"),
        "ack_rate": rec["ack_rate_msg_s"],
        **{f"{view}.{q}_ms": (lat[view][f"{q}_us"] or 0) / 1000
           for view in ("publish_response", "e2e_response") for q in ("p50", "p99", "p999")},
        "verdict": rec["verdict"]["status"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", default="kafka", choices=("kafka", "rabbitmq", "pulsar"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("extra", nargs="*", help="more pytest options, after --")
    args = ap.parse_args()
    rows = []
    for _ in range(args.repeats):
        for mode in ("process", "container"):
            row = run_once(args.broker, mode, args.extra)
            rows.append(row)
            print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                            for k, v in row.items()), flush=True)
    for mode in ("process", "container"):
        mine = [r for r in rows if r["mode"] == mode]
        med = {k: statistics.median(float(r[k]) for r in mine)  # type: ignore[arg-type]
               for k in mine[0] if k not in ("mode", "verdict")}
        print(f"median {args.broker} {mode}: " + "  ".join(f"{k}={v:.3f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
