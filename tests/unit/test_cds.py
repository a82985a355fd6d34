"""Class-data sharing archives (``brokers/provision/cds.py``): where one lives, when it
is written, read or left alone. No JVM here: ``tests/report/test_quiet_spark.py`` runs
Spark's and the integration tests the brokers' with real ones."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.cds import (
    CDS_DIR_ENV,
    CDS_ENV,
    ClassDataSharing,
    cds_dir,
    class_data_sharing,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BROKERPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(CDS_ENV, raising=False)
    monkeypatch.delenv(CDS_DIR_ENV, raising=False)
    return tmp_path / "cache"


@pytest.fixture
def jars(tmp_path: Path) -> list[Path]:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("a.jar", "b.jar"):
        (lib / name).write_bytes(b"")
    return sorted(lib.glob("*.jar"))


JAVA = sys.executable  # any existing binary: only its path and mtime are keyed


def test_the_first_jvm_writes_the_archive_the_later_ones_read(cache: Path,
                                                              jars: list[Path]) -> None:
    assert class_data_sharing("kafka", JAVA, jars, write=False) is None  # nothing yet
    first = class_data_sharing("kafka", JAVA, jars, write=True)
    assert first is not None and first.writing is not None
    assert first.writing.parent == first.archive.parent == cache / "cds"
    assert f"-XX:ArchiveClassesAtExit={first.writing}" in first.flags()
    first.writing.write_bytes(b"archive")  # what the JVM writes as it exits
    assert first.keep() and first.archive.read_bytes() == b"archive"
    assert not first.writing.exists()
    later = class_data_sharing("kafka", JAVA, jars, write=True)
    assert later == ClassDataSharing(first.archive)
    # a mismatched or damaged archive is Java's to ignore, and it must say nothing
    assert later.flags() == ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off",
                             f"-XX:SharedArchiveFile={first.archive}"]


def test_another_kind_or_class_path_has_an_archive_of_its_own(cache: Path,
                                                             jars: list[Path]) -> None:
    kafka = class_data_sharing("kafka", JAVA, jars, write=True)
    pulsar = class_data_sharing("pulsar", JAVA, jars, write=True)
    fewer = class_data_sharing("kafka", JAVA, jars[:1], write=True)
    assert kafka and pulsar and fewer
    assert len({kafka.archive, pulsar.archive, fewer.archive}) == 3


def test_a_jvm_that_wrote_nothing_leaves_nothing(cache: Path, jars: list[Path]) -> None:
    cds = class_data_sharing("kafka", JAVA, jars, write=True)
    assert cds is not None and cds.writing is not None
    assert not cds.keep()
    assert not list((cache / "cds").iterdir())


def test_a_crashed_writer_s_file_is_removed_after_an_hour(cache: Path,
                                                          jars: list[Path]) -> None:
    folder = cache / "cds"
    folder.mkdir(parents=True)
    stale, fresh = folder / "kafka-x.1.tmp", folder / "kafka-x.2.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    class_data_sharing("kafka", JAVA, jars, write=True)
    assert not stale.exists() and fresh.exists()


@pytest.mark.parametrize("off", ["0", "off", "false"])
def test_turned_off_nothing_is_read_or_written(cache: Path, jars: list[Path], off: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CDS_ENV, off)
    assert class_data_sharing("kafka", JAVA, jars, write=True) is None
    assert not (cache / "cds").exists()


def test_no_java_no_archive(cache: Path, jars: list[Path], tmp_path: Path) -> None:
    assert class_data_sharing("kafka", tmp_path / "no-java", jars, write=True) is None


def test_the_archives_can_live_apart_from_the_cache(cache: Path, jars: list[Path],
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert cds_dir() == cache / "cds"
    monkeypatch.setenv(CDS_DIR_ENV, str(tmp_path / "archives"))
    cds = class_data_sharing("kafka", JAVA, jars, write=True)
    assert cds is not None and cds.archive.parent == tmp_path / "archives" == cds_dir()
