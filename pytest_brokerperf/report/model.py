"""Declared types the Spark job hands to gates and renderers (plain Python, no pyspark).

A *cell* is one point of the test matrix: broker × scenario × parameters × durability
level × fault × environment label. Its figures are pooled over every valid record of
the cell (histograms merged bucket by bucket, so percentiles are exact); per-run figures
feed the noise floor of gates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pytest_brokerperf.core.errors import BrokerPerfError
from pytest_brokerperf.core.metric_names import (
    LATENCY_STATS,
    PERCENTILE_NAMES,
    RATE_METRICS,
    VIEWS,
)

__all__ = [
    "LATENCY_STATS",
    "RATE_METRICS",
    "SETUP_DIMENSIONS",
    "UNKNOWN",
    "VIEWS",
    "CellKey",
    "CellStats",
    "CurvePoint",
    "Figures",
    "InvalidRecord",
    "LatencyStats",
    "RateStats",
    "ReportInputError",
    "ReportResult",
    "cell_key_of",
    "clients_text",
    "figures_of",
    "machine_label",
    "natural_key",
    "period_text",
    "record_status",
    "setup_split",
]



class ReportInputError(BrokerPerfError):
    """The report's input cannot be read or used (exit code 2); the message says why."""


#: What a cell's key says beyond broker × scenario × parameters × durability × fault ×
#: env: the set-up that changes the figure. Each is compared only with its like unless
#: an ``--across-<dimension>`` flag says otherwise (``SETUP_DIMENSIONS``).
UNKNOWN = "?"


@dataclass(frozen=True, order=True)
class CellKey:
    """One matrix cell. ``params`` is canonical ``key=value`` text, sorted by key.

    The set-up fields (nodes … clients) default to :data:`UNKNOWN`: a record written
    before a field existed says nothing about it, and a comparison treats it as
    matching anything (saying so)."""

    broker: str
    scenario: str
    params: str
    durability: str  # "d1".."d4" or "driver-defined"
    fault: str  # "none" when no fault was injected
    env: str
    nodes: str = UNKNOWN
    broker_version: str = UNKNOWN
    profile: str = UNKNOWN
    period: str = UNKNOWN  # the stats period, e.g. "10.0s"
    provision: str = UNKNOWN  # process | container | remote
    tls: str = UNKNOWN  # "off", or what the clients spoke over TLS: SSL, SASL_SSL, amqps…
    driver: str = UNKNOWN  # the driver's name
    driver_file: str = UNKNOWN
    driver_settings: str = UNKNOWN  # 12 hex digits of the effective settings' SHA-256
    clients: str = UNKNOWN  # "confluent-kafka 2.16.1 librdkafka 2.16.0"

    def label(self) -> str:
        return (f"{self.broker} {self.scenario} [{self.params}] {self.durability} "
                f"fault={self.fault} env={self.env}")

    def setup(self) -> str:
        """The set-up part of the key, for tables: ``nodes=1 v=3.9.0 smoke/10.0s …``."""
        return (f"nodes={self.nodes} version={self.broker_version} "
                f"profile={self.profile}/{self.period} {self.provision} tls={self.tls} "
                f"driver={self.driver}:{self.driver_file}#{self.driver_settings} "
                f"clients={self.clients}")


#: ``--across-<name>``: the cell key fields it lets differ between run and baseline.
SETUP_DIMENSIONS: Mapping[str, tuple[str, ...]] = {
    "nodes": ("nodes",),
    "broker-version": ("broker_version",),
    "profile": ("profile", "period"),
    "provision": ("provision",),
    "tls": ("tls",),
    "driver": ("driver", "driver_file", "driver_settings"),
    "durability": ("durability",),
    "clients": ("clients",),
}


@dataclass(frozen=True)
class LatencyStats:
    """One latency view merged over records (µs; ``None`` = empty or undersampled)."""

    count: int
    values: Mapping[str, float | None]  # keys: LATENCY_STATS

    def get(self, stat: str) -> float | None:
        if stat not in LATENCY_STATS:
            raise KeyError(f"unknown latency statistic {stat!r}; known: "
                           f"{', '.join(LATENCY_STATS)}")
        return self.values.get(stat)


@dataclass(frozen=True)
class RateStats:
    """A rate across repeats (valid records of the cell)."""

    n: int
    mean: float | None
    stddev: float | None
    min: float | None
    max: float | None

    @property
    def spread(self) -> float | None:
        """Coefficient of variation (stddev / mean) across repeats: run-to-run spread."""
        if self.mean in (None, 0) or self.stddev is None:
            return None
        return self.stddev / self.mean


