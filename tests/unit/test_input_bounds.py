"""Sizes, counts and files without bounds are refused before anything starts (issue 24 item 5).

Each was accepted on main and then crashed (``OverflowError`` in the payload pool, the
Kafka client's raw ``ValueError``), judged nothing (an empty SLO file) or misread
(``--brokerperf-broker-memory=1`` shown as "0MiB").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.judge.slo.files import load_slo_file
from pytest_brokerperf.workload.model import Workload

BASE = ("topics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\nproducerRate: 100\n"
        "producersPerTopic: 1\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\n"
        "testDurationMinutes: 1\n")


@pytest.mark.parametrize(("line", "needle"), [
    ("messageSize: 268435456", r"w\.yaml:\d+: messageSize = 268435456: more than the "
                               r"67,108,864 a run can use .*Fix: write `messageSize: 67108864`"),
    ("messageSize: 300000000", "more than the 67,108,864"),
    ("partitionsPerTopic: 1000000000", r"partitionsPerTopic = 1000000000: more than the "
                                       "100,000"),
    ("topics: 20000", "topics = 20000: more than the 10,000"),
    ("useRandomizedPayloads: true\nrandomizedPayloadPoolSize: 1000\nmessageSize: 10485760",
     r"randomizedPayloadPoolSize = 1000: 1,000 payloads of 10,485,760 bytes would take 9\.8 "
     "GiB"),
])
def test_sizes_and_counts_have_bounds(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "w.yaml"
    keys = {x.split(":")[0] for x in line.splitlines()}
    base = "".join(x + "\n" for x in BASE.splitlines() if x.split(":")[0] not in keys)
    path.write_text(base + line + "\n")
    with pytest.raises(ConfigError, match=needle):
        Workload.from_yaml(path)


def test_the_largest_message_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(BASE.replace("1024", "67108864"))
    assert Workload.from_yaml(path).message_size == 64 * 1024 * 1024


@pytest.mark.parametrize("text", ["", "# nothing here\n", "slos:\n", "slos: []\n", "[]\n"])
def test_an_empty_slo_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"{path}.*(is empty|lists no SLO).*Fix: write `slos:`"):
        load_slo_file(path)


@pytest.mark.parametrize("raw", ["1", "255MiB", "1000"])
def test_a_broker_memory_cap_too_small_to_start_a_broker_is_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"invalid broker memory limit .*below the 256 MiB"):
        Settings.resolve({"brokerperf_broker_memory": raw}, {}, {})
    assert Settings.resolve({"brokerperf_broker_memory": "256MiB"}, {}, {}).broker_memory == (
        256 * 1024**2)


@pytest.mark.parametrize("raw", ["http://u:p@host:notaport/metrics", "http://host:0/m",
                                 "http://host:70000/m"])
def test_a_prometheus_url_needs_a_valid_port(raw: str) -> None:
    with pytest.raises(ConfigError, match="port is not a number 1-65535") as info:
        Settings.resolve({"brokerperf_prometheus": raw}, {}, {})
    assert ":p@" not in str(info.value)
