"""Java's class-data sharing for the JVMs the suite starts: the second start is faster.

A Kafka broker loads some 8,000 classes as it starts, a Pulsar standalone and Spark's
driver some 20,000; most of their start-up is that. Java (13+) writes the classes a run
loaded into an archive as it exits (``-XX:ArchiveClassesAtExit``) and maps it into later
JVMs on the same Java and class path (``-XX:SharedArchiveFile``). Measured here: a Kafka
node ready in 2.5 s instead of 4.2 s, a Pulsar standalone in 7 s instead of 9.5 s, Spark's
start in 1.9 s instead of 3.4 s. Only class loading changes: the code that runs, the JIT
and the heap are the same, so no figure a run measures moves.

One archive per kind, Java binary and class path (its jars), in the cache dir's ``cds/``
(``BROKERPERF_CDS_DIR`` moves them alone); the first JVM that finds none writes it when
it exits normally (a few seconds more, once), into a temporary file that becomes the
archive only once complete. An archive that does not fit the JVM is Java's to ignore
(``-Xshare:auto``), silently (its CDS logging off). ``BROKERPERF_CDS=0`` turns it all off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CDS_DIR_ENV", "CDS_ENV", "ClassDataSharing", "cds_dir", "class_data_sharing"]

#: ``BROKERPERF_CDS=0`` (or off/false/no): no archive is read or written
CDS_ENV = "BROKERPERF_CDS"
#: a directory for the archives alone (default: ``<cache dir>/cds``)
CDS_DIR_ENV = "BROKERPERF_CDS_DIR"
#: a writer's temporary file older than this was left by a crash
_STALE_S = 3600.0


@dataclass(frozen=True)
class ClassDataSharing:
    """One archive: read it (``writing`` None) or write it at the JVM's exit."""

    archive: Path
    writing: Path | None = None

    def flags(self) -> list[str]:
        """The JVM options that read (or write) the archive."""
        quiet = ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
        if self.writing is not None:
            return [*quiet, f"-XX:ArchiveClassesAtExit={self.writing}"]
        return [*quiet, f"-XX:SharedArchiveFile={self.archive}"]

    def keep(self) -> bool:
        """After the writing JVM exited: its archive in place. True if there is one."""
        if self.writing is None:
            return self.archive.exists()
        try:
            if self.writing.stat().st_size > 0:
                os.replace(self.writing, self.archive)
                return True
        except OSError:
            pass
        self.discard()
        return False

    def discard(self) -> None:
        """Drop what a writer wrote (it was killed: the file may be half written)."""
        if self.writing is not None:
            with contextlib.suppress(OSError):
                self.writing.unlink(missing_ok=True)


def cds_dir() -> Path:
    """Where the archives live: ``$BROKERPERF_CDS_DIR``, else ``<cache dir>/cds``."""
    from pytest_brokerperf.brokers.provision.maven import cache_root

    own = os.environ.get(CDS_DIR_ENV, "").strip()
    return Path(own).expanduser() if own else cache_root() / "cds"


def class_data_sharing(kind: str, java: str | Path, jars: Iterable[Path], *,
                       write: bool, extra: Iterable[str] = ()) -> ClassDataSharing | None:
    """The archive of ``kind``'s JVMs on ``java`` with ``jars`` on their class path:
    to read when there is one; to write (``write``) when there is none; else None (also
    when turned off or ``java`` cannot be found: the JVM then starts as without)."""
    if os.environ.get(CDS_ENV, "1").strip().lower() in ("0", "off", "false", "no"):
        return None
    try:
        binary = Path(java).resolve(strict=True)
        # the jars' paths: an archive records its class path and fits no other
        stamp = [kind, str(binary), binary.stat().st_mtime_ns, *extra,
                 sorted(str(p.resolve()) for p in jars)]
    except OSError:
        return None
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]
    folder = cds_dir()
    archive = folder / f"{kind}-{key}.jsa"
    if archive.exists():
        return ClassDataSharing(archive)
    if not write:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.tmp"):  # a writer that never finished (a crash)
            if time.time() - old.stat().st_mtime > _STALE_S:
                old.unlink(missing_ok=True)
    except OSError:
        return None
    return ClassDataSharing(archive, folder / f"{kind}-{key}.{os.getpid()}.tmp")
