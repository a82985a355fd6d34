"""The power-cut filesystem mounted for real (FUSE), no broker: what was fsynced
survives a cut, what was not is gone, and nothing stays mounted afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision.powercut import PowerCutMount, powercut_problem

pytestmark = pytest.mark.integration


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[PowerCutMount]:
    problem = powercut_problem()
    if problem is not None:
        pytest.skip(problem)
    m = PowerCutMount(tmp_path / "backing", tmp_path / "mnt", tmp_path / "state").start()
    try:
        yield m
    finally:
        m.stop()
    assert not os.path.ismount(tmp_path / "mnt")


def test_synced_bytes_survive_a_cut_and_unsynced_ones_do_not(mounted: PowerCutMount) -> None:
    mnt = mounted.mount
    (mnt / "topic-0").mkdir()
    seg = mnt / "topic-0" / "segment.log"
    fd = os.open(seg, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, b"A" * 4096)
    os.fsync(fd)
    os.write(fd, b"B" * 1000)  # acknowledged, in the page cache only
    os.close(fd)
    idx = mnt / "topic-0" / "segment.index"
    with open(idx, "wb") as f:
        f.write(b"\0" * 512)
        f.flush()
        os.fdatasync(f.fileno())
    with open(idx, "r+b") as f:  # an overwrite in place, never synced
        f.seek(100)
        f.write(b"\x01" * 8)
    (mnt / "never-synced").write_bytes(b"gone")
    assert seg.stat().st_size == 5096  # a kill -9 would leave all of it

    report = mounted.cut()

    assert mounted.mounted  # mounted again, on a cold page cache
    assert seg.read_bytes() == b"A" * 4096
    assert idx.read_bytes() == b"\0" * 512
    assert not (mnt / "never-synced").exists()
    assert (mnt / "topic-0").is_dir()  # directories are metadata: kept
    assert report["removed"] == ["/never-synced"]
    assert sorted(report["restored"]) == ["/topic-0/segment.index", "/topic-0/segment.log"]
    assert report["bytes_dropped"] == 1000 + 8 + 4
    assert (mounted.backing / "topic-0" / "segment.log").stat().st_size == 4096


def test_a_second_cut_starts_from_the_state_after_the_first(mounted: PowerCutMount) -> None:
    f = mounted.mount / "f"
    with open(f, "wb") as out:
        out.write(b"one")
        out.flush()
        os.fsync(out.fileno())
    mounted.cut()
    with open(f, "ab") as out:
        out.write(b"two")
    mounted.cut()
    assert f.read_bytes() == b"one"
    assert len(mounted.cuts) == 2


def test_a_filesystem_whose_server_was_killed_is_unmounted_and_removed(tmp_path: Path) -> None:
    """What the watchdog does after a session died of SIGKILL: the FUSE server is
    SIGKILLed too, and the removal of the scratch directory unmounts what it left."""
    import signal

    from pytest_brokerperf.brokers.provision.watchdog import remove_tree

    problem = powercut_problem()
    if problem is not None:
        pytest.skip(problem)
    scratch = tmp_path / "scratch"
    m = PowerCutMount(scratch / "backing", scratch / "mnt", scratch / "state").start()
    (m.mount / "f").write_bytes(b"x")
    assert m._proc is not None
    m._proc.signal(signal.SIGKILL)
    m._proc.wait(10)
    remove_tree(str(scratch))
    assert not os.path.ismount(scratch / "mnt")
    assert not scratch.exists()
    m.stop()  # nothing left to stop: no error


def test_a_cluster_s_cut_merges_every_node_and_every_durable_directory(tmp_path: Path) -> None:
    """The shared cut of local clusters (provision/powercut_nodes.py): node 1 with two
    durable directories, node 2 with one; everything killed before any rollback."""
    from pytest_brokerperf.brokers.provision.powercut_nodes import PowerCutNodes

    problem = powercut_problem()
    if problem is not None:
        pytest.skip(problem)
    dirs = {1: [tmp_path / "n1-journal", tmp_path / "n1-ledgers"], 2: [tmp_path / "n2-data"]}
    nodes = PowerCutNodes(owner="Toy", fix="none")
    nodes.mount(tmp_path / "backing", dirs)
    killed: list[list[int]] = []
    try:
        for paths in dirs.values():
            for d in paths:
                (d / "booted").write_bytes(b"b" * 7)  # never fsynced, but written back
        nodes.write_back()
        for i, paths in dirs.items():
            for k, d in enumerate(paths):
                (d / "kept").write_bytes(b"k" * 10)
                with open(d / "kept", "rb+") as f:
                    os.fsync(f.fileno())
                (d / "unsynced").write_bytes(b"u" * (100 * i + k))
        report = nodes.cut_all([1, 2], lambda idx: killed.append(list(idx)) or [11, 22])
        assert killed == [[1, 2]]
        assert report["pids"] == [11, 22]
        assert report["nodes"][1]["bytes_dropped"] == 100 + 101
        assert report["nodes"][2]["bytes_dropped"] == 200
        assert report["bytes_dropped"] == 401
        assert sorted(report["removed"]) == ["node-1/unsynced", "node-1/unsynced",
                                             "node-2/unsynced"]
        for paths in dirs.values():
            for d in paths:
                assert os.path.ismount(d) and (d / "kept").read_bytes() == b"k" * 10
                assert (d / "booted").read_bytes() == b"b" * 7
                assert not (d / "unsynced").exists()
        with pytest.raises(Exception, match=r"Toy node\(s\) \[3\] have no power-cut"):
            nodes.cut(3, lambda idx: 0)
    finally:
        nodes.stop()
    assert not any(os.path.ismount(d) for paths in dirs.values() for d in paths)
