"""The studies' tables with this run's figures in them (``brokerperf report --studies``).

A study case's record names its study, case and table (``params.study``, ``case``,
``study_source``); :data:`BINDINGS` say, per table of ``data/studies/layouts.yaml``,
which of our matrix cells fill which of its cells and with which figure, converted to the
published unit. The aggregation is the report's own (Spark: :mod:`.spark` pools the
cells' histograms and rates); :func:`load_facts` adds, per cell, what only a study
table reads (the catch-up, mixed and reassignment blocks, the profile's scaling note,
the machine and disk the run had). :func:`study_tables` lays it all out in each
table's own rows and columns; a cell nothing fills keeps the reason.

Units: the studies ran OpenMessaging Benchmark and pulsar-perf, which print "MB/s" and
"Mbit/s" in binary units (bytes / 1024 / 1024), so MB/s here is 2^20 bytes per second.
Latency is OMB's (``e2e_latency``, ``publish_latency``: not corrected for coordinated
omission), as the studies measured it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.report import published
from pytest_brokerperf.report.model import CellKey, CellStats
from pytest_brokerperf.report.published import STUDIES, PublishedFigure, Study, TableLayout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["BINDINGS", "Binding", "Metric", "Ours", "RunSetup", "StudyCell", "StudyFacts",
           "StudyRun", "StudySection", "StudyTable", "convert", "load_facts",
           "parse_studies", "scaling_of", "study_sections"]

MIB: Final = 2.0**20
#: our base unit -> published unit -> factor (value_in_published = base * factor)
_FACTORS: Final[Mapping[str, Mapping[str, float]]] = {
    "us": {"ms": 1e-3, "s": 1e-6, "us": 1.0},
    "s": {"s": 1.0, "ms": 1e3},
    "B/s": {"MB/s": 1 / MIB, "MiB/s": 1 / MIB, "GB/s": 1 / 2.0**30, "Mbit/s": 8 / MIB},
    "msg/s": {"msg/s": 1.0},
    # a change against a figure of the same run: "-10 % change", "rose by 0.4 ms"
    "%": {"% change": 1.0},
    "us increase": {"ms increase": 1e-3},
}
#: published units that are changes against another figure of the same run: no ratio
CHANGES: Final = frozenset({"% change", "ms increase"})
#: the unit our figure is shown in where the published cell's does not convert
NATURAL: Final = {"us": "ms", "s": "s", "B/s": "MB/s", "msg/s": "msg/s", "%": "% change",
                  "us increase": "ms increase"}
LEVELS: Final = {1: "local sync, Ack-2", 2: "local async, Ack-2", 3: "local sync, Ack-1",
                 4: "local async, Ack-1"}
#: the study's size labels (KB as the studies write it) for our exact binary sizes
SIZES: Final = {"128B": "128 B", "1KiB": "1 KB", "10KiB": "10 KB", "16KiB": "16 KB",
                "100KiB": "100 KB", "512KiB": "512 KB", "1MiB": "1 MB"}


def convert(value: float | None, base: str, unit: str) -> float | None:
    """``value`` (our ``base`` unit) in the published ``unit``; None when either is
    missing or the units do not convert (a ratio of ``x`` against MB/s means nothing)."""
    factor = _FACTORS.get(base, {}).get(unit)
    return None if value is None or factor is None else value * factor


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class RunSetup:
    """This run's set-up as its records' manifests state it."""

    cpus: str  # "2 logical CPUs (2 cores), AMD EPYC, 23.5 GiB RAM"
    disk: str  # "ext4 on /dev/vda, fsync p99 1.20 ms" or "not probed (remote cluster)"
    nodes: str
    provision: str

    def text(self) -> str:
        return (f"{self.nodes} broker node(s), provisioned as {self.provision}; "
                f"{self.cpus}; disk: {self.disk}")


@dataclass(frozen=True)
class StudyFacts:
    """What a study table reads from one matrix cell beyond its pooled figures (Spark,
    over the cell's records; block figures are means over its valid records)."""

    study: str
    case: str
    source: str
    message_size: int | None
    note: str  # the record's "study case ..." note (its scaling)
    catchup_bytes_s: float | None = None
    #: the catch-up's acknowledged rate during the drain / before it, and OMB's publish
    #: latency mean before and during the drain
    catchup_send_rate_ratio: float | None = None
    catchup_send_mean_before_us: float | None = None
    catchup_send_mean_drain_us: float | None = None
    mixed_publish_p99_during_us: float | None = None
    move_duration_s: float | None = None
    setups: tuple[RunSetup, ...] = ()


def scaling_of(note: str, profile: str) -> str:
    """The profile's scaling from a record's study note (ScaledCase.note's format):
    ``smoke: partitions 100 -> 16, rate 200k -> 1k msg/s``, or ``omb: as published``."""
    _, sep, scaled = note.partition("; scaled for --brokerperf-profile=")
    if not sep:
        return f"{profile}: the study's numbers, unscaled"
    name, _, what = scaled.partition(": ")
    return f"{name}: {what}"


_CASE = re.compile(r"^p(?P<p>\d+)(?:-s(?P<s>\d+))?(?:-\d+x\d+)?-(?P<size>\d+(?:B|KiB|MiB))"
                   r"(?:-r(?P<rate>[0-9.]+[kM]?))?")


@dataclass(frozen=True)
class StudyRun:
    """One matrix cell of a study case: its key, pooled figures and study facts."""

    key: CellKey
    stats: CellStats
    facts: StudyFacts

    def _id(self, name: str) -> str | None:
        m = _CASE.match(self.facts.case)
        return m.group(name) if m else None

    @property
    def partitions(self) -> int | None:
        """The study's partition count (the case id's, before scaling)."""
        p = self._id("p")
        return None if p is None else int(p)

    @property
    def subscriptions(self) -> int:
        s = self._id("s")
        return 1 if s is None else int(s)

    @property
    def size(self) -> str | None:
        return SIZES.get(self._id("size") or "")

    @property
    def rate(self) -> str | None:
        return self._id("rate")

    @property
    def batch(self) -> str | None:
        m = re.search(r"-batch(\d+(?:B|KiB|MiB))", self.facts.case)
        return SIZES.get(m.group(1)) if m else None

    def has(self, suffix: str) -> bool:
        return self.facts.case.endswith(f"-{suffix}")

    @property
    def level(self) -> int | None:
        d = self.key.durability
        return int(d[1:]) if d.startswith("d") and d[1:].isdigit() else None

    @property
    def fsync(self) -> bool:
        """An fsync of every message: levels 1 and 3 (``flush.messages=1``,
        ``journalSyncData``); a driver-defined Kafka does not."""
        return self.level in (1, 3)

    def figure(self, view: str, stat: str) -> float | None:
        lat = self.stats.figures.latency.get(view)
        return None if lat is None else lat.get(stat)

    def rate_of(self, name: str) -> float | None:
        r = self.stats.figures.rates.get(name)
        return None if r is None else r.mean

    def peak_bytes(self) -> float | None:
        rate = self.rate_of("max_sustainable_rate")
        size = self.facts.message_size
        return None if rate is None or size is None else rate * size


# --------------------------------------------------------------------------- bindings


@dataclass(frozen=True)
class Metric:
    """One of our figures: what it is, in which base unit, and how a cell reads it."""

    what: str
    base: str
    get: Callable[[StudyRun], float | None]


E2E_P99 = Metric("end-to-end latency p99 (OMB's e2e_latency)", "us",
                 lambda r: r.figure("e2e_latency", "p99"))
SEND_P99 = Metric("publish latency p99 (OMB's publish_latency)", "us",
                  lambda r: r.figure("publish_latency", "p99"))
SEND_MEAN = Metric("publish latency mean over the ladder's rungs", "us",
                   lambda r: r.figure("publish_latency", "mean"))
PEAK_BYTES = Metric("highest sustainable rate x message size", "B/s", StudyRun.peak_bytes)
PEAK_MSGS = Metric("highest sustainable rate", "msg/s",
                   lambda r: r.rate_of("max_sustainable_rate"))
ACK_RATE = Metric("acknowledged rate", "msg/s", lambda r: r.rate_of("ack_rate"))
PUBLISH_BYTES = Metric("publish throughput", "B/s",
                       lambda r: None if (v := r.rate_of("publish_mib_s")) is None
                       else v * MIB)
CATCHUP_BYTES = Metric("catch-up read rate (catchup.catchup_mib_s)", "B/s",
                       lambda r: r.facts.catchup_bytes_s)
CATCHUP_SEND_CHANGE = Metric(
    "acknowledged rate during the drain against the window before "
    "(catchup.drain_publish_rate_ratio)", "%",
    lambda r: None if (v := r.facts.catchup_send_rate_ratio) is None else (v - 1) * 100)
CATCHUP_SEND_MEAN = Metric("publish latency mean during the drain (OMB's publish_latency; "
                           "catchup.publish_latency_mean_drain_us)", "us",
                           lambda r: r.facts.catchup_send_mean_drain_us)
CATCHUP_SEND_RISE = Metric(
    "publish latency mean during the drain less the window before's (OMB's "
    "publish_latency; catchup.publish_latency_mean_*_us)", "us increase",
    lambda r: None if r.facts.catchup_send_mean_drain_us is None
    or r.facts.catchup_send_mean_before_us is None
    else r.facts.catchup_send_mean_drain_us - r.facts.catchup_send_mean_before_us)
MIXED_SEND_P99 = Metric("publish response p99 during the catch-up "
                        "(mixed.publish_response_during_us)", "us",
                        lambda r: r.facts.mixed_publish_p99_during_us)
MOVE_S = Metric("move duration (reassignment.duration_s)", "s",
                lambda r: r.facts.move_duration_s)

Placement = tuple[str, str, Metric]  # row, column, metric


@dataclass(frozen=True)
class Binding:
    """Which of our cells fill a study table: records of ``scenario`` whose case cites
    one of ``sources``; ``place`` names the table cells each fills (none: not this
    table's). ``hint``: how to run what fills it; ``gaps``: cells no case fills, and why
    (``*`` for a whole row or column)."""

    study: str
    table: str
    scenario: str
    sources: tuple[str, ...]
    place: Callable[[StudyRun], Iterable[Placement]]
    gaps: Mapping[tuple[str, str], str] = field(default_factory=dict)


def _broker(r: StudyRun, names: Mapping[str, str]) -> str | None:
    return names.get(r.key.broker)


CONFLUENT_BROKERS: Final = {"kafka": "Kafka", "pulsar": "Pulsar"}
STUDY_BROKERS: Final = {"kafka": "Kafka", "pulsar": "Pulsar"}
AUTOMQ_BROKERS: Final = {"kafka": "Apache Kafka", "automq": "AutoMQ"}


def _confluent_broker(r: StudyRun) -> str | None:
    if r.key.broker == "rabbitmq":
        return "RabbitMQ (mirrored)" if r.has("mirrored") else None
    return _broker(r, CONFLUENT_BROKERS)


def _summary(r: StudyRun) -> Iterable[Placement]:
    col = _confluent_broker(r)
    if col is None:
        return
    if r.key.scenario == "throughput" and r.facts.source == "figure 5":
        yield "peak throughput", col, PEAK_BYTES
    if (r.key.scenario == "tailread" and r.facts.source == "figure 13" and not r.fsync
            and (r.key.broker != "rabbitmq" or r.rate == "30k")):
        yield "p99 end-to-end latency", col, E2E_P99


def _figure2(r: StudyRun) -> Iterable[Placement]:
    if r.key.broker == "kafka" and r.batch is not None:
        yield (r.batch, "fsync every message" if r.fsync else "fsync off (default)",
               PEAK_MSGS)


def _figure5(r: StudyRun) -> Iterable[Placement]:
    row = _confluent_broker(r)
    if row is not None:
        yield row, "peak stable throughput", PEAK_BYTES


def _figure12(r: StudyRun) -> Iterable[Placement]:
    row = _confluent_broker(r)
    if row is not None and not r.fsync and (r.key.broker != "rabbitmq" or r.rate == "30k"):
        yield row, "end-to-end latency percentiles", E2E_P99


def _figure13(r: StudyRun) -> Iterable[Placement]:
    row = _confluent_broker(r)
    if row is None or (r.key.broker == "rabbitmq" and r.rate != "30k"):
        return
    if r.key.broker == "kafka" and r.fsync:
        row = "Kafka (fsync every message)"
    yield row, "end-to-end latency percentiles", E2E_P99


def _rabbitmq_latency(r: StudyRun) -> Iterable[Placement]:
    if r.key.broker != "rabbitmq" or not r.has("mirrored"):
        return
    if r.key.scenario == "throughput":
        yield "mirrored at 38K msg/s", "highest sustained rate", PEAK_MSGS
    elif r.rate == "30k":
        yield "mirrored at 30K msg/s", "p99 end-to-end latency", E2E_P99
        yield "mirrored at 30K msg/s", "highest sustained rate", ACK_RATE


def _figure14(r: StudyRun) -> Iterable[Placement]:
    if r.key.broker != "rabbitmq" or r.rate is None:
        return
    col = "mirrored" if r.has("mirrored") else "classic" if r.has("classic") else None
    if col is not None:
        yield f"{r.rate.upper()} msg/s", col, E2E_P99


def _level(r: StudyRun) -> str | None:
    lv = r.level
    return None if lv is None else f"level {lv} ({LEVELS[lv]})"


def _sn_table1(r: StudyRun) -> Iterable[Placement]:
    col, lv = _broker(r, STUDY_BROKERS), r.level
    if col is None or lv not in (1, 2):
        return
    if r.key.scenario == "throughput":
        n = r.partitions
        yield (f"publish and tailing read / level {lv} / {n} partition"
               f"{'' if n == 1 else 's'}", col, PEAK_BYTES)
    elif r.key.scenario == "catchup":
        yield f"publish and catch-up read / level {lv} / 100 partitions", col, CATCHUP_BYTES


def _sn_table2(r: StudyRun) -> Iterable[Placement]:
    col, lv = _broker(r, STUDY_BROKERS), _level(r)
    if col is None or lv is None or r.has("journal-bypass") or r.partitions != 100:
        return
    s = r.subscriptions
    yield f"{s} subscription{'' if s == 1 else 's'} / {lv}", col, E2E_P99


def _sn_table3(r: StudyRun) -> Iterable[Placement]:
    col, lv = _broker(r, STUDY_BROKERS), _level(r)
    if col is None or lv is None or r.has("journal-bypass") or r.subscriptions != 1:
        return
    yield f"{lv} / {r.partitions} partitions", col, E2E_P99


def _sn_table4(r: StudyRun) -> Iterable[Placement]:
    col, lv = _broker(r, STUDY_BROKERS), _level(r)
    if col is not None and lv is not None:
        yield lv, col, MIXED_SEND_P99


AUTOMQ_RATES: Final = {"25.6k": "100 MiB/s", "51.2k": "200 MiB/s",
                       "230.4k": "extreme throughput"}


def _automq_31(r: StudyRun) -> Iterable[Placement]:
    who, row = _broker(r, AUTOMQ_BROKERS), AUTOMQ_RATES.get(r.rate or "")
    if who is None or row is None:
        return
    yield row, f"{who} throughput", PUBLISH_BYTES
    yield row, f"{who} send latency", SEND_P99
    yield row, f"{who} end-to-end latency", E2E_P99


def _automq_32(r: StudyRun) -> Iterable[Placement]:
    who = _broker(r, AUTOMQ_BROKERS)
    if who is not None:
        yield "catch-up read peak", who, CATCHUP_BYTES
        yield "send throughput during catch-up", who, CATCHUP_SEND_CHANGE
        # the study gives AutoMQ's as a rise ("by about 0.4 ms"), Kafka's as the mean
        # itself ("rose to 900 ms")
        yield ("average send latency during catch-up", who,
               CATCHUP_SEND_RISE if who == "AutoMQ" else CATCHUP_SEND_MEAN)


def _automq_33(r: StudyRun) -> Iterable[Placement]:
    who = _broker(r, AUTOMQ_BROKERS)
    if who is not None:
        yield "move duration", who, MOVE_S


def _limit_results(r: StudyRun) -> Iterable[Placement]:
    mode = "sync" if r.has("sync") else "async" if r.has("async") else None
    if r.key.broker != "pulsar" or mode is None or r.size is None:
        return
    row = f"{mode} {r.size}"
    yield row, "max rate", PEAK_MSGS
    yield row, "throughput", PEAK_BYTES
    yield row, "average latency", SEND_MEAN


def _limit_async(r: StudyRun) -> Iterable[Placement]:
    if r.key.broker == "pulsar" and r.has("lz4-async") and r.size == "128 B":
        yield "async batching with compression", "max rate", PEAK_MSGS


NO_CASE = "no case of the suite measures this"
BINDINGS: Final[tuple[Binding, ...]] = (
    Binding("confluent", "summary", "throughput", ("figure 5",), _summary),
    Binding("confluent", "summary", "tailread", ("figure 13",), _summary),
    Binding("confluent", "figure 2", "throughput", ("figure 2",), _figure2),
    Binding("confluent", "figure 5", "throughput", ("figure 5",), _figure5),
    Binding("confluent", "figure 12", "tailread", ("figure 13",), _figure12),
    Binding("confluent", "figure 13", "tailread", ("figure 13",), _figure13),
    Binding("confluent", "rabbitmq latency", "throughput", ("figure 5",), _rabbitmq_latency),
    Binding("confluent", "rabbitmq latency", "tailread", ("figure 13",), _rabbitmq_latency,
            gaps={("mirrored at 38K msg/s", "p99 end-to-end latency"):
                  "no case offers 38K msg/s (figure 14's 40K mirrored case is the nearest)",
                  ("classic without replication", "*"):
                  "no case measures classic queues' peak (figure 14 runs them at 10K-40K)"}),
    Binding("confluent", "figure 14", "tailread", ("figure 13", "figure 14"), _figure14),
    Binding("streamnative", "table 1", "throughput", ("table 1",), _sn_table1),
    Binding("streamnative", "table 1", "catchup", ("table 1",), _sn_table1),
    Binding("streamnative", "table 2", "tailread", ("table 2",), _sn_table2),
    Binding("streamnative", "table 3", "tailread", ("table 2", "table 3"), _sn_table3),
    Binding("streamnative", "table 4", "mixed", ("table 4",), _sn_table4),
    Binding("automq", "section 3.1", "tailread", ("section 3.1",), _automq_31),
    Binding("automq", "section 3.2", "catchup", ("section 3.2",), _automq_32),
    Binding("automq", "section 3.3", "reassign", ("section 3.3",), _automq_33),
    Binding("pulsar-limit", "results table", "throughput", ("results table",),
            _limit_results,
            gaps={("sync 1 KB (several IO threads)", "*"):
                  "no case varies the client's IO threads"}),
    Binding("pulsar-limit", "async summary", "throughput", ("results table",),
            _limit_async,
            gaps={("async batching", "*"): "every asynchronous case compresses (LZ4), as "
                  "the study's table does"}),
)

#: Tables no case fills, and why.
UNCOVERED: Final[Mapping[tuple[str, str], str]] = {
    ("confluent", "figure 1"): "a disk benchmark (dd), not a broker case: the header "
    "gives this run's disk and its fsync latency",
    ("confluent", "pulsar deployment"): "brokers on instances of their own is a "
    "deployment the suite does not vary",
    ("confluent", "pulsar raid0"): "a RAID0 of the two disks is a host set-up the suite "
    "does not vary",
    ("confluent", "conclusion"): "ratios of the summary's peaks: see the summary table",
    ("streamnative", "disk throughput"): "a disk benchmark (dd), not a broker case: the "
    "header gives this run's disk and its fsync latency",
    ("streamnative", "figure 1-1"): "a disk probe across instances: the header gives this "
    "run's fsync p99",
    ("automq", "section 3.1 ratios"): "ratios of AutoMQ's and Apache Kafka's figures: "
    "see section 3.1 (filled when both brokers ran)",
    ("pulsar-limit", "latency breakdown"): "fio and network round trips, not broker "
    "cases: the header gives this run's fsync p99",
}

#: The command that runs each study's cases (docs/reference/study-cases.md).
COMMANDS: Final[Mapping[str, str]] = {
    "confluent": "pytest scenarios -m \"study(name='confluent')\" "
                 "--broker=kafka,pulsar,rabbitmq --brokerperf-nodes=3",
    "streamnative": "pytest scenarios -m \"study(name='streamnative')\" "
                    "--broker=kafka,pulsar --brokerperf-durability=1,2,3,4",
    "automq": "pytest scenarios -m \"study(name='automq')\" --broker=kafka "
              "--brokerperf-nodes=3",
    "pulsar-limit": "pytest scenarios -m \"study(name='pulsar-limit')\" --broker=pulsar "
                    "--brokerperf-nodes=3",
}


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Ours:
    """One of our figures in a study cell, in the published unit."""

    value: float | None
    unit: str
    metric: str
    key: CellKey
    case: str
    valid: int
    records: int
    status: str  # "valid", or the statuses of the records left out
    scaling: str

    def ratio(self, pub: PublishedFigure | None) -> float | None:
        """Ours over the published figure (same unit); None when either is missing, or
        for a change (a ratio of two changes says nothing: -2 % against -10 %)."""
        if (pub is None or pub.value in (None, 0) or self.value is None
                or pub.unit != self.unit or self.unit in CHANGES):
            return None
        return self.value / pub.value


@dataclass(frozen=True)
class StudyCell:
    row: str
    column: str
    published: PublishedFigure | None
    ours: tuple[Ours, ...]
    reason: str  # why ours is empty ("" when filled)


@dataclass(frozen=True)
class StudyTable:
    layout: TableLayout
    rows: tuple[tuple[StudyCell, ...], ...]  # the layout's rows x columns

    @property
    def filled(self) -> int:
        return sum(1 for row in self.rows for c in row if c.ours)


@dataclass(frozen=True)
class StudySection:
    """One study: its published set-up, this run's, and its tables."""

    study: Study
    command: str
    tables: tuple[StudyTable, ...]
    setups: tuple[RunSetup, ...]
    profiles: tuple[str, ...]


def parse_studies(value: str | None) -> tuple[str, ...] | None:
    """``--studies`` alone or absent: None (the studies the input has records of);
    ``--studies=all``: every study; ``--studies=a,b``: those."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        return None
    if names == ["all"]:
        return tuple(STUDIES)
    bad = [n for n in names if n not in STUDIES]
    if bad:
        raise ConfigError(f"--studies={value}: unknown stud{'y' if len(bad) == 1 else 'ies'} "
                          f"{', '.join(bad)}; known: {', '.join(STUDIES)} (or all). A "
                          "result directory right after a bare --studies is read as its "
                          "value: write DIR --studies, or --studies=NAMES DIR")
    return tuple(dict.fromkeys(names))


def _status(stats: CellStats) -> str:
    if stats.valid:
        return "valid"
    return ", ".join(sorted({r.status for r in stats.invalid})) or "no record"


def _table(layout: TableLayout, runs: Sequence[StudyRun]) -> StudyTable:
    placed: dict[tuple[str, str], list[Ours]] = {}
    bindings = [b for b in BINDINGS if (b.study, b.table) == (layout.study, layout.table)]
    for b in bindings:
        for r in runs:
            if r.key.scenario != b.scenario or r.facts.source not in b.sources:
                continue
            for row, column, metric in b.place(r):
                if row not in layout.rows or column not in layout.columns:
                    raise ValueError(f"binding of {layout.study} {layout.table!r} places "
                                     f"{row!r} x {column!r}, not a cell of its layout")
                pub = published.cell(layout.study, layout.table, row, column)
                unit = (pub.unit if pub is not None
                        and convert(1.0, metric.base, pub.unit) is not None
                        else NATURAL[metric.base])
                value = convert(metric.get(r), metric.base, unit) if r.stats.valid else None
                placed.setdefault((row, column), []).append(Ours(
                    value=value, unit=unit, metric=metric.what, key=r.key,
                    case=r.facts.case, valid=r.stats.valid, records=r.stats.records,
                    status=_status(r.stats),
                    scaling=scaling_of(r.facts.note, r.key.profile)))
    gaps: dict[tuple[str, str], str] = {}
    for b in bindings:
        gaps.update(b.gaps)
    none = UNCOVERED.get((layout.study, layout.table))
    rows = []
    for row in layout.rows:
        cells = []
        for column in layout.columns:
            ours = tuple(placed.get((row, column), ()))
            reason = ""
            if not ours:
                reason = (none or gaps.get((row, column)) or gaps.get((row, "*"))
                          or gaps.get(("*", column))
                          or (f"not in these results: {COMMANDS[layout.study]}" if bindings
                              else NO_CASE))
            cells.append(StudyCell(row, column, published.cell(layout.study, layout.table,
                                                               row, column), ours, reason))
        rows.append(tuple(cells))
    return StudyTable(layout, tuple(rows))


def study_sections(cells: Mapping[CellKey, CellStats], facts: Mapping[CellKey, StudyFacts],
                   studies: Sequence[str] | None) -> list[StudySection]:
    """Each asked-for study's tables in its own layout (``studies`` None: the studies the
    input has records of)."""
    runs = [StudyRun(k, cells[k], f) for k, f in sorted(facts.items()) if k in cells]
    wanted = (studies if studies is not None
              else [s for s in STUDIES if any(r.facts.study == s for r in runs)])
    out = []
    for name in wanted:
        mine = [r for r in runs if r.facts.study == name]
        setups = tuple(dict.fromkeys(s for r in mine for s in r.facts.setups))
        profiles = tuple(sorted({r.key.profile for r in mine}))
        out.append(StudySection(STUDIES[name], COMMANDS[name],
                                tuple(_table(t, mine) for t in published.tables_of(name)),
                                setups, profiles))
    return out


# --------------------------------------------------------------------------- Spark


def _facts_schema() -> Any:
    from pyspark.sql import types as T

    from pytest_brokerperf.report.spark import tls_schema

    s, d, long_ = T.StringType(), T.DoubleType(), T.LongType()

    def struct(**fields: Any) -> T.StructType:
        return T.StructType([T.StructField(k, v, True) for k, v in fields.items()])

    manifest = struct(
        machine=struct(cpu_model=s, logical_cpus=long_, physical_cores=long_,
                       mem_total_bytes=long_),
        driver=struct(client=s, client_version=s, librdkafka_version=s),
        fsync_probe=struct(fs_type=s, mount_source=s, p99_us=d, suspicious=T.BooleanType()))
    return struct(
        schema=s, run_id=s, test_id=s, attempt=long_, broker=s, scenario=s,
        params=T.MapType(s, s), env=s, durability=struct(level=long_), end_time=s,
        verdict=struct(status=s), run_status=s,
        throughput=struct(highest_sustainable_rate_msg_s=d),
        nodes=long_, broker_version=s, profile=s, period_s=d, provision=s, driver=s,
        driver_file=s, driver_settings_sha256=s, tls=tls_schema(), manifest=manifest,
        notes=T.ArrayType(s),
        catchup=struct(catchup_mib_s=d, drain_publish_rate_ratio=d,
                       publish_latency_mean_before_us=d, publish_latency_mean_drain_us=d),
        mixed=struct(publish_response_during_us=T.MapType(s, d)),
        reassignment=struct(duration_s=d),
        _corrupt_record=s)


def _setup(row: Any) -> RunSetup:
    cpus = (f"{row['cpus'] if row['cpus'] is not None else '?'} logical CPUs"
            + (f" ({row['cores']} cores)" if row["cores"] is not None else "")
            + f", {row['cpu_model'] or 'CPU model unknown'}"
            + (f", {row['mem'] / 2**30:.1f} GiB RAM" if row["mem"] else ""))
    if row["fs_type"] is None and row["fsync_p99"] is None:
        disk = ("not probed (a remote cluster's disks are its own)"
                if row["provision"] == "remote" else "not probed")
    else:
        disk = (f"{row['fs_type'] or '?'} on {row['mount_source'] or '?'}, fsync p99 "
                f"{row['fsync_p99'] / 1000:.2f} ms"
                + (" (suspiciously fast: not stable storage)" if row["suspicious"] else ""))
    return RunSetup(cpus=cpus, disk=disk, nodes=str(row["nodes"] or "?"),
                    provision=str(row["provision"] or "?"))


def load_facts(spark: SparkSession, dirs: Sequence[str | Path], *,
               run_id: str | None = None) -> dict[CellKey, StudyFacts]:
    """Per matrix cell of a study case (a record with ``params.study``): its
    :class:`StudyFacts`, read and grouped in Spark on a narrow schema."""
    from pyspark.sql import functions as F

    from pytest_brokerperf.report.spark import (
        CELL,
        _upgrade,
        _with_cell,
        cell_key,
        figure_column,
        find_result_files,
    )

    files = find_result_files(dirs)
    df = (spark.read.schema(_facts_schema()).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", "_corrupt_record")
          .json([str(f) for f in files])
          .filter(F.col("_corrupt_record").isNull() & F.col("run_id").isNotNull()
                  & F.col("test_id").isNotNull() & F.col("params")["study"].isNotNull()))
    if run_id is not None:
        df = df.filter(F.col("run_id") == run_id)
    df = _with_cell(_upgrade(df))
    valid = figure_column()

    def mean_valid(col: Any) -> Any:
        return F.avg(F.when(valid, col))

    m = "manifest."
    setup = F.struct(
        F.col(m + "machine.logical_cpus").alias("cpus"),
        F.col(m + "machine.physical_cores").alias("cores"),
        F.col(m + "machine.cpu_model").alias("cpu_model"),
        F.col(m + "machine.mem_total_bytes").alias("mem"),
        F.col(m + "fsync_probe.fs_type").alias("fs_type"),
        F.col(m + "fsync_probe.mount_source").alias("mount_source"),
        F.col(m + "fsync_probe.p99_us").alias("fsync_p99"),
        F.col(m + "fsync_probe.suspicious").alias("suspicious"),
        F.col("nodes"), F.col("provision"))
    note = F.filter(F.coalesce(F.col("notes"), F.array()),
                    lambda n: n.startswith("study case "))
    rows = (df.groupBy(*CELL).agg(
        F.first(F.col("params")["study"]).alias("study"),
        F.first(F.col("params")["case"]).alias("case"),
        F.first(F.col("params")["study_source"]).alias("source"),
        F.first(F.col("params")["message_size"]).alias("message_size"),
        F.first(F.element_at(note, 1), ignorenulls=True).alias("note"),
        mean_valid(F.col("catchup.catchup_mib_s")).alias("catchup_mib_s"),
        mean_valid(F.col("catchup.drain_publish_rate_ratio")).alias("send_ratio"),
        mean_valid(F.col("catchup.publish_latency_mean_before_us")).alias("send_before"),
        mean_valid(F.col("catchup.publish_latency_mean_drain_us")).alias("send_drain"),
        mean_valid(F.col("mixed.publish_response_during_us")["p99"]).alias("mixed_p99"),
        mean_valid(F.col("reassignment.duration_s")).alias("move_s"),
        F.collect_set(setup).alias("setups"))
        .collect())
    out: dict[CellKey, StudyFacts] = {}
    for r in rows:
        size = r["message_size"]
        out[cell_key(r)] = StudyFacts(
            study=r["study"], case=r["case"] or "?", source=r["source"] or "?",
            message_size=int(float(size)) if size not in (None, "", "null") else None,
            note=r["note"] or "",
            catchup_bytes_s=None if r["catchup_mib_s"] is None
            else r["catchup_mib_s"] * MIB,
            catchup_send_rate_ratio=r["send_ratio"], catchup_send_mean_before_us=r["send_before"],
            catchup_send_mean_drain_us=r["send_drain"],
            mixed_publish_p99_during_us=r["mixed_p99"], move_duration_s=r["move_s"],
            setups=tuple(sorted({_setup(s) for s in r["setups"]},
                                key=lambda s: s.text())))
    return dict(sorted(out.items()))
