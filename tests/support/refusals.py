"""A session whose broker fixture leaves a mark when it starts: a refusal that must come
before any broker starts is checked by the mark's absence (``broker-started``)."""

from __future__ import annotations

__all__ = ["CONFTEST", "TEST"]

#: a loopback broker fixture that writes ``broker-started`` in the session's directory
CONFTEST = """
from pathlib import Path

import pytest
from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

@pytest.fixture(scope="session")
def broker(broker_kind):
    Path("broker-started").write_text("yes")
    yield BrokerEndpoint(kind="loopback", bootstrap="in-process", mode="process")
"""

#: one tail-read test on that broker
TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_tail(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200))
"""
