"""SIGTERM during a scenario run: stop it as Ctrl-C does, with its record written.

Python turns Ctrl-C (SIGINT) into ``KeyboardInterrupt``; SIGTERM (a CI job cancelled,
``timeout``, ``kill``) kills the process without unwinding, so a run in progress would
leave no record. While a scenario runs, :func:`sigterm_interrupts` makes the first
SIGTERM raise :class:`~pytest_brokerperf.errors.RunInterrupted` instead: the scenario
writes its ``interrupted`` record, pytest stops the session as for Ctrl-C (fixtures torn
down, brokers stopped) and, at the very end, :func:`redeliver_sigterm` lets the process
die of the SIGTERM it received, as it would have without the plugin.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from pytest_brokerperf.errors import RunInterrupted

__all__ = ["redeliver_sigterm", "sigterm_interrupts"]

_received = threading.Event()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, the first SIGTERM raises ``RunInterrupted("SIGTERM")`` in the main
    thread; later ones wait for :func:`redeliver_sigterm`. Outside the main thread (where
    Python cannot set handlers) or where SIGTERM is ignored, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        yield
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if _received.is_set():
            return  # the record is being written; the session ends as soon as it can
        _received.set()
        raise RunInterrupted("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def redeliver_sigterm() -> None:
    """Die of the SIGTERM a run turned into an interrupt (its previous handler runs:
    the default action, or the provisioner's clean-up then the default action)."""
    if _received.is_set():
        _received.clear()
        os.kill(os.getpid(), signal.SIGTERM)
