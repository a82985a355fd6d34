"""Fast tests of local Kafka provisioning: config rendering, Maven cache, processes, ports.

Nothing here starts a JVM or reaches a network: Maven is replaced by a fake ``mvn``
script, processes are ``sh``/``sleep``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_brokerperf.brokers.kafka import node_config as kp
from pytest_brokerperf.brokers.kafka.node_config import (
    ExtraListener,
    NodePorts,
    generate_cluster_id,
    kafka_jvm_flags,
    node_config,
    render_log4j2_properties,
)
from pytest_brokerperf.brokers.kafka.process import KafkaProcessCluster
from pytest_brokerperf.brokers.provision import java as pj
from pytest_brokerperf.brokers.provision import maven
from pytest_brokerperf.brokers.provision.java import render_properties
from pytest_brokerperf.brokers.provision.ports import (
    ephemeral_port_range,
    free_port,
    free_ports,
    port_open,
    wait_for_port,
)
from pytest_brokerperf.brokers.provision.process import (
    ManagedProcess,
    discard_cleanup_path,
    kill_all,
    log_tail,
    register_cleanup_path,
    running_processes,
)
from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError, ProvisionError
from pytest_brokerperf.metrics.cpus import default_broker_cpus

ONE = [NodePorts(1, 21001, 21002)]
THREE = [NodePorts(1, 21001, 21002), NodePorts(2, 21003, 21004), NodePorts(3, 21005, 21006)]


def parse_properties(text: str) -> dict[str, str]:
    """Enough of java.util.Properties for what render_properties writes."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", "!")):
            continue
        m = re.match(r"((?:\\.|[^=\\])*)=(.*)$", line)
        assert m, line
        key = re.sub(r"\\(.)", r"\1", m.group(1))
        value = m.group(2).replace("\\n", "\n").replace("\\\\", "\\")
        out[key] = value
    return out


# -- cluster id --------------------------------------------------------------------------


def test_cluster_id_format() -> None:
    ids = {generate_cluster_id() for _ in range(500)}
    assert len(ids) == 500
    for cid in ids:
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", cid), cid


def test_cluster_id_never_starts_with_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    dash_first = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))  # base64 index 62 = '-'
    ok = uuid.UUID(bytes=bytes(range(16)))
    seq = iter([dash_first, dash_first, ok])
    monkeypatch.setattr(kp.uuid, "uuid4", lambda: next(seq))
    cid = generate_cluster_id()
    assert not cid.startswith("-")
    assert cid == "AAECAwQFBgcICQoLDA0ODw"


# -- node properties ----------------------------------------------------------------------


def test_single_node_static_config(tmp_path: Path) -> None:
    cfg = node_config(ONE[0], ONE, data_dir=tmp_path / "d")
    assert cfg["process.roles"] == "broker,controller"
    assert cfg["node.id"] == "1"
    assert cfg["controller.quorum.voters"] == "1@127.0.0.1:21002"
    assert "controller.quorum.bootstrap.servers" not in cfg
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.1:21001,CONTROLLER://127.0.0.1:21002"
    assert cfg["advertised.listeners"] == "PLAINTEXT://127.0.0.1:21001"
    assert cfg["controller.listener.names"] == "CONTROLLER"
    assert cfg["inter.broker.listener.name"] == "PLAINTEXT"
    assert cfg["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert cfg["log.dirs"] == str(tmp_path / "d")
    assert cfg["num.partitions"] == "1"
    assert cfg["auto.create.topics.enable"] == "false"
    assert cfg["group.initial.rebalance.delay.ms"] == "0"
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
    ):
        assert cfg[key] == "1", key


def test_single_node_dynamic_quorum_config(tmp_path: Path) -> None:
    cfg = node_config(ONE[0], ONE, data_dir=tmp_path, quorum="dynamic")
    assert cfg["controller.quorum.bootstrap.servers"] == "127.0.0.1:21002"
    assert "controller.quorum.voters" not in cfg
    assert cfg["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:21001,CONTROLLER://127.0.0.1:21002"
    )


