"""The shared YAML-with-lines reader and the pydantic-error renderer (files.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from pytest_brokerperf.errors import ConfigError
from pytest_brokerperf.files import LineOf, load_yaml, parse_label, validate


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
