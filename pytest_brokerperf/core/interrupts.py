"""SIGTERM during a scenario run: stop it as Ctrl-C does, with its record written.

Python turns Ctrl-C (SIGINT) into ``KeyboardInterrupt``; SIGTERM (a CI job cancelled,
``timeout``, ``kill``) kills the process without unwinding, so a run in progress would
leave no record. While a scenario runs, :func:`sigterm_interrupts` makes the first
SIGTERM raise :class:`~pytest_brokerperf.core.errors.RunInterrupted` instead: the scenario
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

from pytest_brokerperf.core.errors import RunInterrupted

__all__ = ["redeliver_sigterm", "signals_deferred", "sigterm_interrupts"]

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


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM back while a record is written: one that arrives
    meanwhile is noted and raised again, to the handler it would have met, as soon as
    the block ends, so a record is never left half written by the interrupt itself.

    Python runs signal handlers in the main thread whichever thread the signal reached,
    so swapping the handlers (not the calling thread's signal mask) holds them all.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    held = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in held}
    if any(h is None for h in previous.values()):  # set outside Python: left alone
        yield
        return
    for sig in held:
        signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)


def redeliver_sigterm() -> None:
    """Die of the SIGTERM a run turned into an interrupt (its previous handler runs:
    the default action, or the provisioner's clean-up then the default action)."""
    if _received.is_set():
        _received.clear()
        os.kill(os.getpid(), signal.SIGTERM)
