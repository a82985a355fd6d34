#!/usr/bin/env bash
# The main job in one command: set up what the smoke needs (ci/setup.sh --smoke: Java,
# Maven, a .venv with the package, the Kafka jars), then run the tail-read smoke scenario
# on a Kafka broker this project starts itself (KRaft; a local JVM process, or a container
# where a Docker engine answers with a Kafka image: --brokerperf-provision=auto).
# Arguments go to pytest: bash ci/smoke.sh --brokerperf-provision=process -q
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh --smoke
# the tail-read smoke scenario alone (one test; the studies' tail-read cases and sweeps,
# also marked tailread, are a run of their own: pytest -m tailread --broker=kafka)
exec .venv/bin/python -m pytest scenarios/test_tailread.py::test_tailread --broker=kafka "$@"
