"""--brokerperf-executor, --brokerperf-spark-master, --brokerperf-generators: flag, env
and ini, Spark's master strings passed through, and the refusals before any broker."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ConfigError


def _resolve(cli: dict[str, Any] | None = None, env: dict[str, str] | None = None,
             ini: dict[str, Any] | None = None) -> Settings:
    return Settings.resolve(cli or {}, env or {}, ini or {})


def test_defaults_are_local_without_generators() -> None:
    s = _resolve()
    assert (s.executor, s.spark_master, s.generators) == ("local", None, None)


@pytest.mark.parametrize("master", [
    "local[2]", "local[*]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077",
    "spark://a:7077,b:7077", "yarn", "k8s://https://10.0.0.1:6443",
])
def test_spark_masters_are_passed_through(master: str) -> None:
    s = _resolve(cli={"brokerperf_executor": "spark", "brokerperf_spark_master": master,
                      "brokerperf_generators": "1"})
    assert s.spark_master == master


def test_each_option_comes_from_flag_env_or_ini_in_that_order() -> None:
    env = {"BROKERPERF_EXECUTOR": "spark", "BROKERPERF_GENERATORS": "2",
           "BROKERPERF_SPARK_MASTER": "local[4]"}
    s = _resolve(env=env, ini={"brokerperf_generators": 3})
    assert (s.executor, s.generators, s.spark_master) == ("spark", 2, "local[4]")
    assert s.sources["generators"] == "BROKERPERF_GENERATORS environment variable"
    s = _resolve(cli={"brokerperf_generators": "4"}, env=env)
    assert s.generators == 4 and s.sources["generators"] == "--brokerperf-generators"
    s = _resolve(ini={"brokerperf_executor": "spark", "brokerperf_generators": 1})
    assert (s.executor, s.generators) == ("spark", 1)


@pytest.mark.parametrize(("cli", "message"), [
    ({"brokerperf_executor": "sparkk"}, r"expected one of local, spark \(did you mean 'spark'"),
    ({"brokerperf_spark_master": "http://host:7077"}, r"expected a Spark master"),
    ({"brokerperf_spark_master": "spark://host"}, r"expected a Spark master"),
    ({"brokerperf_generators": "2"}, r"sets the Spark tasks of --brokerperf-executor=spark"),
    ({"brokerperf_executor": "spark", "brokerperf_generators": "0"}, r"integer >= 1"),
    ({"brokerperf_executor": "spark", "brokerperf_workers": "2"},
     r"--brokerperf-workers .* counts local worker processes"),
    ({"brokerperf_executor": "spark", "brokerperf_generators": "3",
      "brokerperf_spark_master": "local-cluster[2,1,1024]"}, r"needs 3 task slots .* has 2"),
    ({"brokerperf_executor": "spark", "brokerperf_spark_master": "local[1]"},
     r"--brokerperf-generators=2 .* needs 2 task slots .* has 1"),
])
def test_refusals_name_the_option_and_the_fix(cli: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _resolve(cli=cli)


def test_spark_without_pyspark_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))
    with pytest.raises(ConfigError, match="needs PySpark"):
        _resolve(cli={"brokerperf_executor": "spark"})
