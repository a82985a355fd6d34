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
# Three pytest runs, each with its closing line; the script fails if any fails.
# 1. Unit and plugin tests (mostly the in-process loopback broker): time-bound, not
#    CPU-bound (two thirds of the CPU idle on two workers), so four xdist workers.
# 2. The integration tests: real brokers, one at a time, so serial. They leave about half
#    of the two CPUs idle, so meanwhile
# 3. the report tests (PySpark's JVMs, CPU-bound, no broker and no timing verdict) run
#    beside them under SCHED_IDLE (`chrt --idle 0`): they get only CPU time no broker,
#    generator or test of run 2 wants, so run 2's figures and verdicts see no other load
#    (a runnable normal task preempts an idle-class one at once). Two xdist workers, each
#    on a CPU lane of its own (tests/conftest.py). Their output follows run 2's.
# The slowest tests of each run are listed: where CI time goes, for keeping it short.
status=0
"$PY" -m pytest tests --ignore=tests/integration --ignore=tests/report -n 4 --dist loadgroup \
  --durations=30 \
  "$@" || status=$?
idle=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0); fi
report_log=$(mktemp "${TMPDIR:-/tmp}/brokerperf-report-tests.XXXXXX")
"${idle[@]}" "$PY" -m pytest tests/report -n 2 --durations=15 "$@" >"$report_log" 2>&1 &
report_pid=$!
"$PY" -m pytest tests/integration --durations=40 "$@" || status=$?
report_status=0
wait "$report_pid" || report_status=$?
cat "$report_log"
rm -f "$report_log"
[ "$report_status" -eq 0 ] || status=$report_status
exit "$status"
