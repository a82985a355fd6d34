"""A FUSE passthrough filesystem that forgets unsynced writes on command (a power cut).

Run as its own process (``python -m pytest_brokerperf.brokers.provision.powercut_fs BACKING MOUNT
STATE``, started by :class:`~pytest_brokerperf.brokers.provision.powercut.PowerCutMount`): every
operation on MOUNT goes to BACKING, and every write or truncate first records what it
destroys in an :class:`~.undo_log.UndoLog`; an fsync of a file clears its records, and a
file named ``writeback`` appearing in STATE clears them all (the kernel's periodic
writeback; the filesystem removes the file once done). A
file named ``cut`` appearing in STATE is the power cut: the filesystem rolls every file
back to its last fsync, writes ``cut.json`` (what it took away) into STATE and answers
every later operation with EIO until it is unmounted (the machine is off). The caller
then unmounts it and mounts a fresh one on the same BACKING: the restart, with a cold
page cache.

fusepy (the ``faults`` extra) and libfuse2 (``apt-get install fuse libfuse2``) are
needed only here; importing the rest of the package never needs them.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from typing import Any

from pytest_brokerperf.brokers.provision.undo_log import UndoLog

__all__ = ["CUT_FILE", "CUT_REPORT", "READY_FILE", "WRITEBACK_FILE", "main"]

#: created in the state directory by the controller: cut the power now
CUT_FILE = "cut"
#: written by the filesystem once the rollback is done
CUT_REPORT = "cut.json"
#: written by the filesystem once it serves
READY_FILE = "ready"
#: created by the controller: count everything written so far as on disk (the kernel's
#: periodic writeback); the filesystem removes it once done
WRITEBACK_FILE = "writeback"
POLL_S = 0.02


def _operations(backing: str, state: str) -> Any:
    from fuse import FuseOSError, Operations  # the faults extra; only this process needs it

    class PowerCutFS(Operations):
        """Passthrough to ``backing`` with an undo log of everything not yet fsynced."""

        def __init__(self) -> None:
            self.root = os.path.realpath(backing)
            self._undo = UndoLog(self.root)
            self._mutex = threading.Lock()
            self.off = False  # the power is cut: every operation fails
            self.paths: dict[int, str] = {}  # fh -> path (renames update it)

        # -- helpers -----------------------------------------------------------------
        def _full(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def _check(self) -> None:
            if self.off:
                raise FuseOSError(errno.EIO)

        def write_back(self) -> None:
            with self._mutex:
                self._undo.written_back()

        def cut(self) -> dict[str, Any]:
            with self._mutex:
                self.off = True
                report = self._undo.rollback()
                for fh in list(self.paths):
                    os.close(fh)
                self.paths.clear()
            return report.as_dict()

        # -- metadata ----------------------------------------------------------------
        def access(self, path: str, amode: int) -> None:
            self._check()
            if not os.access(self._full(path), amode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            self._check()
            st = os.lstat(self._full(path))
            return {k: getattr(st, k) for k in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid")}

        def readdir(self, path: str, fh: int) -> list[str]:
            self._check()
            return [".", "..", *os.listdir(self._full(path))]

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self._full(path))
            return {k: getattr(st, k) for k in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def chmod(self, path: str, mode: int) -> None:
            self._check()
            os.chmod(self._full(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            self._check()
            os.chown(self._full(path), uid, gid)

        def utimens(self, path: str, times: tuple[float, float] | None = None) -> None:
            self._check()
            os.utime(self._full(path), times)

        def mkdir(self, path: str, mode: int) -> None:
            self._check()
            os.mkdir(self._full(path), mode)

        def rmdir(self, path: str) -> None:
            self._check()
            os.rmdir(self._full(path))

        def unlink(self, path: str) -> None:
            self._check()
            with self._mutex:
                os.unlink(self._full(path))
                self._undo.unlinked(path)

        def rename(self, old: str, new: str) -> None:
            self._check()
            with self._mutex:
                os.rename(self._full(old), self._full(new))
                self._undo.renamed(old, new)
                for fh, p in self.paths.items():
                    if p == old:
                        self.paths[fh] = new

        def symlink(self, target: str, source: str) -> None:
            self._check()
            os.symlink(source, self._full(target))

        def readlink(self, path: str) -> str:
            self._check()
            return os.readlink(self._full(path))

        # -- files -------------------------------------------------------------------
        @staticmethod
        def _backing_flags(flags: int) -> int:
            # read access for the undo log; offsets come from the kernel, so no O_APPEND
            flags &= ~(os.O_APPEND | os.O_ACCMODE | os.O_TRUNC)
            return flags | os.O_RDWR

        def open(self, path: str, flags: int) -> int:
            self._check()
            full = self._full(path)
            with self._mutex:
                if (flags & os.O_ACCMODE) == os.O_RDONLY:
                    fh = os.open(full, flags & ~os.O_TRUNC)
                else:
                    fh = os.open(full, self._backing_flags(flags))
                    if flags & os.O_TRUNC:
                        self._undo.before_truncate(path, fh, 0)
                        os.ftruncate(fh, 0)
                self.paths[fh] = path
            return fh

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            self._check()
            full = self._full(path)
            with self._mutex:
                # the kernel also sends create for an existing file (O_CREAT on a cold
                # cache); an O_TRUNC reaches us as a truncate of its own
                existed = os.path.exists(full)
                fh = os.open(full, os.O_RDWR | os.O_CREAT, mode)
                if not existed:
                    self._undo.created(path)
                self.paths[fh] = path
            return fh

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            self._check()
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            self._check()
            with self._mutex:
                self._undo.before_write(self.paths.get(fh, path), fh, offset, len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            self._check()
            with self._mutex:
                if fh is not None and fh in self.paths:
                    self._undo.before_truncate(self.paths[fh], fh, length)
                    os.ftruncate(fh, length)
                    return
                fd = os.open(self._full(path), os.O_RDWR)
                try:
                    self._undo.before_truncate(path, fd, length)
                    os.ftruncate(fd, length)
                finally:
                    os.close(fd)

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            self._check()
            with self._mutex:
                if datasync:
                    os.fdatasync(fh)
                else:
                    os.fsync(fh)
                self._undo.synced(self.paths.get(fh, path))

        def flush(self, path: str, fh: int) -> None:
            self._check()  # close() is no sync: nothing to clear

        def release(self, path: str, fh: int) -> None:
            with self._mutex:
                if self.paths.pop(fh, None) is not None:
                    os.close(fh)

        def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
            self._check()

    return PowerCutFS()


def _watch(fs: Any, state: str) -> None:
    """Wait for the controller's ``cut`` file, doing each ``writeback`` asked for
    meanwhile; then cut and report."""
    cut = os.path.join(state, CUT_FILE)
    writeback = os.path.join(state, WRITEBACK_FILE)
    while not os.path.exists(cut):
        if os.path.exists(writeback):
            fs.write_back()
            os.unlink(writeback)
        time.sleep(POLL_S)
    report = fs.cut()
    tmp = os.path.join(state, CUT_REPORT + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f)
    os.rename(tmp, os.path.join(state, CUT_REPORT))


def _announce_ready(mount: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not os.path.ismount(mount):
        time.sleep(POLL_S)
    with open(os.path.join(state, READY_FILE), "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))


def main(argv: list[str]) -> int:
    """``BACKING MOUNT STATE``: serve MOUNT in the foreground until unmounted."""
    if len(argv) != 3:
        print("usage: python -m pytest_brokerperf.brokers.provision.powercut_fs "
              "BACKING MOUNT STATE",
              file=sys.stderr)
        return 2
    backing, mount, state = argv
    from fuse import FUSE

    fs = _operations(backing, state)
    threading.Thread(target=_watch, args=(fs, state), daemon=True).start()
    threading.Thread(target=_announce_ready, args=(mount, state), daemon=True).start()
    # multithreaded (a broker has many threads doing IO); the kernel keeps no write-back
    # cache (writes reach us at once, as they reach a disk's page cache)
    FUSE(fs, mount, foreground=True, nothreads=False, default_permissions=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
