"""AutoMQ in a container with its object store (``--broker=automq
--brokerperf-provision=container``).

The deployment follows AutoMQ's own single-node docker-compose (``docker/docker-compose.yaml``
in github.com/AutoMQ/automq, AutoMQ 1.5.0) and its object-storage URI format
(https://www.automq.com/docs/automq/configuration/object-storage-configuration):

- an object store, the ``minio/minio`` image run as ``server /data`` with
  ``MINIO_ROOT_USER``/``MINIO_ROOT_PASSWORD``, alias ``minio`` on the session's network,
  port 9000; the buckets ``automq-data`` and ``automq-ops`` are created through the S3
  API (:mod:`pytest_brokerperf.brokers.provision.s3`) once ``/minio/health/live`` answers, and
  before AutoMQ starts (the compose file's ``mc mb`` step);
- the ``automqinc/automq`` image, ``KAFKA_S3_ACCESS_KEY``/``KAFKA_S3_SECRET_KEY``,
  ``KAFKA_HEAP_OPTS`` and ``CLUSTER_ID`` in its environment, running
  ``kafka-server-start.sh .../kraft/server.properties --override ...`` with the rendered
  overrides (:func:`start_command`): one combined controller+broker, the data, ops and
  write-ahead-log URIs on ``http://minio:9000`` with ``pathStyle=true``, and two Kafka
  listeners as Kafka's container mode has them (``HOST`` bound and published on loopback
  port P, advertised as ``127.0.0.1:P``; ``PLAINTEXT`` on 9092 advertised as
  ``automq-1:9092``);
- ready when the log says ``Kafka Server started`` and the Kafka metadata seen from the
  host names the node at ``127.0.0.1:P``.

Neither image can be obtained on this project's machines, so the rendering is
unit-tested, and the wiring runs against stand-ins (``ci/images/automq-standin``,
``ci/images/s3-standin``; docs/reference/containers.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
from pytest_brokerperf.brokers.kafka.container import await_node_advertised
from pytest_brokerperf.brokers.provision.container_node import (
    ContainerNode,
    ContainerPlan,
    wait_for_log,
)
from pytest_brokerperf.brokers.provision.ports import LOOPBACK, free_ports
from pytest_brokerperf.brokers.provision.s3 import S3Endpoint
from pytest_brokerperf.core.errors import ConfigError, ProvisionError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

    from pytest_brokerperf.brokers.provision.containers import ImageInfo

__all__ = [
    "AUTOMQ_DEFAULT_VERSION",
    "BUCKETS",
    "OBJECT_STORE_KIND",
    "AutoMQContainer",
    "automq_env",
    "bucket_uri",
    "default_images",
    "object_store_images",
    "start_command",
]

AUTOMQ_DEFAULT_VERSION = "1.5.0"
MINIO_DEFAULT_IMAGE = "minio/minio:RELEASE.2025-05-24T17-08-30Z"
#: the ``--brokerperf-image`` name of the object store's image
OBJECT_STORE_KIND = "minio"
ALIAS = "automq-1"
STORE_ALIAS = "minio"
STORE_PORT = 9000
IN_NETWORK_PORT = 9092
CONTROLLER_PORT = 9093
#: the data bucket (also the write-ahead log's) and the ops bucket, as in AutoMQ's compose
BUCKETS = ("automq-data", "automq-ops")
REGION = "us-east-1"
SERVER_START = "/opt/automq/kafka/bin/kafka-server-start.sh"
SERVER_PROPERTIES = "/opt/automq/kafka/config/kraft/server.properties"
READY_LINE = b"Kafka Server started"
STORE_MEMORY_MB = 512
DEFAULT_START_TIMEOUT_S = 120.0
#: the standing credentials of the session's throwaway store (loopback-published only)
ACCESS_KEY = "brokerperf"
SECRET_KEY = "brokerperf-secret"


def default_images(version: str = AUTOMQ_DEFAULT_VERSION) -> tuple[str, ...]:
    """The official image (no local build exists: see the module docstring)."""
    return (f"automqinc/automq:{version}",)


def object_store_images() -> tuple[str, ...]:
    """The object store's image: MinIO at the release AutoMQ's compose file pins."""
    return (MINIO_DEFAULT_IMAGE,)


def bucket_uri(bucket_id: int, bucket: str) -> str:
    """AutoMQ's object-storage URI for a bucket in the session's store (MinIO form:
    path style, explicit endpoint)."""
    return (f"{bucket_id}@s3://{bucket}?region={REGION}"
            f"&endpoint=http://{STORE_ALIAS}:{STORE_PORT}&pathStyle=true")


def start_command(host_port: int, cluster_id: str) -> list[str]:
    """``kafka-server-start.sh`` with the overrides of one combined node, two Kafka
    listeners, and the data, ops and WAL URIs in the session's object store."""
    if not 0 < host_port < 65536:
        raise ConfigError(f"the host listener port must be 1-65535, got {host_port}")
    if not cluster_id:
        raise ConfigError("AutoMQ needs a cluster id (CLUSTER_ID), got an empty one")
    data, ops = BUCKETS
    overrides = {
        "cluster.id": cluster_id,
        "node.id": "0",
        "controller.quorum.voters": f"0@{ALIAS}:{CONTROLLER_PORT}",
        "controller.quorum.bootstrap.servers": f"{ALIAS}:{CONTROLLER_PORT}",
        "listeners": (f"PLAINTEXT://:{IN_NETWORK_PORT},HOST://:{host_port},"
                      f"CONTROLLER://:{CONTROLLER_PORT}"),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "advertised.listeners": (f"PLAINTEXT://{ALIAS}:{IN_NETWORK_PORT},"
                                 f"HOST://{LOOPBACK}:{host_port}"),
        "s3.data.buckets": bucket_uri(0, data),
        "s3.ops.buckets": bucket_uri(1, ops),
        "s3.wal.path": bucket_uri(0, data),
    }
    command = [SERVER_START, SERVER_PROPERTIES]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    return command


