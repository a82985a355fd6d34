"""What every broker kind provides, in one place: the :class:`BrokerType` interface.

A broker kind (``kafka``, ``pulsar``, ``rabbitmq``, ``tansu``, ...) is one package under
:mod:`pytest_brokerperf.brokers` whose ``__init__`` defines a :class:`BrokerType`
subclass and registers it (see :mod:`pytest_brokerperf.brokers`). Everything the rest
of the plugin needs to know about a broker goes through this interface: which driver
speaks to it, how it is started in each provisioning mode or reached remotely, what a
durability level means on it, which of its metrics the sampler understands, and which
flags it checks. Adding a broker, or a provisioning mode to one, touches that broker's
package only (in the spirit of testcontainers' one module per service over a small core
and OMB's one module per driver over a few tiny interfaces).

Standard library only at import time: the client libraries load when a driver is made.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pytest_brokerperf.brokers.capabilities import Capabilities
from pytest_brokerperf.brokers.durability import LEVELS, SYNC_MIN_REPLICAS, check_level
from pytest_brokerperf.core.errors import BrokerUnavailable, ClusterUnreachable

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.producer_tweak import ProducerTweak
    from pytest_brokerperf.core.redaction import Secret
    from pytest_brokerperf.metrics.broker import Series

__all__ = [
    "CONNECT_TIMEOUT_S", "DRY_RUN_CONNECT_TIMEOUT_S", "PROVISION_MODES", "BrokerSettings",
    "BrokerType", "ManagedBroker", "Stoppable", "unreachable",
]

#: The ways a broker can come to exist (``--brokerperf-provision``; ``auto`` resolves to
#: one of the first two).
PROVISION_MODES = ("process", "container", "remote")

#: How long reaching a remote cluster may take, seconds (a dry run waits less).
CONNECT_TIMEOUT_S = 15.0
DRY_RUN_CONNECT_TIMEOUT_S = 5.0


def unreachable(what: str, address: str, started: float, cause: str,
                timeout_s: float, check: str) -> ClusterUnreachable:
    """The error for a remote cluster that did not answer: the address tried, how long
    the attempt really took and why it ended (refused at once, or no answer in time)."""
    elapsed = time.monotonic() - started
    how = (f"no answer within {timeout_s:.0f} s" if elapsed >= timeout_s * 0.9
           else f"failed after {elapsed:.1f} s")
    return ClusterUnreachable(
        f"the remote {what} at {address} did not answer: {how} ({cause}); check {check}")


class BrokerSettings(Protocol):
    """The part of the session's settings a broker kind reads, and nothing else: a
    narrow typed view, so ``brokers/`` never imports the configuration layer. The
    plugin's frozen ``config.Settings`` satisfies it as it is (type checkers verify)."""

    # what runs, and how many nodes (--brokerperf-provision, --brokerperf-nodes)
    @property
    def provision_effective(self) -> str: ...
    @property
    def remote(self) -> bool: ...
    @property
    def nodes(self) -> int: ...
    @property
    def run_id(self) -> str: ...
    # local nodes: memory cap, power-cut filesystem, metrics agent, container images
    @property
    def broker_memory(self) -> int | None: ...
    @property
    def powercut_effective(self) -> bool: ...
    @property
    def broker_metrics(self) -> bool: ...
    #: --brokerperf-tls: local brokers serve (and clients use) TLS listeners
    @property
    def tls(self) -> bool: ...
    def image_for(self, kind: str) -> str | None: ...
    # what the remote-cluster and version flags say, per broker family
    @property
    def kafka_version(self) -> str: ...
    @property
    def kafka_home(self) -> Path | None: ...
    @property
    def kafka_bootstrap(self) -> str | None: ...
    @property
    def kafka_config(self) -> Path | None: ...
    @property
    def pulsar_version(self) -> str: ...
    @property
    def pulsar_url(self) -> str | None: ...
    @property
    def pulsar_admin_url(self) -> str | None: ...
    @property
    def pulsar_config(self) -> Path | None: ...
    @property
    def rabbitmq_url(self) -> tuple[Secret, ...]: ...
    @property
    def allow_cluster_changes(self) -> bool: ...
    #: where each value came from (flag, env, ini), for errors that name it
    @property
    def sources(self) -> Mapping[str, str]: ...


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class ManagedBroker:
    """A broker this session started (or reached), with the way to let it go."""

    endpoint: BrokerEndpoint
    handle: Stoppable | None = None

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()


