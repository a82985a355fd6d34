"""What a power cut takes away: every file's writes since its last fsync, as an undo log.

A kill -9 leaves everything a process wrote in the kernel's page cache, which survives
it; a power cut loses whatever was never fsynced. :class:`UndoLog` keeps, per file, the
bytes each write or truncate destroyed since that file's last ``fsync``/``fdatasync``
(its last sync point) and the size it had there; :meth:`UndoLog.rollback` puts every file
back to that state. Pure logic over file descriptors of a backing directory, no FUSE, so
it is unit-tested on plain files (the FUSE layer is :mod:`.powercut_fs`).

The model (documented in docs/reference/faults.md): file *contents* roll back to their
last fsync; a file created since and never fsynced is removed (its creation never
reached disk); directory operations (mkdir, rename, unlink) are kept, as a journaling
filesystem commits metadata on its own within seconds. Restoring the saved ranges in
reverse order and then truncating to the synced size gives back exactly the synced bytes:
each record saves only what lay inside both the synced size and the file at that moment,
and whatever lay beyond the file then was saved by the truncate that shortened it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["CutReport", "FileUndo", "UndoLog"]


@dataclass
class FileUndo:
    """One file's way back to its last sync point."""

    synced_size: int
    created: bool = False  # created since the last sync point: removed by a rollback
    saved: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, old bytes)
    written: int = 0  # bytes written or cut since the sync point (for the report)


@dataclass
class CutReport:
    """What a rollback took away: files removed, files restored, bytes lost."""

    removed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    bytes_dropped: int = 0  # bytes written or cut off since the files' sync points

    def as_dict(self) -> dict[str, object]:
        return {"removed": sorted(self.removed), "restored": sorted(self.restored),
                "bytes_dropped": self.bytes_dropped}


def _size(fd: int) -> int:
    return os.fstat(fd).st_size


class UndoLog:
    """Undo records per file path (relative to the backing directory ``root``).

    Call :meth:`before_write` / :meth:`before_truncate` *before* changing the file
    through ``fd`` (a descriptor that can read), :meth:`created` after creating one,
    :meth:`synced` after an fsync, :meth:`renamed` / :meth:`unlinked` after those. The
    caller serialises calls (the FUSE layer holds one lock around log and operation).
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, FileUndo] = {}

    def _entry(self, path: str, fd: int) -> FileUndo:
        entry = self.files.get(path)
        if entry is None:  # first change since the sync point: its size is the synced one
            entry = self.files[path] = FileUndo(synced_size=_size(fd))
        return entry

    def created(self, path: str) -> None:
        """``path`` was created (empty): a rollback removes it unless it is fsynced."""
        self.files[path] = FileUndo(synced_size=0, created=True)

    def before_write(self, path: str, fd: int, offset: int, length: int) -> None:
        """Save the synced bytes a write of ``length`` at ``offset`` will overwrite."""
        entry = self._entry(path, fd)
        entry.written += length
        if entry.created:
            return  # the whole file goes
        end = min(offset + length, entry.synced_size, _size(fd))
        if end > offset:
            entry.saved.append((offset, os.pread(fd, end - offset, offset)))

    def before_truncate(self, path: str, fd: int, length: int) -> None:
        """Save the synced bytes a truncate to ``length`` will cut off."""
        entry = self._entry(path, fd)
        if entry.created:
            return
        end = min(entry.synced_size, _size(fd))
        if end > length:
            entry.saved.append((length, os.pread(fd, end - length, length)))
            entry.written += end - length

    def synced(self, path: str) -> None:
        """``path`` was fsynced: what it holds now survives a cut."""
        self.files.pop(path, None)

    def renamed(self, old: str, new: str) -> None:
        """The undo records follow the file; one it replaced is gone (metadata is kept)."""
        self.files.pop(new, None)
        entry = self.files.pop(old, None)
        if entry is not None:
            self.files[new] = entry
        prefix = old.rstrip("/") + "/"
        for path in [p for p in self.files if p.startswith(prefix)]:  # a directory moved
            self.files[new.rstrip("/") + "/" + path[len(prefix):]] = self.files.pop(path)

    def unlinked(self, path: str) -> None:
        self.files.pop(path, None)

    def written_back(self) -> int:
        """The kernel wrote every dirty page back (its periodic writeback): what every
        file holds now survives a cut. How many files had changes."""
        count = len(self.files)
        self.files.clear()
        return count

    def pending(self) -> int:
        """Files with changes a cut would take away."""
        return len(self.files)

    def rollback(self) -> CutReport:
        """Put every file back to its last sync point; the log is empty afterwards."""
        report = CutReport()
        for path, entry in sorted(self.files.items()):
            full = os.path.join(self.root, path.lstrip("/"))
            report.bytes_dropped += entry.written
            if entry.created:
                try:
                    os.unlink(full)
                    report.removed.append(path)
                except FileNotFoundError:
                    pass
                continue
            try:
                fd = os.open(full, os.O_RDWR)
            except FileNotFoundError:  # unlinked through another name: nothing to restore
                continue
            try:
                for offset, old in reversed(entry.saved):
                    os.pwrite(fd, old, offset)
                os.ftruncate(fd, entry.synced_size)
                os.fsync(fd)
            finally:
                os.close(fd)
            report.restored.append(path)
        self.files.clear()
        return report
