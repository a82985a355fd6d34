"""RabbitMQ administration for a run: exchanges, queues and streams created and deleted,
backlogs, the mirroring check and the queue settings read back.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf.brokers.driver import BrokerBacklog
from pytest_brokerperf.brokers.rabbitmq.config import (
    durability_of,
    owned_queue_prefix,
    subscription_queues,
    topic_queues,
)
from pytest_brokerperf.brokers.rabbitmq.connection import _params
from pytest_brokerperf.core.errors import BrokerUnavailable, DriverError, ProvisionError

#: a descriptive CLI read (exchanges, policies) that does not answer in this long is a
#: named gap in the read-back (the queues, which runs are judged on, keep their timeout)
READ_BACK_TIMEOUT_S = 15.0

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.rabbitmq.config import RabbitMQDriverConfig
    from pytest_brokerperf.brokers.rabbitmq.process import CtlAccess


class AdminSource(Protocol):
    """What the admin reads of the driver that made it (a
    :class:`~pytest_brokerperf.brokers.rabbitmq.driver.RabbitMQDriver` is one): declared
    here, so the admin never imports the driver module that imports it."""

    @property
    def endpoint(self) -> BrokerEndpoint: ...
    @property
    def config(self) -> RabbitMQDriverConfig: ...
    @property
    def topic_partitions(self) -> dict[str, int]: ...
    @property
    def uris(self) -> list[str]: ...
    def ctl(self) -> CtlAccess | None: ...


class _RabbitAdmin:
    """Exchanges, streams and policies; read-back through ``rabbitmqctl`` when local."""

    def __init__(self, driver: AdminSource) -> None:
        import pika

        self._driver = driver
        # Idle from topic creation to deletion (the whole run): no heartbeats, or the
        # broker would drop it before the topics are deleted. Node 1 first; the others
        # when its node went away (a fault, a restart).
        ep = driver.endpoint
        self._nodes = [_params(u, ep.client_config, "brokerperf-admin", ep.tls)
                       for u in driver.uris]
        for params in self._nodes:
            params.heartbeat = 0
        self._conn = pika.BlockingConnection(self._nodes[0])
        self._ch = self._conn.channel()
        self._ctl = driver.ctl()
        self._created: dict[str, int] = {}
        self._policies: list[str] = []

    def _channel(self) -> Any:
        if not self._conn.is_open:
            self._reconnect()
        elif not self._ch.is_open:
            self._ch = self._conn.channel()
        return self._ch

    def _reconnect(self) -> None:
        """A new connection to the first node that answers (a dead one is only noticed
        when used: the admin connection has no heartbeat)."""
        import pika

        with contextlib.suppress(Exception):
            self._conn.close()
        last: Exception | None = None
        for params in self._nodes:
            try:
                self._conn = pika.BlockingConnection(params)
                self._ch = self._conn.channel()
                return
            except pika.exceptions.AMQPError as exc:
                last = exc
        raise DriverError(f"no RabbitMQ node accepted the admin connection: {last!r}")

    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        import pika

        d = self._driver
        cfg = d.config
        for p in set(partitions):
            cfg.check_partitions(p)
        if cfg.ha_policy:
            self._check_mirroring()
        args = cfg.queue_declare_arguments()
        for name, p in zip(names, partitions, strict=True):
            ch = self._channel()
            try:
                ch.exchange_declare(name, exchange_type=cfg.exchange_type.lower(), durable=True)
                for q in topic_queues(name, p, cfg):
                    ch.queue_declare(q.name, durable=True, auto_delete=False, arguments=args)
                    ch.queue_bind(q.name, name, routing_key=q.routing_key)
            except pika.exceptions.AMQPError as exc:
                raise DriverError(f"creating RabbitMQ topic {name!r} failed: {exc!r}") from exc
            if cfg.ha_policy:
                policy = f"{name}-ha"
                assert self._ctl is not None
                self._ctl.check(
                    "rabbitmqctl",
                    "set_policy",
                    "--apply-to",
                    "queues",
                    policy,
                    "^" + _regex_escape(owned_queue_prefix(name)),
                    json.dumps(dict(cfg.ha_policy)),
                )
                self._policies.append(policy)
            d.topic_partitions[name] = p
            self._created[name] = p

    def _check_mirroring(self) -> None:
        version = self._driver.endpoint.version
        major = int(version.split(".", 1)[0]) if version[:1].isdigit() else 0
        if major >= 4:
            raise BrokerUnavailable(
                f"classic mirrored queues (haPolicy) were removed in RabbitMQ 4.0; this "
                f"broker is {version}. Use queueType: QUORUM instead"
            )
        if self._ctl is None:
            raise BrokerUnavailable(
                "classic mirroring (haPolicy) is set by policy, which needs rabbitmqctl "
                "access to the broker (local process mode); the remote endpoint has none"
            )

    def delete_topics(self, names: list[str]) -> None:
        import pika

        cfg = self._driver.config
        errors: list[str] = []
        for name in names:
            p = self._created.get(name) or self._driver.topic_partitions.get(name, 1)
            for attempt in (1, 2):
                try:
                    ch = self._channel()
                    for q in topic_queues(name, p, cfg):
                        ch.queue_delete(q.name)
                    ch.exchange_delete(name)
                    break
                except pika.exceptions.AMQPConnectionError as exc:
                    if attempt == 2:  # the node went away since the last use: once more
                        errors.append(f"{name}: {exc!r}")
                    else:
                        self._reconnect()
                except pika.exceptions.AMQPError as exc:
                    errors.append(f"{name}: {exc!r}")
                    break
        for policy in list(self._policies):
            if self._ctl is not None and policy.removesuffix("-ha") in names:
                self._ctl.run("rabbitmqctl", "clear_policy", policy)
                self._policies.remove(policy)
        # Subscription queues the engine never named (e.g. a crashed run): sweep by prefix.
        if self._ctl is not None:
            for row in self._queues():
                qname = str(row.get("name", ""))
                if any(qname.startswith(owned_queue_prefix(n)) for n in names):
                    with contextlib.suppress(pika.exceptions.AMQPError):
                        self._channel().queue_delete(qname)
        if errors:
            raise DriverError("deleting RabbitMQ topics failed: " + "; ".join(errors))

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]) -> list[BrokerBacklog]:
        """Ready messages of each subscription's queues (a passive declare's
        ``message_count``); empty for streams, which keep no per-consumer count."""
        cfg = self._driver.config
        if cfg.is_stream:
            return []
        out: list[BrokerBacklog] = []
        for topic, subs in subscriptions.items():
            p = self._created.get(topic, 0)
            for sub in subs:
                ready = sum(
                    int(self._channel().queue_declare(q.name, passive=True).method.message_count)
                    for q in subscription_queues(topic, sub, p, cfg)
                )
                out.append(
                    BrokerBacklog(
                        subscription=sub,
                        messages=ready,
                        how="messages ready in the subscription's queues",
                    )
                )
        return out

    def delete_groups(self, subscriptions: list[str]) -> None:
        """Delete the subscription queues (classic/quorum) of the topics created here."""
        import pika

        cfg = self._driver.config
        if cfg.is_stream:
            return
        for topic, p in self._created.items():
            for sub in subscriptions:
                if not sub.startswith(topic):
                    continue
                for q in subscription_queues(topic, sub, p, cfg):
                    with contextlib.suppress(pika.exceptions.AMQPError):
                        self._channel().queue_delete(q.name)

    def _queues(self) -> list[dict[str, Any]]:
        if self._ctl is None:
            return []
        rows = self._ctl.json(
            "rabbitmqctl",
            "list_queues",
            "-q",
            "name",
            "type",
            "durable",
            "exclusive",
            "auto_delete",
            "arguments",
            "policy",
            "messages_ready",
        )
        return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []

    def read_back(self, names: list[str]) -> dict[str, Any]:
        """Exchanges and queues as the broker reports them, plus alarms and durability."""
        d = self._driver
        cfg = d.config
        out: dict[str, Any] = {"topics": {}, "broker": {"version": d.endpoint.version}}
        for name in names:
            p = self._created.get(name) or d.topic_partitions.get(name, 1)
            out["topics"][name] = {
                "exchange": name,
                "exchange_type": cfg.exchange_type.lower(),
                "partitions": p,
                "routing_keys": cfg.routing_keys(p),
                "queues": {},
                "declare_arguments": cfg.queue_declare_arguments(),
                "message_persistence": cfg.message_persistence,
            }
        out["durability"] = durability_of(cfg, d.endpoint.nodes)
        if self._ctl is None:
            out["note"] = (
                "queue types and arguments are read with rabbitmqctl on local "
                "brokers; this endpoint has no CLI access, so only the declared "
                "arguments are recorded"
            )
            return out
        from pytest_brokerperf.brokers.rabbitmq.process import read_alarms

        for q in self._queues():
            qname = str(q.get("name", ""))
            for name in names:
                if qname.startswith(owned_queue_prefix(name)):
                    row = {
                        k: q.get(k)
                        for k in ("type", "durable", "exclusive", "auto_delete", "policy")
                    }
                    row["arguments"] = _ctl_table(q.get("arguments"))
                    out["topics"][name]["queues"][qname] = row
        # What follows only describes the broker: a CLI that does not answer within
        # READ_BACK_TIMEOUT_S is a named gap in the read-back, never a failed run.
        gaps: list[str] = []
        try:
            exchanges = self._ctl.json("rabbitmqctl", "list_exchanges", "-q", "name", "type",
                                       "durable", timeout=READ_BACK_TIMEOUT_S)
        except (ProvisionError, ValueError) as e:
            gaps.append(f"exchanges: {str(e)[:300]}")
            exchanges = []
        for x in exchanges if isinstance(exchanges, list) else []:
            if isinstance(x, dict) and x.get("name") in out["topics"]:
                out["topics"][x["name"]]["exchange_read_back"] = x
        out["broker"]["alarms"] = read_alarms(self._ctl)
        try:
            policies = self._ctl.json("rabbitmqctl", "list_policies", "-q",
                                      timeout=READ_BACK_TIMEOUT_S)
        except (ProvisionError, ValueError) as e:
            gaps.append(f"policies: {str(e)[:300]}")
            policies = []
        out["broker"]["policies"] = policies if isinstance(policies, list) else []
        if gaps:
            out["read_back_gaps"] = gaps
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._conn.is_open:
                self._conn.close()


def _ctl_table(value: Any) -> Any:
    """rabbitmqctl's AMQP table ``[[key, type, value], ...]`` as ``{key: value}``."""
    if isinstance(value, list) and all(isinstance(x, list) and len(x) == 3 for x in value):
        return {str(k): v for k, _, v in value}
    return value


def _regex_escape(text: str) -> str:
    """Escape a queue-name prefix for a policy pattern (Erlang re, PCRE-like)."""
    return re.escape(text)