def automq_env(cluster_id: str, heap: str = "1g", direct_memory: str = "1g") -> dict[str, str]:
    """The AutoMQ container's environment: object-store credentials, heap (fixed, as
    process-mode Kafka's; AutoMQ's compose caps direct memory at 1G) and cluster id."""
    from pytest_brokerperf.brokers.provision.java import check_jvm_size

    check_jvm_size(heap)
    check_jvm_size(direct_memory)
    return {
        "KAFKA_S3_ACCESS_KEY": ACCESS_KEY,
        "KAFKA_S3_SECRET_KEY": SECRET_KEY,
        "KAFKA_HEAP_OPTS": (f"-Xms{heap} -Xmx{heap} -XX:MetaspaceSize=96m "
                            f"-XX:MaxDirectMemorySize={direct_memory.upper()}"),
        "CLUSTER_ID": cluster_id,
    }


def _is_stand_in(labels: dict[str, str]) -> bool:
    return labels.get("org.brokerperf.image", "").endswith("-standin")


class AutoMQContainer(ContainerNode):
    """One AutoMQ node and its object store on the session's network.

    Container 1 is the AutoMQ node (the one node faults act on), container 2 the object
    store; the store starts first and gets its buckets before the node starts.
    """

    kind: ClassVar[str] = "automq"

    def __init__(self, *, workdir: Path, run_id: str, image: str | None = None,
                 store_image: str | None = None, version: str = AUTOMQ_DEFAULT_VERSION,
                 heap: str = "1g", cpus: set[int] | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT_S) -> None:
        super().__init__(workdir=workdir, run_id=run_id, image=image, cpus=cpus,
                         start_timeout=start_timeout)
        self.version = version
        self.heap = heap
        self.requested_store_image = store_image
        self._host_port: int | None = None
        self._store_port: int | None = None
        self._store_image: ImageInfo | None = None
        self._endpoint: BrokerEndpoint | None = None

    @property
    def endpoint(self) -> BrokerEndpoint:
        if self._endpoint is None:
            raise RuntimeError("the AutoMQ containers are not running; call start() first")
        return self._endpoint

    @property
    def store(self) -> S3Endpoint:
        """The object store as the host reaches it (its port published on loopback)."""
        if self._store_port is None:
            raise RuntimeError("the object store is not planned yet; call start() first")
        return S3Endpoint(f"http://{LOOPBACK}:{self._store_port}", ACCESS_KEY, SECRET_KEY,
                          REGION)

    def image_candidates(self) -> tuple[str, ...]:
        return default_images(self.version)

    def name_of(self, node: int) -> str:
        if node == 2:
            return f"brokerperf-{self.run_id}-automq-{STORE_ALIAS}-{os.getpid()}"
        return super().name_of(node)

    def node_count(self) -> int:
        return min(1, len(self._containers))  # the object store is no node to fault

    def plans(self) -> list[ContainerPlan]:
        from pytest_brokerperf.brokers.kafka.node_config import generate_cluster_id
        from pytest_brokerperf.brokers.provision import containers
        from pytest_brokerperf.brokers.provision.java import jvm_size_bytes

        client = containers.docker_client()
        try:
            self._store_image = containers.resolve_image(
                client, OBJECT_STORE_KIND, self.requested_store_image, object_store_images())
        finally:
            client.close()
        port, store_port = free_ports(2)
        self._host_port, self._store_port = port, store_port
        cluster_id = generate_cluster_id()
        memory_mb = (jvm_size_bytes(self.heap) + jvm_size_bytes("1g")) // 2**20 + 512
        node = ContainerPlan(alias=ALIAS, hostname=ALIAS, env=automq_env(cluster_id, self.heap),
                             command=start_command(port, cluster_id), ports={port: port},
                             memory_mb=memory_mb)
        store = ContainerPlan(
            alias=STORE_ALIAS, hostname=STORE_ALIAS, image=self._store_image.ref,
            env={"MINIO_ROOT_USER": ACCESS_KEY, "MINIO_ROOT_PASSWORD": SECRET_KEY},
            command=["server", "/data"], ports={STORE_PORT: store_port},
            memory_mb=STORE_MEMORY_MB)
        return [node, store]

    def start_containers(self, created: list[DockerContainer], plans: list[ContainerPlan],
                         deadline: float) -> None:
        """The object store, its buckets, then AutoMQ (which reads them at start-up)."""
        node, store = created
        store.start()

        def running() -> None:
            wrapped = store.get_wrapped_container()
            wrapped.reload()
            if wrapped.status in ("exited", "dead"):
                code = (wrapped.attrs.get("State") or {}).get("ExitCode")
                raise ProvisionError(f"the object store's container exited with code {code} "
                                     "before its S3 API answered")

        self.store.wait_live(deadline, running)
        for bucket in BUCKETS:
            self.store.create_bucket(bucket)
        node.start()

    def wait_cluster_ready(self, started: list[DockerContainer], plans: list[ContainerPlan],
                           deadline: float) -> None:
        """The node's ready line, then the Kafka metadata from the host names the node
        at the address it advertises to the host."""
        self.wait_ready(started[0], plans[0], deadline)

    def wait_ready(self, container: DockerContainer, plan: ContainerPlan,
                   deadline: float) -> None:
        wait_for_log(container, READY_LINE, deadline, self.start_timeout, since=self.log_since)
        await_node_advertised(f"{LOOPBACK}:{self._host_port}", deadline)

    def start(self) -> BrokerEndpoint:
        plans, info = self.launch()
        labels = info.pop("image_labels")
        store = self._store_image
        if store is None:  # plans() resolves it, and launch() ran plans()
            raise RuntimeError("the object store's image was not resolved")
        stand_in = _is_stand_in(labels) or _is_stand_in(dict(store.labels))
        node_pids = self.host_pids("java")
        if node_pids:  # the JVM, not the store, is what /proc sampling should read
            info["pids"] = node_pids
        info.update({
            "command": plans[0].command,
            "env": {k: ("***" if k == "KAFKA_S3_SECRET_KEY" else v)
                    for k, v in sorted(plans[0].env.items())},
            "listeners": {"HOST": f"{LOOPBACK}:{self._host_port}",
                          "PLAINTEXT": f"{ALIAS}:{IN_NETWORK_PORT}"},
            "in_network_bootstrap": f"{ALIAS}:{IN_NETWORK_PORT}",
            "heap": self.heap,
            "cluster_id": plans[0].env["CLUSTER_ID"],
            "object_store": {
                "part_of_deployment": True,
                "image": store.as_dict(),
                "alias": STORE_ALIAS,
                "endpoint_in_network": f"http://{STORE_ALIAS}:{STORE_PORT}",
                "endpoint_on_host": self.store.url,
                "buckets": list(BUCKETS),
                "stand_in": _is_stand_in(dict(store.labels)),
            },
            "stand_in": stand_in,
        })
        if stand_in:
            info["stand_in_note"] = ("a stand-in image ran (ci/images/automq-standin or "
                                     "s3-standin): its figures are Kafka's, not AutoMQ's")
        self._endpoint = BrokerEndpoint(
            kind="automq", bootstrap=f"{LOOPBACK}:{self._host_port}", mode="container",
            nodes=1, version=(f"stand-in (Kafka {labels.get('org.brokerperf.kafka-version')})"
                              if _is_stand_in(labels) else
                              labels.get("org.opencontainers.image.version") or self.version),
            info=info, local=self.local_record(info))
        return self.serving(self._endpoint)

    def forget(self) -> None:
        self._endpoint = None