@dataclass(frozen=True)
class RemoteFlags:
    """The settings that name a remote cluster of a broker kind, checked before any start.

    Brokers spoken to through one protocol share one instance (Tansu, Redpanda and AutoMQ
    use Kafka's ``--kafka-bootstrap``), so each set is checked once.
    """

    #: Settings fields that name the cluster (any of them set: the run is remote)
    address: tuple[str, ...]
    #: what ``--brokerperf-provision=remote`` needs, as advice ("pass --kafka-bootstrap=…")
    needs: str
    #: the Settings field of the remote client config (TLS, SASL), if the kind has one
    client_config: str | None = None
    #: the flag that must come with the client config
    client_config_needs: str = ""


def flag_of(field_name: str) -> str:
    """The command-line flag of a Settings field (``kafka_bootstrap`` → ``--kafka-bootstrap``)."""
    return "--" + field_name.replace("_", "-")


class BrokerType:
    """One broker kind: its driver, provisioning, durability mapping, metrics and flags.

    Subclasses override what their broker has; the defaults say clearly that a broker
    lacks a capability (a :class:`BrokerUnavailable`, so the test skips with the reason).
    """

    #: the name users give ``--broker`` and that results carry
    name: ClassVar[str] = ""
    #: the client library family of its driver (``kafka`` for Kafka-protocol brokers)
    protocol: ClassVar[str] = ""
    #: True when a durability level is a property of the broker process (another level
    #: needs another process), False when it is per topic or queue
    broker_wide_durability: ClassVar[bool] = False
    #: why levels are not offered (None: this kind maps levels 1-4)
    no_durability: ClassVar[str | None] = (
        "durability levels are not mapped for {name} in this version")

    #: what scenarios and faults may ask of this kind beyond a driver (an earliest
    #: reader, a partition mover, a read-back), and why it lacks the others: a test whose
    #: scenario needs a missing one is deselected at collection with that reason
    capabilities: ClassVar[Capabilities] = Capabilities()

    #: the flags naming a remote cluster of this kind (None: no remote mode)
    remote_flags: ClassVar[RemoteFlags | None] = None
    #: node counts container mode offers (empty: no container mode)
    container_nodes: ClassVar[tuple[int, ...]] = ()
    #: the modes in which --brokerperf-broker-memory caps this broker's memory
    memory_cap_modes: ClassVar[tuple[str, ...]] = ()
    #: the modes whose start writes a study case's broker or bookie settings into the
    #: started broker's configuration (``StudyCase.server_settings``); empty: none
    server_settings_modes: ClassVar[tuple[str, ...]] = ()
    #: the provisioning modes whose nodes can lose unsynced writes (the ``power-cut``
    #: fault: durable directories on the power-cut filesystem); empty: none
    power_cut_modes: ClassVar[tuple[str, ...]] = ()
    #: the provisioning modes whose brokers serve TLS listeners with a per-run CA
    #: (``--brokerperf-tls``); empty: none, and the flag is refused for this kind
    tls_modes: ClassVar[tuple[str, ...]] = ()
    #: non-empty when one local process holds every node (why, for the refusal of a
    #: ``power-cut`` aimed at node 2 or later): its one node's cut is the whole cluster's
    power_cut_one_process: ClassVar[str] = ""

    def container_images(self, settings: BrokerSettings) -> tuple[str, ...]:
        """Images container mode tries in order without ``--brokerperf-image``."""
        return ()

    def companion_images(self, settings: BrokerSettings) -> dict[str, tuple[str, ...]]:
        """Images of the services container mode runs beside the broker (AutoMQ's object
        store), by their ``--brokerperf-image`` name; empty when there are none."""
        return {}

    def memory_floor(self) -> int:
        """The least memory in bytes one local node needs beside page cache (a
        --brokerperf-broker-memory below it is refused before anything starts)."""
        from pytest_brokerperf.brokers.provision.cgroups import MIN_NODE_MEMORY

        return MIN_NODE_MEMORY

    # -- flags ---------------------------------------------------------------------------
    def complete_remote(self, values: dict[str, Any]) -> None:
        """Fill in what the remote-cluster flags imply (Pulsar: the other URL on the
        default ports); ``values`` are the settings being resolved."""

    # -- driver --------------------------------------------------------------------------
    def default_driver_file(self, nodes: int, scenario: str) -> Path:
        """The shipped OMB driver YAML a scenario uses when the user names none."""
        raise BrokerUnavailable(f"no driver for broker kind {self.name!r} yet")

    def tweak_driver_file(self, base: Path, tweak: ProducerTweak, dest: Path) -> Path:
        """``base`` with the producer settings of ``tweak`` applied, written to ``dest``
        (a study case's batching, linger, compression or send-mode sweep)."""
        raise BrokerUnavailable(
            f"{self.name} has no producer setting for {tweak.id!r} in this version of "
            "pytest-brokerperf (its driver has no batching, linger, compression or send mode "
            "to sweep)")

    def create_driver(self, endpoint: BrokerEndpoint, driver_file: Path | None, *,
                      scenario: str = "tailread", stats_interval_ms: int = 5000) -> Driver:
        """The driver for ``endpoint`` from an OMB driver YAML (or the shipped default),
        with the endpoint's durability level applied; BrokerUnavailable for a level this
        broker cannot offer with that driver file."""
        raise BrokerUnavailable(
            f"broker kind {self.name!r} has no driver in this version of pytest-brokerperf")

    # -- provisioning --------------------------------------------------------------------
    def start(self, mode: str, settings: BrokerSettings, workdir: Path,
              durability: int | None = None, *,
              server: Mapping[str, str] | None = None) -> ManagedBroker:
        """Start (or reach) this broker as ``mode`` says; BrokerUnavailable when it cannot.

        ``durability`` (1-4) matters where it is broker-wide (see
        :attr:`broker_wide_durability`); per-topic levels are applied by the driver.
        ``server``: broker or bookie settings written into the started broker's own
        configuration last (a study case's ``server_settings``); only in
        :attr:`server_settings_modes`.
        """
        if server and mode not in self.server_settings_modes:
            raise BrokerUnavailable(
                f"{self.name} in {mode} mode cannot take broker settings "
                f"({'; '.join(f'{k}={v}' for k, v in server.items())}) in this version"
                + (f" (it can in: {', '.join(self.server_settings_modes)})"
                   if self.server_settings_modes else "")
                + "; run against a cluster configured so (--brokerperf-provision=remote)")
        if settings.broker_memory is not None and mode not in self.memory_cap_modes:
            raise BrokerUnavailable(
                f"--brokerperf-broker-memory (from {settings.sources.get('broker_memory')}) "
                f"cannot cap {self.name} in {mode} mode in this version (it can in: "
                f"{', '.join(self.memory_cap_modes) or 'no mode'}); drop the flag for {self.name}")
        problem = self.tls_problem(settings, mode)
        if problem is not None:
            raise BrokerUnavailable(problem)
        if mode == "process":
            managed = self.start_process(settings, workdir, durability, server or None)
        elif mode == "container":
            managed = self.start_container(settings, workdir, durability, server or None)
        elif mode == "remote":
            managed = self.reach_remote(settings, timeout_s=CONNECT_TIMEOUT_S)
        else:
            raise BrokerUnavailable(f"unknown provisioning mode {mode!r}; expected one of "
                                    f"{', '.join(PROVISION_MODES)}")
        if durability is not None and managed.endpoint.durability != durability:
            managed.endpoint = replace(managed.endpoint, durability=durability)
        return managed

    def tls_problem(self, settings: BrokerSettings, mode: str) -> str | None:
        """Why ``--brokerperf-tls`` cannot be honoured for this kind in ``mode`` (the flag,
        where it came from and the fix), or None. Checked before any broker starts."""
        if not settings.tls:
            return None
        where = f"--brokerperf-tls (from {settings.sources.get('tls', 'the command line')})"
        if mode == "remote":
            return (f"{where} makes local brokers serve TLS; a remote cluster's TLS is the "
                    "client's setting: drop the flag and put security.protocol=SSL (or "
                    "SASL_SSL) and ssl.ca.location in --kafka-config, use amqps:// in "
                    "--rabbitmq-url, or pulsar+ssl:// in --pulsar-url with "
                    "tlsTrustCertsFilePath in --pulsar-config")
        if mode not in self.tls_modes:
            offered = (f"it can in: {', '.join(self.tls_modes)}" if self.tls_modes
                       else "in no mode yet")
            return (f"{where}: {self.name} in {mode} mode has no TLS listener in this version "
                    f"({offered}); drop the flag for {self.name}"
                    + (", or use --brokerperf-provision=" + self.tls_modes[0]
                       if self.tls_modes else ""))
        return None

    def start_process(self, settings: BrokerSettings, workdir: Path,
                      durability: int | None,
                      server: Mapping[str, str] | None = None) -> ManagedBroker:
        """Start local broker processes (``--brokerperf-provision=process``)."""
        raise BrokerUnavailable(
            f"{self.name} cannot be started by pytest-brokerperf as a local process; point "
            "it at a running cluster (remote mode)")

    def start_container(self, settings: BrokerSettings, workdir: Path,
                        durability: int | None,
                        server: Mapping[str, str] | None = None) -> ManagedBroker:
        """Start broker containers (``--brokerperf-provision=container``)."""
        raise BrokerUnavailable(
            f"--brokerperf-provision=container is not available for {self.name!r} in this "
            "version; use --brokerperf-provision=process (local processes, no Docker needed)")

    def reach_remote(self, settings: BrokerSettings, *, timeout_s: float) -> ManagedBroker:
        """Reach a running cluster named by flags, read-only (metadata only); raise
        :class:`ClusterUnreachable` naming the address when it does not answer in time."""
        raise BrokerUnavailable(
            f"--brokerperf-provision=remote for {self.name!r} needs the remote-cluster "
            "flags, which are not available in this version")

    def check_client_config(self, settings: BrokerSettings) -> None:
        """Load the remote client config file its ``remote_flags`` name (TLS, SASL) before
        any broker starts; a BrokerPerfError names the line, key and fix. Default: none."""
        return None

    def remote_address(self, settings: BrokerSettings) -> str | None:
        """The address the remote-cluster flags name, credentials removed (None: none)."""
        return None

    def dry_run_endpoint(self, settings: BrokerSettings) -> BrokerEndpoint:
        """The endpoint a dry run plans against: nothing is started or created.

        A remote cluster is reached read-only (metadata only), so the plan picks the
        driver config the real run would; when it does not answer, the plan assumes
        ``--brokerperf-nodes`` nodes and says why. Local brokers are not started.
        """
        from pytest_brokerperf.brokers.endpoint import BrokerEndpoint

        unreached = None
        if settings.remote:
            try:
                managed = self.reach_remote(settings, timeout_s=DRY_RUN_CONNECT_TIMEOUT_S)
            except ClusterUnreachable as exc:
                why = str(exc).split("; check ")[0]
                unreached = (f"cluster not reached ({why}); the plan assumes "
                             f"{settings.nodes} broker(s) (--brokerperf-nodes)")
            else:
                return replace(managed.endpoint, dry_run=True)
        address = self.remote_address(settings) if settings.remote else None
        return BrokerEndpoint(
            kind=self.name, bootstrap=address or "(not started: dry run)",
            mode=settings.provision_effective, nodes=settings.nodes,
            dry_run=True, unreached=unreached)

    # -- durability ----------------------------------------------------------------------
    def unavailable_level(self, level: int) -> BrokerUnavailable:
        """The reason this broker offers no level (``no_durability``)."""
        reason = (self.no_durability or "durability levels are not mapped for {name}")
        return BrokerUnavailable(reason.format(name=self.name, level=level))

    def restart_key(self, level: int | None) -> int | None:
        """The part of a level that needs its own broker process (None: any one serves)."""
        return level if self.broker_wide_durability else None

    def level_settings(self, level: int, *, nodes: int = 1,
                       shape: Mapping[str, int | None] | None = None) -> dict[str, Any]:
        """What ``level`` means on this broker: scope, settings and why (see
        :func:`pytest_brokerperf.brokers.durability.describe`). ``shape`` carries the driver's
        replication figures (replication factor, ensemble, write quorum) when known."""
        raise self.unavailable_level(level)

    def check_offered(self, level: int | None, nodes: int, *, remote: bool = False) -> None:
        """Before a broker starts: raise BrokerUnavailable if ``level`` cannot run here
        whatever the driver file says (RF and quorums are checked again when the driver
        is built). A remote cluster's size is unknown here: only the kind is checked."""
        if level is None:
            return
        check_level(level)
        if self.no_durability is not None:
            raise self.unavailable_level(level)
        if remote:
            return
        if LEVELS[level].replication == "sync" and nodes < SYNC_MIN_REPLICAS:
            self.level_settings(level, nodes=nodes)  # raises with the broker's own reason

    def durability_settings(self, description: Mapping[str, Any],
                            endpoint: BrokerEndpoint) -> dict[str, Any]:
        """The durability-relevant settings a driver ran with (its ``describe()``)."""
        return {}

    def durability_read_back(self, read_back: Mapping[str, Any],
                             endpoint: BrokerEndpoint) -> dict[str, Any]:
        """The durability part of what the broker reported (the driver's ``read_back``)."""
        return {}

    def no_level_label(self) -> str | None:
        """The record's durability label when no level was asked for (None: the default,
        ``driver-defined``)."""
        return None

    def check_driver_file(self, path: Path) -> None:
        """Load ``path`` as this broker's OMB driver file (before any broker starts);
        a BrokerPerfError names the line, key, value and fix. Default: nothing to check."""
        return None

    # -- faults ---------------------------------------------------------------------------
    def fault_leader(self, endpoint: BrokerEndpoint, driver: Driver, topic: str) -> int | None:
        """The 1-based node leading the run's first topic or queue, the default target of
        a fault; None when this broker cannot tell (the fault then strikes node 1)."""
        return None

    # -- metrics -------------------------------------------------------------------------
    def prometheus_figures(self, series: Series) -> dict[str, float]:
        """Figures this broker's Prometheus metrics give (the broker-metrics sampler):
        JVM and process figures unless the broker knows more."""
        from pytest_brokerperf.metrics.broker import process_figures

        return process_figures(series)
