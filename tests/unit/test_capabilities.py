"""Brokers behind capabilities: what each kind declares, the reasons it gives, and the
boundary the architecture page promises (no broker kind named outside ``brokers/``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.capabilities import CAPABILITY_NAMES, Capabilities
from pytest_brokerperf.core.errors import BrokerUnavailable
from pytest_brokerperf.scenario_library import SCENARIOS, Mixed, Reassign, capability_refusal

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_brokerperf"


def _has(kind: str) -> set[str]:
    caps = brokers.get(kind).capabilities
    return {n for n in CAPABILITY_NAMES if caps.provider(n) is not None}


def test_each_builtin_declares_what_it_offers() -> None:
    assert _has("kafka") == {"earliest_reader", "partition_mover", "read_back"}
    assert _has("redpanda") == _has("automq") == {"earliest_reader", "partition_mover"}
    assert _has("tansu") == {"earliest_reader"}
    assert _has("pulsar") == {"earliest_reader", "read_back"}
    assert _has("rabbitmq") == {"read_back"}
    assert _has("loopback") == set()
    assert brokers.get("loopback").capabilities.harness_only
    assert not any(brokers.get(k).capabilities.harness_only for k in brokers.names())


def test_every_missing_capability_says_why_in_the_brokers_words() -> None:
    for kind in (*brokers.names(), brokers.HARNESS):
        caps = brokers.get(kind).capabilities
        for name in CAPABILITY_NAMES:
            if caps.provider(name) is None:
                assert name in caps.lacks, (kind, name)
            else:
                assert name not in caps.lacks, (kind, name)  # no stale reason


def test_scenarios_declare_their_needs() -> None:
    assert Reassign.needs == ("partition_mover",)
    assert Mixed.needs == ("earliest_reader",)
    assert all(not cls.needs for name, cls in SCENARIOS.items()
               if name not in ("reassign", "mixed"))


def test_the_refusal_names_the_scenario_the_broker_and_the_capability() -> None:
    why = capability_refusal(brokers.get("pulsar"), "reassign")
    assert why is not None
    assert why.startswith("the reassign scenario does not apply to pulsar: partition "
                          "reassignment is a Kafka-protocol operation")
    assert why.endswith("(missing: partition mover)")
    assert "stream queue" in (capability_refusal(brokers.get("rabbitmq"), "mixed") or "")
    assert capability_refusal(brokers.get("kafka"), "reassign") is None
    assert capability_refusal(brokers.get("rabbitmq"), "tailread") is None
    assert capability_refusal(brokers.get("rabbitmq"), "no-such-scenario") is None
    # a kind that declares nothing still gets a reason
    bare = Capabilities().refusal(("partition_mover",), "toy", "the reassign scenario")
    assert bare == ("the reassign scenario does not apply to toy: it declares no partition "
                    "mover (missing: partition mover)")


def test_the_kafka_read_back_lives_in_the_kafka_package() -> None:
    import pytest_brokerperf.brokers.readback as neutral
    import pytest_brokerperf.faults.readback as judged
    from pytest_brokerperf.brokers.kafka.readback import KafkaReadBack, read_back_kafka

    # brokers/ keeps what every broker's reader shares, faults/ the comparison
    assert not hasattr(neutral, "read_back_kafka") and not hasattr(judged, "read_back_kafka")
    assert {"SeqBitmaps", "READ_BACK_TIMEOUT_S"} <= set(neutral.__all__)
    assert {"ReadBack", "compare"} <= set(judged.__all__)
    assert callable(read_back_kafka)
    assert isinstance(brokers.get("kafka").capabilities.read_back, KafkaReadBack)


def test_a_capability_provider_loads_no_client_library() -> None:
    import subprocess
    import sys

    code = ("import sys; from pytest_brokerperf import brokers\n"
            "for k in brokers.BUILTIN: brokers.get(k).capabilities\n"
            "heavy = {'confluent_kafka', 'pulsar', 'pika', 'kafka', 'numpy', 'pydantic'}\n"
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_kafka_earliest_reader_refuses_another_driver() -> None:
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

    reader = brokers.get("kafka").capabilities.earliest_reader
    assert reader is not None
    with pytest.raises(BrokerUnavailable, match="needs the Kafka driver"):
        reader.earliest(LoopbackDriver())


# --------------------------------------------------------------------------- boundary

#: broker packages (and modules) under brokers/ that only brokers/ may import; what every
#: broker shares (the interface, endpoint, durability levels, node control, read-back
#: bitmaps, versions, the provisioning base) and the registry are for everyone
_NEUTRAL = {"base", "driver", "capabilities", "producer_tweak", "durability", "endpoint",
            "node_control", "provision", "readback", "versions"}

#: what stays, and why; anything new fails the test
_ALLOWED: dict[str, str] = {
    # the ``brokerperf`` command's Kafka-only subcommands (``fetch kafka`` jars,
    # ``cleanup`` of a Kafka cluster's topics by prefix)
    "plugin/cli.py": "kafka",
    # the studies' tables have a column per broker: a record's broker is its column
    "report/studies.py": "kafka pulsar rabbitmq automq",
}


def _kinds() -> set[str]:
    return set(brokers.BUILTIN)


#: the modules and packages inside brokers/ (a name the registry exports is none)
_BROKER_MODULES = {p.stem for p in (PACKAGE / "brokers").iterdir()
                   if p.suffix == ".py" or (p / "__init__.py").is_file()} - {"__init__"}


def _violations(path: Path, rel: str) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    kinds = _kinds()
    for node in ast.walk(tree):
        mods: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.startswith("pytest_brokerperf.brokers.")):
            mods = [node.value.split(":")[0]]
        for mod in mods:
            parts = mod.split(".")
            if (parts[:2] == ["pytest_brokerperf", "brokers"] and len(parts) > 2
                    and parts[2] in _BROKER_MODULES - _NEUTRAL):
                found.append(f"{rel}:{node.lineno}: imports {mod}")  # type: ignore[attr-defined]
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = ([side] if isinstance(side, ast.Constant)
                          else list(side.elts) if isinstance(side, ast.Tuple | ast.List | ast.Set)
                          else [])
                for v in values:
                    if isinstance(v, ast.Constant) and v.value in kinds:
                        found.append(f"{rel}:{node.lineno}: compares with {v.value!r}")
    return found


def test_no_broker_kind_or_broker_package_outside_brokers() -> None:
    problems: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("brokers/"):
            continue
        for v in _violations(path, rel):
            allowed = _ALLOWED.get(rel, "")
            if allowed and any(k in v for k in allowed.split()):
                continue
            problems.append(v)
    assert problems == []


def test_the_boundary_check_sees_what_the_old_code_had(tmp_path: Path) -> None:
    # the shapes the scenarios used before brokers had capabilities
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from pytest_brokerperf.brokers.kafka.reassign import Mover\n"
        "from pytest_brokerperf.brokers.driver import Driver\n"
        "def f(driver, ctx):\n"
        "    if driver.kind in ('kafka', 'redpanda', 'automq'):\n"
        "        return 1\n"
        "    return ctx.broker.kind == 'loopback'\n")
    found = _violations(probe, "scenario_library/probe.py")
    assert [v.split(": ", 1)[1] for v in found] == [
        "imports pytest_brokerperf.brokers.kafka.reassign",
        "imports pytest_brokerperf.brokers.kafka.reassign.Mover",
        "compares with 'kafka'", "compares with 'redpanda'", "compares with 'automq'",
        "compares with 'loopback'"]
