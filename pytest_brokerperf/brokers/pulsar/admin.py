"""Pulsar admin over the REST v2 API (urllib, no extra dependency): the run's namespace
with its policies, its topics, backlogs, and the settings read back.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pytest_brokerperf.brokers.driver import (
    BrokerBacklog,
)
from pytest_brokerperf.core.errors import DriverError

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.brokers.pulsar.config import PulsarDriverConfig


# -- admin (REST v2) --------------------------------------------------------------------


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as HTTPError: :meth:`_Rest.call` follows them itself."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


class _Rest:
    """Tiny JSON client of the Pulsar admin REST API (urllib; no extra dependency)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        context: ssl.SSLContext | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.token = token
        self.context = context
        self.timeout = timeout

    #: redirects followed per call: a namespace or topic served by another broker of the
    #: cluster answers 307 with that broker's web service URL
    MAX_REDIRECTS = 3

    def call(
        self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 204)
    ) -> tuple[int, Any]:
        """One request; a 307/308 redirect to the broker that owns the namespace bundle
        (any cluster of more than one broker) is followed with the same method, body and
        token, as Pulsar's own admin client does (urllib follows none for PUT/DELETE).
        An ``https`` URL is never redirected to plain ``http``."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = self.base + path
        for _ in range(self.MAX_REDIRECTS + 1):
            status, text, location = self._once(method, url, data, headers)
            if status not in (307, 308) or not location:
                break
            target = urllib.parse.urljoin(url, location)
            if url.startswith("https:") and not target.startswith("https:"):
                raise DriverError(f"Pulsar admin {method} {url} redirected to {target}: "
                                  "refused (https to plain http)")
            url = target
        if status not in ok:
            raise DriverError(f"Pulsar admin {method} {url} -> HTTP {status}: {text[:500]}")
        try:
            return status, json.loads(text) if text.strip() else None
        except ValueError:
            return status, text

    def _once(self, method: str, url: str, data: bytes | None, headers: dict[str, str]
              ) -> tuple[int, str, str | None]:
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(
            context=self.context) if self.context else urllib.request.HTTPSHandler())
        try:
            with opener.open(req, timeout=self.timeout) as r:
                return int(r.status), r.read().decode("utf-8", "replace"), None
        except urllib.error.HTTPError as e:
            return (int(e.code), e.read().decode("utf-8", "replace"),
                    e.headers.get("Location") if e.headers else None)
        except (OSError, urllib.error.URLError) as e:
            raise DriverError(f"Pulsar admin {method} {url} failed: {e}") from e

    def get(self, path: str, ok: tuple[int, ...] = (200,)) -> Any:
        return self.call("GET", path, ok=ok)[1]


class AdminSource(Protocol):
    """What the admin reads of the driver that made it (a
    :class:`~pytest_brokerperf.brokers.pulsar.driver.PulsarDriver` is one): declared here,
    so the admin never imports the driver module that imports it."""

    @property
    def config(self) -> PulsarDriverConfig: ...
    @property
    def endpoint(self) -> BrokerEndpoint: ...
    @property
    def namespace(self) -> str: ...
    @property
    def admin_url(self) -> str: ...
    def _rest(self) -> _Rest: ...


class PulsarAdmin:
    """Creates the run's namespace (with its policies) and topics; reads them back.

    The namespace ``<tenant>/<prefix>-<random>`` is the driver's and lives for one run:
    :meth:`close` deletes it once every topic created here has been deleted.
    """

    def __init__(self, driver: AdminSource) -> None:
        self._driver = driver
        self.rest = driver._rest()
        self.namespace = driver.namespace
        self._created: dict[str, int] = {}  # topic name -> partitions (0 = non-partitioned)
        self._namespace_created = False
        self.notes: list[str] = []

    # -- helpers ------------------------------------------------------------------------
    def _topic_path(self, name: str) -> str:
        kind = self._driver.config.client.topic_type
        return f"/admin/v2/{kind}/{self.namespace}/{urllib.parse.quote(name)}"

    def clusters(self) -> list[str]:
        got = self.rest.get("/admin/v2/clusters")
        return [str(c) for c in got] if isinstance(got, list) else []

    def bookies(self) -> int | None:
        """Bookies registered with the cluster, None if the API does not say."""
        try:
            got = self.rest.get("/admin/v2/bookies/all")
        except DriverError:
            return None
        if isinstance(got, dict) and isinstance(got.get("bookies"), list):
            return len(got["bookies"])
        return None

    def _ensure_tenant(self) -> None:
        tenant = self._driver.config.tenant
        status, _ = self.rest.call("GET", f"/admin/v2/tenants/{tenant}", ok=(200, 404))
        if status == 200:
            return
        ep = self._driver.endpoint
        if ep.mode == "remote" and not ep.allow_cluster_changes:
            raise DriverError(
                f"tenant {tenant!r} (client.namespacePrefix of the driver file) does not exist "
                f"on the remote cluster at {self._driver.admin_url}; creating a tenant is a "
                "cluster-wide change: use an existing tenant in client.namespacePrefix, or "
                "pass --brokerperf-allow-cluster-changes"
            )
        wanted = self._driver.config.client.cluster_name
        clusters = self.clusters()
        allowed = [wanted] if wanted in clusters else clusters
        if wanted and wanted not in clusters:
            self.notes.append(
                f"clusterName {wanted!r} is not a cluster of this broker "
                f"({clusters}); tenant {tenant!r} allowed on {allowed}"
            )
        self.rest.call(
            "PUT",
            f"/admin/v2/tenants/{tenant}",
            {"adminRoles": [], "allowedClusters": allowed},
            ok=(200, 204, 409),
        )

    def _create_namespace(self) -> None:
        ns = self.namespace
        self.rest.call("PUT", f"/admin/v2/namespaces/{ns}", ok=(200, 204))
        self._namespace_created = True
        pol = self._driver.config.namespace_policies()
        base = f"/admin/v2/namespaces/{ns}"
        self.rest.call("POST", f"{base}/persistence", pol["persistence"])
        self.rest.call(
            "POST", f"{base}/backlogQuota?backlogQuotaType=destination_storage", pol["backlogQuota"]
        )
        self.rest.call("POST", f"{base}/retention", pol["retention"])
        self.rest.call("POST", f"{base}/deduplication", pol["deduplication"])

    # -- AdminClient protocol -----------------------------------------------------------
    def create_topics(self, names: list[str], partitions: list[int]) -> None:
        cfg = self._driver.config
        bookies = self.bookies()
        if bookies is not None:
            cfg.check_bookies(bookies, self._driver.endpoint.admin_url or "the cluster")
        self._ensure_tenant()
        if not self._namespace_created:
            self._create_namespace()
        for name, n in zip(names, partitions, strict=True):
            path = self._topic_path(name)
            if n > 1:
                self.rest.call("PUT", f"{path}/partitions", n)
                self._created[name] = n
            else:  # OMB creates a partitioned topic only for partitions > 1
                self.rest.call("PUT", path)
                self._created[name] = 0

    def delete_groups(self, groups: list[str]) -> None:
        """Subscriptions go with their topics (deleted with force)."""

    def delete_topics(self, names: list[str]) -> None:
        errors: list[str] = []
        for name in names:
            path = self._topic_path(name)
            partitioned = self._created.get(name, 1) > 0
            try:
                if partitioned:
                    self.rest.call("DELETE", f"{path}/partitions?force=true", ok=(200, 204, 404))
                else:
                    self.rest.call("DELETE", f"{path}?force=true", ok=(200, 204, 404))
                self._created.pop(name, None)
            except DriverError as exc:
                errors.append(str(exc))
        if errors:
            raise DriverError("deleting Pulsar topics failed: " + "; ".join(errors))

    def topic_partitions(self, name: str) -> int:
        got = self.rest.get(f"{self._topic_path(name)}/partitions")
        return int(got.get("partitions", 0)) if isinstance(got, dict) else 0

    def backlog(self, names: list[str]) -> dict[str, int]:
        """Broker-side ``msgBacklog`` per subscription, summed over partitions."""
        out: dict[str, int] = {}
        for name in names:
            path = self._topic_path(name)
            stats = self.rest.get(
                f"{path}/partitioned-stats" if self._created.get(name, 1) else f"{path}/stats"
            )
            for sub, s in (stats or {}).get("subscriptions", {}).items():
                out[sub] = out.get(sub, 0) + int(s.get("msgBacklog", 0))
        return out

    def subscription_backlog(self, subscriptions: Mapping[str, list[str]]) -> list[BrokerBacklog]:
        """Each subscription's ``msgBacklog`` from the topic's (partitioned) stats."""
        got = self.backlog(list(subscriptions))
        return [
            BrokerBacklog(
                subscription=sub,
                messages=got.get(sub, 0),
                how="msgBacklog of the (partitioned) topic stats",
            )
            for subs in subscriptions.values()
            for sub in subs
        ]

    def read_back(self, names: list[str]) -> dict[str, Any]:
        ns = self.namespace
        base = f"/admin/v2/namespaces/{ns}"
        out: dict[str, Any] = {
            "namespace": ns,
            "persistence": self.rest.get(f"{base}/persistence"),
            "retention": self.rest.get(f"{base}/retention"),
            "backlogQuota": self.rest.get(f"{base}/backlogQuotaMap"),
            "deduplication": self.rest.get(f"{base}/deduplication", ok=(200, 204)),
            "topics": {n: {"partitions": self.topic_partitions(n)} for n in names},
        }
        clusters = self.clusters()
        brokers: list[str] = []
        for cl in clusters:
            got = self.rest.get(f"/admin/v2/brokers/{cl}", ok=(200, 404))
            if isinstance(got, list):
                brokers += [str(b) for b in got]
        out["cluster"] = {
            "clusters": clusters,
            "brokers": len(brokers),
            "broker_ids": brokers,
            "bookies": self.bookies(),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def close(self) -> None:
        if not self._namespace_created or self._created:
            return  # topics kept (--brokerperf-keep-topics): keep their namespace too
        for attempt in range(5):
            try:
                self.rest.call(
                    "DELETE", f"/admin/v2/namespaces/{self.namespace}", ok=(200, 204, 404)
                )
                self._namespace_created = False
                return
            except DriverError:
                if attempt == 4:
                    return  # a local broker is wiped anyway; a remote run reports it
                time.sleep(0.5 * (attempt + 1))


# -- the driver --------------------------------------------------------------------------
