"""Care for clusters the harness does not own (docs/how-to/remote.md).

A catch-up scenario pointed at a production bootstrap writes its whole backlog there.
So before anything is created, every scenario gets a :class:`ScenarioPlan` — topics,
partitions, replication factor, topic configs, consumer groups, peak rate, total bytes,
duration and cluster-wide changes — which is printed against remote clusters (and with
``--brokerperf-dry-run``, which then stops), and refused when it breaks a cap:

* byte cap ``--brokerperf-max-bytes`` and rate cap ``--brokerperf-max-rate``, with
  conservative defaults against remote clusters
  (:data:`~pytest_brokerperf.config.settings.REMOTE_MAX_BYTES`,
  :data:`~pytest_brokerperf.config.settings.REMOTE_MAX_RATE`);
* OMB's ``reset: true`` (which deletes *every* topic) against a remote cluster;
* cluster-wide changes (broker configs, throttles, reassigning what the run did not
  create) without ``--brokerperf-allow-cluster-changes``.

Topics carry their owner and run id in the name, ``bp-<owner>-<run id>-<scenario>-...``
(Kafka has no topic tags), so ``brokerperf cleanup --prefix bp-<owner>- --older-than 1d``
finds what crashed runs left; against remote clusters they also get explicit
``retention.ms``/``retention.bytes`` (and ``segment.ms``, without which retention never
touches the active segment of a leftover topic).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.run_names import RUN_ID_IN_NAME, created_at, new_run_id

if TYPE_CHECKING:
    from pytest_brokerperf.brokers.driver import Driver
    from pytest_brokerperf.brokers.endpoint import BrokerEndpoint
    from pytest_brokerperf.config.settings import Settings
    from pytest_brokerperf.engine.plan import RunPlan
    from pytest_brokerperf.results.prepared import PreparedRun
    from pytest_brokerperf.workload.model import Workload

__all__ = [
    "RUN_ID_IN_NAME",
    "ScenarioPlan",
    "build_plan",
    "created_at",
    "format_bytes",
    "owner_slug",
    "require_cluster_change",
    "safe_driver",
    "topic_prefix",
]

#: Retention floor on remote topics: a leftover's data is gone within ~1.5 h.
MIN_RETENTION_MS = 3_600_000
MIN_RETENTION_BYTES = 16 * 1024 * 1024


def format_bytes(n: float) -> str:
    """``24.4 MiB``, ``1 GiB``, ``512 B``."""
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text} {unit}"
    return f"{n:.0f} B"


def _format_rate_cap(cap: tuple[float, str]) -> str:
    value, unit = cap
    if unit == "B/s":
        return f"{format_bytes(value)}/s"
    return f"{value:,.0f} msg/s"


def owner_slug(owner: str) -> str:
    """The owner as it appears in topic names: ``alice@ci-3`` → ``alice-ci-3``."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", owner).strip("-").lower()[:40]
    return slug or "owner"


def topic_prefix(settings: Settings, scenario: str, test_id: str) -> str:
    """``bp-<owner>-<run id>-<scenario>-<test hash>``; topics append ``-000``, groups
    ``-000-sub000``. A hand-made run id without a timestamp gets one, so cleanup can age it.
    """
    from pytest_brokerperf.engine.coordinator import safe_name

    run = settings.run_id
    if RUN_ID_IN_NAME.search(run) is None:
        run = f"{new_run_id()}-{run}"
    digest = sum(ord(c) * 31**i for i, c in enumerate(test_id)) % 10**6  # stable across runs
    return safe_name(f"bp-{owner_slug(settings.owner_effective)}-{run}-{scenario}-{digest:06d}")


