"""Mount a power-cut filesystem over a data directory, cut it, remount it, clean up.

:class:`PowerCutMount` runs :mod:`.powercut_fs` as a managed process (so the session's
process cleanup and watchdog stop it, and its SIGTERM unmounts) over ``backing``,
mounted at ``mount``. :meth:`PowerCutMount.cut` is the power cut once the node using it
was killed with SIGKILL: every file goes back to its last fsync, then the filesystem is
unmounted and mounted again (a cold page cache, as after a reboot) so the node can start
on what a real disk would have kept. See docs/reference/faults.md (``power-cut``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_brokerperf.brokers.provision.powercut_fs import (
    CUT_FILE,
    CUT_REPORT,
    READY_FILE,
    WRITEBACK_FILE,
)
from pytest_brokerperf.brokers.provision.process import (
    ManagedProcess,
    discard_cleanup_path,
    register_cleanup_path,
)
from pytest_brokerperf.core.errors import BrokerUnavailable, ProvisionError

__all__ = ["PowerCutMount", "powercut_problem"]

MOUNT_TIMEOUT_S = 20.0
CUT_TIMEOUT_S = 60.0


def powercut_problem() -> str | None:
    """Why this machine cannot mount the filesystem (with the fix), or None."""
    if importlib.util.find_spec("fuse") is None:
        return ("the power-cut filesystem needs fusepy, which is not installed. Fix: "
                "pip install 'pytest-brokerperf[faults]'")
    try:
        import fuse  # noqa: F401  (fusepy loads libfuse2 on import)
    except OSError as exc:
        return (f"fusepy cannot load libfuse ({exc}). Fix: apt-get install fuse libfuse2")
    if not os.path.exists("/dev/fuse"):
        return ("the power-cut filesystem needs /dev/fuse, which this machine lacks. Fix: "
                "load the fuse module, or give the container --device /dev/fuse")
    if shutil.which("fusermount") is None:
        return "fusermount is not on PATH. Fix: apt-get install fuse"
    return None


def _unmount(mount: Path) -> None:
    """Lazy unmount (a dead filesystem answers 'transport endpoint not connected')."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["fusermount", "-u", "-z", str(mount)], capture_output=True,
                       timeout=10, check=False)


@dataclass
class PowerCutMount:
    """``mount`` serving ``backing`` through the power-cut filesystem; ``state`` holds the
    control files and the filesystem's log."""

    backing: Path
    mount: Path
    state: Path
    cuts: list[dict[str, Any]] = field(default_factory=list)  # each cut's report
    _proc: ManagedProcess | None = None

    def start(self) -> PowerCutMount:
        """Mount (ProvisionError with the filesystem's log when it does not come up)."""
        problem = powercut_problem()
        if problem is not None:
            raise BrokerUnavailable(problem)
        for d in (self.backing, self.mount, self.state):
            d.mkdir(parents=True, exist_ok=True)
        for name in (CUT_FILE, CUT_REPORT, READY_FILE, WRITEBACK_FILE):
            (self.state / name).unlink(missing_ok=True)
        _unmount(self.mount)  # a stale mount of an earlier session that died
        register_cleanup_path(self.state)
        self._proc = ManagedProcess(
            [sys.executable, "-m", "pytest_brokerperf.brokers.provision.powercut_fs",
             str(self.backing), str(self.mount), str(self.state)],
            log_file=self.state / "powercut-fs.log", name="powercut-fs", append_log=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).start()
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not (self.state / READY_FILE).exists():
            if not self._proc.alive() or time.monotonic() > deadline:
                tail = self._proc.log_tail()
                self.stop()
                raise ProvisionError(
                    f"the power-cut filesystem over {self.backing} did not mount at "
                    f"{self.mount} within {MOUNT_TIMEOUT_S:g} s; its log:\n{tail}")
            time.sleep(0.02)
        return self

    @property
    def mounted(self) -> bool:
        return self._proc is not None and self._proc.alive() and os.path.ismount(self.mount)

    def write_back(self) -> None:
        """Count everything written so far as on disk, as the kernel's periodic writeback
        would have made it by the time a power cut comes (``vm.dirty_expire_centisecs``:
        30 s by default)."""
        if self._proc is None or not self._proc.alive():
            raise ProvisionError(f"no power-cut filesystem is mounted at {self.mount}")
        flag = self.state / WRITEBACK_FILE
        flag.touch()
        deadline = time.monotonic() + CUT_TIMEOUT_S
        while flag.exists():
            if not self._proc.alive() or time.monotonic() > deadline:
                raise ProvisionError(
                    f"the power-cut filesystem at {self.mount} did not write back within "
                    f"{CUT_TIMEOUT_S:g} s; its log:\n{self._proc.log_tail()}")
            time.sleep(0.02)

    def cut(self) -> dict[str, Any]:
        """Drop everything not fsynced, then remount; the cut's report (files removed and
        restored, bytes dropped). Kill the processes using the mount first (SIGKILL):
        the cut fails every operation still running on it."""
        if self._proc is None or not self._proc.alive():
            raise ProvisionError(f"no power-cut filesystem is mounted at {self.mount} to cut")
        (self.state / CUT_FILE).touch()
        deadline = time.monotonic() + CUT_TIMEOUT_S
        report_file = self.state / CUT_REPORT
        while not report_file.exists():
            if not self._proc.alive() or time.monotonic() > deadline:
                raise ProvisionError(
                    f"the power-cut filesystem at {self.mount} did not roll back within "
                    f"{CUT_TIMEOUT_S:g} s; its log:\n{self._proc.log_tail()}")
            time.sleep(0.02)
        report: dict[str, Any] = json.loads(report_file.read_text(encoding="utf-8"))
        self.cuts.append(report)
        self._halt()
        self.start()
        return report

    def _halt(self) -> None:
        if self._proc is not None:
            self._proc.terminate()  # fusepy unmounts on SIGTERM
            self._proc.stop(timeout=10)
            self._proc = None
        _unmount(self.mount)

    def stop(self) -> None:
        """Unmount and stop the filesystem; the backing directory stays (its owner's)."""
        self._halt()
        discard_cleanup_path(self.state)
