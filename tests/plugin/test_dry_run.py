"""--brokerperf-dry-run and the remote caps through the real plugin: nothing is started.

No broker is needed: a dry run neither starts a local broker nor contacts a remote one,
and a plan over a cap is refused before anything is contacted.
"""

from __future__ import annotations

import os

import pytest

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tailread(brokerperf):
    brokerperf.run(TailRead())
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in list(os.environ):
        if name.startswith("BROKERPERF_") and name not in (
                "BROKERPERF_AUTO_PROVISION", "BROKERPERF_CACHE_DIR"):
            monkeypatch.delenv(name)
    pytester.makepyfile(test_scn=TEST)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rs", f"--brokerperf-results={pytester.path}/res", *args)


def test_local_dry_run_starts_nothing_and_prints_the_plan(suite: pytest.Pytester) -> None:
    result = _run(suite, "--brokerperf-dry-run")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*DRY-RUN*",
        "*brokerperf plan for test_scn.py::test_tailread?kafka? ?tailread? (DRY RUN*",
        "*target      kafka process (not started: dry run)*",
        "*topics      bp-*: 4 partitions each, replication factor 1*",
        "*brokerperf dry run: nothing was started or created*",
        "*SKIPPED*DRY RUN: plan printed, nothing created*",
    ])
    assert not (suite.path / "res").exists()


def test_remote_dry_run_shows_retention_caps_and_cleanup(suite: pytest.Pytester) -> None:
    result = _run(suite, "--brokerperf-dry-run", "--kafka-bootstrap=127.0.0.1:1",
                  "--brokerperf-owner=ci")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*provision=auto(remote)*DRY-RUN*",
        "*target      kafka remote 127.0.0.1:1; owner ci*",
        "*topic cfg   min.insync.replicas=1, retention.ms=3600000, retention.bytes=*",
        "*caps        bytes 1 GiB, rate 10 MiB/s: within caps*",
        "*afterwards  topics and consumer groups deleted; leftovers*brokerperf cleanup "
        "--prefix bp-ci- --older-than 1d*",
        "*note        cluster not reached*the plan assumes 1 broker(s)*",
        "*afterwards  topics and consumer groups deleted; leftovers*brokerperf cleanup "
        "--prefix bp-ci- --older-than 1d*",
    ])


def test_over_the_remote_rate_cap_is_refused_naming_the_flag(suite: pytest.Pytester) -> None:
    result = _run(suite, "--brokerperf-dry-run", "--kafka-bootstrap=127.0.0.1:1",
                  "--brokerperf-rate=20000")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*REFUSED     the peak publish rate 19.5 MiB/s is over the rate cap 10 MiB/s*",
        "*REFUSED before anything was created*--brokerperf-max-rate=RATE*",
    ])


def test_byte_cap_applies_locally_when_given(suite: pytest.Pytester) -> None:
    result = _run(suite, "--brokerperf-dry-run", "--brokerperf-max-bytes=1MB")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*over the byte cap 976.6 KiB (--brokerperf-max-bytes)*"])


def test_reset_true_is_refused_against_a_remote_cluster(suite: pytest.Pytester) -> None:
    suite.makefile(".yaml", reset_driver="""
name: Kafka
replicationFactor: 1
reset: true
producerConfig: |
  acks=all
""")
    result = _run(suite, "--brokerperf-dry-run", "--kafka-bootstrap=127.0.0.1:1",
                  f"--brokerperf-driver={suite.path / 'reset_driver.yaml'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sets OMB's `reset: true`*refused against a remote*"])


# (not named `broker`: that is the plugin's fixture, which xdist workers refuse)
@pytest.mark.parametrize("kind", ["pulsar", "rabbitmq"])
def test_every_broker_prints_a_local_dry_run_plan(suite: pytest.Pytester, kind: str) -> None:
    result = _run(suite, "--brokerperf-dry-run", f"--broker={kind}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*target      {kind} process (not started: dry run)*",
                                 "*SKIPPED*DRY RUN: plan printed, nothing created*"])


def test_a_remote_dry_run_names_the_address_it_could_not_reach(suite: pytest.Pytester) -> None:
    result = _run(suite, "--brokerperf-dry-run", "--broker=rabbitmq",
                  "--rabbitmq-url=amqp://u:sekret@127.0.0.1:1/")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*target      rabbitmq remote amqp://127.0.0.1:1/;*",
        "*note        cluster not reached (the remote RabbitMQ at amqp://127.0.0.1:1/ did not "
        "answer: failed after*the plan assumes 1 broker(s)*"])
    assert "reached read-only" not in result.stdout.str()
    assert "sekret" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("flags", [
    ("--broker=rabbitmq", "--rabbitmq-url=amqp://u:sekret@127.0.0.1:1/"),
    ("--broker=pulsar", "--pulsar-url=pulsar://127.0.0.1:1",
     "--pulsar-admin-url=http://127.0.0.1:1"),
], ids=["rabbitmq", "pulsar"])
def test_an_unreachable_remote_cluster_is_a_usage_error_not_a_skip(
        suite: pytest.Pytester, flags: tuple[str, ...]) -> None:
    result = _run(suite, *flags)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*pytest-brokerperf: the remote * at *127.0.0.1:1* did not "
                                 "answer: failed after *; check --*"])
    assert "sekret" not in result.stdout.str() + result.stderr.str()
    assert not (suite.path / "res" / "results.jsonl").exists()


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_refused_client_config_never_shows_its_password(suite: pytest.Pytester,
                                                           dry_run: bool) -> None:
    props = suite.path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=BOGUS\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                     'required username="u" password="TOPSECRET";\n')
    junit = suite.path / "junit.xml"
    result = _run(suite, "--kafka-bootstrap=127.0.0.1:1", f"--kafka-config={props}",
                  f"--junitxml={junit}", "--tb=long", "--showlocals",
                  *(["--brokerperf-dry-run"] if dry_run else []))
    # refused before anything runs: a usage error (4), not a test error (1) a CI gate
    # would take for a failed measurement
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*--kafka-config={props}: {props}: librdkafka refused the "
                                 "Kafka client config*BOGUS*fix the property it names*"])
    shown = result.stdout.str() + result.stderr.str() + (
        junit.read_text() if junit.exists() else "")
    assert "TOPSECRET" not in shown and "Traceback" not in shown


def test_client_configs_mask_secrets_in_their_repr() -> None:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.core.redaction import SecretDict

    conf = SecretDict({"sasl.password": "TOPSECRET", "sasl.username": "u", "acks": "all"})
    assert "TOPSECRET" not in repr(conf) and "TOPSECRET" not in str(conf)
    assert "'acks': 'all'" in repr(conf) and conf["sasl.password"] == "TOPSECRET"
    ep = BrokerEndpoint(kind="kafka", bootstrap="h:1", mode="remote",
                        client_config={"sasl.jaas.config": "password=TOPSECRET"})
    assert "TOPSECRET" not in repr(ep)
    assert ep.redacted()["client_config"] == {"sasl.jaas.config": "***"}
