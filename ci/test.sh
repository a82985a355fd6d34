#!/usr/bin/env bash
# The project's tests in one command: set up, lint and type-check, then unit, plugin
# and integration tests (integration tests start real local brokers, one at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
# Container mode's tests need a Docker engine and the locally built images: CI provides
# both (dockerd, images cached by content hash); elsewhere those tests skip with the reason.
if [ "${CI:-}" = true ] || [ "${BROKERPERF_CONTAINERS:-}" = 1 ]; then
  bash ci/docker.sh
fi
PY=${PYTHON:-python3}
"$PY" -m ruff check pytest_brokerperf tests scenarios benchmarks
"$PY" -m mypy
# The 60 slowest tests in the log: where CI time goes, for keeping the run short.
exec "$PY" -m pytest tests --durations=60 "$@"