def test_three_node_config(tmp_path: Path) -> None:
    cfgs = [node_config(n, THREE, data_dir=tmp_path / f"n{n.node_id}") for n in THREE]
    voters = "1@127.0.0.1:21002,2@127.0.0.1:21004,3@127.0.0.1:21006"
    assert [c["node.id"] for c in cfgs] == ["1", "2", "3"]
    assert {c["controller.quorum.voters"] for c in cfgs} == {voters}
    assert len({c["log.dirs"] for c in cfgs}) == 3
    assert cfgs[1]["listeners"] == "PLAINTEXT://127.0.0.1:21003,CONTROLLER://127.0.0.1:21004"
    for c in cfgs:
        assert c["offsets.topic.replication.factor"] == "3"
        assert c["transaction.state.log.replication.factor"] == "3"
        assert c["transaction.state.log.min.isr"] == "2"
        assert c["share.coordinator.state.topic.replication.factor"] == "3"
        assert c["share.coordinator.state.topic.min.isr"] == "2"


def test_two_node_replication_factor_capped(tmp_path: Path) -> None:
    two = THREE[:2]
    cfg = node_config(two[0], two, data_dir=tmp_path)
    assert cfg["offsets.topic.replication.factor"] == "2"
    assert cfg["transaction.state.log.min.isr"] == "2"


def test_extra_listeners_config(tmp_path: Path) -> None:
    extra = [ExtraListener("DELAYED", bind_port=40123, advertised_port=40999)]
    cfg = node_config(ONE[0], ONE, data_dir=tmp_path, extra_listeners=extra)
    assert cfg["listeners"].split(",") == [
        "PLAINTEXT://127.0.0.1:21001",
        "CONTROLLER://127.0.0.1:21002",
        "DELAYED://127.0.0.1:40123",
    ]
    assert cfg["advertised.listeners"].split(",") == [
        "PLAINTEXT://127.0.0.1:21001",
        "DELAYED://127.0.0.1:40999",
    ]
    assert "DELAYED:PLAINTEXT" in cfg["listener.security.protocol.map"].split(",")
    assert cfg["inter.broker.listener.name"] == "PLAINTEXT"


def test_overrides_merged_last(tmp_path: Path) -> None:
    cfg = node_config(
        ONE[0],
        ONE,
        data_dir=tmp_path,
        overrides={"num.partitions": "6", "auto.create.topics.enable": "true", "x.y": "z"},
    )
    assert cfg["num.partitions"] == "6"
    assert cfg["auto.create.topics.enable"] == "true"
    assert list(cfg)[-1] == "x.y"


def test_properties_text_round_trips(tmp_path: Path) -> None:
    cfg = node_config(THREE[1], THREE, data_dir=tmp_path / "with space", overrides={"a=b": "c\\d"})
    text = render_properties(cfg, header="node 2 of 3")
    assert text.startswith("# node 2 of 3\n")
    assert "a\\=b=c\\\\d" in text
    assert parse_properties(text) == cfg


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="single node"):
        node_config(THREE[0], THREE, data_dir=Path("/x"), quorum="dynamic")
    with pytest.raises(ConfigError, match="single-node"):
        extra = [ExtraListener("A", 1, 2)]
        node_config(THREE[0], THREE, data_dir=Path("/x"), extra_listeners=extra)
    with pytest.raises(ConfigError, match="single-node"):
        KafkaProcessCluster(nodes=3, extra_listeners={"DELAYED": 40000})
    with pytest.raises(ConfigError, match="single node"):
        KafkaProcessCluster(nodes=3, quorum="dynamic")
    for bad in ("delayed", "PLAINTEXT", "CONTROLLER", "A-B", ""):
        with pytest.raises(ConfigError, match="listener name"):
            KafkaProcessCluster(extra_listeners={bad: 40000})
    with pytest.raises(ConfigError, match="advertised port"):
        KafkaProcessCluster(extra_listeners={"A": 40000, "B": 40000})
    with pytest.raises(ConfigError, match="advertised port"):
        KafkaProcessCluster(extra_listeners={"A": 70000})
    with pytest.raises(ConfigError, match="heap"):
        KafkaProcessCluster(heap="lots")
    with pytest.raises(ConfigError, match="nodes"):
        KafkaProcessCluster(nodes=0)
    with pytest.raises(ConfigError, match="subset"):
        KafkaProcessCluster(cpus={10_000})


