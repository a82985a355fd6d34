"""One SparkSession (local[2]) for every report test: Spark's start-up is paid once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
    from pytest_brokerperf.report.spark import spark_session

    session = spark_session("local[2]", app="brokerperf-report-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report_jvm() -> Iterator[dict[str, str]]:
    """The environment that sends a ``brokerperf report`` subprocess (or a pytest session
    whose gate runs one) to this worker's shared driver JVM (tests/support/spark_jvm.py)."""
    pytest.importorskip("pyspark", reason="the report extra (pyspark) is not installed")
    from tests.support.spark_jvm import shared_spark_jvm

    with shared_spark_jvm() as (env, _proc):
        yield env
