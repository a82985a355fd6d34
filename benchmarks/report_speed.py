"""How long the Spark report job takes on many realistic records (a figure, not a test).

    python benchmarks/report_speed.py [--records 100000] [--master local[2]] [--dir DIR]

Writes N synthetic records (3 latency views with real histograms at the recorded 3-digit
precision, about a thousand non-empty buckets in all, plus the HdrHistogram blobs a
record carries) over 8 brokers × scenarios × 20 runs, then times the aggregation in
Spark local mode (session start-up reported apart) and prints the figures with the
machine's CPU model and core count.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.support.records import (
    SyntheticRun,
    latency_block_from_samples,
    synthetic_record,
)

TEMPLATES = 40


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_records(path: Path, n: int) -> tuple[int, int]:
    """``n`` records into ``path``; returns (bytes written, mean non-empty buckets)."""
    rng = np.random.default_rng(7)
    blocks = []
    buckets = []
    for i in range(TEMPLATES):
        scale = 500 * (1 + i % 7)
        # a few hundred samples per view: about a thousand non-empty buckets in all
        samples = {
            "publish_response": rng.lognormal(np.log(scale), 0.35, 500).astype(np.int64),
            "e2e_response": rng.lognormal(np.log(scale * 2), 0.3, 500).astype(np.int64),
            "publish_delay": rng.lognormal(np.log(400), 0.5, 500).astype(np.int64),
        }
        block = latency_block_from_samples(samples)
        buckets.append(sum(len(block[v]["sparse"]) for v in samples))
        blocks.append(block)
    brokers = ("kafka", "pulsar", "rabbitmq", "tansu")
    with open(path, "w", encoding="utf-8") as fh:
        for k in range(n):
            broker = brokers[k % len(brokers)]
            run = SyntheticRun(run_id=f"2026{(k // 5000) % 20:04d}-000000-bench0",
                               test_id=f"bench.py::test[{broker}-{k}]", broker=broker,
                               params={**SyntheticRun().params, "rate": 1000.0 * (1 + k % 2)},
                               ack_rate=1000.0 + k % 13)
            rec = synthetic_record(run, {}, latency=blocks[k % TEMPLATES])
            fh.write(json.dumps(rec, allow_nan=False) + "\n")
    return path.stat().st_size, int(np.mean(buckets))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where to write the records (default: a temporary directory)")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="brokerperf-report-bench-"))
    try:
        t0 = time.monotonic()
        size, buckets = write_records(root / "results.jsonl", args.records)
        print(f"wrote {args.records:,} records ({size / 2**20:,.0f} MiB, ~{buckets} non-empty "
              f"buckets per record over 3 views) in {time.monotonic() - t0:.1f} s")
        from pytest_brokerperf.report.spark import run_job, spark_session

        t0 = time.monotonic()
        spark = spark_session(args.master)
        start = time.monotonic() - t0
        t0 = time.monotonic()
        result = run_job(spark, [root])
        took = time.monotonic() - t0
        spark.stop()
        print(f"Spark {spark.version} {args.master}: session start {start:.1f} s, aggregation "
              f"of {result.records_read:,} records into {len(result.cells)} cells: "
              f"{took:.1f} s ({result.records_read / took:,.0f} records/s)")
        print(f"machine: {_cpu_model()}, {os.cpu_count()} logical CPUs, load average "
              f"{os.getloadavg()[0]:.1f} at the end")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
