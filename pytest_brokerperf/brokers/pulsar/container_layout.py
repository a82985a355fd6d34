"""Three Pulsar nodes in containers: what each container is given (pure, unit-tested).

The layout of Pulsar's own "Deploy a cluster on Docker" guide and its docker-compose
example (pulsar.apache.org/docs, ``deploy-docker``): ZooKeeper, cluster metadata
initialised once (``bin/pulsar initialize-cluster-metadata``), then bookies and brokers
configured by environment through the apachepulsar/pulsar image's scripts. Differences,
and why:

- one metadata container, ``pulsar-meta`` (ZooKeeper, 256 MiB heap), which also runs
  ``initialize-cluster-metadata`` once ZooKeeper answers: the brokers' and bookies'
  metadata must live somewhere, and outside the nodes a killed node leaves the other
  two a working metadata store;
- each node ``pulsar-N`` is one container running a bookie *and* a broker, two JVMs
  under a small shell entrypoint that exits when either does: a node fault (kill,
  pause, stop) hits a broker and a bookie together, as a machine failure would, and
  the fault injector's node numbers stay 1..3;
- the two configuration files of a node are set through
  ``bin/apply-config-from-env-with-prefix.py`` with their own prefixes (``BOOKIE_``
  for ``conf/bookkeeper.conf``, ``BROKER_`` for ``conf/broker.conf``) instead of bare
  key names: both files have keys of the same name (``advertisedAddress``) that must
  differ here (the bookie is reached as ``pulsar-N``, the broker as ``127.0.0.1``).

Listeners: broker N binds its binary port P_N and web port W_N inside its container on
the numbers they are published on (127.0.0.1 only) and advertises ``host`` =
``pulsar://127.0.0.1:P_N`` (its internal listener, which lookups without a listener name
answer: clients on the host need no setting) and ``network`` = ``pulsar://pulsar-N:P_N``
for clients in containers. Brokers reach each other at those loopback addresses too (an
admin call on a topic another broker serves, a partitioned topic's deletion): each node
runs a small forwarder (:data:`FORWARDER_PY`) that listens on the other nodes' port
numbers on its own loopback and relays to ``pulsar-k``. System topics (topic-level
policies), transactions and functions stay off; the load manager only writes load
reports to ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_brokerperf.brokers.provision.java import check_jvm_size
from pytest_brokerperf.brokers.provision.ports import LOOPBACK
from pytest_brokerperf.brokers.pulsar.process import (
    BROKER_SHUTDOWN_TIMEOUT_MS,
    CLUSTER_NAME,
    PULSAR_EXTRA_FLAGS,
    PULSAR_GC_FLAGS,
    journal_settings,
)

__all__ = [
    "BOOKIE_PORT", "BOOKIE_PREFIX", "BROKER_PREFIX", "META_ALIAS", "ZK_PORT", "NodeLayout",
    "bookie_config", "broker_config", "meta_command", "node_command", "node_env",
    "zookeeper_config",
]

META_ALIAS = "pulsar-meta"
ZK_PORT = 2181
BOOKIE_PORT = 3181
BOOKIE_PREFIX = "BOOKIE_"
BROKER_PREFIX = "BROKER_"
LOG_DIR = "/pulsar/logs"
#: the line pulsar-meta's command prints once the cluster metadata exists
META_READY = "brokerperf: cluster metadata initialized"
ENSEMBLE, WRITE_QUORUM, ACK_QUORUM = 3, 3, 2


@dataclass(frozen=True)
class NodeLayout:
    """One node's addresses: alias on the network, the broker's two published ports."""

    index: int
    broker_port: int
    web_port: int

    @property
    def alias(self) -> str:
        return f"pulsar-{self.index}"

    @property
    def host_url(self) -> str:
        return f"pulsar://{LOOPBACK}:{self.broker_port}"

    @property
    def network_url(self) -> str:
        return f"pulsar://{self.alias}:{self.broker_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.web_port}"


def metadata_store() -> str:
    return f"zk:{META_ALIAS}:{ZK_PORT}"


def zookeeper_config() -> dict[str, str]:
    """``conf/zookeeper.conf``: one standalone ZooKeeper server."""
    return {
        "tickTime": "2000",
        "initLimit": "10",
        "syncLimit": "5",
        "dataDir": "data/zookeeper",
        "clientPort": str(ZK_PORT),
        "admin.enableServer": "false",
        "autopurge.snapRetainCount": "3",
        "autopurge.purgeInterval": "1",
        "4lw.commands.whitelist": "ruok,stat",
    }


def bookie_config(node: NodeLayout, durability: int | None = None) -> dict[str, str]:
    """``conf/bookkeeper.conf`` of node N: process mode's bookie settings
    (:func:`.process.standalone_config`), reached as ``pulsar-N:3181``."""
    cfg = {
        "bookiePort": str(BOOKIE_PORT),
        "advertisedAddress": node.alias,
        # as initialize-cluster-metadata formats it: no path (the ledgers root is /ledgers)
        "metadataServiceUri": f"metadata-store:{metadata_store()}",
        "zkServers": f"{META_ALIAS}:{ZK_PORT}",
        "journalDirectories": "data/bookkeeper/journal",
        "ledgerDirectories": "data/bookkeeper/ledgers",
        "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
        "journalMaxGroupWaitMSec": "1",
        "dbStorage_writeCacheMaxSizeMb": "64",
        "dbStorage_readAheadCacheMaxSizeMb": "64",
        "dbStorage_rocksDB_blockCacheSize": str(32 * 2**20),
        "httpServerEnabled": "false",
        "diskUsageThreshold": "0.99",
        "diskUsageWarnThreshold": "0.99",
        "autoRecoveryDaemonEnabled": "false",
    }
    cfg.update(journal_settings(durability))
    return cfg


def broker_config(node: NodeLayout, overrides: Mapping[str, str] | None = None
                  ) -> dict[str, str]:
    """``conf/broker.conf`` of node N: process mode's broker settings, ensemble 3 /
    write quorum 3 / ack quorum 2, the ``host`` and ``network`` listeners."""
    cfg = {
        "clusterName": CLUSTER_NAME,
        "metadataStoreUrl": metadata_store(),
        "configurationMetadataStoreUrl": metadata_store(),
        "bindAddress": "0.0.0.0",
        "advertisedAddress": LOOPBACK,
        "advertisedListeners": f"host:{node.host_url},network:{node.network_url}",
        "internalListenerName": "host",
        "brokerServicePort": str(node.broker_port),
        "webServicePort": str(node.web_port),
        "managedLedgerDefaultEnsembleSize": str(ENSEMBLE),
        "managedLedgerDefaultWriteQuorum": str(WRITE_QUORUM),
        "managedLedgerDefaultAckQuorum": str(ACK_QUORUM),
        # three brokers share the bundles (the no-op load manager keeps every bundle
        # on whichever broker a client asked first); no load shedding during a run
        "loadManagerClassName":
            "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        "loadBalancerEnabled": "false",
        "allowAutoTopicCreation": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "transactionCoordinatorEnabled": "false",
        "functionsWorkerEnabled": "false",
        # stops in 1.5 s, not 5 s (process mode's standalone_config says why)
        "brokerShutdownTimeoutMs": str(BROKER_SHUTDOWN_TIMEOUT_MS),
        # no broker-to-broker client over the loopback internal listener
        "systemTopicEnabled": "false",
        "topicLevelPoliciesEnabled": "false",
        "managedLedgerNewEntriesCheckDelayInMillis": "0",
        "bookkeeperUseV2WireProtocol": "true",
        "webSocketServiceEnabled": "false",
    }
    for k, v in (overrides or {}).items():
        cfg[str(k)] = str(v)
    return cfg


def _jvm(heap: str, direct_memory: str, gc_log: str) -> dict[str, str]:
    check_jvm_size(heap)
    check_jvm_size(direct_memory, "direct memory")
    return {
        "MEM": f"-Xms{heap} -Xmx{heap} -XX:MaxDirectMemorySize={direct_memory}",
        "GC_LOG": f"-Xlog:gc*:file={LOG_DIR}/{gc_log}:time,uptime:filecount=10,filesize=100M",
    }


def node_env(node: NodeLayout, *, durability: int | None, heap: str, direct_memory: str,
             bookie_heap: str, bookie_direct_memory: str,
             overrides: Mapping[str, str] | None = None,
             nodes: Sequence[NodeLayout] = ()) -> dict[str, str]:
    """Node N's environment: every key with its file's prefix, and each JVM's flags
    (``PULSAR_BROKER_MEM`` / ``PULSAR_BOOKIE_MEM`` become ``PULSAR_MEM`` of that process
    in :func:`node_command`)."""
    # ``overrides`` go to both files, as in a standalone's one file (broker and bookie
    # each read the keys they know): a study's bookie tuning reaches the bookies
    bookie = {**bookie_config(node, durability),
              **{str(k): str(v) for k, v in (overrides or {}).items()}}
    env = {BOOKIE_PREFIX + k: v for k, v in bookie.items()}
    env.update({BROKER_PREFIX + k: v for k, v in broker_config(node, overrides).items()})
    broker_jvm = _jvm(heap, direct_memory, f"gc-broker-{node.index}.log")
    bookie_jvm = _jvm(bookie_heap, bookie_direct_memory, f"gc-bookie-{node.index}.log")
    env.update({
        "PULSAR_BROKER_MEM": broker_jvm["MEM"], "PULSAR_BROKER_GC_LOG": broker_jvm["GC_LOG"],
        "PULSAR_BOOKIE_MEM": bookie_jvm["MEM"], "PULSAR_BOOKIE_GC_LOG": bookie_jvm["GC_LOG"],
        "PULSAR_GC": " ".join(PULSAR_GC_FLAGS),
        "PULSAR_EXTRA_OPTS": " ".join(PULSAR_EXTRA_FLAGS),
        "PULSAR_BROKERPERF_PEERS": peers(node, nodes),
        "PULSAR_BROKERPERF_FORWARDER": FORWARDER_PY,
    })
    return env


#: A node's stand-in for its peers on its own loopback: Pulsar brokers reach each other at
#: the URLs they advertise (their lookup data's ``webServiceUrl`` and ``brokerServiceUrl``,
#: ``127.0.0.1:W_k`` / ``127.0.0.1:P_k`` here, so host clients need no setting), e.g. when
#: the broker that owns a partitioned topic's metadata deletes partitions another broker
#: serves. Inside node N those addresses are N's own loopback: this forwarder listens on
#: every peer's port numbers there (they are distinct, so they never clash with N's own)
#: and relays to ``pulsar-k`` on the session network.
#: ``PULSAR_BROKERPERF_PEERS``: ``port=host:port,...``.
FORWARDER_PY = """
import asyncio, os
async def pipe(r, w):
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        w.close()
def relay(host, port):
    async def on(r, w):
        try:
            pr, pw = await asyncio.open_connection(host, port)
        except OSError:
            w.close()
            return
        await asyncio.gather(pipe(r, pw), pipe(pr, w))
    return on
