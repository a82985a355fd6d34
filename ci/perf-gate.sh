#!/usr/bin/env bash
# The performance gate's steps, the same in CI and on a workstation:
#   1. run the smoke matrix (pytest, results under $RESULTS/<run id>/),
#   2. aggregate it with `brokerperf report` against the baseline history in $BASELINE,
#   3. publish the Markdown summary ($GITHUB_STEP_SUMMARY when set) and the HTML page,
#   4. exit with the report's code: 0 ok, 1 regression, 2 usage/input error, 3 inconclusive.
# Environment (all optional):
#   RESULTS      where this run's results go            (default brokerperf-results)
#   BASELINE     earlier runs' results (>= 3 runs)       (default brokerperf-baseline)
#   ENV_LABEL    --brokerperf-env label (machine class)  (default local)
#   FAIL_ON      budgets  (default 'e2e_response.p99:+15%,publish_response.p99:+15%,ack_rate:-10%')
#   REPORT_DIR   where report.html/summary.md/cells.csv go (default brokerperf-report)
#   PYTEST_ARGS  the matrix to run (default: the shipped tail-read smoke on Kafka)
#   SKIP_RUN=1   only report on what $RESULTS already holds
set -uo pipefail
PY=${PYTHON:-python3}
RESULTS=${RESULTS:-brokerperf-results}
BASELINE=${BASELINE:-brokerperf-baseline}
ENV_LABEL=${ENV_LABEL:-local}
FAIL_ON=${FAIL_ON:-e2e_response.p99:+15%,publish_response.p99:+15%,ack_rate:-10%}
REPORT_DIR=${REPORT_DIR:-brokerperf-report}
mkdir -p "$REPORT_DIR"

if [ "${SKIP_RUN:-0}" != 1 ]; then
  # a failed scenario (SLO, INCONCLUSIVE) is the report's business, not this step's
  # shellcheck disable=SC2086
  "$PY" -m pytest ${PYTEST_ARGS:-scenarios -m tailread --broker=kafka} \
    --brokerperf-results="$RESULTS" --brokerperf-env="$ENV_LABEL" || true
fi

args=("$RESULTS" --env "$ENV_LABEL" --html "$REPORT_DIR/report.html"
      --markdown "$REPORT_DIR/summary.md" --csv "$REPORT_DIR/cells.csv")
if [ -d "$BASELINE" ] && [ -n "$(find "$BASELINE" -name results.jsonl -print -quit)" ]; then
  args+=(--baseline "$BASELINE" --fail-on "$FAIL_ON")
else
  echo "perf-gate: no baseline in $BASELINE yet: reporting without a gate" >&2
fi
"$PY" -m pytest_brokerperf.cli report "${args[@]}"
code=$?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$REPORT_DIR/summary.md" ]; then
  cat "$REPORT_DIR/summary.md" >> "$GITHUB_STEP_SUMMARY"
fi
echo "perf-gate: brokerperf report exited $code" >&2
exit $code
