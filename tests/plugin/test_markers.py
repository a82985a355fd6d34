"""Markers and the broker matrix: registration, --broker parametrization, deselection."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if (name.startswith(("BROKERPERF_", "PYTEST_XDIST_")) or name == "KAFKA_HOME") and (
                name != "BROKERPERF_AUTO_PROVISION"):
            monkeypatch.delenv(name)


def test_markers_are_registered_with_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    assert result.ret == 0
    result.stdout.fnmatch_lines_random([
        "@pytest.mark.tailread: tail-read latency scenario (fixed-rate publishing, tailing "
        "consumers)",
        "@pytest.mark.throughput: maximum sustainable throughput scenario",
        "@pytest.mark.broker(*names): run this test only for these brokers*",
        '@pytest.mark.slo(*exprs): SLO expressions for this test, e.g. @pytest.mark.slo("'
        'e2e_response.p99 < 50 ms")',
    ])


def test_markers_pass_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.tailread
        @pytest.mark.throughput
        @pytest.mark.broker("kafka")
        @pytest.mark.slo("e2e_response.p99 < 50 ms")
        def test_a():
            pass
    """)
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


def test_m_selects_scenarios_by_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.tailread
        def test_tail(broker_kind):
            pass

        @pytest.mark.throughput
        def test_max(broker_kind):
            pass
    """)
    result = pytester.runpytest("-m", "tailread", "--broker=kafka,pulsar", "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines(["*test_tail[[]kafka[]] PASSED*", "*test_tail[[]pulsar[]] PASSED*"])


def test_broker_list_parametrizes_broker_kind(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_a(broker_kind):
            assert broker_kind in ("kafka", "pulsar")

        def test_unit():
            pass
    """)
    result = pytester.runpytest("--broker=kafka,pulsar", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "test_*.py::test_a[[]kafka[]]",
        "test_*.py::test_a[[]pulsar[]]",
        "test_*.py::test_unit",
    ])
    pytester.runpytest("--broker=kafka,pulsar").assert_outcomes(passed=3)


def test_default_broker_is_kafka(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(broker_kind):\n    assert broker_kind == 'kafka'\n")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_*.py::test_a[[]kafka[]]"])


def test_broker_kind_is_session_scoped_and_groups_tests(pytester: pytest.Pytester) -> None:
    """Items are ordered broker by broker, so each broker starts once per session."""
    pytester.makepyfile(test_one="def test_x(broker_kind): pass\ndef test_y(broker_kind): pass\n")
    result = pytester.runpytest("--broker=kafka,pulsar", "--collect-only", "-q")
    lines = [line for line in result.stdout.lines if "::" in line]
    kinds = [line.split("[")[1].rstrip("]") for line in lines]
    assert kinds == ["kafka", "kafka", "pulsar", "pulsar"]


def test_marker_excluding_every_selected_broker_deselects(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.broker("pulsar")
        def test_pulsar_only(broker_kind):
            pass

        @pytest.mark.broker("pulsar", "rabbitmq")
        def test_no_broker_fixture():
            pass

        @pytest.mark.broker("kafka", "pulsar")
        def test_both(broker_kind):
            assert broker_kind == "kafka"

        def test_everywhere(broker_kind):
            pass
    """)
    result = pytester.runpytest("--broker=kafka", "-v")
    result.assert_outcomes(passed=2, deselected=2)
    result.stdout.fnmatch_lines_random([
        "*test_both[[]kafka[]] PASSED*",
        "*test_everywhere[[]kafka[]] PASSED*",
    ])
    assert "test_pulsar_only" not in result.stdout.str()
    assert "skipped" not in result.stdout.str()


def test_marker_restricts_the_broker_list(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.broker("Pulsar")
        def test_a(broker_kind):
            assert broker_kind == "pulsar"
    """)
    result = pytester.runpytest("--broker=kafka,pulsar,rabbitmq", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_*.py::test_a[[]pulsar[]]", "1 test collected*"])


def test_class_level_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.broker("rabbitmq")
        class TestRabbit:
            def test_a(self, broker_kind):
                assert broker_kind == "rabbitmq"

            @pytest.mark.broker("kafka")
            def test_closest_marker_wins(self, broker_kind):
                assert broker_kind == "kafka"
    """)
    result = pytester.runpytest("--broker=kafka,rabbitmq", "-q")
    result.assert_outcomes(passed=2)
    result = pytester.runpytest("--broker=kafka", "-q")
    result.assert_outcomes(passed=1, deselected=1)


def test_invalid_broker_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.broker("kafak")
        def test_a(broker_kind):
            pass

        @pytest.mark.broker()
        def test_b():
            pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*@pytest.mark.broker('kafak',) on test_*.py::test_a*: unknown broker 'kafak'; "
        "known brokers are kafka, pulsar, rabbitmq, tansu, redpanda, automq",
        "*@pytest.mark.broker() on test_*.py::test_b: expected one or more broker names*",
    ])


def test_user_parametrization_of_broker_kind_is_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.parametrize("broker_kind", ["kafka", "pulsar"])
        def test_a(broker_kind):
            pass
    """)
    # --broker still filters: pulsar is not selected, so its case is deselected
    result = pytester.runpytest("--broker=kafka", "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_a[[]kafka[]] PASSED*"])
