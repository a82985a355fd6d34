"""A test whose scenario needs a capability its broker lacks is deselected at collection,
with the broker's reason, before any broker starts (``BrokerType.capabilities``,
``Scenario.needs``); the fixture resolves the broker kind once and hands the object on.
No broker runs here (``--collect-only``, or the in-process loopback)."""

from __future__ import annotations

import textwrap

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS

BODY = """
import pytest
from pytest_brokerperf import Mixed, Reassign

@pytest.mark.reassign
def test_ra(brokerperf):
    brokerperf.run(Reassign())

@pytest.mark.mixed
def test_mx(brokerperf):
    brokerperf.run(Mixed())

@pytest.mark.tailread
def test_tail(brokerperf):
    pass
"""

TOY = '''
from typing import ClassVar

from pytest_brokerperf.brokers.base import BrokerType
from pytest_brokerperf.brokers.capabilities import Capabilities


class ToyBroker(BrokerType):
    name: ClassVar[str] = "toy"
    protocol: ClassVar[str] = "toy"
    capabilities: ClassVar[Capabilities] = Capabilities(
        lacks={"partition_mover": "toys keep every partition where it was put"})
'''


def _toy_distribution(pytester: pytest.Pytester) -> None:
    """A distribution registering ``toy`` through the entry-point group, importable from
    the test directory (a subprocess's ``python -m pytest`` puts it on sys.path)."""
    info = pytester.path / "toy_broker-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-broker\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pytest_brokerperf.brokers]\ntoy = toybroker:ToyBroker\n")
    (pytester.path / "toybroker.py").write_text(textwrap.dedent(TOY))


def test_a_broker_without_a_partition_mover_is_deselected_from_reassign(
        pytester: pytest.Pytester) -> None:
    _toy_distribution(pytester)
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--broker=toy",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    collected = [ln for ln in out.splitlines() if "::" in ln and not ln.startswith(" ")]
    assert [ln.split("::")[1] for ln in collected] == ["test_tail[toy]"]
    result.stdout.fnmatch_lines([
        "brokerperf: 2 test(s) deselected, they do not apply to their broker:",
        "*test_ra?toy?: the reassign scenario does not apply to toy: toys keep every "
        "partition where it was put (missing: partition mover)",
        "*test_mx?toy?: the mixed scenario does not apply to toy: it declares no "
        "earliest-position reader (missing: earliest-position reader)",
    ])


def test_builtin_brokers_are_deselected_by_their_declared_capabilities(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scn=BODY)
    result = pytester.runpytest_subprocess("--collect-only", "-q",
                                           "--broker=kafka,pulsar,rabbitmq,tansu",
                                           "-p", "no:cacheprovider")
    out = result.stdout.str()
    collected = {ln.split("::")[1] for ln in out.splitlines()
                 if "::" in ln and not ln.startswith(" ")}
    assert collected == {
        "test_ra[kafka]", "test_mx[kafka]", "test_mx[pulsar]", "test_mx[tansu]",
        *(f"test_tail[{k}]" for k in ("kafka", "pulsar", "rabbitmq", "tansu"))}
    result.stdout.fnmatch_lines([
        "brokerperf: 4 test(s) deselected, they do not apply to their broker:",
        "*test_ra?pulsar?: the reassign scenario does not apply to pulsar: partition "
        "reassignment is a Kafka-protocol operation*",
        "*test_ra?rabbitmq?: the reassign scenario does not apply to rabbitmq: *",
        "*test_mx?rabbitmq?: the mixed scenario does not apply to rabbitmq: a new "
        "subscription starts from the earliest message only on a stream queue*",
        "*test_ra?tansu?: the reassign scenario does not apply to tansu: a single stateless "
        "broker*",
    ])


RESOLVED_ONCE = """
import pytest
from pytest_brokerperf import brokers
from pytest_brokerperf.brokers.loopback import LoopbackBroker
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

MADE = []


class Unregistered(LoopbackBroker):
    # a kind the registry does not know: only the fixture's object can reach its driver
    name = "unregistered"

    def create_driver(self, endpoint, driver_file, *, scenario="tailread",
                      stats_interval_ms=5000):
        MADE.append(scenario)
        return super().create_driver(endpoint, driver_file, scenario=scenario,
                                     stats_interval_ms=stats_interval_ms)


@pytest.fixture(scope="session")
def broker_type(broker_kind):
    return Unregistered()


@pytest.fixture(scope="session")
def broker(broker_type):
    yield BrokerEndpoint(kind=broker_type.name, bootstrap="in-process", mode="process")
"""

RESOLVED_BODY = """
import pytest
from pytest_brokerperf import TailRead
from conftest import MADE

@pytest.mark.tailread
def test_tail(brokerperf, broker_type):
    assert brokerperf.broker_type is broker_type
    brokerperf.run(TailRead(message_size=128, partitions=1, rate=200), check=False)
    assert MADE == ["tailread"]
"""


def test_the_run_asks_the_fixtures_broker_type_for_its_driver(
        pytester: pytest.Pytester) -> None:
    # before, the driver came from a lookup of the endpoint's kind by name in the registry
    # (an unknown kind: "has no driver", a skip)
    pytester.makeconftest(RESOLVED_ONCE)
    pytester.makepyfile(test_resolved=RESOLVED_BODY)
    result = pytester.runpytest_subprocess(*FAST_ARGS,
                                           f"--brokerperf-results={pytester.path}/res",
                                           "--no-brokerperf-broker-metrics", "-rs")
    result.assert_outcomes(passed=1)


def test_the_help_lists_the_registrys_brokers_third_party_ones_too(
        pytester: pytest.Pytester) -> None:
    # one list of broker kinds: --broker's help and the broker marker's ask the registry
    _toy_distribution(pytester)
    result = pytester.runpytest_subprocess("--help")
    out = " ".join(result.stdout.str().split())  # argparse wraps the help text
    assert "known: kafka, pulsar, rabbitmq, tansu, redpanda, automq, toy." in out
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.broker(*names): run this test only for these "
                                  "brokers (known: kafka, *, automq, toy)*"])
