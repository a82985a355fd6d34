"""The shared YAML-with-lines reader and the pydantic-error renderer (files.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from pytest_brokerperf.core.errors import ConfigError
from pytest_brokerperf.core.files import LineOf, load_yaml, parse_label, validate


class _Demo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hosts: list[str] = Field([], json_schema_extra={"fix": "write `hosts: [a, b]`"})
    port: int = Field(1, strict=True, json_schema_extra={"fix": "write `port: 5672`"})


def _doc(tmp_path: Path, text: str) -> tuple[Any, LineOf]:
    path = tmp_path / "f.yaml"
    path.write_text(text, encoding="utf-8")
    doc = load_yaml(path, ConfigError, "demo")
    return doc.data, doc.line


def test_parse_label_is_the_path_of_a_key() -> None:
    assert parse_label("slos[2].when.params.rate") == ("slos", 2, "when", "params", "rate")
    assert parse_label("producerRateList[1]") == ("producerRateList", 1)


@pytest.mark.parametrize(("text", "expected"), [
    ("port: 1\nhosts:\n  - a\n  - 7\n", r"f\.yaml:4: hosts\[1\] = 7: expected text, got int\. "
                                       r"Fix: write `hosts: \[a, b\]`\."),
    ("port: '5672'\n", r"f\.yaml:1: port = '5672': expected a whole number, got str\. "
                       r"Fix: write `port: 5672`\."),
    ("port: 1\nhots: [a]\n", r"f\.yaml:2: hots = \['a'\]: unknown key \(did you mean "
                             r"'hosts'\?\); keys are hosts, port\. Fix: remove or rename it\."),
])
def test_errors_name_file_line_key_value_and_fix(tmp_path: Path, text: str,
                                                 expected: str) -> None:
    data, line_of = _doc(tmp_path, text)
    with pytest.raises(ConfigError, match=expected):
        validate(_Demo, data, source=str(tmp_path / "f.yaml"), line_of=line_of)


# ---------------------------------------------------------------- hostile files (issue 24)

def _laughs(levels: int, per: int) -> str:
    out = ["messageSize: 1024", "a0: &a0 [lol]"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*a{i - 1}"] * per)
        out.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(("text", "needle"), [
    (_laughs(12, 9), "more than 100 aliases (*name)"),  # the classic, 9 aliases a level
    (_laughs(40, 2), "more than 100,000 values once its aliases are expanded"),  # 2^40
    ("a: " + "[" * 200 + "]" * 200 + "\n", "nested deeper than 64 levels"),
])
def test_a_hostile_yaml_file_is_refused_at_once_with_its_line(
        tmp_path: Path, text: str, needle: str) -> None:
    import time

    from pytest_brokerperf.core.files import load_yaml

    path = tmp_path / "w.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:\d+: the workload file is "
                       rf"refused: {re.escape(needle)}\. Fix: "):
        load_yaml(path, ConfigError, "workload")
    assert time.monotonic() - started < 5  # was: minutes of 100 % CPU


def test_an_oversized_yaml_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from pytest_brokerperf.core.files import load_yaml

    path = tmp_path / "w.yaml"
    with open(path, "wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse: nothing is written
    with pytest.raises(ConfigError, match=r"67,108,864 bytes, more than the 1,048,576"):
        load_yaml(path, ConfigError, "workload")


def test_a_few_anchors_still_load(tmp_path: Path) -> None:
    from pytest_brokerperf.core.files import load_yaml

    path = tmp_path / "d.yaml"
    path.write_text("base: &b {x: 1}\none: *b\ntwo: *b\n")
    assert load_yaml(path, ConfigError, "driver").data["two"] == {"x": 1}