def require_cluster_change(settings: Settings, endpoint: BrokerEndpoint, what: str) -> None:
    """Refuse a cluster-wide change on a remote cluster without the explicit opt-in.

    For scenario code about to set broker configs or throttles, or to reassign
    partitions it did not create. Local clusters belong to the session: always allowed.
    """
    if endpoint.mode == "remote" and not settings.allow_cluster_changes:
        raise ConfigError(
            f"REFUSED: {what} is a cluster-wide change on the remote cluster at "
            f"{endpoint.bootstrap}; pass --brokerperf-allow-cluster-changes to allow it."
        )


# ------------------------------------------------------------------------------ the plan


@dataclass
class ScenarioPlan:
    """What one scenario run will create and send, worked out before anything is created."""

    test_id: str
    scenario: str
    broker: str
    mode: str  # process | container | remote
    target: str  # bootstrap servers
    security: str | None
    owner: str
    prefix: str
    topics: list[str]
    partitions: list[int]
    replication_factor: int | None  # None: the broker's default.replication.factor
    topic_config: dict[str, str]
    consumer_groups: list[str]
    message_size: int
    rate_msg_s: float
    warmup_max_s: float
    measure_s: float
    max_run_s: float  # load plus readiness probe, flush and drain bounds
    messages_max: int
    bytes_max: int
    cluster_changes: list[str]
    keep_topics: bool
    max_bytes: int | None
    max_rate: tuple[float, str] | None
    dry_run: bool
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the run's phases in order, where the measured window is more than one window
    #: (a reassignment: before the move, the move, after it); None: one window
    phases: str | None = None

    @property
    def peak_bytes_s(self) -> float:
        return self.rate_msg_s * self.message_size

    @property
    def load_s(self) -> float:
        return self.warmup_max_s + self.measure_s

    @property
    def stored_bytes_max(self) -> int:
        return self.bytes_max * max(1, self.replication_factor or 1)

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["peak_bytes_s"] = self.peak_bytes_s
        out["stored_bytes_max"] = self.stored_bytes_max
        out["max_rate"] = list(self.max_rate) if self.max_rate else None
        return out

    def lines(self) -> list[str]:
        """The plan as printed: one heading and indented fields."""
        head = "DRY RUN, nothing is created" if self.dry_run else "before anything is created"
        rf = str(self.replication_factor) if self.replication_factor else "broker default"
        sec = f" ({self.security})" if self.security else ""
        cfg = ", ".join(f"{k}={v}" for k, v in self.topic_config.items()) or "broker defaults"
        shown_topics = ", ".join(self.topics[:3]) + (
            f", ... ({len(self.topics)} topics)" if len(self.topics) > 3 else "")
        parts = sorted(set(self.partitions))
        part_text = (f"{parts[0]} partitions each" if len(parts) == 1
                     else f"{min(parts)}-{max(parts)} partitions")
        groups = ", ".join(self.consumer_groups[:2]) + (
            f", ... ({len(self.consumer_groups)} groups)" if len(self.consumer_groups) > 2
            else "")
        cluster = "; ".join(self.cluster_changes) if self.cluster_changes else "none"
        mib_s = self.peak_bytes_s / 1024**2
        byte_cap = format_bytes(self.max_bytes) if self.max_bytes else "none"
        rate_cap = _format_rate_cap(self.max_rate) if self.max_rate else "none"
        after = ("topics KEPT (--brokerperf-keep-topics)" if self.keep_topics
                 else "topics and consumer groups deleted")
        lines = [
            f"brokerperf plan for {self.test_id} [{self.scenario}] ({head}):",
            f"  target      {self.broker} {self.mode} {self.target}{sec}; owner {self.owner}",
            f"  topics      {shown_topics}: {part_text}, replication factor {rf}",
            f"  topic cfg   {cfg}",
            f"  groups      {groups}",
            f"  load        {self.rate_msg_s:,.0f} msg/s x {self.message_size:,} B = "
            f"{mib_s:.2f} MiB/s peak; warm-up <= {self.warmup_max_s:g} s + measured "
            f"{self.measure_s:g} s",
            *([f"  phases      {self.phases}"] if self.phases else []),
            f"  totals      <= {self.messages_max:,} messages, <= {format_bytes(self.bytes_max)} "
            f"produced (<= {format_bytes(self.stored_bytes_max)} stored with replicas)",
            f"  duration    <= {self.load_s:g} s of load, <= {self.max_run_s:g} s in all "
            "(readiness probe, flush and drain bounds included)",
            f"  changes     topic configs above on the created topics only; "
            f"cluster-wide: {cluster}",
            f"  caps        bytes {byte_cap}, rate {rate_cap}: "
            + ("REFUSED" if self.refusals else "within caps"),
            f"  afterwards  {after}; leftovers of crashed runs: brokerperf cleanup "
            f"--prefix bp-{owner_slug(self.owner)}- --older-than 1d",
        ]
        lines += [f"  note        {n}" for n in self.notes]
        lines += [f"  REFUSED     {r}" for r in self.refusals]
        return lines


