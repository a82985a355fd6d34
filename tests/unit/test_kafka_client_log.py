"""librdkafka's log lines go to the artefacts, not the terminal (a real client against a
port where nothing listens: it logs a failed connect per retry)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pytest_brokerperf.brokers.kafka import client_log


def test_a_client_without_a_broker_logs_into_the_artefact_not_the_terminal(
        capfd: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer

    with socket.socket() as held:  # bound, never listening: connects are refused
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        client_log.take_log_doc()
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}",
                      "logger": client_log.client_logger(),
                      "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and client_log._handler.total < 5:
            p.poll(0.2)
    doc = client_log.take_log_doc()
    assert doc is not None
    log = json.loads(doc)["librdkafka_log"]
    assert log["total"] >= 5 and any("refused" in x.lower() or "fail" in x.lower()
                                     for x in log["lines"])
    err = capfd.readouterr().err
    shown = [x for x in err.splitlines() if "librdkafka" in x or "|FAIL|" in x]
    assert len(shown) <= 1, shown  # one line now and then, not one per retry
    assert client_log.take_log_doc() is None  # taken: the next document starts afresh


def test_kept_lines_are_bounded_and_the_total_is_exact() -> None:
    logger = client_log.client_logger()
    client_log.take_log_doc()
    for i in range(client_log.MAX_KEPT + 25):
        logger.debug("line %d", i)
    log = json.loads(client_log.take_log_doc() or "{}")["librdkafka_log"]
    assert len(log["lines"]) == client_log.MAX_KEPT
    assert log["total"] == client_log.MAX_KEPT + 25 and log["not_kept"] == 25


def test_the_drivers_clients_log_there_and_their_stats_carry_the_lines(
        capfd: pytest.CaptureFixture[str]) -> None:
    from pytest_brokerperf.brokers import create_driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        client_log.take_log_doc()
        driver = create_driver(BrokerEndpoint(kind="kafka", bootstrap=f"127.0.0.1:{port}",
                                              mode="remote"), None)
        producer = driver.producer("t", "c1", lambda v, lat: None, lambda v, e: None)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and client_log._handler.total < 3:
            time.sleep(0.1)  # the producer's own poll thread serves the log
        producer.close()
    docs = [json.loads(d) for d in driver.client_stats()]
    logs = [d["librdkafka_log"] for d in docs if "librdkafka_log" in d]
    assert logs and logs[0]["total"] >= 3
    assert "|FAIL|" not in capfd.readouterr().err  # librdkafka's own stderr format
