"""No credential reaches any output (issue 24 item 2), whatever option carries it.

Every option that can hold a credential is given one here, with a password no output may
contain: ``--rabbitmq-url`` (URI user info), ``--brokerperf-prometheus`` (URL user info),
``--kafka-config`` (``sasl.jaas.config``/``sasl.password``, ``ssl.key.password``,
``ssl.truststore.password``) and ``--pulsar-config`` (``authParams``). Each run is looked
at in every output: the terminal at ``-l -vvv`` (tracebacks with their locals), the JUnit
XML, and every file under the results directory (records, manifest, logs).
"""

from __future__ import annotations

import pytest

from pytest_brokerperf.testing.loopback import FAST_ARGS, LOOPBACK_CONFTEST

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200))
"""

SECRETS = ("PromPw-1", "RabbitPw-2", "RabbitPw-3", "SaslPw-4", "KeyPw-5", "TrustPw-6",
           "PulsarTok-7")


def _outputs(pytester: pytest.Pytester, result: pytest.RunResult) -> dict[str, str]:
    """Every text a user or a CI system could read after the run."""
    out = {"terminal": result.stdout.str() + result.stderr.str()}
    for path in pytester.path.rglob("*"):
        if path.is_file() and "test_" not in path.name:
            out[str(path.relative_to(pytester.path))] = path.read_text(errors="replace")
    return out


def _assert_clean(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    outputs = _outputs(pytester, result)
    assert "junit.xml" in outputs, sorted(outputs)
    for name, text in outputs.items():
        for secret in SECRETS:
            if name.endswith((".conf", ".properties")):
                continue  # the user's own config files hold them, by design
            assert secret not in text, f"{secret} in {name}"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_scn=TEST)
    return pytester.runpytest_subprocess(
        *FAST_ARGS, "-l", "-vvv", "--junitxml=junit.xml",
        f"--brokerperf-results={pytester.path}/res", *args)


def test_a_prometheus_url_password_is_in_no_result_file(pytester: pytest.Pytester) -> None:
    """A full run: the manifest and record show the Prometheus URL masked."""
    pytester.makeconftest(LOOPBACK_CONFTEST)
    result = _run(pytester, "--brokerperf-prometheus=http://scraper:PromPw-1@127.0.0.1:1/m")
    assert (pytester.path / "res" / "results.jsonl").is_file()  # the run was recorded
    _assert_clean(pytester, result)


@pytest.mark.parametrize("value", [
    "http://ok:1/m,ftp://scraper:PromPw-1@host/m",  # only another entry of the list is bad
    "ftp://scraper:PromPw-1@host/m",
    "http://scraper:PromPw-1@host:notaport/metrics",  # item 5: a port that is no number
])
def test_a_bad_prometheus_url_is_refused_masked(pytester: pytest.Pytester, value: str) -> None:
    pytester.makeconftest(LOOPBACK_CONFTEST)
    result = _run(pytester, f"--brokerperf-prometheus={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid Prometheus*entry * of *scraper:[*][*][*]@host*"])
    _assert_clean(pytester, result)


def test_rabbitmq_uris_with_different_credentials_are_a_usage_error(
        pytester: pytest.Pytester) -> None:
    """Was a setup ERROR (exit 1) whose traceback printed the password."""
    result = _run(pytester, "--broker=rabbitmq",
                  "--rabbitmq-url=amqp://a:RabbitPw-2@127.0.0.1:1,amqp://b:RabbitPw-3@127.0.0.1:2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*every URI must carry the same user and password*"])
    _assert_clean(pytester, result)


def test_an_unreachable_rabbitmq_url_names_no_password(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--broker=rabbitmq", "--rabbitmq-url=amqp://a:RabbitPw-2@127.0.0.1:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "amqp://127.0.0.1:1" in result.stdout.str() + result.stderr.str()
    _assert_clean(pytester, result)


def test_kafka_client_config_secrets_stay_hidden(pytester: pytest.Pytester) -> None:
    conf = pytester.path / "client.properties"
    conf.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="bench" password="SaslPw-4";\n'
        "ssl.key.password=KeyPw-5\nssl.truststore.password=TrustPw-6\n")
    result = _run(pytester, "--broker=kafka", "--kafka-bootstrap=127.0.0.1:1",
                  f"--kafka-config={conf}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_clean(pytester, result)


def test_pulsar_auth_params_stay_hidden(pytester: pytest.Pytester) -> None:
    conf = pytester.path / "client.conf"
    conf.write_text("authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
                    "authParams=token:PulsarTok-7\n")
    result = _run(pytester, "--broker=pulsar", "--pulsar-url=pulsar://127.0.0.1:1",
                  f"--pulsar-config={conf}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _assert_clean(pytester, result)


def test_a_secret_is_masked_in_repr_str_format_and_settings() -> None:
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.core.redaction import Secret

    s = Secret("amqp://u:RabbitPw-2@h:5672/vh")
    assert s.reveal() == "amqp://u:RabbitPw-2@h:5672/vh"
    for shown in (repr(s), str(s), f"{s}", f"{s:>40}"):
        assert "RabbitPw-2" not in shown and "u:***@h:5672" in shown
    settings = Settings.resolve({"brokerperf_rabbitmq_url": "amqp://u:RabbitPw-2@h",
                                 "brokerperf_prometheus": "http://p:PromPw-1@h/m?tok=x"},
                                {}, {})
    assert "RabbitPw-2" not in repr(settings) and "PromPw-1" not in repr(settings)
    assert "tok=x" not in repr(settings)
    assert "PromPw-1" not in str(settings.as_dict())


TLS_CONFTEST = """
from pathlib import Path

