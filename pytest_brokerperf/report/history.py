"""A CI job's baseline history: one directory per run, appended, never overwritten.

The performance gate (``ci/perf-gate.sh``, ``ci/github/perf-gate.yml``) keeps the runs
it judges against in one directory, restored from and saved to the CI cache::

    <history>/<run id>/results.jsonl      one run's records, as it wrote them

``append`` copies one run's records from a results directory into ``<history>/<run
id>/`` (the same run appended twice is written once) and prunes the history to its
newest ``keep`` runs — by run id, which sorts by time (``YYYYmmdd-HHMMSS-<hex>``).
Nothing else in the history is touched, so runs accumulate from job to job and the
gate's noise floor (at least 3 runs) is learnt. A run that measured nothing (no record)
adds nothing. ``brokerperf report --baseline <history>`` reads every run under it.

    python -m pytest_brokerperf.report.history append --history H --results R [--run ID]
    python -m pytest_brokerperf.report.history list --history H
    python -m pytest_brokerperf.report.history measured --results R --run ID
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_KEEP", "Appended", "append_run", "history_runs", "main"]

#: Runs kept by default: enough for a noise floor (3) with room for a few bad runs.
DEFAULT_KEEP = 20
_RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]+$")


@dataclass(frozen=True)
class Appended:
    """What ``append_run`` did."""

    run_ids: tuple[str, ...]  # runs written (empty: nothing measured)
    records: int
    pruned: tuple[str, ...]  # runs removed to keep the newest ``keep``
    kept: int  # runs in the history afterwards


def history_runs(history: Path) -> list[str]:
    """The run ids in the history, oldest first."""
    if not history.is_dir():
        return []
    return sorted(p.name for p in history.iterdir()
                  if p.is_dir() and _RUN_ID.match(p.name) and (p / "results.jsonl").is_file())


def _records_by_run(results: Path, run_id: str | None) -> dict[str, list[str]]:
    """The complete record lines of ``results`` (a results.jsonl, or the directory
    holding it), per run id; torn lines (a killed writer) are left out."""
    path = results / "results.jsonl" if results.is_dir() else results
    runs: dict[str, list[str]] = {}
    if not path.is_file():
        return runs
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        rid = rec.get("run_id") if isinstance(rec, dict) else None
        if not isinstance(rid, str) or not _RUN_ID.match(rid):
            continue
        if run_id is None or rid == run_id:
            runs.setdefault(rid, []).append(line)
    return runs


def append_run(history: Path, results: Path, *, run_id: str | None = None,
               keep: int = DEFAULT_KEEP) -> Appended:
    """Copy the records of ``run_id`` (default: every run in ``results``) into the
    history, one directory per run, then keep its newest ``keep`` runs."""
    if keep < 3:
        raise ValueError(f"keep={keep}: a noise floor needs at least 3 runs")
    runs = _records_by_run(results, run_id)
    written = 0
    for rid, lines in sorted(runs.items()):
        target = history / rid
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / "results.jsonl.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(target / "results.jsonl")  # a rerun of the same run replaces it
        written += len(lines)
    present = history_runs(history)
    pruned = present[:-keep] if len(present) > keep else []
    for rid in pruned:
        shutil.rmtree(history / rid)
    return Appended(tuple(sorted(runs)), written, tuple(pruned), len(present) - len(pruned))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_brokerperf.report.history",
                                     description=__doc__.splitlines()[0] if __doc__ else "")
    sub = parser.add_subparsers(dest="command", required=True)
    p_add = sub.add_parser("append", help="add a run's records to the history and prune it")
    p_add.add_argument("--history", type=Path, required=True, help="the history directory")
    p_add.add_argument("--results", type=Path, required=True,
                       help="the run's --brokerperf-results directory (or its results.jsonl)")
    p_add.add_argument("--run", default=None, metavar="RUN_ID",
                       help="only this run's records (default: every run in --results)")
    p_add.add_argument("--keep", type=int, default=DEFAULT_KEEP,
                       help=f"newest runs to keep (default {DEFAULT_KEEP}, at least 3)")
    p_list = sub.add_parser("list", help="the runs in the history, oldest first")
    p_list.add_argument("--history", type=Path, required=True)
    p_has = sub.add_parser("measured", help="exit 0 when --results holds a record of "
                           "--run (the run measured something), else 1")
    p_has.add_argument("--results", type=Path, required=True)
    p_has.add_argument("--run", required=True, metavar="RUN_ID")
    args = parser.parse_args(argv)
    if args.command == "measured":
        return 0 if _records_by_run(args.results, args.run) else 1
    if args.command == "list":
        for rid in history_runs(args.history):
            print(rid)
        return 0
    try:
        done = append_run(args.history, args.results, run_id=args.run, keep=args.keep)
    except ValueError as exc:
        print(f"history: --keep: {exc}", file=sys.stderr)
        return 2
    if not done.run_ids:
        print(f"history: {args.results} holds no record"
              + (f" of run {args.run}" if args.run else "")
              + f": nothing measured, nothing added; {done.kept} run(s) in {args.history}",
              file=sys.stderr)
        return 0
    print(f"history: added run {', '.join(done.run_ids)} ({done.records} record(s)); "
          + (f"pruned {', '.join(done.pruned)}; " if done.pruned else "")
          + f"{done.kept} run(s) in {args.history}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover - the CLI
    raise SystemExit(main())
