"""``brokerperf cleanup``: remove what crashed runs left on a Kafka cluster.

A run deletes its topics and consumer groups on the way out, also on errors; only a
killed process (SIGKILL, a lost CI runner) leaves them behind. Their names carry the
owner and the run id, ``bp-<owner>-<YYYYmmdd-HHMMSS>-<hex>-...`` (see
:mod:`pytest_brokerperf.core.run_names`), so the run's start time is read from the name:
Kafka keeps no creation time for topics or groups. A name under the prefix without a
run id is never touched (it may not be ours).

Consumer groups are deleted only when empty (Kafka refuses non-empty ones), so a run
still going is not disturbed.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.redaction import SecretDict
from pytest_brokerperf.core.run_names import created_at

__all__ = ["Leftover", "cleanup", "parse_age", "select"]

_AGE_RE = re.compile(r"^\s*(?P<num>\d+(?:\.\d*)?)\s*(?P<unit>s|m|min|h|d|w)?\s*$")
_AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MIN_PREFIX = 3


def parse_age(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``2d``, ``1w`` or plain seconds → seconds."""
    m = _AGE_RE.match(text)
    if m is None:
        raise ConfigError(
            f"--older-than {text!r}: expected a duration such as 30m, 12h, 2d or 1w"
        )
    return float(m["num"]) * _AGE_UNITS[m["unit"] or "s"]


@dataclass(frozen=True)
class Leftover:
    kind: str  # topic | group
    name: str
    created: _dt.datetime | None
    delete: bool
    why: str


def select(kind: str, names: list[str], prefix: str, older_than_s: float,
           now: _dt.datetime) -> list[Leftover]:
    """Which names under ``prefix`` are old enough to delete, and why (or why not)."""
    out: list[Leftover] = []
    for name in sorted(n for n in names if n.startswith(prefix)):
        created = created_at(name[len(prefix):]) or created_at(name)
        if created is None:
            out.append(Leftover(kind, name, None, False, "no run id in the name: not ours?"))
            continue
        age = (now - created).total_seconds()
        if age >= older_than_s:
            out.append(Leftover(kind, name, created, True, f"run began {_ago(age)} ago"))
        else:
            out.append(Leftover(kind, name, created, False, f"too young ({_ago(age)})"))
    return out


def _ago(seconds: float) -> str:
    if seconds < 0:
        return "in the future"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _admin(bootstrap: str, config: Path | None) -> Any:
    from confluent_kafka.admin import AdminClient

    from pytest_brokerperf.brokers.kafka.remote import load_client_config

    client: dict[str, str] = {}
    if config is not None:
        client, _ = load_client_config(config)
    return AdminClient(SecretDict({**client, "bootstrap.servers": bootstrap, "log_level": 0}))


def cleanup(*, bootstrap: str, prefix: str, older_than_s: float, config: Path | None = None,
            dry_run: bool = False, now: _dt.datetime | None = None,
            echo: Any = print) -> int:
    """Delete old topics and empty consumer groups named ``prefix...<run id>...``.

    Returns the exit status: 0 done (or nothing to do), 1 some deletion failed,
    2 usage error.
    """
    if len(prefix) < MIN_PREFIX:
        raise ConfigError(
            f"--prefix {prefix!r} is too short: give at least {MIN_PREFIX} characters, e.g. "
            "bp-<owner>- (a run's topics are named bp-<owner>-<run id>-...)"
        )
    now = now or _dt.datetime.now(_dt.UTC)
    admin = _admin(bootstrap, config)
    topics = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    groups_result = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
    groups = [g.group_id for g in groups_result.valid]
    found = select("topic", topics, prefix, older_than_s, now) + select(
        "group", groups, prefix, older_than_s, now)
    if not found:
        echo(f"brokerperf cleanup: nothing under prefix {prefix!r} at {bootstrap}")
        return 0
    failed = 0
    doomed_topics = [x.name for x in found if x.kind == "topic" and x.delete]
    doomed_groups = [x.name for x in found if x.kind == "group" and x.delete]
    results: dict[str, str] = {}
    if not dry_run and doomed_topics:
        for name, fut in admin.delete_topics(doomed_topics, operation_timeout=60).items():
            try:
                fut.result(timeout=90)
                results[f"topic:{name}"] = "deleted"
            except Exception as exc:
                failed += 1
                results[f"topic:{name}"] = f"FAILED: {exc}"
    if not dry_run and doomed_groups:
        for name, fut in admin.delete_consumer_groups(doomed_groups,
                                                      request_timeout=30).items():
            try:
                fut.result(timeout=60)
                results[f"group:{name}"] = "deleted"
            except Exception as exc:
                failed += 1
                results[f"group:{name}"] = f"FAILED: {exc}"
    for x in found:
        if x.delete:
            state = "would delete" if dry_run else results.get(f"{x.kind}:{x.name}", "?")
        else:
            state = "kept"
        echo(f"{x.kind:5} {x.name}: {state} ({x.why})")
    verb = "would delete" if dry_run else "deleted"
    echo(f"brokerperf cleanup: {verb} {len(doomed_topics)} topic(s) and {len(doomed_groups)} "
         f"group(s) under {prefix!r} older than {_ago(older_than_s)}"
         + (f"; {failed} failed" if failed else ""))
    return 1 if failed else 0
