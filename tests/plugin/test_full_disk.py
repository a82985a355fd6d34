"""A results disk that fills during a run (issue 24 item 3), on a small tmpfs of its own.

The test mounts a 4 MiB tmpfs as ``--brokerperf-results`` (root needed; unmounted after).
The broker fixture fills the disk once the test's directory exists, so every result
file the run writes from then on meets ``ENOSPC``. On main this ended, after the whole
run, in a raw ``OSError`` with a truncated (invalid JSON) ``record.json`` and no
``results.jsonl`` line. Now:

* the first failed write is said at once, during the run, naming the file and the free
  space;
* ``record.json`` is valid JSON (the space held for it since the run began is given
  back), lists the artefacts that could not be written and the error;
* ``results.jsonl`` holds the record;
* the test fails with the file, the free space and the fix, not a raw ``OSError``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS

CONFTEST = """
from pathlib import Path

import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind, brokerperf_settings):
    filler = Path(brokerperf_settings.results_dir) / "filler"
    with open(filler, "wb") as fh:  # the disk fills once the test's directory exists
        try:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
        except OSError:
            pass
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200))
"""


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "res"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_results_disk_leaves_a_valid_record_and_says_so_at_once(
        pytester: pytest.Pytester, tmpfs: Path) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess(
        *[a for a in FAST_ARGS if not a.startswith("--brokerperf-duration")],
        "--brokerperf-duration=3", "--brokerperf-noise-retries=0", "-v",
        f"--brokerperf-results={tmpfs}")
    out = result.stdout.lines
    assert result.ret == pytest.ExitCode.TESTS_FAILED, "\n".join(out)
    # said at once: before the run's last period line, naming the file and free space
    said = [i for i, x in enumerate(out) if "RESULTS NOT WRITTEN: cannot write" in x]
    periods = [i for i, x in enumerate(out) if " measure " in x and "sent" in x]
    assert said and periods and said[0] < periods[-1], "\n".join(out)
    assert "No space left on device" in out[said[0]] and "free on its filesystem" in out[said[0]]
    # the test fails with the file, the free space and the fix, not a raw OSError
    text = "\n".join(out)
    assert "ResultsWriteError: cannot write" in text and "Fix: free space there" in text
    assert "OSError: [Errno 28]" not in text
    # the record as left on disk: valid JSON, naming what is missing and why
    [record_path] = tmpfs.glob("*/*test_tail*/record.json")
    record = json.loads(record_path.read_text())
    assert record["artefacts_missing"] and "No space left on device" in record["results_error"]
    assert record["delivery"]["acknowledged"] > 0
    [line] = (tmpfs / "results.jsonl").read_text().splitlines()
    assert json.loads(line)["test_id"] == record["test_id"]
    assert not list(tmpfs.glob("*/*/.*.tmp-*"))  # no half-written temporary file left
    (Path(os.environ.get("BROKERPERF_PROBE_DIR", pytester.path)) / "full-disk-record.json"
     ).write_text(record_path.read_text())