def _retention(settings: Settings, workload: Workload, planned_bytes: int,
               max_run_s: float) -> dict[str, str]:
    """Retention for topics on a cluster the harness does not own."""
    retention_ms = max(MIN_RETENTION_MS, math.ceil(2 * max_run_s * 1000))
    total_partitions = max(1, sum(workload.partitions_for_topic(i)
                                  for i in range(workload.topics)))
    cap = settings.effective_max_bytes or planned_bytes
    per_partition = max(MIN_RETENTION_BYTES, math.ceil(2 * cap / total_partitions))
    return {
        "retention.ms": str(retention_ms),
        "retention.bytes": str(per_partition),
        "segment.ms": str(max(60_000, retention_ms // 2)),
    }


def safe_driver(driver: Driver, settings: Settings, endpoint: BrokerEndpoint,
                prepared: PreparedRun, run_plan: RunPlan) -> tuple[Driver, list[str]]:
    """The driver with remote-safety topic configs applied, and notes on what changed.

    Only against remote clusters: local brokers belong to the session and are
    measured as configured. A driver file's own finite retention wins.
    """
    if endpoint.mode != "remote":
        return driver, []
    planned = _planned_messages(prepared, run_plan) * prepared.workload.message_size
    wanted = _retention(settings, prepared.workload, planned, _max_run_s(run_plan))
    have = driver.topic_settings()
    changes: dict[str, str] = {}
    notes: list[str] = []
    for key, value in wanted.items():
        current = have.get(key)
        if current is not None and current.strip() not in ("-1", ""):
            notes.append(f"{key}={current} from the driver file kept")
            continue
        changes[key] = value
    if changes:
        bounded = driver.with_retention(changes, reason="remote cluster: bounded retention")
        if bounded is None:  # nothing per run to bound: the notes say what was kept
            return driver, []
        driver = bounded
    return driver, notes


def _planned_messages(prepared: PreparedRun, run_plan: RunPlan) -> int:
    periods = max(1, math.ceil(run_plan.measure_s / run_plan.period_s - 1e-9))
    seconds = run_plan.warmup_max_s + periods * run_plan.period_s
    return math.ceil(prepared.rate * seconds)


def _max_run_s(run_plan: RunPlan) -> float:
    periods = max(1, math.ceil(run_plan.measure_s / run_plan.period_s - 1e-9))
    return (run_plan.probe_timeout_s + run_plan.warmup_max_s + periods * run_plan.period_s
            + run_plan.flush_timeout_s + run_plan.drain_timeout_s)


def build_plan(settings: Settings, endpoint: BrokerEndpoint, prepared: PreparedRun,
               driver: Driver, run_plan: RunPlan, *, test_id: str,
               cluster_changes: tuple[str, ...] = ()) -> ScenarioPlan:
    """Work out the plan and every refusal (nothing is contacted or created)."""
    wl = prepared.workload
    prefix = run_plan.topic_prefix
    # the coordinator's naming (engine/coordinator.py run_workload)
    topics = [f"{prefix}-{i:03d}" for i in range(wl.topics)]
    groups = [f"{t}-sub{j:03d}" for t in topics for j in range(wl.subscriptions_per_topic)]
    rf = driver.replication_factor()
    topic_cfg = driver.topic_settings()
    messages = _planned_messages(prepared, run_plan)
    security = endpoint.security_protocol
    if security and endpoint.sasl_mechanism:
        security = f"{security}/{endpoint.sasl_mechanism}"
    plan = ScenarioPlan(
        test_id=test_id, scenario=prepared.scenario, broker=endpoint.kind,
        mode=endpoint.mode, target=endpoint.bootstrap, security=security,
        owner=settings.owner_effective, prefix=prefix, topics=topics,
        partitions=[wl.partitions_for_topic(i) for i in range(wl.topics)],
        replication_factor=rf if isinstance(rf, int) and rf > 0 else None,
        topic_config=topic_cfg, consumer_groups=groups, message_size=wl.message_size,
        rate_msg_s=prepared.rate, warmup_max_s=run_plan.warmup_max_s,
        measure_s=max(1, math.ceil(run_plan.measure_s / run_plan.period_s - 1e-9))
        * run_plan.period_s,
        max_run_s=_max_run_s(run_plan), messages_max=messages,
        bytes_max=messages * wl.message_size, cluster_changes=list(cluster_changes),
        keep_topics=run_plan.keep_topics, max_bytes=settings.effective_max_bytes,
        max_rate=settings.effective_max_rate, dry_run=settings.dry_run,
    )
    where = "remote default" if endpoint.mode == "remote" else "cap"
    if plan.max_bytes is not None and plan.bytes_max > plan.max_bytes:
        given = settings.max_bytes is not None
        plan.refusals.append(
            f"the run would produce up to {format_bytes(plan.bytes_max)} "
            f"({plan.rate_msg_s:,.0f} msg/s x {plan.message_size:,} B x {plan.load_s:g} s), "
            f"over the byte cap {format_bytes(plan.max_bytes)} "
            f"(--brokerperf-max-bytes{'' if given else ', ' + where}); raise it with "
            "--brokerperf-max-bytes=SIZE or shorten the run (--brokerperf-duration, "
            "--brokerperf-warmup, --brokerperf-rate)"
        )
    if plan.max_rate is not None:
        value, unit = plan.max_rate
        peak = plan.peak_bytes_s if unit == "B/s" else plan.rate_msg_s
        if peak > value:
            given = settings.max_rate is not None
            shown = (f"{format_bytes(peak)}/s" if unit == "B/s" else f"{peak:,.0f} msg/s")
            plan.refusals.append(
                f"the peak publish rate {shown} is over the rate cap "
                f"{_format_rate_cap(plan.max_rate)} (--brokerperf-max-rate"
                f"{'' if given else ', ' + where}); raise it with --brokerperf-max-rate=RATE "
                "or lower --brokerperf-rate"
            )
    if endpoint.mode == "remote" and driver.resets_cluster():
        plan.refusals.append(
            f"the driver file {driver.source} sets OMB's `reset: true`, "
            "which deletes every topic of the cluster; it is refused against a remote "
            "cluster: remove it (pytest-brokerperf deletes only the topics it created)"
        )
    if cluster_changes and endpoint.mode == "remote" and not settings.allow_cluster_changes:
        plan.refusals.append(
            f"cluster-wide changes ({'; '.join(cluster_changes)}) need "
            "--brokerperf-allow-cluster-changes"
        )
    if endpoint.unreached:
        plan.notes.append(endpoint.unreached)
    elif endpoint.dry_run and endpoint.mode == "remote":
        plan.notes.append(f"cluster reached read-only: {endpoint.nodes} broker(s)")
    if endpoint.mode == "remote" and run_plan.keep_topics:
        plan.notes.append("--brokerperf-keep-topics: remove the topics with brokerperf cleanup")
    return plan
