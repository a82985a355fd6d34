"""Saved runs and named baselines, keyed by environment, as pytest-benchmark keeps them.

pytest-benchmark saves runs under ``.benchmarks/<machine id>/NNNN_<name>.json``
(``--benchmark-autosave``, ``--benchmark-save=NAME``, ``--benchmark-storage``) and
compares with them by number or name. Here a saved run is the session's result records
under ``<storage>/<key>/NNNN_<name>/results.jsonl``, where the key is the
``--brokerperf-env`` label the user chose, or — for the default label ``local`` — the
machine's class (``local-Linux-x86_64-2cpu``), so runs of different machines never
share a history by accident.

A baseline is then named by a directory of results, or by a stored run: its number
(``0003``), its name (the newest with that name), ``last`` (the newest), or ``all``
(every stored run of the key: the history a noise floor is learnt from).
"""

from __future__ import annotations

import json
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_brokerperf.core.errors import ConfigError

__all__ = ["DEFAULT_STORAGE", "StoredRun", "machine_key", "resolve_baseline", "save_run",
           "stored_runs"]

DEFAULT_STORAGE = ".brokerperf"
_ENTRY = re.compile(r"^(?P<num>\d{4})_(?P<name>.+)$")


def machine_key(env: str) -> str:
    """The storage key: the user's environment label, or the machine class for the
    default label ``local``."""
    if env != "local":
        return env
    return f"local-{platform.system()}-{platform.machine()}-{os.cpu_count() or 0}cpu"


@dataclass(frozen=True)
class StoredRun:
    number: int
    name: str
    path: Path

    @property
    def label(self) -> str:
        return f"{self.number:04d}_{self.name}"


def stored_runs(storage: Path, key: str) -> list[StoredRun]:
    """The runs stored for ``key``, oldest first."""
    base = storage / key
    if not base.is_dir():
        return []
    runs = []
    for entry in base.iterdir():
        m = _ENTRY.match(entry.name)
        if m and (entry / "results.jsonl").is_file():
            runs.append(StoredRun(int(m["num"]), m["name"], entry))
    return sorted(runs, key=lambda r: r.number)


def save_run(storage: Path, key: str, results_jsonl: Path, run_id: str,
             name: str | None = None) -> StoredRun | None:
    """Store the records of run ``run_id`` as the next numbered run of ``key``; None
    when the run wrote no record."""
    if not results_jsonl.is_file():
        return None
    lines = []
    for line in results_jsonl.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                if json.loads(line).get("run_id") == run_id:
                    lines.append(line)
            except ValueError:
                continue  # a torn line of another run is not this run's business
    if not lines:
        return None
    existing = stored_runs(storage, key)
    number = (existing[-1].number + 1) if existing else 1
    entry = storage / key / f"{number:04d}_{name or run_id}"
    entry.mkdir(parents=True, exist_ok=False)
    tmp = entry / "results.jsonl.tmp"
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(entry / "results.jsonl")
    return StoredRun(number, name or run_id, entry)


def resolve_baseline(ref: str, storage: Path, key: str, *, source: str) -> list[Path]:
    """The result directories ``ref`` names (see the module docstring)."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return [path]
    runs = stored_runs(storage, key)
    chosen: list[StoredRun]
    if ref == "all":
        chosen = runs
    elif ref == "last":
        chosen = runs[-1:]
    elif ref.isdigit():
        chosen = [r for r in runs if r.number == int(ref)]
    else:
        chosen = [r for r in runs if r.name == ref][-1:]
    if not chosen:
        have = ", ".join(r.label for r in runs[-10:]) or "none"
        others = [f"{p.name} ({', '.join(r.label for r in stored_runs(storage, p.name)[-3:])})"
                  for p in sorted(storage.iterdir()) if p.is_dir() and p.name != key
                  and stored_runs(storage, p.name)] if storage.is_dir() else []
        elsewhere = (f"; other environments' keys there: {'; '.join(others)} — run with "
                     "that --brokerperf-env label to use them" if others else "")
        raise ConfigError(
            f"{source}={ref}: neither a results directory nor a run stored under "
            f"{storage / key} (stored: {have}{elsewhere}). Fix: give a directory of "
            "results, or save runs with --brokerperf-autosave / --brokerperf-save=NAME "
            "(same --brokerperf-env) and name one by number, name, 'last' or 'all'")
    return [r.path for r in chosen]
