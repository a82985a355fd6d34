"""``brokerperf report DIR [DIR...]``: run the Spark job, write outputs, judge the gates.

Exit codes: 0 ok, 1 regression, 2 usage or input error, 3 inconclusive (a gated cell
could not be judged: too few baseline runs, no valid result, a cell on one side only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_brokerperf.core.errors import BrokerPerfError, ConfigError
from pytest_brokerperf.report.gates import (
    MIN_BASELINE_RUNS,
    Budget,
    align,
    evaluate,
    gate_tally,
    parse_fail_on,
    same_environment,
)
from pytest_brokerperf.report.model import SETUP_DIMENSIONS
from pytest_brokerperf.report.storage import DEFAULT_STORAGE

__all__ = ["EXIT_INCONCLUSIVE", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "ReportOptions",
           "add_arguments", "run"]

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


@dataclass
class ReportOptions:
    """What to read, what to write, what to judge."""

    dirs: list[Path]
    html: Path | None = None
    markdown: Path | None = None
    csv: Path | None = None
    baseline: list[Path] = field(default_factory=list)
    fail_on: list[str] = field(default_factory=list)
    env: str | None = None
    #: compare with a baseline of another environment label (refused by default)
    across_env: bool = False
    #: the current run's environment label, when the caller knows it (a pytest session)
    current_env: str | None = None
    #: how messages name the options (a pytest session says --brokerperf-...)
    baseline_source: str = "--baseline"
    across_fix: str = "--across-env"
    master: str | None = None
    title: str = "brokerperf report"
    run_id: str | None = None  # only this run's records (the pytest session's report)
    #: set-up dimensions compared across on purpose (``--across-nodes`` …: SETUP_DIMENSIONS)
    across: frozenset[str] = frozenset()
    #: Spark's own log on stderr at its level (else: errors only, into a log file)
    verbose: bool = False
    #: the "Studies" section: None: the studies the input has records of; () none; else
    #: these studies' tables (``--studies``)
    studies: tuple[str, ...] | None = None
    #: ``--studies`` was given: without --markdown/--html the tables go to stdout
    studies_asked: bool = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                   help="result directories (--brokerperf-results of one or more runs, or "
                   "a parent: every results.jsonl under it is read)")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="write the self-contained HTML report here")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="write the Markdown summary here ('-' for stdout)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write one CSV row per cell")
    p.add_argument("--baseline", action="append", default=[], metavar="DIR|RUN",
                   help="baseline result directories, or runs saved in --storage for the "
                   "--env label: a number (0003), a name, last or all (repeatable; at "
                   f"least {MIN_BASELINE_RUNS} runs for a noise floor)")
    p.add_argument("--storage", type=Path, default=Path(DEFAULT_STORAGE), metavar="DIR",
                   help=f"saved runs (default {DEFAULT_STORAGE}, as --brokerperf-storage)")
    p.add_argument("--across-env", action="store_true",
                   help="compare with a baseline of another environment label (refused "
                   "by default)")
    for dim, fields in SETUP_DIMENSIONS.items():
        p.add_argument(f"--across-{dim}", action="append_const", const=dim, dest="across",
                       default=[],
                       help=f"compare with baseline cells of another {' / '.join(fields)} "
                       "(refused by default; the difference is printed)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show Spark's own log (warnings included) on stderr")
    p.add_argument("--fail-on", action="append", default=[], metavar="EXPR",
                   help="budgets, e.g. 'e2e_response.p99:+15%%,ack_rate:-10%%' (needs "
                   "--baseline; repeatable)")
    p.add_argument("--env", metavar="LABEL",
                   help="only cells with this --brokerperf-env label, on both sides")
    p.add_argument("--master", metavar="URL",
                   help="Spark master (default: embedded local[*]; e.g. spark://host:7077)")
    p.add_argument("--run", metavar="RUN_ID", default=None,
                   help="only this run's records of DIR (a results directory several runs "
                   "wrote into)")
    p.add_argument("--title", default="brokerperf report", help="report title")
    p.add_argument("--studies", nargs="?", const="", default=None, metavar="NAMES",
                   help="the published studies' tables with this run's figures in them "
                   "(the report's Studies section): alone, the studies the input has "
                   "records of; all; or names (confluent,streamnative,automq,pulsar-limit). "
                   "Without --markdown or --html the Markdown goes to stdout")


def options_from(args: argparse.Namespace) -> ReportOptions:
    """The command line as options; stored baselines resolved (ConfigError if unknown)."""
    from pytest_brokerperf.report.storage import machine_key, resolve_baseline
    from pytest_brokerperf.report.studies import parse_studies

    studies = parse_studies(args.studies)
    baseline = [d for ref in args.baseline
                for d in resolve_baseline(ref, args.storage, machine_key(args.env or "local"),
                                          source="--baseline")]
    return ReportOptions(dirs=list(args.dirs), html=args.html, markdown=args.markdown,
                         csv=args.csv, baseline=baseline, fail_on=list(args.fail_on),
                         env=args.env, master=args.master, title=args.title,
                         across_env=args.across_env, current_env=args.env,
                         across=frozenset(args.across), verbose=args.verbose,
                         run_id=args.run, studies=studies,
                         studies_asked=args.studies is not None)


def _budgets(opts: ReportOptions) -> list[Budget]:
    if not opts.fail_on:
        return []
    if not opts.baseline:
        raise ConfigError("--fail-on needs --baseline DIR (the runs to compare with)")
    return parse_fail_on(opts.fail_on)


def _write(path: Path, text: str, out: TextIO) -> None:
    if str(path) == "-":
        out.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _require_extra(html: bool) -> None:
    """Say the report extra is missing before anything starts (ImportError)."""
    import importlib

    for name in ("pyspark", *(("matplotlib",) if html else ())):
        importlib.import_module(name)


def run(opts: ReportOptions, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The whole command; returns its exit code (errors are printed, never raised)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    started = None
    failed = True
    try:
        budgets = _budgets(opts)
        _require_extra(opts.html is not None)
        from pytest_brokerperf.report.render import Report, csv_text, html_page, markdown
        from pytest_brokerperf.report.spark import QuietSpark, progress, quick_jit, run_job

        started = QuietSpark(opts.master, verbose=opts.verbose,
                             quick=quick_jit([*opts.dirs, *opts.baseline]))
        with progress("starting Spark", err):
            spark = started.start()
        with progress(f"aggregating {len(opts.dirs)} result director"
                      f"{'y' if len(opts.dirs) == 1 else 'ies'}", err):
            current = run_job(spark, opts.dirs, run_id=opts.run_id)
        baseline = None
        if opts.baseline:
            with progress("aggregating the baseline", err):
                baseline = run_job(spark, opts.baseline)
            envs = {k.env for k in current.cells}
            env = opts.current_env or (envs.pop() if len(envs) == 1 else None)
            if env is None:
                raise ConfigError(f"the input mixes environments {', '.join(sorted(envs))}: "
                                  "choose one with --env to compare with a baseline")
            machines = {m for c in current.cells.values() if c.key.env == env
                        for m in c.machines}
            baseline.cells = same_environment(baseline.cells, env, across=opts.across_env,
                                              source=opts.baseline_source,
                                              fix=opts.across_fix, machines=machines)
        if opts.env is not None:
            for side in (current, baseline):
                if side is not None:
                    side.cells = {k: v for k, v in side.cells.items() if k.env == opts.env}
            if not current.cells:
                raise ConfigError(f"--env {opts.env!r}: no cell of the input has this label")
        report = Report(current=current, baseline=baseline, budgets=budgets, title=opts.title)
        if opts.studies != ():
            report.studies = _studies(spark, opts, current, err)
        if baseline is not None:
            aligned = align(current.cells, baseline.cells, across=opts.across)
            report.aligned = aligned.cells
            report.baseline_of = aligned.sources
            report.comparison_notes = aligned.notes
            if budgets:
                report.gates = evaluate(current.cells, aligned.cells, budgets,
                                        hints=aligned.hints)
        md = markdown(report)
        if opts.markdown:
            _write(opts.markdown, md, out)
        elif opts.studies_asked and opts.html is None:
            from pytest_brokerperf.report.study_render import studies_markdown

            out.write("\n".join(studies_markdown(report.studies)) + "\n")
        if opts.csv:
            _write(opts.csv, csv_text(current), out)
        if opts.html:
            from pytest_brokerperf.report.series import load_history_series, load_series

            with progress("reading per-period series", err):
                report.series = load_series(spark, opts.dirs, run_id=opts.run_id)
                if opts.baseline:
                    report.baseline_series = load_history_series(spark, opts.baseline)
            _write(opts.html, html_page(report), out)
        for w in current.warnings:
            err.write(f"brokerperf report: warning: {w}\n")
        for note in report.comparison_notes:
            err.write(f"brokerperf report: note: {note}\n")
        code = report.exit_code
        if budgets:
            bad = [g for g in report.gates if g.status != "pass"]
            for g in bad:
                err.write(f"brokerperf report: {g.status.upper()}: {g.cell.label()}: "
                          f"{g.message}\n")
            err.write(f"brokerperf report: {gate_tally(report.gates)}: exit {code}\n")
        failed = False
        return code
    except (BrokerPerfError, OSError) as exc:
        err.write(f"brokerperf report: {exc}\n")
        if started is not None and started.log is not None:
            err.write(f"brokerperf report: Spark's log: {started.log}\n")
        return EXIT_USAGE
    except ImportError as exc:
        err.write(f"brokerperf report: {exc}; install the report extra: "
                  "pip install 'pytest-brokerperf[report]'\n")
        return EXIT_USAGE
    finally:
        if started is not None:
            started.stop(keep_log=failed)


def _studies(spark: Any, opts: ReportOptions, current: Any, err: TextIO) -> list[Any]:
    """The Studies section's tables; a study asked for by name is shown even when the
    input has none of its records (every cell then says so). ``--studies`` alone on an
    input without study records is a usage error."""
    from pytest_brokerperf.report.spark import progress
    from pytest_brokerperf.report.studies import load_facts, study_sections

    with progress("reading the study cases' facts", err):
        facts = load_facts(spark, opts.dirs, run_id=opts.run_id)
    if opts.studies_asked and opts.studies is None and not facts:
        raise ConfigError(
            "--studies: the input has no study case's record (params.study); run a "
            "study first, e.g. pytest scenarios -m \"study(name='streamnative')\" "
            "--broker=kafka,pulsar, or name one (--studies=streamnative) to see its "
            "published tables")
    return study_sections(current.cells, facts, opts.studies)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brokerperf report", description=__doc__)
    add_arguments(parser)
    try:
        opts = options_from(parser.parse_args(argv))
    except BrokerPerfError as exc:
        sys.stderr.write(f"brokerperf report: {exc}\n")
        return EXIT_USAGE
    return run(opts)
