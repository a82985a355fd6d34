"""Fast tests of the local Pulsar standalone: standalone.conf, JVM flags, jars, errors.

Nothing here starts a JVM or reaches a network (Maven is a fake script).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.provision import maven
from pytest_brokerperf.brokers.provision.java import render_properties
from pytest_brokerperf.brokers.pulsar.process import (
    PulsarPorts,
    PulsarStandalone,
    journal_settings,
    pulsar_jvm_flags,
    render_pulsar_log4j2,
    standalone_args,
    standalone_config,
)
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError, ProvisionError

PORTS = PulsarPorts(broker_port=21650, web_port=21080)


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"((?:\\.|[^=\\])*)=(.*)$", line)
        assert m, line
        out[re.sub(r"\\(.)", r"\1", m.group(1))] = m.group(2)
    return out


def test_single_bookie_config_is_loopback_and_1_1_1() -> None:
    cfg = standalone_config(PORTS)
    assert cfg["bindAddress"] == cfg["advertisedAddress"] == "127.0.0.1"
    assert cfg["brokerServicePort"] == "21650" and cfg["webServicePort"] == "21080"
    assert cfg["listeningInterface"] == "lo"  # bookies bind loopback too
    # ServiceConfiguration defaults to 2/2/2, which one bookie cannot serve
    assert (cfg["managedLedgerDefaultEnsembleSize"], cfg["managedLedgerDefaultWriteQuorum"],
            cfg["managedLedgerDefaultAckQuorum"]) == ("1", "1", "1")
    assert cfg["metadataStoreUrl"] == ""  # -> rocksdb://<metadata dir>
    assert cfg["managedLedgerNewEntriesCheckDelayInMillis"] == "0"  # OMB broker template
    assert cfg["brokerDeleteInactiveTopicsEnabled"] == "false"
    assert cfg["functionsWorkerEnabled"] == "false"
    assert cfg["ledgerStorageClass"].endswith("DbLedgerStorage")
    # BookKeeper's defaults when no durability level is asked for
    assert cfg["journalWriteData"] == cfg["journalSyncData"] == "true"
    # a stop waits min(a quarter of it, 5 s) for the event loops: 1.5 s, not 5 s
    assert min(int(cfg["brokerShutdownTimeoutMs"]) // 4, 5000) == 1500


def test_three_bookies_get_omb_default_quorum() -> None:
    cfg = standalone_config(PORTS, bookies=3)
    assert (cfg["managedLedgerDefaultEnsembleSize"], cfg["managedLedgerDefaultWriteQuorum"],
            cfg["managedLedgerDefaultAckQuorum"]) == ("3", "3", "2")


@pytest.mark.parametrize(("level", "sync"), [(1, "true"), (2, "false"), (3, "true"),
                                              (4, "false")])
def test_durability_level_sets_the_bookie_journal(level: int, sync: str) -> None:
    cfg = standalone_config(PORTS, durability=level)
    assert cfg["journalWriteData"] == "true"
    assert cfg["journalSyncData"] == sync
    if sync == "false":  # StreamNative's async-journal runs
        assert cfg["journalPageCacheFlushIntervalMSec"] == "1000"


def test_bad_durability_level() -> None:
    with pytest.raises(ConfigError, match="durability level 5"):
        journal_settings(5)
    with pytest.raises(ConfigError, match="durability level 0"):
        PulsarStandalone(durability=0)


def test_overrides_merged_last_and_file_round_trips() -> None:
    cfg = standalone_config(PORTS, durability=1,
                            overrides={"journalFlushWhenQueueEmpty": "true",
                                       "journalSyncData": "false"})
    assert cfg["journalFlushWhenQueueEmpty"] == "true"
    assert cfg["journalSyncData"] == "false"
    text = render_properties(cfg, header="test")
    assert parse_properties(text) == cfg


def test_jvm_flags_are_the_standalone_ones(tmp_path: Path) -> None:
    flags = pulsar_jvm_flags("1g", "1g", tmp_path / "gc.log", tmp_path / "log4j2.properties")
    assert "-Xms1g" in flags and "-Xmx1g" in flags and "-XX:MaxDirectMemorySize=1g" in flags
    assert "-XX:+UseG1GC" in flags and "-XX:MaxGCPauseMillis=10" in flags
    assert any(f.startswith("-Xlog:gc*:file=") and "gc.log" in f for f in flags)
    # without these two the bookie cannot use the RocksDB metadata store
    assert ("-Dbookkeeper.metadata.bookie.drivers="
            "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver") in flags
    assert ("-Dbookkeeper.metadata.client.drivers="
            "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver") in flags
    opens = [flags[i + 1] for i, f in enumerate(flags) if f == "--add-opens"]
    assert "java.base/java.nio=ALL-UNNAMED" in opens
    assert "java.base/jdk.internal.misc=ALL-UNNAMED" in opens
    assert f"-Dlog4j2.configurationFile={tmp_path / 'log4j2.properties'}" in flags
    with pytest.raises(ConfigError, match="direct memory"):
        pulsar_jvm_flags("1g", "lots", tmp_path / "gc.log", tmp_path / "l")
    with pytest.raises(ConfigError, match="':'"):
        pulsar_jvm_flags("1g", "1g", Path("/a:b/gc.log"), tmp_path / "l")


def test_standalone_arguments(tmp_path: Path) -> None:
    args = standalone_args(tmp_path / "standalone.conf", tmp_path / "data", 1)
    assert args[:2] == ["--config", str(tmp_path / "standalone.conf")]
    for flag in ("--no-functions-worker", "--no-stream-storage", "--wipe-data"):
        assert flag in args
    assert args[args.index("--advertised-address") + 1] == "127.0.0.1"
    assert args[args.index("--metadata-dir") + 1] == str(tmp_path / "data" / "metadata")
    assert "--num-bookies" not in args
    three = standalone_args(tmp_path / "s.conf", tmp_path / "data", 3)
    assert three[three.index("--num-bookies") + 1] == "3"


def test_log4j2_config_keeps_milestones_at_info() -> None:
    text = render_pulsar_log4j2()
    assert "rootLogger.level = warn" in text
    assert "org.apache.pulsar.PulsarStandalone" in text
    assert "org.apache.pulsar.metadata.bookkeeper.BKCluster" in text


def test_constructor_validation() -> None:
    with pytest.raises(ConfigError, match="positive integer"):
        PulsarStandalone(nodes=0)
    with pytest.raises(ConfigError, match="heap"):
        PulsarStandalone(heap="big")
    with pytest.raises(ConfigError, match=r"bad standalone\.conf key"):
        PulsarStandalone(overrides={"bad key": "1"})
    s = PulsarStandalone()
    assert not s.running and s.processes == []
    with pytest.raises(RuntimeError, match="not running"):
        _ = s.endpoint
    s.stop()  # safe when never started


# -- jars -----------------------------------------------------------------------------------


def test_pulsar_artifacts_are_unshaded_broker_plus_log4j2() -> None:
    arts = maven.pulsar_artifacts("4.0.7")
    coords = [a.coordinates for a in arts]
    assert coords[0] == "org.apache.pulsar:pulsar-broker:4.0.7"
    assert not any("shaded" in c for c in coords)
    assert any(c.startswith("org.apache.logging.log4j:log4j-slf4j2-impl:") for c in coords)
    with pytest.raises(ConfigError, match="not supported"):
        maven.pulsar_artifacts("3.0.0")
    with pytest.raises(ConfigError, match="bad version"):
        maven.pulsar_artifacts("4.0;rm")


def test_pulsar_version_of(tmp_path: Path) -> None:
    (tmp_path / "pulsar-broker-4.0.7.jar").touch()
    (tmp_path / "pulsar-broker-common-4.0.7.jar").touch()
    (tmp_path / "pulsar-broker-auth-sasl-4.0.7.jar").touch()
    assert maven.pulsar_version_of(tmp_path) == "4.0.7"
    (tmp_path / "pulsar-broker-4.0.6.jar").touch()
    with pytest.raises(ProvisionError, match="exactly one"):
        maven.pulsar_version_of(tmp_path)


def test_unavailable_without_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    with pytest.raises(BrokerUnavailable, match=r"Pulsar 4\.0\.7 is not available.*mvn"):
        maven.resolve_pulsar("4.0.7")


FAKE_MVN = """#!{python}
import os, sys, xml.etree.ElementTree as ET
args = sys.argv[1:]
pom = args[args.index("-f") + 1]
out = [a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory=")][0]
os.makedirs(out, exist_ok=True)
for dep in ET.parse(pom).getroot().iter("dependency"):
    open(os.path.join(out, dep.findtext("artifactId") + "-" + dep.findtext("version")
                      + ".jar"), "wb").close()
"""


def test_resolve_and_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mvn").write_text(FAKE_MVN.format(python=sys.executable), encoding="utf-8")
    (bindir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    assert maven.main(["pulsar"]) == 0
    lib = Path(capsys.readouterr().out.strip())
    assert lib == tmp_path / "cache" / f"pulsar-{maven.PULSAR_DEFAULT_VERSION}" / "lib"
    assert maven.pulsar_version_of(lib) == maven.PULSAR_DEFAULT_VERSION
    assert maven.main(["pulsar", "--version", "3.0.0"]) == 1
    assert "not supported" in capsys.readouterr().err


def test_extra_listeners_replace_the_advertised_address(tmp_path: Path) -> None:
    cfg = standalone_config(PORTS, extra_listeners={"proxy": 7001})
    assert "advertisedAddress" not in cfg  # Pulsar refuses both together
    assert cfg["advertisedListeners"] == (
        f"internal:pulsar://127.0.0.1:{PORTS.broker_port},proxy:pulsar://127.0.0.1:7001")
    assert cfg["internalListenerName"] == "internal"
    args = standalone_args(tmp_path / "s.conf", tmp_path / "data", 1, advertised_address=False)
    assert "--advertised-address" not in args
