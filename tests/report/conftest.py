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