@dataclass(frozen=True)
class Figures:
    """Latency views and rates of a cell or of one run of it."""

    latency: Mapping[str, LatencyStats]
    rates: Mapping[str, RateStats]

    def metric(self, name: str) -> float | None:
        """``e2e_response.p99`` (µs) or ``ack_rate`` (msg/s): the figure gates compare."""
        if name in RATE_METRICS:
            r = self.rates.get(name)
            return None if r is None else r.mean
        view, _, stat = name.partition(".")
        if view not in VIEWS or not stat:
            raise KeyError(name)
        lat = self.latency.get(view)
        return None if lat is None else lat.get(stat)


@dataclass(frozen=True)
class InvalidRecord:
    """A record left out of verdicts, shown with its reason."""

    run_id: str
    test_id: str
    attempt: int
    status: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class CurvePoint:
    """One latency-versus-throughput point (a ladder rung, or a whole tail-read run)."""

    run_id: str
    offered_rate: float | None
    ack_rate: float | None
    e2e_p99_us: float | None
    publish_p99_us: float | None
    sustainable: bool | None
    knee_rate: float | None = None


@dataclass(frozen=True)
class CellStats:
    """Everything the report knows about one cell."""

    key: CellKey
    records: int
    valid: int
    runs: int  # distinct run ids, any status
    figures: Figures  # pooled over valid records
    run_figures: Mapping[str, Figures]  # per valid run id
    p99_spread: float | None  # CV of the per-record e2e_response p99 across valid records
    invalid: tuple[InvalidRecord, ...] = ()
    machines: tuple[str, ...] = ()
    curve: tuple[CurvePoint, ...] = ()

    @property
    def valid_runs(self) -> int:
        return len(self.run_figures)


@dataclass
class ReportResult:
    """The job's output: cells plus what was skipped while reading."""

    cells: dict[CellKey, CellStats]
    files: list[str]
    records_read: int
    duplicates_dropped: int
    malformed_lines: int
    warnings: list[str] = field(default_factory=list)


def machine_label(cpu_model: str | None, logical_cpus: int | None) -> str:
    """``AMD EPYC 7B13 × 2 cpus``: a record's machine (``manifest.machine``) exactly as
    the Spark job spells it (a cell's ``machines``)."""
    return f"{cpu_model or '?'} × {logical_cpus if logical_cpus is not None else '?'} cpus"


def _param_text(value: object) -> str:
    """A parameter value as the Spark job's ``map<string,string>`` reading renders it."""
    import json

    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


#: the verdict statuses whose figures are the broker's (judge/verdict.py): ``valid``, and
#: ``broker-backpressure`` (the client's queue filled because the broker pushed back: a
#: broker result, the run stays valid). Only their records are pooled into a cell's
#: figures, gated and counted as ``valid``; every other status is left out, named.
FIGURE_STATUSES: Final = ("valid", "broker-backpressure")


def is_figure(status: str) -> bool:
    """Whether a record of this status (:func:`record_status`) counts as a figure."""
    return status in FIGURE_STATUSES


def record_status(record: Mapping[str, object]) -> str:
    """The status a report files a record under: its verdict's, except that a run that
    did not complete (``run_status`` ``failed`` or ``interrupted``) is never a figure
    (:data:`FIGURE_STATUSES`): its figures cover only the periods before the stop."""
    verdict = record.get("verdict")
    status = verdict.get("status") if isinstance(verdict, Mapping) else None
    run_status = record.get("run_status")
    if run_status not in (None, "completed") and (status is None or status in FIGURE_STATUSES):
        return str(run_status)
    return str(status or "unknown")


def _text(x: object) -> str:
    return UNKNOWN if x is None or x == "" else str(x)


def period_text(period_s: object) -> str:
    """The stats period as the Spark job spells it (``10.0s``)."""
    if period_s is None:
        return UNKNOWN
    return f"{float(period_s)!r}s"  # type: ignore[arg-type]


def tls_text(tls: object) -> str:
    """A record's ``tls`` as the cell key spells it: ``off``, the protocol the clients
    spoke over TLS (``SSL``, ``SASL_SSL``, ``amqps``…), or unknown for a record written
    before the field existed. A figure over TLS is never pooled with a plaintext one."""
    if not isinstance(tls, Mapping) or tls.get("on") is None:
        return UNKNOWN
    if not tls.get("on"):
        return "off"
    return str(tls.get("protocol") or "on")


def clients_text(client: object, version: object, librdkafka: object) -> str:
    """``confluent-kafka 2.16.1 librdkafka 2.16.0`` from ``manifest.driver``."""
    parts = [str(x) for x in (client, version) if x not in (None, "")]
    if librdkafka not in (None, ""):
        parts.append(f"librdkafka {librdkafka}")
    return " ".join(parts) or UNKNOWN