import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint, TlsClient
from pytest_brokerperf.brokers.kafka.node_config import KafkaTls
from pytest_brokerperf.brokers.provision.tls import make_tls_material
from pytest_brokerperf.core.redaction import Secret

MATERIAL = make_tls_material(Path("tls"))
# the broker's own file may hold it (.properties are skipped by the check)
Path("server.properties").write_text(f"ssl.key.password={MATERIAL.key_password.reveal()}\\n")

LISTENER = KafkaTls(ca_cert=MATERIAL.ca_cert, server_key_store=MATERIAL.server_key_store,
                    key_password=MATERIAL.key_password,
                    users={"admin": Secret("AdminPw-8")})

@pytest.fixture(scope="session")
def broker(broker_kind):
    yield BrokerEndpoint(
        kind="loopback", bootstrap="in-process", mode="process",
        info={"tls_material": MATERIAL.as_info()},
        tls=TlsClient(protocol="SSL", ca_file=str(MATERIAL.ca_cert), plaintext="in-process",
                      server_names=MATERIAL.hosts))
"""

TLS_TEST = """
import pytest
from pytest_brokerperf import TailRead
from conftest import LISTENER, MATERIAL

@pytest.mark.tailread
def test_tail(brokerperf):
    material, listener = MATERIAL, LISTENER  # in the traceback's locals (-l)
    brokerperf.run(TailRead(message_size=128, rate=200))
    raise AssertionError(f"fails on purpose with {material!r} and {material.key_password}")
"""


def test_a_tls_key_password_reaches_no_output(pytester: pytest.Pytester) -> None:
    """The server key's password (``--brokerperf-tls``): only the broker's own file holds
    it, never a record, manifest, traceback (with locals) or JUnit file."""
    from pytest_brokerperf.core.redaction import is_secret, redact

    pytester.makeconftest(TLS_CONFTEST)
    pytester.makepyfile(test_scn=TLS_TEST)
    result = pytester.runpytest_subprocess(
        *FAST_ARGS, "-l", "-vvv", "--junitxml=junit.xml", "--brokerperf-inconclusive=warn",
        f"--brokerperf-results={pytester.path}/res")
    result.assert_outcomes(failed=1, warnings=result.parseoutcomes().get("warnings", 0))
    password = (pytester.path / "server.properties").read_text().split("=", 1)[1].strip()
    assert len(password) >= 24
    outputs = _outputs(pytester, result)
    assert "junit.xml" in outputs and any(n.endswith("manifest.json") for n in outputs)
    assert "fails on purpose with TlsMaterial(" in outputs["terminal"]
    assert "listener   = KafkaTls(" in outputs["terminal"]
    for name, text in outputs.items():
        if name.endswith(".properties") or name.startswith("tls") or name == "conftest.py":
            continue  # the broker's own files, and the test's source
        assert password not in text, name
        assert "AdminPw-8" not in text, name
    # the keys that carry it are secret by name wherever a configuration is shown
    for key in ("ssl.key.password", "ssl.keystore.password", "ssl_options.password",
                "listener.name.sasl_ssl.plain.sasl.jaas.config"):
        assert is_secret(key) and redact({key: password}) == {key: "***"}
