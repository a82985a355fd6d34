"""Files shipped in ``pytest_brokerperf/data``: OMB workloads and driver files."""

from __future__ import annotations

from pathlib import Path

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.files import closest

__all__ = ["DATA_DIR", "DRIVERS_DIR", "WORKLOADS_DIR", "shipped_driver", "shipped_drivers",
           "shipped_workload", "shipped_workloads"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
WORKLOADS_DIR = DATA_DIR / "workloads"
DRIVERS_DIR = DATA_DIR / "drivers"


def shipped_workloads() -> list[str]:
    """Names (without ``.yaml``) of the workloads shipped in ``pytest_brokerperf/data``."""
    return sorted(p.stem for p in WORKLOADS_DIR.glob("*.yaml"))


def shipped_workload(name: str) -> Path:
    """Path of a shipped workload YAML, by name with or without ``.yaml``."""
    stem = name.removesuffix(".yaml").removesuffix(".yml")
    path = WORKLOADS_DIR / f"{stem}.yaml"
    if path.is_file():
        return path
    names = shipped_workloads()
    near = closest(stem, names)
    hint = f" Did you mean {near!r}?" if near else ""
    raise ConfigError(
        f"no shipped workload named {name!r}.{hint} Shipped: {', '.join(names)}. "
        "Fix: use one of these names or pass a path to your own OMB workload YAML."
    )


def shipped_drivers() -> list[str]:
    """Names (without ``.yaml``) of the driver configs shipped in ``pytest_brokerperf/data``."""
    return sorted(p.stem for p in DRIVERS_DIR.glob("*.yaml"))


def shipped_driver(name: str) -> Path:
    """Path of a shipped driver YAML, by name with or without ``.yaml``."""
    stem = name.removesuffix(".yaml").removesuffix(".yml")
    path = DRIVERS_DIR / f"{stem}.yaml"
    if path.is_file():
        return path
    names = shipped_drivers()
    near = closest(stem, names)
    hint = f" Did you mean {near!r}?" if near else ""
    raise ConfigError(
        f"no shipped driver config named {name!r}.{hint} Shipped: {', '.join(names)}. "
        "Fix: use one of these names or pass a path to your own OMB driver YAML."
    )
