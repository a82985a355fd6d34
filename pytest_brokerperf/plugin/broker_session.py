"""The session's brokers: what ``--brokerperf-provision=auto`` becomes and why, and the one
start call the fixtures make.

Every mode ends in one :class:`~pytest_brokerperf.brokers.endpoint.BrokerEndpoint`, so a scenario
never knows how its broker was made. These ask the broker registry and the Docker engine,
so they sit with the plugin, above the brokers and the provisioning machinery they use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.base import ManagedBroker
    from pytest_brokerperf.config.settings import Settings

__all__ = ["AUTO_PROVISION_ENV", "decide_auto", "provision_reason", "start_broker"]

#: Pins what ``--brokerperf-provision=auto`` becomes on this machine (``process``).
AUTO_PROVISION_ENV = "BROKERPERF_AUTO_PROVISION"


def decide_auto(settings: Settings) -> tuple[str, str]:
    """What ``--brokerperf-provision=auto`` becomes for this session, and why.

    Containers when the containers extra is installed, a Docker engine answers and every
    broker of the session offers container mode for ``--brokerperf-nodes`` with an image
    on the engine (the one ``--brokerperf-image`` names, else one of its defaults; nothing
    is pulled); local processes otherwise. One mode for the whole session, so a
    multi-broker run is never split across two. ``BROKERPERF_AUTO_PROVISION=process``
    keeps ``auto`` on processes on a machine whose engine must not change what a suite
    measures (the project's own tests set it).
    """
    import os

    from pytest_brokerperf import brokers
    from pytest_brokerperf.brokers.provision.containers import engine_status, image_on_engine

    pinned = os.environ.get(AUTO_PROVISION_ENV, "").strip()
    if pinned == "process":
        return "process", f"provision auto -> process: {AUTO_PROVISION_ENV}=process"
    if pinned not in ("", "container"):
        from pytest_brokerperf.core.errors import ConfigError

        raise ConfigError(f"{AUTO_PROVISION_ENV}={pinned!r} (environment variable) is not "
                          "'process' or 'container'; unset it to let auto decide")
    import importlib.util

    if settings.tls:
        return "process", ("provision auto -> process: --brokerperf-tls serves TLS listeners "
                           "from local processes only")
    if importlib.util.find_spec("testcontainers") is None:
        return "process", ("provision auto -> process: container mode needs the containers "
                           "extra (pip install 'pytest-brokerperf[containers]')")
    engine = engine_status()
    if not engine.answers:
        return "process", (f"provision auto -> process: no Docker engine answers at "
                           f"{engine.address} ({engine.detail})")
    for kind in settings.brokers:
        broker = brokers.get(kind)
        if settings.nodes not in broker.container_nodes:
            offered = (f"offers {' or '.join(map(str, broker.container_nodes))} node(s) "
                       f"in container mode, not {settings.nodes}" if broker.container_nodes
                       else "has no container mode")
            return "process", f"provision auto -> process: {kind} {offered}"
        needed = {kind: broker.container_images(settings),
                  **broker.companion_images(settings)}
        for name, defaults in needed.items():
            wanted = settings.image_for(name)
            candidates = (wanted,) if wanted else defaults
            if not any(image_on_engine(ref, address=engine.address) for ref in candidates):
                return "process", (
                    f"provision auto -> process: a Docker engine answers at "
                    f"{engine.address}, but none of {', '.join(candidates)} is on it "
                    "(bash ci/docker.sh builds the local images)")
    return "container", (f"provision auto -> container: a Docker engine answers at "
                         f"{engine.address} with an image for "
                         f"{', '.join(settings.brokers)}")


def provision_reason(settings: Settings) -> str | None:
    """Which provisioning mode the session uses and why, with the Docker engine's state
    (for the report header); None for remote clusters and an explicit ``process``."""
    from pytest_brokerperf.brokers.provision.containers import engine_status

    if settings.provision_effective not in ("process", "container"):
        return None
    if settings.provision == "auto":
        return settings.auto_reason or decide_auto(settings)[1]
    if settings.provision_effective == "process":
        return None
    engine = engine_status()
    where = (f"a Docker engine answers at {engine.address}" if engine.answers
             else f"no Docker engine answers at {engine.address} ({engine.detail})")
    if engine.answers:
        return f"provision container: {where}"
    return f"provision container: {where}; container-mode tests skip"


def start_broker(kind: str, settings: Settings, workdir: Path,
                 durability: int | None = None) -> ManagedBroker:
    """Start (or reach) a broker of ``kind`` as the settings say; raise BrokerUnavailable.

    ``durability`` (1-4) is the test's level: started into the broker where it is
    broker-wide (Pulsar's bookie journal), recorded on the endpoint everywhere.
    """
    from pytest_brokerperf import brokers

    return brokers.get(kind).start(settings.provision_effective, settings, workdir,
                                   durability)
