"""The loopback "broker": no broker and no client, to measure the harness alone.

Its driver acknowledges and delivers in-process, so calibration and the engine's own
tests see the generator's ceiling and latency floor without any broker in the way.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.base import BrokerType
from pytest_brokerperf.brokers.capabilities import Capabilities

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

__all__ = ["LoopbackBroker"]


class LoopbackBroker(BrokerType):
    """The harness's no-broker driver (tests and calibration)."""

    name: ClassVar[str] = "loopback"
    capabilities: ClassVar[Capabilities] = Capabilities(
        harness_only=True,
        lacks={"partition_mover": "the in-process loopback broker has no partitions to move",
               "earliest_reader": "its driver keeps no retained log a new subscription "
                                  "could read from the earliest position",
               "read_back": "it holds no messages to read back"})
    protocol: ClassVar[str] = "loopback"
    #: the plugin's own tests give it clusters of sleeping processes that simulate a
    #: power cut; it holds no messages to read back
    power_cut_modes: ClassVar[tuple[str, ...]] = ("process",)

    def create_driver(self, endpoint: BrokerEndpoint, driver_file: Path | None, *,
                      scenario: str = "tailread", stats_interval_ms: int = 5000
                      ) -> LoopbackDriver:
        from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

        return LoopbackDriver()
