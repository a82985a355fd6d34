"""The ``brokerperf`` command: run the shipped suite, fetch broker jars, show facts.

    brokerperf smoke [PYTEST ARGS...]   the tail-read smoke scenario (one test) on Kafka
    brokerperf run [PYTEST ARGS...]     the shipped scenario suite with your options
    brokerperf fetch kafka [--version V]  resolve and cache the broker jars
    brokerperf info                     versions, machine, clock and fsync facts (JSON)
    brokerperf report DIR [DIR...] [--html F] [--markdown F] [--csv F]
                      [--baseline DIR --fail-on EXPR] [--studies[=NAMES]]
                                        aggregate results with Spark, gate regressions,
                                        the studies' tables beside ours
    brokerperf cleanup --prefix P --older-than D --bootstrap HOST:PORT [--config PATH]
                                        delete topics and groups crashed runs left
    brokerperf cleanup --local [--all] [--dry-run]
                                        stop local brokers and workers of crashed runs,
                                        remove their data directories
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


#: The smoke: the plain tail-read scenario alone (what ci/smoke.sh runs), not the
#: tail-read studies and sweeps, which are a run of their own (``brokerperf run -m tailread``).
SMOKE_TEST = "test_tailread.py::test_tailread"

#: The help's first line: plain text (the docstring's reStructuredText stays in the docs).
DESCRIPTION = "brokerperf: run the shipped scenario suite, fetch broker jars, show facts."

#: Commands whose arguments all go to pytest, unparsed (``brokerperf run -m catchup``).
PYTEST_COMMANDS = ("smoke", "run")


def _suite_dir() -> Path | None:
    """A checkout's ``scenarios/`` in the working directory, else None (installed copy)."""
    local = Path.cwd() / "scenarios"
    return local if (local / "test_tailread.py").is_file() else None


