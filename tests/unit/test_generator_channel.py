"""The generators' channel (plugin/spark_executor.py): a connection without the run's
secret is refused and counted, one with it is accepted, and once the listener is shut
nobody connects. Real sockets, no Spark (the accept path does not touch it)."""

from __future__ import annotations

import secrets
import time
import types
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest

from pytest_brokerperf.plugin.spark_executor import _Stage


def test_a_wrong_secret_is_refused_and_the_right_one_accepted(
        capsys: pytest.CaptureFixture[str]) -> None:
    stage = _Stage(types.SimpleNamespace(sparkContext=None), 1, "127.0.0.1")
    stage._accept.start()
    try:
        with pytest.raises(AuthenticationError):
            Client(stage.address, authkey=secrets.token_bytes(32))
        deadline = time.monotonic() + 5
        while stage.refused < 1 and time.monotonic() < deadline:  # the server's side
            time.sleep(0.01)
        assert "refused a generator connection without the run's secret" in (
            capsys.readouterr().err)
        assert stage.refused == 1
        client = Client(stage.address, authkey=stage.secret)
        server = stage.accept(5)
        client.send(("hello", 1))
        assert server.recv() == ("hello", 1)
        client.close()
        server.close()
    finally:
        stage.close_listener()
    assert not stage._accept.is_alive()
    with pytest.raises(ConnectionRefusedError):
        Client(stage.address, authkey=stage.secret)