def cell_key_of(record: Mapping[str, object]) -> CellKey:
    """The matrix cell of one JSONL record, exactly as the Spark job keys it."""
    params = record.get("params") or {}
    assert isinstance(params, Mapping)
    text = " ".join(sorted(f"{k}={_param_text(v)}" for k, v in params.items()
                           if k not in ("durability", "fault")))
    durability = record.get("durability") or {}
    level = durability.get("level") if isinstance(durability, Mapping) else None
    if level is None:
        level = params.get("durability")
    fault = params.get("fault")
    manifest = record.get("manifest")
    drv = manifest.get("driver") if isinstance(manifest, Mapping) else None
    drv = drv if isinstance(drv, Mapping) else {}
    sha = record.get("driver_settings_sha256")
    return CellKey(broker=str(record.get("broker") or "?"),
                   scenario=str(record.get("scenario") or "?"), params=text,
                   durability="driver-defined" if level is None else f"d{level}",
                   fault="none" if fault is None else _param_text(fault),
                   env=str(record.get("env") or "local"),
                   nodes=_text(record.get("nodes")),
                   broker_version=_text(record.get("broker_version")),
                   profile=_text(record.get("profile")),
                   period=period_text(record.get("period_s")),
                   provision=_text(record.get("provision")),
                   tls=tls_text(record.get("tls")),
                   driver=_text(record.get("driver")),
                   driver_file=_text(record.get("driver_file")),
                   driver_settings=_text(sha),
                   clients=clients_text(drv.get("client"), drv.get("client_version"),
                                        drv.get("librdkafka_version")))


def _opt_float(x: object) -> float | None:
    return None if x is None else float(x)  # type: ignore[arg-type]


def figures_of(record: Mapping[str, object]) -> Figures:
    """The figures of one record (its own percentiles: exact for a single run)."""
    latency: dict[str, LatencyStats] = {}
    blocks = record.get("latency") or {}
    assert isinstance(blocks, Mapping)
    for view in VIEWS:
        b = blocks.get(view)
        if not isinstance(b, Mapping):
            continue
        values: dict[str, float | None] = {
            name: _opt_float(b.get(f"{name.replace('.', '')}_us"))
            for name, _ in PERCENTILE_NAMES}
        values.update(min=_opt_float(b.get("min_us")), max=_opt_float(b.get("max_us")),
                      mean=_opt_float(b.get("mean_us")))
        latency[view] = LatencyStats(count=int(b.get("count") or 0), values=values)
    rates: dict[str, RateStats] = {}
    for name, path in RATE_METRICS.items():
        node: object = record
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        v = _opt_float(node)
        rates[name] = RateStats(n=0 if v is None else 1, mean=v, stddev=None, min=v, max=v)
    return Figures(latency=latency, rates=rates)


#: The set-up fields of a cell key, in the order tables show them.
SETUP_FIELDS: tuple[str, ...] = ("nodes", "broker_version", "profile", "period", "provision",
                                 "tls", "driver", "driver_file", "driver_settings", "clients")


def setup_split(keys: Iterable[CellKey]) -> tuple[str, dict[CellKey, str]]:
    """What the cells' set-ups share (``nodes=1 broker_version=3.9.0 …``), and per cell
    the fields that vary among them (empty text when none does): tables show the shared
    part once and a column for the rest."""
    ks = sorted(set(keys), key=natural_key)
    varying = [f for f in SETUP_FIELDS if len({getattr(k, f) for k in ks}) > 1]
    common = " ".join(f"{f}={getattr(ks[0], f)}" for f in SETUP_FIELDS
                      if f not in varying) if ks else ""
    return common, {k: " ".join(f"{f}={getattr(k, f)}" for f in varying) for k in ks}


_NUM = re.compile(r"(-?\d+(?:\.\d+)?)")


def natural_key(key: CellKey | str) -> tuple[Any, ...]:
    """Sort key that orders numbers by value (``rate=500`` before ``rate=1000``)."""
    fields = [key] if isinstance(key, str) else [getattr(key, f) for f in CELL_FIELDS]
    out: list[Any] = []
    for text in fields:
        parts = _NUM.split(str(text))
        out.append(tuple((0, float(p), "") if i % 2 else (1, 0.0, p)
                         for i, p in enumerate(parts) if p != ""))
    return tuple(out)


#: Every field of a cell key, in its order.
CELL_FIELDS: tuple[str, ...] = ("broker", "scenario", "params", "durability", "fault", "env",
                                *SETUP_FIELDS)
