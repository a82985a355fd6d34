#!/usr/bin/env bash
# The project's tests in one command: set up, lint and type-check, then unit, plugin
# and integration tests (integration tests start real local brokers, one at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
PY=${PYTHON:-python3}
"$PY" -m ruff check pytest_brokerperf tests scenarios benchmarks
"$PY" -m mypy
exec "$PY" -m pytest tests "$@"