def test_fluent_configuration() -> None:
    c = (
        KafkaProcessCluster()
        .with_override("num.io.threads", "2")
        .with_listener("DELAYED", 40999)
        .with_heap("512m")
    )
    assert c.broker_overrides == {"num.io.threads": "2"}
    assert c.extra_listeners == {"DELAYED": 40999}
    assert c.heap == "512m"
    with pytest.raises(ConfigError):
        c.with_heap("1 GB")


# -- JVM flags, logging, CPUs ---------------------------------------------------------------


def test_jvm_flags_match_kafka_scripts(tmp_path: Path) -> None:
    flags = kafka_jvm_flags("1g", tmp_path / "gc-1.log", tmp_path)
    assert flags[:2] == ["-Xms1g", "-Xmx1g"]
    for f in (
        "-server",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-XX:MaxInlineLevel=15",
        "-Djava.awt.headless=true",
        f"-Xlog:gc*:file={tmp_path / 'gc-1.log'}:time,uptime:filecount=10,filesize=100M",
        f"-Dkafka.logs.dir={tmp_path}",
    ):
        assert f in flags
    assert kp.logging_flags("4.3.1", tmp_path / "l.properties") == [
        f"-Dlog4j2.configurationFile={tmp_path / 'l.properties'}"
    ]
    assert kp.logging_flags("3.9.1", tmp_path / "l.properties") == [
        f"-Dlog4j.configuration=file:{tmp_path / 'l.properties'}"
    ]
    with pytest.raises(ConfigError):
        kafka_jvm_flags("1g", Path("/a:b/gc.log"), tmp_path)


def test_log4j2_properties() -> None:
    text = render_log4j2_properties()
    props = parse_properties(text.replace(" = ", "="))
    assert props["rootLogger.level"] == "warn"
    assert props["appender.out.type"] == "Console"
    names = {v for k, v in props.items() if k.endswith(".name") and k.startswith("logger.")}
    assert "kafka.server.KafkaRaftServer" in names  # "Kafka Server started"


def test_default_broker_cpus() -> None:
    assert default_broker_cpus({0, 1}) == {1}
    assert default_broker_cpus({0, 2, 5}) == {5}
    assert default_broker_cpus({0}) is None
    assert KafkaProcessCluster(cpus=set()).broker_cpus() is None
    if len(os.sched_getaffinity(0)) > 1:
        assert KafkaProcessCluster().broker_cpus() == {max(os.sched_getaffinity(0))}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime', ("17.0.15", 17)),
        ('java version "1.8.0_392"', ("1.8.0_392", 8)),
        ('openjdk version "21" 2023-09-19', ("21", 21)),
        ('openjdk version "25-ea" 2025-09-16', ("25-ea", 25)),
    ],
)
def test_java_version_parsing(
    monkeypatch: pytest.MonkeyPatch, output: str, expected: tuple[str, int]
) -> None:
    monkeypatch.setattr(pj, "java_version_output", lambda java: output)
    assert pj.java_version("java") == expected


def test_not_running_cluster() -> None:
    c = KafkaProcessCluster()
    assert not c.running
    assert c.uptime_s() == 0.0
    with pytest.raises(RuntimeError, match="not running"):
        _ = c.endpoint
    c.stop()  # no-op


def fake_kafka_home(tmp_path: Path, version: str = "4.3.1") -> Path:
    home = tmp_path / f"kafka_2.13-{version}"
    (home / "libs").mkdir(parents=True)
    for name in (f"kafka_2.13-{version}.jar", f"kafka-clients-{version}.jar"):
        (home / "libs" / name).write_bytes(b"")
    return home


