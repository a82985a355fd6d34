"""The broker kinds, one package each, found through one registry.

``get("kafka")`` returns the :class:`~pytest_brokerperf.brokers.base.BrokerType` that
knows everything Kafka-specific: its driver (confluent-kafka), how it is started as
local processes or reached remotely, what durability levels mean on it, its metrics
and its flags. The plugin's own kinds are listed in :data:`BUILTIN`; a third party adds
one through the ``pytest_brokerperf.brokers`` entry-point group (name → an object or
class with the :class:`BrokerType` interface), without touching this package::

    [project.entry-points."pytest_brokerperf.brokers"]
    mybroker = "mypackage.brokerperf:MyBrokerType"

Lookups import a broker's package only when it is asked for, so loading the plugin
stays cheap.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_brokerperf.errors import BrokerUnavailable, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.endpoint import BrokerEndpoint

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "create_driver", "get", "names"]

#: The plugin's own broker kinds: name → "module:attribute" of its BrokerType.
BUILTIN: dict[str, str] = {
    "kafka": "pytest_brokerperf.brokers.kafka:KafkaBroker",
    "pulsar": "pytest_brokerperf.brokers.pulsar:PulsarBroker",
    "rabbitmq": "pytest_brokerperf.brokers.rabbitmq:RabbitMQBroker",
    "tansu": "pytest_brokerperf.brokers.tansu:TansuBroker",
    "redpanda": "pytest_brokerperf.brokers.redpanda:RedpandaBroker",
    "automq": "pytest_brokerperf.brokers.automq:AutoMQBroker",
    "loopback": "pytest_brokerperf.brokers.loopback:LoopbackBroker",
}

#: The entry-point group through which other packages register broker kinds.
ENTRY_POINT_GROUP = "pytest_brokerperf.brokers"


def _load(target: str) -> BrokerType:
    module, _, attr = target.partition(":")
    obj = getattr(import_module(module), attr)
    broker: BrokerType = obj() if isinstance(obj, type) else obj
    return broker


@cache
def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.name not in BUILTIN}


def names(*, include_internal: bool = False) -> tuple[str, ...]:
    """Every broker kind ``--broker`` accepts (``loopback``, the harness's no-broker
    driver, only when asked for)."""
    own = [n for n in BUILTIN if include_internal or n != "loopback"]
    return (*own, *sorted(_plugins()))


@cache
def get(name: str) -> BrokerType:
    """The broker kind called ``name``; ConfigError naming the known ones otherwise."""
    target = BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise ConfigError(f"unknown broker {name!r}; known brokers: {', '.join(names())}")
    broker = _load(target)
    if broker.name != name:
        raise ConfigError(f"broker entry point {name!r} ({target}) names itself "
                          f"{broker.name!r}; the two must agree")
    return broker


def create_driver(endpoint: BrokerEndpoint, driver_file: Path | None,
                  scenario: str = "tailread", stats_interval_ms: int = 5000) -> Driver:
    """The driver for ``endpoint``: its broker kind's, from an OMB driver YAML (or the
    shipped default), with the endpoint's durability level applied."""
    try:
        broker = get(endpoint.kind)
    except ConfigError:
        raise BrokerUnavailable(f"broker kind {endpoint.kind!r} has no driver in this "
                                "version of pytest-brokerperf") from None
    return broker.create_driver(endpoint, driver_file, scenario=scenario,
                                stats_interval_ms=stats_interval_ms)
