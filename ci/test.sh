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
# The layers of docs/explanation/architecture.md ([tool.importlinter] in pyproject.toml)
"$PY" -c 'import sys; from importlinter.cli import lint_imports_command as m; sys.exit(m())' \
  --no-cache
# Two pytest runs, each with its closing line; the script fails if either fails.
# 1. Unit, plugin and report tests (mostly the in-process loopback broker), on two xdist
#    workers, each pinned to a CPU of its own (tests/conftest.py): a test's CPU figures
#    (host noise, steal, calibration) see its own lane, never the other worker's load.
#    `--dist loadgroup`: tests marked with one xdist_group share a worker (the local
#    reaper's, tests/unit/test_watchdog.py).
# 2. The integration tests: real brokers, one at a time, so serial.
# The slowest tests of each run are listed: where CI time goes, for keeping it short.
status=0
"$PY" -m pytest tests --ignore=tests/integration -n 2 --dist loadgroup --durations=30 "$@" \
  || status=$?
"$PY" -m pytest tests/integration --durations=40 "$@" || status=$?
exit "$status"
