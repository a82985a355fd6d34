"""Start-up time of one Kafka node: local process versus container, same machine.

Starts a single KRaft node ``--repeats`` times in each mode (alternating, so drift in
the host's load hits both) and prints seconds from the start call until the Admin API
answers from the host (the ``startup_s`` both provisioners record), then the median
per mode. Needs a Docker engine and the local image (``bash ci/docker.sh``).

    flock /tmp/brokerperf-broker.lock python benchmarks/container_startup.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pytest_brokerperf.brokers.kafka.container import KafkaContainerCluster
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION


def start_once(mode: str, workdir: Path) -> float:
    began = time.monotonic()
    cluster: KafkaProcessCluster | KafkaContainerCluster
    if mode == "process":
        cluster = KafkaProcessCluster(nodes=1, workdir=workdir)
    else:
        cluster = KafkaContainerCluster(version=KAFKA_DEFAULT_VERSION, workdir=workdir,
                                        run_id="bench-startup")
    try:
        cluster.start()
        return time.monotonic() - began
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"process": [], "container": []}
    with tempfile.TemporaryDirectory(prefix="bp-startup-") as tmp:
        for i in range(args.repeats):
            for mode in figures:
                seconds = start_once(mode, Path(tmp) / f"{mode}-{i}")
                figures[mode].append(seconds)
                print(f"{mode:9s} run {i + 1}: {seconds:6.1f} s", flush=True)
    for mode, values in figures.items():
        print(f"{mode:9s} median {statistics.median(values):6.1f} s "
              f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})")


if __name__ == "__main__":
    main()