async def main():
    servers = []
    for item in filter(None, os.environ.get("PULSAR_BROKERPERF_PEERS", "").split(",")):
        local, _, target = item.partition("=")
        host, _, port = target.rpartition(":")
        servers.append(await asyncio.start_server(relay(host, int(port)), "127.0.0.1",
                                                  int(local), reuse_address=True))
    print("brokerperf: peer forwarder on", len(servers), "port(s)", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

#: node N's entrypoint: both files from the environment, the peer forwarder, the bookie
#: and the broker as background processes, the container ends when any of them ends
#: (``wait -n``)
NODE_SCRIPT = (
    f"bin/apply-config-from-env-with-prefix.py {BOOKIE_PREFIX} conf/bookkeeper.conf"
    f" && bin/apply-config-from-env-with-prefix.py {BROKER_PREFIX} conf/broker.conf"
    " || exit 3; "
    'python3 -c "$PULSAR_BROKERPERF_FORWARDER" & '
    "PULSAR_MEM=$PULSAR_BOOKIE_MEM PULSAR_GC_LOG=$PULSAR_BOOKIE_GC_LOG bin/pulsar bookie & "
    "PULSAR_MEM=$PULSAR_BROKER_MEM PULSAR_GC_LOG=$PULSAR_BROKER_GC_LOG bin/pulsar broker & "
    "trap 'kill $(jobs -p) 2>/dev/null' TERM INT; wait -n; code=$?; "
    "kill $(jobs -p) 2>/dev/null; exit $code"
)


def peers(node: NodeLayout, nodes: Sequence[NodeLayout]) -> str:
    """``PULSAR_BROKERPERF_PEERS`` of node N: each other node's broker and web port,
    relayed to its alias."""
    return ",".join(f"{port}={n.alias}:{port}" for n in nodes if n.index != node.index
                    for port in (n.broker_port, n.web_port))


def node_command() -> list[str]:
    return ["bash", "-c", NODE_SCRIPT]


def meta_command(nodes: Sequence[NodeLayout]) -> list[str]:
    """ZooKeeper, then ``initialize-cluster-metadata`` (cluster, the brokers' URLs, the
    ``public/default`` namespace, BookKeeper's ledger root) once it answers."""
    web = ",".join(f"http://{n.alias}:{n.web_port}" for n in nodes)
    binary = ",".join(n.network_url for n in nodes)
    script = (
        "bin/apply-config-from-env.py conf/zookeeper.conf || exit 3; "
        "bin/pulsar zookeeper & zk=$!; "
        f"for _ in $(seq 1 240); do (exec 3<>/dev/tcp/127.0.0.1/{ZK_PORT}) 2>/dev/null "
        "&& break; sleep 0.5; done; "
        "bin/pulsar initialize-cluster-metadata"
        f" --cluster {CLUSTER_NAME} --metadata-store {metadata_store()}"
        f" --configuration-metadata-store {metadata_store()}"
        f" --web-service-url {web} --broker-service-url {binary} || exit 4; "
        f"echo '{META_READY}'; wait $zk"
    )
    return ["bash", "-c", script]


def meta_env(heap: str = "256m") -> dict[str, str]:
    """pulsar-meta's environment: ``conf/zookeeper.conf``'s keys by both rules of
    ``apply-config-from-env.py`` (a key's name replaces it, ``PULSAR_PREFIX_`` adds
    it), and ZooKeeper's heap."""
    check_jvm_size(heap)
    env: dict[str, str] = {}
    for key, value in zookeeper_config().items():
        env[key] = value
        env["PULSAR_PREFIX_" + key] = value
    env["PULSAR_MEM"] = f"-Xms{heap} -Xmx{heap}"
    env["PULSAR_GC"] = " ".join(PULSAR_GC_FLAGS)
    return env


def image_default_files() -> dict[str, str]:
    """The local image's ``conf/zookeeper.conf``, ``conf/bookkeeper.conf`` and
    ``conf/broker.conf`` (``ci/docker.sh``): this layout's keys for a node 1 on the
    official image's ports (6650, 8080), so that every key the environment sets is in
    the file."""
    from pytest_brokerperf.brokers.provision.java import render_properties

    node = NodeLayout(index=1, broker_port=6650, web_port=8080)
    header = "the brokerperf/pulsar image's defaults (ci/docker.sh)"
    return {
        "zookeeper.conf": render_properties(zookeeper_config(), header=f"ZooKeeper, {header}"),
        "bookkeeper.conf": render_properties(bookie_config(node), header=f"Bookie, {header}"),
        "broker.conf": render_properties(broker_config(node), header=f"Broker, {header}"),
    }
