"""librdkafka's log lines: kept for the artefacts, rate-limited on the terminal.

Left alone, librdkafka writes every line to the process's stderr: a broker that went
away makes each client print a "Connection refused" line per retry (about a thousand
lines in a minute). Handed a Python logger instead (confluent-kafka's ``logger``
setting, served by ``poll()``), the lines go to ``client-stats.jsonl`` in the run's
artefacts (the first :data:`MAX_KEPT` of each worker process, with the total) and the
terminal sees at most one line per :data:`TERMINAL_EVERY_S` per process.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time

__all__ = ["MAX_KEPT", "TERMINAL_EVERY_S", "client_logger", "take_log_doc"]

MAX_KEPT = 2000
TERMINAL_EVERY_S = 30.0


class _KeepAndThrottle(logging.Handler):
    """Keeps the first lines, counts them all, and shows one now and then."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.kept: list[str] = []
        self.total = 0
        self.shown = 0
        self._last_shown = -TERMINAL_EVERY_S
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a log line must never break a client
            return
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        line = f"{stamp} {record.levelname} {text}"
        now = time.monotonic()
        with self._guard:
            self.total += 1
            if len(self.kept) < MAX_KEPT:
                self.kept.append(line)
            show = now - self._last_shown >= TERMINAL_EVERY_S
            if show:
                self._last_shown = now
                self.shown += 1
        if show:
            sys.stderr.write(f"brokerperf: librdkafka {record.levelname}: {text} (its lines "
                             "are in the run's client-stats.jsonl)\n")

    def take(self) -> str | None:
        with self._guard:
            if not self.total:
                return None
            doc = {"librdkafka_log": {"lines": self.kept, "total": self.total,
                                      "not_kept": self.total - len(self.kept),
                                      "shown_on_terminal": self.shown}}
            self.kept, self.total, self.shown = [], 0, 0
        return json.dumps(doc)


_handler = _KeepAndThrottle()
_logger: logging.Logger | None = None


def client_logger() -> logging.Logger:
    """The logger every Kafka client of this process logs to (created once)."""
    global _logger
    if _logger is None:
        logger = logging.getLogger("pytest_brokerperf.librdkafka")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # not into pytest's captured log: into the artefacts
        logger.addHandler(_handler)
        _logger = logger
    return _logger


def take_log_doc() -> str | None:
    """The lines logged since the last call, as one client-stats document (or None)."""
    return _handler.take()
