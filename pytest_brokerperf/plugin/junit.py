"""JUnit XML that tells the truth when a session stops early (issue 24 item 8).

CI systems read the ``--junitxml`` file, not the exit code. pytest writes no test case
when a session stops before or inside a test's setup, so on its own:

* a usage error (exit 4) found while pytest configures writes no file at all;
* one found later (the pre-start check, a remote cluster that does not answer, which
  the ``broker`` fixture ends with ``pytest.exit``) writes ``tests=0 failures=0``;
* Ctrl-C in a test's call writes a ``<testcase>`` with no name (its setup passed, its
  call report never came).

Each is turned into a named, failed test case that quotes the message the terminal
showed: the test that was running, or ``pytest-brokerperf::session`` when none was.
The message is the one the terminal printed, which never holds a secret
(:mod:`pytest_brokerperf.core.redaction`).
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = ["SESSION_TESTCASE", "note_failure", "record_stop", "track_test", "write_early_xml"]

#: the test case that carries a failure no test of the session owns
SESSION_TESTCASE: Final = "pytest-brokerperf::session"

_STOP_KEY = pytest.StashKey[str]()
_CURRENT_KEY = pytest.StashKey[tuple[str, tuple[str, int | None, str]]]()


def note_failure(config: pytest.Config, message: str) -> str:
    """Remember why the session is about to stop (a usage error), for the XML; returns it."""
    config.stash[_STOP_KEY] = message
    return message


def track_test(config: pytest.Config, nodeid: str,
               location: tuple[str, int | None, str]) -> None:
    """The test now running (``pytest_runtest_logstart``)."""
    config.stash[_CURRENT_KEY] = (nodeid, location)


def _xml(config: pytest.Config) -> Any:
    from _pytest.junitxml import xml_key

    return config.stash.get(xml_key, None)


def _fail(xml: Any, nodeid: str, location: tuple[str, int | None, str], message: str) -> None:
    """Add (or complete) the test case of ``nodeid`` as failed with ``message``."""
    from _pytest.reports import TestReport

    xml.pytest_runtest_logreport(TestReport(
        nodeid=nodeid, location=location, keywords={}, outcome="failed", longrepr=message,
        when="call"))
    xml.pytest_runtest_logreport(TestReport(
        nodeid=nodeid, location=location, keywords={}, outcome="passed", longrepr=None,
        when="teardown"))


def record_stop(session: pytest.Session, exitstatus: int) -> None:
    """At session finish, before pytest writes the XML: a failed test case for a usage
    error or an interrupt no test case shows."""
    config = session.config
    xml = _xml(config)
    if xml is None or exitstatus not in (pytest.ExitCode.USAGE_ERROR,
                                         pytest.ExitCode.INTERRUPTED):
        return
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    message = config.stash.get(_STOP_KEY, None) or (
        "the session was interrupted (Ctrl-C, SIGINT or SIGTERM) before this test finished"
        if interrupted else
        "pytest-brokerperf stopped the session with a usage error (exit 4); see the "
        "terminal output")
    nameless = [key for key, rep in xml.node_reporters.items() if "name" not in rep.attrs]
    current = config.stash.get(_CURRENT_KEY, None)
    if nameless:
        for nodeid, _ in nameless:
            where = current[1] if current and current[0] == nodeid else (nodeid, None, nodeid)
            _fail(xml, nodeid, where, message)
        return
    if current is not None and not _reported(xml, current[0]):
        _fail(xml, current[0], current[1], message)
    else:
        _fail(xml, SESSION_TESTCASE, ("pytest-brokerperf", None, "session"), message)


def _reported(xml: Any, nodeid: str) -> bool:
    """Whether a finished test case of ``nodeid`` is already in the XML."""
    for reporter in getattr(xml, "node_reporters_ordered", []):
        if getattr(reporter, "id", None) == nodeid and "name" in reporter.attrs:
            return True
    return False


def write_early_xml(config: pytest.Config, message: str) -> None:
    """A usage error while pytest configures: pytest writes no XML then, so write one."""
    path = getattr(config.option, "xmlpath", None)
    if not path or getattr(config.option, "help", False):
        return
    target = Path(os.path.expanduser(os.path.expandvars(path))).absolute()
    text = html.escape(message, quote=True)
    suite = getattr(config.option, "junit_suite_name", None) or config.getini(
        "junit_suite_name") or "pytest"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
            f'<testsuite name="{html.escape(str(suite))}" errors="0" failures="1" '
            'skipped="0" tests="1" time="0">'
            '<testcase classname="pytest-brokerperf" name="session" time="0">'
            f'<failure message="{text}">{text}</failure></testcase></testsuite>'
            "</testsuites>", encoding="utf-8")
    except OSError:
        pass  # the usage error itself is what the user must see
