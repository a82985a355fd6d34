#!/usr/bin/env bash
# The performance gate's steps, the same in CI and on a workstation:
#   1. run the smoke (pytest, this run's records into $RESULTS under run id $RUN_ID),
#   2. aggregate this run with `brokerperf report` against the baseline history in
#      $BASELINE (one directory per earlier run),
#   3. publish the Markdown summary ($GITHUB_STEP_SUMMARY when set) and the HTML page,
#   4. exit with the report's code: 0 ok, 1 regression, 2 usage/input error, 3 inconclusive.
# Adding this run to the history is a step of its own (`history` below), so a workflow
# can add every run that measured something, whatever the gate said.
#
#   bash ci/perf-gate.sh            run, report, gate
#   bash ci/perf-gate.sh history    add this run ($RUN_ID) to $BASELINE, keep $KEEP runs
#
# Environment (all optional):
#   RESULTS      where this run's results go            (default brokerperf-results)
#   BASELINE     the history: earlier runs, one dir each (default brokerperf-baseline)
#   ENV_LABEL    --brokerperf-env label (machine class)  (default local)
#   FAIL_ON      budgets  (default 'e2e_response.p99:+15%,publish_response.p99:+15%,ack_rate:-10%')
#   REPORT_DIR   where report.html/summary.md/cells.csv go (default brokerperf-report)
#   PYTEST_ARGS  what to run (default: the tail-read smoke on Kafka, as ci/smoke.sh)
#   RUN_ID       this run's id (default: BROKERPERF_RUN_ID, else made here; a file
#                $REPORT_DIR/run-id keeps it for the history step)
#   KEEP         runs the history keeps (default 20)
#   SKIP_RUN=1   only report on what $RESULTS already holds for $RUN_ID
set -uo pipefail
PY=${PYTHON:-python3}
RESULTS=${RESULTS:-brokerperf-results}
BASELINE=${BASELINE:-brokerperf-baseline}
ENV_LABEL=${ENV_LABEL:-local}
FAIL_ON=${FAIL_ON:-e2e_response.p99:+15%,publish_response.p99:+15%,ack_rate:-10%}
REPORT_DIR=${REPORT_DIR:-brokerperf-report}
KEEP=${KEEP:-20}
mkdir -p "$REPORT_DIR"

if [ "${1:-}" = history ]; then
  RUN_ID=${RUN_ID:-$(cat "$REPORT_DIR/run-id" 2>/dev/null || true)}
  if [ -z "$RUN_ID" ]; then
    echo "perf-gate: no run id (RUN_ID, or $REPORT_DIR/run-id from the gate step)" >&2
    exit 2
  fi
  exec "$PY" -m pytest_brokerperf.report.history append --history "$BASELINE" \
    --results "$RESULTS" --run "$RUN_ID" --keep "$KEEP"
fi

RUN_ID=${RUN_ID:-${BROKERPERF_RUN_ID:-$(date -u +%Y%m%d-%H%M%S)-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}}
echo "$RUN_ID" > "$REPORT_DIR/run-id"
if [ "${SKIP_RUN:-0}" != 1 ]; then
  # a failed scenario (SLO, INCONCLUSIVE) is the report's business, not this step's
  # shellcheck disable=SC2086
  BROKERPERF_RUN_ID=$RUN_ID "$PY" -m pytest \
    ${PYTEST_ARGS:-scenarios/test_tailread.py::test_tailread --broker=kafka} \
    --brokerperf-results="$RESULTS" --brokerperf-env="$ENV_LABEL" || true
fi

args=("$RESULTS" --run "$RUN_ID" --env "$ENV_LABEL" --html "$REPORT_DIR/report.html"
      --markdown "$REPORT_DIR/summary.md" --csv "$REPORT_DIR/cells.csv")
if [ -d "$BASELINE" ] && [ -n "$(find "$BASELINE" -name results.jsonl -print -quit)" ]; then
  runs=$("$PY" -m pytest_brokerperf.report.history list --history "$BASELINE" | wc -l)
  echo "perf-gate: baseline history $BASELINE holds $runs run(s)" >&2
  args+=(--baseline "$BASELINE" --fail-on "$FAIL_ON")
else
  echo "perf-gate: no baseline in $BASELINE yet: reporting without a gate" >&2
fi
"$PY" -m pytest_brokerperf.plugin.cli report "${args[@]}"
code=$?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$REPORT_DIR/summary.md" ]; then
  cat "$REPORT_DIR/summary.md" >> "$GITHUB_STEP_SUMMARY"
fi
echo "perf-gate: brokerperf report exited $code" >&2
exit $code
