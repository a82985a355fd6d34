"""The ``brokerperf`` command: run the shipped suite, fetch broker jars, show facts.

    brokerperf smoke [PYTEST ARGS...]   tail-read smoke scenario on a local Kafka
    brokerperf run [PYTEST ARGS...]     the shipped scenario suite with your options
    brokerperf fetch kafka [--version V]  resolve and cache the broker jars
    brokerperf info                     versions, machine, clock and fsync facts (JSON)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _suite_args() -> list[str]:
    """Run the suite from a checkout's scenarios/ when present, else the installed copy."""
    local = Path.cwd() / "scenarios"
    if (local / "test_tailread.py").is_file():
        return [str(local)]
    return ["--pyargs", "pytest_brokerperf.suite"]


def _pytest(args: list[str]) -> int:
    import pytest

    return int(pytest.main(args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="brokerperf", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_smoke = sub.add_parser("smoke", help="tail-read smoke scenario on a local Kafka")
    p_smoke.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_run = sub.add_parser("run", help="the shipped scenario suite (pass pytest options)")
    p_run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p_fetch = sub.add_parser("fetch", help="resolve and cache broker jars")
    p_fetch.add_argument("broker", choices=["kafka"])
    p_fetch.add_argument("--version", default=None)
    sub.add_parser("info", help="versions, machine, clock and fsync facts as JSON")
    args = parser.parse_args(argv)

    if args.command == "smoke":
        return _pytest([*_suite_args(), "-m", "tailread", "--broker=kafka", *args.pytest_args])
    if args.command == "run":
        return _pytest([*_suite_args(), *args.pytest_args])
    if args.command == "fetch":
        from pytest_brokerperf.errors import BrokerPerfError
        from pytest_brokerperf.provision import maven

        try:
            path = maven.resolve_kafka(args.version or maven.KAFKA_DEFAULT_VERSION)
        except BrokerPerfError as exc:
            print(f"brokerperf fetch: {exc}", file=sys.stderr)
            return 2
        print(path)
        return 0
    if args.command == "info":
        from pytest_brokerperf.metrics import sysstats
        from pytest_brokerperf.results import git_sha, library_versions

        with tempfile.TemporaryDirectory() as tmp:
            probe = sysstats.fsync_probe(Path(tmp), n=50)
        print(json.dumps({"libraries": library_versions(), "git_sha": git_sha(),
                          "machine": sysstats.machine_info(), "clock": sysstats.clock_info(),
                          "fsync_probe_tmp": probe}, indent=2, default=str))
        return 0
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2


if __name__ == "__main__":
    sys.exit(main())
