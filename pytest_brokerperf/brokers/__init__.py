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

import re
from functools import cache
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pytest_brokerperf.core.errors import BrokerUnavailable, ConfigError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import BrokerType
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "HARNESS",
    "OWN_DISTRIBUTION",
    "create_driver",
    "get",
    "harness_driver",
    "is_known",
    "names",
]

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

#: The harness's own no-broker kind (calibration measures the generator's ceiling on it);
#: ``--broker`` does not offer it.
HARNESS = "loopback"

#: The entry-point group through which other packages register broker kinds.
ENTRY_POINT_GROUP = "pytest_brokerperf.brokers"


#: The distribution that ships :data:`BUILTIN` (its own entry points name them too).
OWN_DISTRIBUTION = "pytest-brokerperf"


def _dist_name(ep: EntryPoint) -> str:
    """The normalised name of the distribution that declares ``ep`` ("?" when unknown)."""
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) or "?"
    return re.sub(r"[-_.]+", "-", name).lower()


def _describe(ep: EntryPoint) -> str:
    return (f"entry point {ep.name!r} = {ep.value!r} of distribution {_dist_name(ep)!r} "
            f"(group {ENTRY_POINT_GROUP!r})")


@cache
def _plugins() -> tuple[dict[str, EntryPoint], dict[str, str]]:
    """Third-party broker kinds: name → entry point, and name → why it cannot be used
    (a duplicate). Read once, and only when a broker is looked up."""
    found: dict[str, EntryPoint] = {}
    problems: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = _dist_name(ep)
        if ep.name in BUILTIN:
            if dist != OWN_DISTRIBUTION:
                problems[ep.name] = (
                    f"broker {ep.name!r} is a built-in broker, but {_describe(ep)} "
                    f"registers it too; rename that entry point in {dist}'s packaging "
                    f"metadata or uninstall {dist}")
            continue
        earlier = found.get(ep.name)
        if earlier is not None and (earlier.value, _dist_name(earlier)) != (ep.value, dist):
            problems[ep.name] = (
                f"broker {ep.name!r} is registered twice: {_describe(earlier)} and "
                f"{_describe(ep)}; uninstall one of the two distributions or rename one "
                "entry point")
            continue
        found[ep.name] = ep
    return found, problems


def _check(broker: object, where: str) -> BrokerType:
    missing = [a for a in ("name", "create_driver", "start", "remote_flags")
               if not hasattr(broker, a)]
    if missing:
        raise ConfigError(
            f"{where} gives {broker!r}, which lacks {', '.join(missing)}: a broker kind "
            "must subclass pytest_brokerperf.brokers.base.BrokerType (or be an instance "
            "of such a class)")
    return cast("BrokerType", broker)


def _load_builtin(target: str) -> BrokerType:
    module, _, attr = target.partition(":")
    obj = getattr(import_module(module), attr)
    return _check(obj() if isinstance(obj, type) else obj, f"built-in broker {target!r}")


def _load_plugin(ep: EntryPoint) -> BrokerType:
    try:
        obj = ep.load()
        broker = obj() if isinstance(obj, type) else obj
    except Exception as exc:
        dist = _dist_name(ep)
        raise ConfigError(
            f"broker {ep.name!r}: {_describe(ep)} cannot be loaded "
            f"({type(exc).__name__}: {exc}); fix or reinstall {dist}, or uninstall it"
        ) from exc
    return _check(broker, _describe(ep))


def names(*, include_internal: bool = False) -> tuple[str, ...]:
    """Every broker kind ``--broker`` accepts (``loopback``, the harness's no-broker
    driver, only when asked for): the built-ins, then the entry points' names sorted."""
    own = [n for n in BUILTIN if include_internal or n != HARNESS]
    found, problems = _plugins()
    return (*own, *sorted({*found, *(n for n in problems if n not in BUILTIN)}))


def is_known(name: str) -> bool:
    """True when ``name`` is a broker kind ``--broker`` accepts (entry points are read
    only for a name that is not built in)."""
    if name in BUILTIN:
        return name != HARNESS
    return name in names()


@cache
def get(name: str) -> BrokerType:
    """The broker kind called ``name``; ConfigError naming the known ones otherwise, or
    naming the distribution and entry point that is broken or registered twice."""
    found, problems = _plugins()
    if name in problems:
        raise ConfigError(problems[name])
    if name in BUILTIN:
        target = BUILTIN[name]
        broker = _load_builtin(target)
    elif name in found:
        target = _describe(found[name])
        broker = _load_plugin(found[name])
    else:
        raise ConfigError(f"unknown broker {name!r}; known brokers: {', '.join(names())}")
    if broker.name != name:
        raise ConfigError(f"broker {name!r}: {target} names itself {broker.name!r}; the "
                          "two must agree (set the class's `name` to the entry point's)")
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


def harness_driver(partitions: int = 1) -> Driver:
    """The in-process driver that measures the harness alone (no broker, no client):
    calibration's harness ceiling, whatever the run's broker."""
    from pytest_brokerperf.brokers.loopback.driver import LoopbackDriver

    return LoopbackDriver(partitions=partitions)