def pytest_argv(command: str, args: Sequence[str]) -> list[str]:
    """The pytest arguments ``brokerperf smoke|run ARGS`` stand for.

    Every argument goes to pytest as given (``--brokerperf-provision=process``, ``-q``,
    ``-m catchup``); one leading ``--`` is dropped, so ``brokerperf smoke -- -q`` works too.
    The suite is a checkout's ``scenarios/`` when the working directory has one, else the
    installed copy (``--pyargs pytest_brokerperf.suite``).
    """
    rest = list(args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    local = _suite_dir()
    if command == "smoke":
        target = (str(local / SMOKE_TEST) if local is not None
                  else "pytest_brokerperf.suite." + SMOKE_TEST.replace(".py::", "::"))
        head = [target] if local is not None else ["--pyargs", target]
        return [*head, "--broker=kafka", *rest]
    head = [str(local)] if local is not None else ["--pyargs", "pytest_brokerperf.suite"]
    return [*head, *rest]


def _exec_pytest(args: list[str]) -> int:
    """Replace this process with ``python -m pytest ARGS``.

    A fresh interpreter, not ``pytest.main()`` here: this module has already imported
    ``pytest_brokerperf``, so pytest could not rewrite the plugin's asserts and would warn
    (``PytestAssertRewriteWarning: Module already imported``) on every run. ``exec`` keeps
    the exit code and Ctrl-C as pytest's own.
    """
    argv = [sys.executable, "-m", "pytest", *args]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover  (execv does not return)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] and args_in[0] in PYTEST_COMMANDS:
        # pytest's options are pytest's to parse (argparse would refuse `--brokerperf-*`)
        return _exec_pytest(pytest_argv(args_in[0], args_in[1:]))
    parser = argparse.ArgumentParser(
        prog="brokerperf", description=DESCRIPTION,
        epilog="smoke and run hand every argument after them to pytest, e.g. "
        "brokerperf smoke --brokerperf-provision=process -q; "
        "brokerperf run -m catchup --broker=kafka; "
        "brokerperf run --help shows pytest's help with every --brokerperf-* option.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("smoke", help="the tail-read smoke scenario alone (one test, ~1 minute) "
                   "on a Kafka broker it starts; PYTEST ARGS follow")
    sub.add_parser("run", help="the shipped scenario suite; PYTEST ARGS follow (e.g. -m "
                   "catchup --broker=kafka)")
    p_fetch = sub.add_parser("fetch", help="resolve and cache broker jars")
    p_fetch.add_argument("broker", choices=["kafka"])
    p_fetch.add_argument("--version", default=None)
    sub.add_parser("info", help="versions, machine, clock and fsync facts as JSON")
    p_report = sub.add_parser(
        "report", help="aggregate result directories with Spark; charts, summary, gates",
        description="Aggregate results.jsonl records with PySpark into Markdown, CSV and "
        "HTML, and gate regressions against a baseline. Exit codes: 0 ok, 1 regression, "
        "2 usage or input error, 3 inconclusive.")
    from pytest_brokerperf.report.command import add_arguments

    add_arguments(p_report)
    p_clean = sub.add_parser(
        "cleanup", help="delete what crashed runs left: Kafka topics and groups, or "
        "(--local) local broker processes and data",
        description="Delete topics and empty consumer groups whose names start with PREFIX "
        "and embed a run id older than --older-than (names without a run id are kept). "
        "With --local: stop the local broker and worker processes of runs whose pytest "
        "process is gone (found by pid and their BROKERPERF_LOCAL_OWNER tag, never by "
        "name; live runs are left alone) and remove their data directories. Only the runs "
        "of this BROKERPERF_CACHE_DIR are reaped; --all reaps every run whose owner is gone.")
    p_clean.add_argument("--local", action="store_true",
                         help="clean up local processes and data dirs of crashed runs")
    p_clean.add_argument("--all", action="store_true", dest="all_runs",
                         help="with --local: also the crashed runs of other cache dirs "
                         "(BROKERPERF_CACHE_DIR) on this machine")
    p_clean.add_argument("--prefix",
                         help="name prefix, e.g. bp-<owner>- (at least 3 characters)")
    p_clean.add_argument("--older-than", metavar="AGE",
                         help="minimum age from the run id in the name: 30m, 12h, 2d, 1w")
    p_clean.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                         default=os.environ.get("BROKERPERF_KAFKA_BOOTSTRAP") or None,
                         help="the cluster's bootstrap servers (default: "
                         "$BROKERPERF_KAFKA_BOOTSTRAP)")
    p_clean.add_argument("--config", type=Path, metavar="PATH",
                         default=os.environ.get("BROKERPERF_KAFKA_CONFIG") or None,
                         help="client properties file (TLS, SASL), as --kafka-config "
                         "(default: $BROKERPERF_KAFKA_CONFIG)")
    p_clean.add_argument("--dry-run", action="store_true",
                         help="list what would be deleted, delete nothing")
    args = parser.parse_args(argv)

    if args.command == "fetch":
        from pytest_brokerperf.brokers.provision import maven
        from pytest_brokerperf.core.errors import BrokerPerfError

        try:
            path = maven.resolve_kafka(args.version or maven.KAFKA_DEFAULT_VERSION)
        except BrokerPerfError as exc:
            print(f"brokerperf fetch: {exc}", file=sys.stderr)
            return 2
        print(path)
        return 0
    if args.command == "info":
        from pytest_brokerperf.metrics import sysstats
        from pytest_brokerperf.results.record import git_sha, library_versions

        with tempfile.TemporaryDirectory() as tmp:
            probe = sysstats.fsync_probe(Path(tmp), n=50)
        print(json.dumps({"libraries": library_versions(), "git_sha": git_sha(),
                          "machine": sysstats.machine_info(), "clock": sysstats.clock_info(),
                          "fsync_probe_tmp": probe}, indent=2, default=str))
        return 0
    if args.command == "report":
        from pytest_brokerperf.core.errors import BrokerPerfError
        from pytest_brokerperf.report.command import EXIT_USAGE, options_from, run

        try:
            opts = options_from(args)
        except BrokerPerfError as exc:  # a baseline that names no directory or stored run
            print(f"brokerperf report: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return run(opts)
    if args.command == "cleanup" and args.local:
        return _cleanup_local(dry_run=args.dry_run, all_runs=args.all_runs)
    if args.command == "cleanup":
        from pytest_brokerperf.brokers.kafka.cleanup import cleanup, parse_age
        from pytest_brokerperf.core.errors import ConfigError

        missing = [flag for flag, value in (("--prefix", args.prefix),
                                            ("--older-than", args.older_than)) if not value]
        if missing:
            print(f"brokerperf cleanup: give {' and '.join(missing)} (or --local for local "
                  "processes of crashed runs)", file=sys.stderr)
            return 2
        if not args.bootstrap:
            print("brokerperf cleanup: give the cluster with --bootstrap HOST:PORT (or "
                  "BROKERPERF_KAFKA_BOOTSTRAP)", file=sys.stderr)
            return 2
        try:
            return cleanup(bootstrap=args.bootstrap, prefix=args.prefix,
                           older_than_s=parse_age(args.older_than), config=args.config,
                           dry_run=args.dry_run)
        except ConfigError as exc:
            print(f"brokerperf cleanup: {exc}", file=sys.stderr)
            return 2
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2


def _cleanup_local(*, dry_run: bool, all_runs: bool = False) -> int:
    from pytest_brokerperf.brokers.provision.watchdog import cleanup_local, state_dir

    report = cleanup_local(dry_run=dry_run, all_runs=all_runs)
    for line in report.lines:
        print(line)
    if not report.lines:
        print(f"no local leftovers (state files in {state_dir()})")
    if not dry_run:
        print(f"stopped {len(report.stopped)} process(es), removed "
              f"{len(report.removed)} data dir(s); {len(report.live)} live run(s) left alone"
              + (f"; {len(report.foreign)} run(s) of other cache dirs left alone (--all "
                 "reaps them)" if report.foreign else ""))
    _cleanup_containers(dry_run=dry_run)
    return 0


def _cleanup_containers(*, dry_run: bool) -> None:
    """Containers and networks of crashed container-mode sessions (by label), when a
    Docker engine answers."""
    from pytest_brokerperf.brokers.provision import containers

    engine = containers.engine_status()
    if not engine.answers:
        print(f"containers: no Docker engine answers at {engine.address}; nothing to check")
        return
    client = containers.docker_client()
    try:
        names = containers.remove_orphans(client, dry_run=dry_run)
    finally:
        client.close()
    verb = "would remove" if dry_run else "removed"
    for name in names:
        print(f"containers: {verb} {name} (its pytest process is gone)")
    if not names:
        print("containers: no leftovers of crashed sessions")


if __name__ == "__main__":
    sys.exit(main())
