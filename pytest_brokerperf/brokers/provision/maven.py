"""Runtime classpaths of Maven artifacts, resolved once per version into a cache.

Why Maven: the project's machines can reach Maven Central but not the Apache
download mirrors, and brokers such as Kafka and Pulsar are published there as jars.
A tiny POM naming the broker artifact (plus an explicit logging backend) is
resolved with ``dependency:copy-dependencies`` into ``<cache>/<name>-<version>/lib``.

The cache must never look complete when it is not: Maven runs in a temporary
sibling directory that is renamed into place only after every jar is there and a
``resolved.json`` marker is written, and a file lock keeps two processes (pytest-xdist
workers, parallel CI jobs) from resolving the same version at once.

Command line (CI pre-fetch)::

    python -m pytest_brokerperf.brokers.provision.maven kafka|pulsar [--version V]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from pytest_brokerperf.brokers.provision.process import ManagedProcess, log_tail
from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION, PULSAR_DEFAULT_VERSION
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError, ProvisionError

__all__ = [
    "KAFKA_DEFAULT_VERSION",
    "PULSAR_DEFAULT_VERSION",
    "Artifact",
    "cache_root",
    "classpath_dir",
    "is_resolved",
    "kafka_artifacts",
    "kafka_version_of",
    "main",
    "progress_to",
    "pulsar_artifacts",
    "pulsar_version_of",
    "render_pom",
    "resolve_classpath",
    "resolve_kafka",
    "resolve_pulsar",
]

KAFKA_SCALA_VERSION = "2.13"
# Declared explicitly although kafka_2.13 4.x lists them: maintainers discussed
# making the backend optional, and without one slf4j goes silent.
LOG4J2_VERSION = "2.24.3"
RELOAD4J_SLF4J_VERSION = "1.7.36"
RELOAD4J_VERSION = "1.2.25"

# Pulsar 4.0 LTS, pinned in versions.py. Not 4.0.8: its closure is incomplete on the
# reachable Maven Central (jetcd-core-shaded 4.0.8 is missing there); 4.0.7 resolves.
# Pulsar 4.0.x builds against log4j2 2.23.1 and logs through slf4j 2, so the binding is
# log4j-slf4j2-impl; declared explicitly, as the distribution does.
PULSAR_LOG4J2_VERSION = "2.23.1"

CACHE_ENV = "BROKERPERF_CACHE_DIR"
MARKER = "resolved.json"
DEFAULT_MAVEN_TIMEOUT_S = 1800.0
#: Seconds between progress lines while Maven fetches jars on first use.
PROGRESS_EVERY_S = 10.0

#: Where first-use progress lines go: stderr, unless the plugin points them at the
#: terminal past pytest's capture (:func:`progress_to`).
_progress: Callable[[str], None] | None = None


def progress_to(sink: Callable[[str], None] | None) -> None:
    """Send first-use fetch progress lines to ``sink`` (None: back to stderr)."""
    global _progress
    _progress = sink


def _say(line: str) -> None:
    if _progress is not None:
        _progress(line)
    else:
        print(line, file=sys.stderr, flush=True)


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total

_SAFE_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]*$")
_SAFE_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class Artifact:
    """A Maven dependency: ``group:artifact:version`` plus optional exclusions."""

    group_id: str
    artifact_id: str
    version: str
    exclusions: tuple[str, ...] = ()  # "group:artifact", "*" allowed by Maven

    @classmethod
    def parse(cls, coords: str, exclusions: Sequence[str] = ()) -> Artifact:
        """Build from ``"group:artifact:version"``."""
        parts = coords.split(":")
        if len(parts) != 3 or not all(parts):
            raise ConfigError(f"bad Maven coordinates {coords!r}: expected group:artifact:version")
        return cls(parts[0], parts[1], parts[2], tuple(exclusions))

    @property
    def coordinates(self) -> str:
        return f"{self.group_id}:{self.artifact_id}:{self.version}"

    @property
    def jar_name(self) -> str:
        """The file name ``copy-dependencies`` gives this artifact's jar."""
        return f"{self.artifact_id}-{self.version}.jar"

    def to_json(self) -> dict[str, object]:
        return {"coordinates": self.coordinates, "exclusions": list(self.exclusions)}


