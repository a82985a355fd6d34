"""The power cut's undo log on plain files: a rollback gives back exactly the bytes each
file held at its last fsync (docs/reference/faults.md, ``power-cut``)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.undo_log import UndoLog


class Files:
    """Plain files under ``root`` changed the way the FUSE layer changes them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = UndoLog(str(root))
        self.fds: dict[str, int] = {}

    def fd(self, name: str) -> int:
        if name not in self.fds:
            path = self.root / name
            existed = path.exists()
            self.fds[name] = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if not existed:
                self.log.created("/" + name)
        return self.fds[name]

    def write(self, name: str, offset: int, data: bytes) -> None:
        fd = self.fd(name)
        self.log.before_write("/" + name, fd, offset, len(data))
        os.pwrite(fd, data, offset)

    def append(self, name: str, data: bytes) -> None:
        self.write(name, os.fstat(self.fd(name)).st_size, data)

    def truncate(self, name: str, length: int) -> None:
        fd = self.fd(name)
        self.log.before_truncate("/" + name, fd, length)
        os.ftruncate(fd, length)

    def fsync(self, name: str) -> None:
        os.fsync(self.fd(name))
        self.log.synced("/" + name)

    def read(self, name: str) -> bytes | None:
        path = self.root / name
        return path.read_bytes() if path.exists() else None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


@pytest.fixture
def files(tmp_path: Path) -> Iterator[Files]:
    f = Files(tmp_path)
    yield f
    f.close()


def test_appends_after_the_fsync_are_dropped(files: Files) -> None:
    files.append("seg", b"A" * 100)
    files.fsync("seg")
    files.append("seg", b"B" * 50)
    report = files.log.rollback()
    assert files.read("seg") == b"A" * 100
    assert report.restored == ["/seg"] and report.bytes_dropped == 50


def test_a_file_never_fsynced_is_removed(files: Files) -> None:
    files.append("new", b"x" * 10)
    report = files.log.rollback()
    assert files.read("new") is None
    assert report.removed == ["/new"]


def test_a_writeback_makes_everything_written_so_far_survive(files: Files) -> None:
    files.append("meta", b"m" * 10)  # created, never fsynced
    files.append("seg", b"A" * 20)
    assert files.log.written_back() == 2
    files.append("seg", b"B" * 5)
    report = files.log.rollback()
    assert files.read("meta") == b"m" * 10 and files.read("seg") == b"A" * 20
    assert report.removed == [] and report.bytes_dropped == 5


def test_overwrites_of_synced_bytes_are_undone(files: Files) -> None:
    files.append("idx", bytes(range(256)))
    files.fsync("idx")
    files.write("idx", 10, b"\xff" * 20)
    files.write("idx", 15, b"\xee" * 300)  # overlaps the first and grows the file
    files.log.rollback()
    assert files.read("idx") == bytes(range(256))


def test_truncate_shorter_then_rewrite_comes_back_whole(files: Files) -> None:
    files.append("f", b"0123456789")
    files.fsync("f")
    files.truncate("f", 5)
    files.write("f", 5, b"xyz")
    files.truncate("f", 100)  # grown with zeros
    files.log.rollback()
    assert files.read("f") == b"0123456789"


def test_fsync_makes_the_writes_before_it_survive(files: Files) -> None:
    files.append("f", b"a" * 10)
    files.fsync("f")
    files.write("f", 0, b"b" * 5)
    files.fsync("f")  # the overwrite is now on disk
    files.append("f", b"c" * 5)
    files.log.rollback()
    assert files.read("f") == b"b" * 5 + b"a" * 5


def test_a_rename_carries_the_undo_records(files: Files, tmp_path: Path) -> None:
    files.append("tmp", b"checkpoint")
    files.log.renamed("/tmp", "/final")
    os.rename(tmp_path / "tmp", tmp_path / "final")
    files.log.rollback()
    assert files.read("final") is None  # created and never fsynced, whatever its name


def test_the_log_is_empty_after_a_rollback(files: Files) -> None:
    files.append("f", b"a")
    files.log.rollback()
    assert files.log.pending() == 0


@pytest.mark.parametrize("seed", range(20))
def test_random_changes_roll_back_to_the_last_fsync_exactly(files: Files, seed: int) -> None:
    rnd = random.Random(seed)
    names = ["a", "b", "c"]
    synced: dict[str, bytes | None] = {n: None for n in names}
    for _ in range(60):
        name, op = rnd.choice(names), rnd.random()
        size = os.fstat(files.fd(name)).st_size
        if op < 0.45:
            data = rnd.randbytes(rnd.randint(1, 64))
            files.write(name, rnd.randint(0, size + 8), data)
        elif op < 0.65:
            files.truncate(name, rnd.randint(0, size + 16))
        elif op < 0.8:
            files.fsync(name)
            synced[name] = files.read(name)
        else:
            files.append(name, rnd.randbytes(rnd.randint(1, 32)))
    files.close()
    files.log.rollback()
    assert {n: files.read(n) for n in names} == synced