def test_start_without_java_is_unavailable(tmp_path: Path) -> None:
    c = KafkaProcessCluster(
        kafka_home=fake_kafka_home(tmp_path), java=str(tmp_path / "no-java"), workdir=tmp_path / "w"
    )
    with pytest.raises(BrokerUnavailable, match="no-java"):
        c.start()
    assert not running_processes()


def test_start_with_old_java_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pj, "java_version_output", lambda java: 'java version "11.0.2"')
    c = KafkaProcessCluster(kafka_home=fake_kafka_home(tmp_path), java="java")
    with pytest.raises(BrokerUnavailable, match="Java 17"):
        c.start()


# -- Maven cache ------------------------------------------------------------------------------


FAKE_MVN = textwrap.dedent(
    """\
    #!{python}
    # Stands in for Maven: writes one empty jar per dependency of the POM.
    import os, sys, time, xml.etree.ElementTree as ET
    args = sys.argv[1:]
    with open(os.environ["FAKE_MVN_LOG"], "a") as log:
        log.write(" ".join(args) + "\\n")
    time.sleep(float(os.environ.get("FAKE_MVN_SLEEP", "0")))
    if os.environ.get("FAKE_MVN_FAIL"):
        print("[INFO] Scanning for projects...")
        print("[ERROR] Failed to execute goal: Could not resolve dependencies for fake")
        sys.exit(1)
    pom = args[args.index("-f") + 1]
    out = [a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory=")][0]
    assert "-DincludeScope=runtime" in args and "-B" in args and "-q" in args
    os.makedirs(out, exist_ok=True)
    for dep in ET.parse(pom).getroot().iter("dependency"):
        a, v = dep.findtext("artifactId"), dep.findtext("version")
        open(os.path.join(out, f"{{a}}-{{v}}.jar"), "wb").close()
    open(os.path.join(out, "transitive-1.0.jar"), "wb").close()
    """
)


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``mvn`` first on PATH; returns the file its invocations are logged to."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "mvn"
    script.write_text(FAKE_MVN.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    calls = tmp_path / "mvn-calls.log"
    calls.touch()
    monkeypatch.setenv("FAKE_MVN_LOG", str(calls))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    return calls


def calls_of(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line]


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "c"))
    assert maven.cache_root() == tmp_path / "c"
    monkeypatch.delenv(maven.CACHE_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert maven.cache_root() == tmp_path / "home" / ".cache" / "pytest-brokerperf"
    assert maven.classpath_dir("kafka", "4.3.1", tmp_path) == tmp_path / "kafka-4.3.1"
    for bad in ("../4.3.1", "4.3.1/x", ""):
        with pytest.raises(ConfigError):
            maven.classpath_dir("kafka", bad, tmp_path)


def test_kafka_artifacts() -> None:
    coords = [a.coordinates for a in maven.kafka_artifacts("4.3.1")]
    assert coords == [
        "org.apache.kafka:kafka_2.13:4.3.1",
        "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
        "org.apache.logging.log4j:log4j-core:2.24.3",
    ]
    assert maven.KAFKA_DEFAULT_VERSION == "4.3.1"
    assert "org.slf4j:slf4j-reload4j:1.7.36" in [
        a.coordinates for a in maven.kafka_artifacts("3.9.1")
    ]
    with pytest.raises(ConfigError):
        maven.kafka_artifacts("2.8.0")
    with pytest.raises(ConfigError):
        maven.Artifact.parse("a:b")


def test_render_pom_is_valid_xml() -> None:
    arts = [*maven.kafka_artifacts(), maven.Artifact.parse("g:a:1", exclusions=["x:y"])]
    root = ET.fromstring(maven.render_pom("kafka", "4.3.1", arts))
    assert root.findtext("packaging") == "pom"
    deps = root.findall("./dependencies/dependency")
    assert [d.findtext("artifactId") for d in deps] == [
        "kafka_2.13",
        "log4j-slf4j-impl",
        "log4j-core",
        "a",
    ]
    assert deps[-1].findtext("./exclusions/exclusion/artifactId") == "y"


def test_resolve_kafka_with_maven_and_cache(fake_mvn: Path, tmp_path: Path) -> None:
    lib = maven.resolve_kafka("4.3.1")
    target = tmp_path / "cache" / "kafka-4.3.1"
    assert lib == target / "lib"
    assert (lib / "kafka_2.13-4.3.1.jar").is_file()
    assert (lib / "log4j-core-2.24.3.jar").is_file()
    assert (target / "pom.xml").is_file()
    marker = json.loads((target / "resolved.json").read_text())
    assert "transitive-1.0.jar" in marker["jars"]
    assert not list((tmp_path / "cache").glob(".*partial*"))
    (call,) = calls_of(fake_mvn)
    assert "dependency:copy-dependencies" in call
    assert maven.kafka_version_of(lib) == "4.3.1"
    # Second call: cached, Maven not run again, even without Maven on PATH.
    assert maven.resolve_kafka("4.3.1", mvn=None) == lib
    assert len(calls_of(fake_mvn)) == 1


def test_cached_kafka_needs_no_maven(
    fake_mvn: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = maven.resolve_kafka("4.3.1")
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    assert maven.resolve_kafka("4.3.1") == lib


def test_maven_failure_shows_output_and_leaves_no_cache(
    fake_mvn: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    with pytest.raises(ProvisionError, match="Could not resolve dependencies") as info:
        maven.resolve_kafka("4.3.1")
    assert "exit 1" in str(info.value)
    cache = tmp_path / "cache"
    assert not (cache / "kafka-4.3.1").exists()
    assert not list(cache.glob(".*partial*"))


def test_incomplete_cache_is_replaced(fake_mvn: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    half = cache / "kafka-4.3.1" / "lib"
    half.mkdir(parents=True)
    (half / "kafka_2.13-4.3.1.jar").write_bytes(b"")  # no marker: a killed download
    stale = cache / ".kafka-4.3.1.partial-dead"
    stale.mkdir()
    lib = maven.resolve_kafka("4.3.1")
    assert (lib.parent / "resolved.json").is_file()
    assert not stale.exists()
    assert len(calls_of(fake_mvn)) == 1


def test_changed_artifacts_are_resolved_again(fake_mvn: Path) -> None:
    arts = maven.kafka_artifacts("4.3.1")
    maven.resolve_classpath("kafka", "4.3.1", arts)
    lib = maven.resolve_classpath("kafka", "4.3.1", [*arts, maven.Artifact.parse("g:extra:2")])
    assert (lib / "extra-2.jar").is_file()
    assert len(calls_of(fake_mvn)) == 2


def test_concurrent_resolution_runs_maven_once(
    fake_mvn: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MVN_SLEEP", "1.0")
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(maven.resolve_kafka("4.3.1"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(results) == 3 and len(set(results)) == 1
    assert len(calls_of(fake_mvn)) == 1


def test_unavailable_without_maven_and_kafka_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(BrokerUnavailable) as info:
        maven.resolve_kafka("4.3.1")
    msg = str(info.value)
    assert "Maven ('mvn') is not on PATH" in msg
    assert "KAFKA_HOME" in msg
    assert "apt-get install maven" in msg
    assert "Kafka 4.3.1" in msg
    assert not (tmp_path / "cache" / "kafka-4.3.1").exists()
    # Same through shutil.which, with the real PATH.
    monkeypatch.undo()
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    monkeypatch.setenv(maven.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    with pytest.raises(BrokerUnavailable, match="KAFKA_HOME"):
        maven.resolve_kafka("4.3.1")


def test_kafka_home_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    home = fake_kafka_home(tmp_path, "4.2.0")
    (home / "libs" / "kafka_2.13-4.2.0-test.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_HOME", str(home))
    lib = maven.resolve_kafka("4.3.1")
    assert lib == home / "libs"
    assert maven.kafka_version_of(lib) == "4.2.0"
    monkeypatch.delenv("KAFKA_HOME")
    assert maven.resolve_kafka(kafka_home=home) == home / "libs"


def test_bad_kafka_home(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError, match="no libs/"):
        maven.resolve_kafka(kafka_home=tmp_path)
    (tmp_path / "libs").mkdir()
    with pytest.raises(ProvisionError, match="found: none"):
        maven.resolve_kafka(kafka_home=tmp_path)
    for v in ("4.2.0", "4.3.1"):
        (tmp_path / "libs" / f"kafka_2.13-{v}.jar").write_bytes(b"")
    with pytest.raises(ProvisionError, match=re.escape("4.2.0, 4.3.1")):
        maven.resolve_kafka(kafka_home=tmp_path)


def test_cli_prints_lib_dir(
    fake_mvn: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert maven.main(["kafka", "--version", "4.3.1"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "cache" / "kafka-4.3.1" / "lib")


def test_cli_reports_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(maven.shutil, "which", lambda name: None)
    monkeypatch.delenv("KAFKA_HOME", raising=False)
    assert maven.main(["kafka", "--cache-dir", str(tmp_path)]) == 2
    assert "KAFKA_HOME" in capsys.readouterr().err


# -- managed processes ---------------------------------------------------------------------------


def pid_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_managed_process_stops_whole_group(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    p = ManagedProcess(
        ["sh", "-c", "echo hello; sleep 60 & echo child=$!; wait"], log_file=log, name="sh"
    ).start()
    assert p.alive()
    assert p in running_processes()
    assert os.getpgid(p.pid) == p.pid  # its own process group
    deadline = time.monotonic() + 5
    while "child=" not in p.log_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(p.log_tail().split("child=")[1].split()[0])
    assert p.log_tail(1).startswith("child=")
    rc = p.stop(timeout=5)
    assert rc == -signal.SIGTERM
    assert not p.alive()
    assert pid_gone(child)
    assert p not in running_processes()
    assert p.stop() == rc  # idempotent


def test_managed_process_sigkill_after_timeout(tmp_path: Path) -> None:
    p = ManagedProcess(
        ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"],
        log_file=tmp_path / "p.log",
    ).start()
    deadline = time.monotonic() + 5
    while "ready" not in p.log_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    assert p.stop(timeout=0.5) == -signal.SIGKILL
    assert time.monotonic() - t0 < 5


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2+ CPUs")
def test_managed_process_cpu_pinning(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    code = "import threading,time; threading.Thread(target=time.sleep, args=(30,)).start()"
    with ManagedProcess([sys.executable, "-c", code], log_file=tmp_path / "p.log", cpus={cpu}) as p:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            tasks = os.listdir(f"/proc/{p.pid}/task")
            if len(tasks) >= 2 and p.affinity() == {cpu}:
                break
            time.sleep(0.05)
        assert p.affinity() == {cpu}
        for tid in os.listdir(f"/proc/{p.pid}/task"):  # every thread, not just the first
            assert os.sched_getaffinity(int(tid)) == {cpu}
    assert not p.alive()


def test_pinning_shim_without_taskset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_brokerperf.brokers.provision.process.shutil.which",
                        lambda name: None)
    cpu = max(os.sched_getaffinity(0))
    p = ManagedProcess(
        ["sh", "-c", "cat /proc/self/status"], log_file=tmp_path / "p.log", cpus={cpu}
    ).start()
    assert p.wait(10) == 0
    p.stop()
    allowed = re.search(r"Cpus_allowed_list:\s*(\S+)", p.log_tail(100))
    assert allowed and allowed.group(1) == str(cpu)


def test_kill_all_and_cleanup_paths(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    register_cleanup_path(scratch)
    keep = tmp_path / "keep"
    keep.mkdir()
    register_cleanup_path(keep)
    discard_cleanup_path(keep)
    procs = [
        ManagedProcess(["sleep", "60"], log_file=tmp_path / f"{i}.log").start() for i in (1, 2)
    ]
    kill_all(grace=1.0)
    assert not any(p.alive() for p in procs)
    assert not running_processes()
    assert not scratch.exists()
    assert keep.exists()


@pytest.mark.parametrize("ending", ["exit", "exception", "sigterm", "sigint"])
def test_no_orphans_when_interpreter_ends(tmp_path: Path, ending: str) -> None:
    """A child Python starts a managed ``sleep`` and ends badly; the sleep must die too."""
    code = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from pathlib import Path
        # Whatever this test was started from: a background job leaves SIGINT ignored,
        # and a child inherits that; Ctrl-C's Python default is what is tested here.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from pytest_brokerperf.brokers.provision.process import (
            ManagedProcess, register_cleanup_path)
        d = Path({str(tmp_path / "data")!r}); d.mkdir()
        register_cleanup_path(d)
        p = ManagedProcess(["sleep", "60"], log_file=Path({str(tmp_path / "s.log")!r})).start()
        print(p.pid, flush=True)
        ending = {ending!r}
        if ending == "exception":
            raise RuntimeError("crash")
        if ending in ("sigterm", "sigint"):
            time.sleep(30)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    if ending == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif ending == "sigint":
        proc.send_signal(signal.SIGINT)  # what Ctrl-C delivers
    _out, err = proc.communicate(timeout=30)
    assert pid_gone(pid), f"managed child {pid} survived {ending}: {err}"
    assert not (tmp_path / "data").exists()
    if ending == "sigterm":
        assert proc.returncode == -signal.SIGTERM


def test_log_tail(tmp_path: Path) -> None:
    f = tmp_path / "x.log"
    assert log_tail(f) == ""
    f.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert log_tail(f, 2) == "line 998\nline 999"
    assert log_tail(f, 3, max_bytes=20).splitlines()[-1] == "line 999"


# -- ports ---------------------------------------------------------------------------------------


def test_free_ports_are_distinct_bindable_and_not_ephemeral() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20
    lo, _ = ephemeral_port_range()
    for p in ports:
        assert p < lo or lo <= 20000
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))
    assert free_port() not in ports  # remembered for a while


def test_port_open_and_wait() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        assert port_open("127.0.0.1", port)
        assert wait_for_port("127.0.0.1", port, timeout=1)
    closed = free_port()
    assert not port_open("127.0.0.1", closed)
    t0 = time.monotonic()
    assert not wait_for_port("127.0.0.1", closed, timeout=10, alive=lambda: False)
    assert time.monotonic() - t0 < 2


def test_a_first_use_fetch_shows_its_progress(fake_mvn: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Jars fetched when a broker is first used (Pulsar's ~235 MB) say so as they go,
    instead of a silent minute (issue 23, item 6)."""
    lines: list[str] = []
    monkeypatch.setenv("FAKE_MVN_SLEEP", "1.0")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # an empty ~/.m2 to watch
    monkeypatch.setattr(maven, "PROGRESS_EVERY_S", 0.3)
    maven.progress_to(lines.append)
    try:
        maven.resolve_kafka("4.3.1")
    finally:
        maven.progress_to(None)
    target = tmp_path / "cache" / "kafka-4.3.1"
    assert lines[0] == (f"brokerperf: fetching kafka 4.3.1 jars with Maven into {target} "
                        "(first use only; cached afterwards)")
    assert any(line.startswith("brokerperf: fetching kafka 4.3.1 jars: ")
               and line.endswith("MB downloaded so far") for line in lines[1:-1])
    assert lines[-1].startswith(f"brokerperf: kafka 4.3.1 jars cached in {target}")
    lines.clear()
    maven.progress_to(lines.append)
    try:
        maven.resolve_kafka("4.3.1")  # cached: nothing to say
    finally:
        maven.progress_to(None)
    assert lines == []
