"""ci/setup.sh: the smoke's set-up installs what the Kafka smoke needs and nothing more,
and a non-root user gets a message naming what to install, never an apt-get (issue 23,
item 6). Run with a PATH without Java or Maven and an ``id`` that says "not root"."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _setup(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    for tool in ("dirname", "awk", "grep"):  # the script's own tools; no java, mvn, apt-get
        (bin_dir / tool).symlink_to(Path("/usr/bin") / tool if (Path("/usr/bin") / tool)
                                    .exists() else Path("/bin") / tool)
    return subprocess.run(["/bin/bash", str(ROOT / "ci" / "setup.sh"), *args],
                          env={"PATH": str(bin_dir), "PYTHON": sys.executable,
                               "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60, check=False)


def test_smoke_setup_as_non_root_names_java_and_maven_only(tmp_path):
    out = _setup(tmp_path, "--smoke")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "please install: openjdk-17-jre-headless maven" in out.stderr
    for heavy in ("rabbitmq", "chromium", "fuse", "pulsar"):
        assert heavy not in out.stderr.lower()
    assert "installing" not in out.stdout  # nothing was apt-installed


def test_full_setup_as_non_root_names_everything_the_tests_need(tmp_path):
    out = _setup(tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    for pkg in ("openjdk-17-jre-headless", "maven", "rabbitmq-server", "chromium"):
        assert pkg in out.stderr


@pytest.mark.parametrize("arg", ["--smok", "all"])
def test_an_unknown_argument_is_refused(tmp_path, arg):
    out = _setup(tmp_path, arg)
    assert out.returncode == 2
    assert f"unknown argument '{arg}'" in out.stderr and "--smoke" in out.stderr
