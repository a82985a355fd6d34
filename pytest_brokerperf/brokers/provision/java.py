"""What every JVM broker (Kafka, Pulsar) needs: a Java binary, sizes, a GC log, properties files.

The GC log options follow Kafka's ``kafka-run-class.sh`` (``-Xlog:gc*`` with ten 100 MB
files); a run's GC pauses are then readable next to its latency figures.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError

__all__ = [
    "JVM_NON_HEAP",
    "JavaRuntime",
    "check_jvm_size",
    "find_java",
    "gc_log_flag",
    "java_version",
    "java_version_output",
    "jvm_size_bytes",
    "remove_gc_logs",
    "render_console_log4j2",
    "render_properties",
]

#: what a broker JVM needs beside its heap (metaspace, code cache, thread stacks, GC
#: structures, NIO buffers): a memory limit must leave at least this above -Xmx
JVM_NON_HEAP = 384 * 1024**2

_JVM_SIZE = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")


def check_jvm_size(size: str, what: str = "heap") -> None:
    """Refuse a memory size the JVM would not take (``-Xmx``, ``-XX:MaxDirectMemorySize``)."""
    if not _JVM_SIZE.match(size):
        raise ConfigError(f"bad {what} size {size!r}: use a JVM size such as 512m or 1g")


def jvm_size_bytes(size: str) -> int:
    """Bytes of a JVM size (``512m``, ``1g``, ``1048576``)."""
    check_jvm_size(size)
    unit = size[-1].lower()
    number = int(size[:-1]) if unit.isalpha() else int(size)
    return number * {"k": 1024, "m": 1024**2, "g": 1024**3}.get(unit, 1)


def gc_log_flag(gc_log: Path) -> str:
    """``-Xlog:gc*`` into ``gc_log``, decorated with time and uptime, rotated as Kafka does."""
    if ":" in str(gc_log):
        raise ConfigError(f"log directory {gc_log.parent} must not contain ':' (JVM -Xlog syntax)")
    return f"-Xlog:gc*:file={gc_log}:time,uptime:filecount=10,filesize=100M"


def remove_gc_logs(gc_log: Path) -> None:
    """Delete an earlier start's GC logs: the JVM would rotate them, not truncate."""
    for old in gc_log.parent.glob(f"{gc_log.name}*"):
        old.unlink()


def _escape_properties(text: str, *, key: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    if key:
        for ch in ("=", ":", " ", "#", "!"):
            out = out.replace(ch, "\\" + ch)
    return out


def render_console_log4j2(info_loggers: Mapping[str, str]) -> str:
    """A log4j2 ``.properties`` config: everything to the console (the node's log file),
    WARN by default, ``info_loggers`` (short name -> logger) at INFO so a failed or slow
    start can be read from the log tail. The shutdown hook is off: a broker logs its own
    shutdown, and log4j's hook would stop logging first."""
    lines = [
        "status = warn",
        "shutdownHook = disable",
        "appender.out.type = Console",
        "appender.out.name = OUT",
        "appender.out.target = SYSTEM_OUT",
        "appender.out.layout.type = PatternLayout",
        "appender.out.layout.pattern = [%d] %p %m (%c)%n",
        "rootLogger.level = warn",
        "rootLogger.appenderRef.out.ref = OUT",
    ]
    for short, name in info_loggers.items():
        lines += [f"logger.{short}.name = {name}", f"logger.{short}.level = info"]
    return "\n".join(lines) + "\n"


def render_properties(cfg: Mapping[str, str], header: str = "") -> str:
    """Java ``.properties`` text (keys and values escaped where needed)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [
        f"{_escape_properties(k, key=True)}={_escape_properties(v, key=False)}"
        for k, v in cfg.items()
    ]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=8)
def java_version_output(java: str) -> str:
    """What ``java -version`` prints (cached: it does not change within a session)."""
    try:
        out = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BrokerUnavailable(f"cannot run {java} -version: {e}") from e
    return (out.stderr or out.stdout).strip()


def java_version(java: str) -> tuple[str, int]:
    """``("17.0.15", 17)`` from ``java -version``."""
    text = java_version_output(java)
    m = re.search(r'version "([^"]+)"', text)
    if not m:
        raise BrokerUnavailable(f"cannot read the Java version from {java} -version: {text!r}")
    version = m.group(1)
    parts = version.split(".")
    if parts[0] == "1" and len(parts) > 1:  # 1.8.0_x style
        major = int(parts[1])
    else:
        major = int(re.sub(r"\D.*", "", parts[0]) or 0)
    return version, major


def find_java(java: str | None = None, broker: str = "Kafka") -> str:
    """``java`` argument, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    if java:
        return java
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise BrokerUnavailable(
            f"{broker} needs Java 17+, but no 'java' is on PATH and JAVA_HOME is not set. "
            "Install a JDK/JRE 17+ (Debian: apt-get install openjdk-17-jre-headless)."
        )
    return found


@dataclass(frozen=True)
class JavaRuntime:
    """The Java a broker runs on, as recorded with its results."""

    path: str
    version: str
    major: int

    @classmethod
    def find(cls, java: str | None, broker: str, *, min_major: int | None = 17,
             broker_version: str = "") -> JavaRuntime:
        """The Java to run ``broker`` with; BrokerUnavailable if missing or below ``min_major``."""
        path = find_java(java, broker)
        version, major = java_version(path)
        if min_major is not None and major < min_major:
            raise BrokerUnavailable(
                f"{broker} {broker_version} needs Java {min_major}+, but {path} is Java "
                f"{version}; install a newer JDK or set JAVA_HOME to one"
            )
        return cls(path, version, major)

    def as_info(self) -> dict[str, Any]:
        """The ``java*`` keys of ``endpoint.info``."""
        return {
            "java": self.path,
            "java_version": self.version,
            "java_version_output": java_version_output(self.path),
            # Silently changes every JVM flag; recorded so a run shows it.
            "java_tool_options": os.environ.get("JAVA_TOOL_OPTIONS"),
        }