# -- cache layout ---------------------------------------------------------------------


def cache_root() -> Path:
    """``$BROKERPERF_CACHE_DIR``, else ``~/.cache/pytest-brokerperf``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "pytest-brokerperf"


def _check_name_version(name: str, version: str) -> None:
    if not _SAFE_NAME.match(name):
        raise ConfigError(f"bad classpath name {name!r}: use lowercase letters, digits, - and _")
    if not _SAFE_VERSION.match(version):
        raise ConfigError(f"bad version {version!r}: use letters, digits, '.', '-' and '_'")


def classpath_dir(name: str, version: str, root: Path | None = None) -> Path:
    """``<root>/<name>-<version>``: holds ``pom.xml``, ``lib/`` and the marker."""
    _check_name_version(name, version)
    return (root if root is not None else cache_root()) / f"{name}-{version}"


def is_resolved(directory: Path, artifacts: Sequence[Artifact]) -> bool:
    """True if ``directory`` is a complete resolution of exactly ``artifacts``."""
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict):
        return False
    if marker.get("artifacts") != [a.to_json() for a in artifacts]:
        return False
    lib = directory / "lib"
    return all((lib / a.jar_name).is_file() for a in artifacts)


def render_pom(name: str, version: str, artifacts: Sequence[Artifact]) -> str:
    """A packaging-``pom`` project whose runtime dependencies are ``artifacts``."""
    deps: list[str] = []
    for a in artifacts:
        excl = ""
        if a.exclusions:
            items = []
            for e in a.exclusions:
                g, _, art = e.partition(":")
                items.append(
                    "        <exclusion><groupId>"
                    f"{escape(g)}</groupId><artifactId>{escape(art or '*')}</artifactId>"
                    "</exclusion>"
                )
            excl = "\n      <exclusions>\n" + "\n".join(items) + "\n      </exclusions>\n    "
        deps.append(
            "    <dependency>\n"
            f"      <groupId>{escape(a.group_id)}</groupId>\n"
            f"      <artifactId>{escape(a.artifact_id)}</artifactId>\n"
            f"      <version>{escape(a.version)}</version>{excl}\n"
            "    </dependency>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<project>\n"
        "  <!-- written by pytest-brokerperf to resolve a runtime classpath -->\n"
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>local.pytest-brokerperf</groupId>\n"
        f"  <artifactId>{escape(name)}-classpath</artifactId>\n"
        f"  <version>{escape(version)}</version>\n"
        "  <packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(deps) + "\n  </dependencies>\n</project>\n"
    )


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``; ProvisionError after ``timeout`` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise ProvisionError(
                        f"timed out after {timeout:.0f} s waiting for lock {path}: another "
                        "process is resolving the same classpath (or hangs doing so)"
                    ) from None
                time.sleep(0.25)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _run_maven(mvn: str, work: Path, timeout: float, what: str = "jars") -> None:
    """Run copy-dependencies for ``work/pom.xml`` into ``work/lib``; ProvisionError on failure.

    A line every :data:`PROGRESS_EVERY_S` says how long it has run and how much Maven's
    local repository (``~/.m2/repository``, where it downloads to) has grown."""
    log = work / "mvn.log"
    argv = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(work / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={work / 'lib'}",
    ]
    repo = Path.home() / ".m2" / "repository"
    before = _tree_bytes(repo)
    start = time.monotonic()
    proc = ManagedProcess(argv, log_file=log, name="mvn", cwd=work).start()
    rc: int | None = None
    while True:
        left = timeout - (time.monotonic() - start)
        rc = proc.wait(max(0.0, min(PROGRESS_EVERY_S, left)))
        if rc is not None or left <= PROGRESS_EVERY_S:
            break
        grown = max(0, _tree_bytes(repo) - before) / 1024**2
        _say(f"brokerperf: fetching {what}: {time.monotonic() - start:.0f} s, "
             f"{grown:,.0f} MB downloaded so far")
    if rc is None:
        proc.stop(timeout=10.0)
        raise ProvisionError(
            f"Maven did not finish within {timeout:.0f} s: {' '.join(argv)}\n"
            f"--- last lines of Maven's output ---\n{log_tail(log, 30)}"
        )
    proc.stop(timeout=0.0)
    if rc != 0:
        raise ProvisionError(
            f"Maven failed (exit {rc}) resolving {work / 'pom.xml'}: {' '.join(argv)}\n"
            f"--- last lines of Maven's output ---\n{log_tail(log, 30)}\n"
            "--- hint: check network access to Maven Central (or a mirror in "
            "~/.m2/settings.xml) and that the version exists"
        )


def resolve_classpath(
    name: str,
    version: str,
    artifacts: Sequence[Artifact],
    *,
    root: Path | None = None,
    mvn: str | None = None,
    timeout: float = DEFAULT_MAVEN_TIMEOUT_S,
) -> Path:
    """Return ``<root>/<name>-<version>/lib`` holding the runtime closure of ``artifacts``.

    Resolves with Maven on first use; later calls (any process) reuse the cache.
    Raises :class:`BrokerUnavailable` when Maven is needed but not installed and
    :class:`ProvisionError` when Maven fails (with the tail of its output).
    """
    if not artifacts:
        raise ConfigError(f"no artifacts given for classpath {name}-{version}")
    target = classpath_dir(name, version, root)
    if is_resolved(target, artifacts):
        return target / "lib"
    mvn_path = mvn or shutil.which("mvn")
    if not mvn_path:
        raise BrokerUnavailable(
            f"{name} {version} is not cached in {target} and Maven ('mvn') is not on PATH. "
            "Install Maven 3.8+ and a JDK 17+ (Debian: apt-get install maven "
            "openjdk-17-jdk-headless) so the jars can be fetched from Maven Central."
        )
    base = target.parent
    base.mkdir(parents=True, exist_ok=True)
    with _file_lock(base / f".{target.name}.lock", timeout + 120.0):
        if is_resolved(target, artifacts):  # another process finished meanwhile
            return target / "lib"
        # Leftovers of a killed resolution; safe to remove while we hold the lock.
        for stale in base.glob(f".{target.name}.partial-*"):
            _remove_tree(stale)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=base))
        try:
            (work / "pom.xml").write_text(render_pom(name, version, artifacts), encoding="utf-8")
            (work / "lib").mkdir()
            _say(f"brokerperf: fetching {name} {version} jars with Maven into {target} "
                 "(first use only; cached afterwards)")
            _run_maven(mvn_path, work, timeout, what=f"{name} {version} jars")
            _say(f"brokerperf: {name} {version} jars cached in {target} "
                 f"({_tree_bytes(work / 'lib') / 1024**2:,.0f} MB)")
            missing = [a.jar_name for a in artifacts if not (work / "lib" / a.jar_name).is_file()]
            if missing:
                raise ProvisionError(
                    f"Maven finished but {', '.join(missing)} is missing from {work / 'lib'}; "
                    f"--- last lines of Maven's output ---\n{log_tail(work / 'mvn.log', 30)}"
                )
            jars = sorted(p.name for p in (work / "lib").glob("*.jar"))
            marker = {
                "name": name,
                "version": version,
                "artifacts": [a.to_json() for a in artifacts],
                "jars": jars,
                "resolved_at": time.time(),
            }
            (work / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
            if target.exists():  # incomplete or for other artifacts: replace it
                old = base / f".{target.name}.partial-old-{os.getpid()}"
                os.rename(target, old)
                _remove_tree(old)
            os.rename(work, target)
        except BaseException:
            _remove_tree(work)
            raise
    return target / "lib"


# -- Kafka ------------------------------------------------------------------------------


def kafka_artifacts(version: str = KAFKA_DEFAULT_VERSION) -> list[Artifact]:
    """The Maven artifacts whose runtime closure is a Kafka broker of ``version``."""
    _check_name_version("kafka", version)
    try:
        major = int(version.split(".", 1)[0])
    except ValueError:
        raise ConfigError(f"bad Kafka version {version!r}: expected e.g. 4.3.1") from None
    core = Artifact("org.apache.kafka", f"kafka_{KAFKA_SCALA_VERSION}", version)
    if major >= 4:
        return [
            core,
            Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION),
            Artifact("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION),
        ]
    if major == 3:
        # 3.x core ships no slf4j backend at all; the tarball uses reload4j.
        return [
            core,
            Artifact("org.slf4j", "slf4j-reload4j", RELOAD4J_SLF4J_VERSION),
            Artifact("ch.qos.reload4j", "reload4j", RELOAD4J_VERSION),
        ]
    raise ConfigError(f"Kafka {version} is not supported: use 3.x (KRaft) or 4.x")


_KAFKA_JAR = re.compile(r"^kafka_(\d+\.\d+)-(?P<version>\d.*)\.jar$")
_NOT_MAIN_JAR = ("-test", "-sources", "-javadoc", "-scaladoc", "-test-sources")


def kafka_version_of(lib_dir: Path) -> str:
    """The Kafka version of a lib dir, from its ``kafka_<scala>-<version>.jar``."""
    versions: set[str] = set()
    for jar in Path(lib_dir).glob("kafka_*.jar"):
        m = _KAFKA_JAR.match(jar.name)
        if m and not jar.name.removesuffix(".jar").endswith(_NOT_MAIN_JAR):
            versions.add(m.group("version"))
    if len(versions) != 1:
        found = ", ".join(sorted(versions)) or "none"
        raise ProvisionError(
            f"{lib_dir} must hold exactly one kafka_{KAFKA_SCALA_VERSION}-<version>.jar "
            f"(found: {found}); point KAFKA_HOME at an unpacked Kafka binary distribution"
        )
    return versions.pop()


def _kafka_home(kafka_home: str | Path | None) -> Path | None:
    if kafka_home is not None and str(kafka_home).strip():
        return Path(kafka_home).expanduser()
    env = os.environ.get("KAFKA_HOME", "").strip()
    return Path(env).expanduser() if env else None


def resolve_kafka(
    version: str = KAFKA_DEFAULT_VERSION,
    *,
    kafka_home: str | Path | None = None,
    root: Path | None = None,
    mvn: str | None = None,
    timeout: float = DEFAULT_MAVEN_TIMEOUT_S,
) -> Path:
    """A directory of jars that runs a Kafka broker (``java -cp 'dir/*' kafka.Kafka``).

    ``KAFKA_HOME`` (argument, else environment) wins: its ``libs`` directory is used
    as is and ``version`` is ignored; read the real version with
    :func:`kafka_version_of`. Otherwise ``version`` is resolved from Maven Central
    into the cache (see :func:`cache_root`).
    """
    home = _kafka_home(kafka_home)
    if home is not None:
        libs = home / "libs"
        if not libs.is_dir():
            raise ProvisionError(
                f"KAFKA_HOME={home} has no libs/ directory; set it to an unpacked Kafka "
                "binary distribution (the directory holding bin/, config/ and libs/)"
            )
        kafka_version_of(libs)  # fails early with a clear message
        return libs
    artifacts = kafka_artifacts(version)
    target = classpath_dir("kafka", version, root)
    if is_resolved(target, artifacts):
        return target / "lib"
    if not (mvn or shutil.which("mvn")):
        raise BrokerUnavailable(
            f"Kafka {version} is not available: Maven ('mvn') is not on PATH and KAFKA_HOME "
            "is not set. Either install Maven 3.8+ and a JDK 17+ (Debian: apt-get install "
            f"maven openjdk-17-jdk-headless) so the broker jars can be fetched from Maven "
            f"Central into {target}, or unpack a Kafka {version} binary distribution and set "
            "KAFKA_HOME to its directory (the one holding libs/). To pre-fetch: "
            "python -m pytest_brokerperf.brokers.provision.maven kafka"
        )
    return resolve_classpath("kafka", version, artifacts, root=root, mvn=mvn, timeout=timeout)


# -- Pulsar -----------------------------------------------------------------------------


def pulsar_artifacts(version: str = PULSAR_DEFAULT_VERSION) -> list[Artifact]:
    """The Maven artifacts whose runtime closure runs ``PulsarStandaloneStarter``.

    The un-shaded ``pulsar-broker`` (``pulsar-broker-shaded`` breaks the bookie's
    ``DbLedgerStorage``) plus the log4j2 backend bound through slf4j 2.
    """
    _check_name_version("pulsar", version)
    try:
        major = int(version.split(".", 1)[0])
    except ValueError:
        raise ConfigError(f"bad Pulsar version {version!r}: expected e.g. 4.0.7") from None
    if major != 4:
        raise ConfigError(
            f"Pulsar {version} is not supported: the standalone provisioner is built and "
            f"tested for 4.x (default {PULSAR_DEFAULT_VERSION})"
        )
    return [
        Artifact("org.apache.pulsar", "pulsar-broker", version),
        Artifact("org.apache.logging.log4j", "log4j-api", PULSAR_LOG4J2_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-core", PULSAR_LOG4J2_VERSION),
        Artifact("org.apache.logging.log4j", "log4j-slf4j2-impl", PULSAR_LOG4J2_VERSION),
    ]


_PULSAR_JAR = re.compile(r"^pulsar-broker-(?P<version>\d[^-]*(?:-[A-Za-z0-9.]+)?)\.jar$")


def pulsar_version_of(lib_dir: Path) -> str:
    """The Pulsar version of a lib dir, from its ``pulsar-broker-<version>.jar``."""
    versions: set[str] = set()
    for jar in Path(lib_dir).glob("pulsar-broker-*.jar"):
        m = _PULSAR_JAR.match(jar.name)
        if m and not jar.name.removesuffix(".jar").endswith(_NOT_MAIN_JAR):
            versions.add(m.group("version"))
    if len(versions) != 1:
        found = ", ".join(sorted(versions)) or "none"
        raise ProvisionError(
            f"{lib_dir} must hold exactly one pulsar-broker-<version>.jar (found: {found})"
        )
    return versions.pop()


def resolve_pulsar(
    version: str = PULSAR_DEFAULT_VERSION,
    *,
    root: Path | None = None,
    mvn: str | None = None,
    timeout: float = DEFAULT_MAVEN_TIMEOUT_S,
) -> Path:
    """A directory of jars that runs a Pulsar standalone of ``version`` (Maven cache).

    The first call downloads the broker's runtime closure (a few hundred MB, rocksdbjni
    and BookKeeper included) from Maven Central; later calls reuse the cache.
    """
    artifacts = pulsar_artifacts(version)
    target = classpath_dir("pulsar", version, root)
    if is_resolved(target, artifacts):
        return target / "lib"
    if not (mvn or shutil.which("mvn")):
        raise BrokerUnavailable(
            f"Pulsar {version} is not available: Maven ('mvn') is not on PATH. Install "
            "Maven 3.8+ and a JDK 17+ (Debian: apt-get install maven openjdk-17-jdk-headless) "
            f"so the broker jars can be fetched from Maven Central into {target}. To "
            "pre-fetch: python -m pytest_brokerperf.brokers.provision.maven pulsar"
        )
    return resolve_classpath("pulsar", version, artifacts, root=root, mvn=mvn, timeout=timeout)


# -- command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_brokerperf.brokers.provision.maven kafka|pulsar [--version V]``:
    the lib dir."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_brokerperf.brokers.provision.maven",
        description="Resolve a broker's jars into the pytest-brokerperf cache and print "
        "the lib directory (CI pre-fetch).",
    )
    parser.add_argument("broker", choices=["kafka", "pulsar"])
    parser.add_argument(
        "--version", default=None,
        help=f"broker version (default: Kafka {KAFKA_DEFAULT_VERSION}, "
        f"Pulsar {PULSAR_DEFAULT_VERSION})",
    )
    parser.add_argument("--kafka-home", default=None, help="use this KAFKA_HOME instead")
    parser.add_argument("--cache-dir", default=None, help=f"cache root (default ${CACHE_ENV})")
    args = parser.parse_args(argv)
    root = Path(args.cache_dir) if args.cache_dir else None
    try:
        if args.broker == "pulsar":
            lib = resolve_pulsar(args.version or PULSAR_DEFAULT_VERSION, root=root)
        else:
            lib = resolve_kafka(args.version or KAFKA_DEFAULT_VERSION,
                                kafka_home=args.kafka_home, root=root)
    except BrokerUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ProvisionError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(lib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
