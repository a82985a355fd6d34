#!/usr/bin/env bash
# The main job in one command: set up, then run the tail-read smoke scenario on a
# Kafka broker this project starts itself (local JVM process, KRaft, no Docker).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
exec "${PYTHON:-python3}" -m pytest scenarios -m tailread --broker=kafka "$@"
