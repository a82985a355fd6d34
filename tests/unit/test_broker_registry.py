"""The broker registry: built-ins, and broker kinds other distributions add through the
``pytest_brokerperf.brokers`` entry-point group (a fake distribution on ``sys.path``)."""

from __future__ import annotations

import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_brokerperf import brokers
from pytest_brokerperf.config.settings import Settings
from pytest_brokerperf.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

TOY_MODULE = '''
from typing import ClassVar

from pytest_brokerperf.brokers.base import BrokerType


class ToyBroker(BrokerType):
    name: ClassVar[str] = "toy"
    protocol: ClassVar[str] = "toy"


class Misnamed(BrokerType):
    name: ClassVar[str] = "not-toy"


class NotABroker:
    pass
'''


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    brokers._plugins.cache_clear()
    brokers.get.cache_clear()
    yield
    brokers._plugins.cache_clear()
    brokers.get.cache_clear()
    sys.modules.pop("toybroker", None)


def _fake_dist(root: Path, dist: str, entries: dict[str, str], monkeypatch: pytest.MonkeyPatch,
               module: str | None = TOY_MODULE) -> None:
    """A distribution ``dist`` installed in ``root`` (put on sys.path) with these broker
    entry points and, when given, a ``toybroker`` module."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"  # as wheels name it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[pytest_brokerperf.brokers]\n{lines}\n")
    if module is not None:
        (root / "toybroker.py").write_text(textwrap.dedent(module))
    monkeypatch.syspath_prepend(str(root))


def test_the_builtins_resolve_by_name() -> None:
    for name in brokers.BUILTIN:
        assert brokers.get(name).name == name
    own = tuple(n for n in brokers.BUILTIN if n != brokers.HARNESS)
    assert brokers.names()[: len(own)] == own


def test_pyproject_registers_exactly_the_builtins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"][brokers.ENTRY_POINT_GROUP]
    assert declared == brokers.BUILTIN


def test_a_third_party_broker_is_found_through_its_entry_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, "toy-dist", {"toy": "toybroker:ToyBroker"}, monkeypatch)
    assert "toy" in brokers.names()
    assert brokers.is_known("toy")
    assert type(brokers.get("toy")).__name__ == "ToyBroker"
    settings = Settings.resolve({"brokerperf_broker": "kafka,toy"}, {}, {}, cwd=tmp_path)
    assert settings.brokers == ("kafka", "toy")


def test_no_entry_point_is_read_for_a_builtin_name_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(brokers, "entry_points", lambda **kw: calls.append(kw) or ())
    assert brokers.is_known("kafka")
    assert calls == []


def test_a_broken_entry_point_names_its_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, "toy-dist", {"toy": "toybroker:NoSuchClass"}, monkeypatch)
    with pytest.raises(ConfigError) as err:
        brokers.get("toy")
    message = str(err.value)
    assert "'toy-dist'" in message
    assert "'toybroker:NoSuchClass'" in message
    assert "AttributeError" in message
    assert "uninstall" in message


def test_an_entry_point_that_is_no_broker_kind_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, "toy-dist", {"toy": "toybroker:NotABroker"}, monkeypatch)
    with pytest.raises(ConfigError, match=r"toy-dist.*lacks name, create_driver.*BrokerType"):
        brokers.get("toy")


def test_an_entry_point_must_agree_with_its_broker_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, "toy-dist", {"toy": "toybroker:Misnamed"}, monkeypatch)
    with pytest.raises(ConfigError, match=r"toy-dist.*names itself 'not-toy'"):
        brokers.get("toy")


def test_a_third_party_may_not_take_a_builtin_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path, "toy-dist", {"kafka": "toybroker:ToyBroker"}, monkeypatch)
    with pytest.raises(ConfigError, match=r"built-in broker.*'toy-dist'.*uninstall toy-dist"):
        brokers.get("kafka")


def test_one_name_from_two_distributions_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(tmp_path / "a", "toy-a", {"toy": "toybroker:ToyBroker"}, monkeypatch)
    _fake_dist(tmp_path / "b", "toy-b", {"toy": "toybroker:ToyBroker"}, monkeypatch,
               module=None)
    with pytest.raises(ConfigError, match=r"registered twice.*'toy-[ab]'.*'toy-[ab]'"):
        brokers.get("toy")


def test_an_unknown_broker_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown broker 'nope'; known brokers: kafka"):
        brokers.get("nope")
