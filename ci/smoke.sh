#!/usr/bin/env bash
# The main job in one command: set up, then run the tail-read smoke scenario on a
# Kafka broker this project starts itself (KRaft; a local JVM process, or a container
# where a Docker engine answers with a Kafka image: --brokerperf-provision=auto).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# the tail-read smoke scenario alone (the studies' tail-read cases and sweeps, also marked
# tailread, are a run of their own: pytest scenarios -m tailread --broker=kafka)
exec "${PYTHON:-python3}" -m pytest scenarios/test_tailread.py::test_tailread --broker=kafka "$@"
