"""The broker reference pages say what each broker offers: a provisioning mode the code
implements is never listed as "Not implemented" (docs/reference/pulsar.md still said
"Container mode" after it shipped: issue 23, item 10)."""

from pathlib import Path

import pytest

from pytest_brokerperf import brokers

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


def _not_implemented(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    _, _, rest = text.partition("## Not implemented")
    return rest.split("\n## ", 1)[0].lower()


@pytest.mark.parametrize("kind", ["pulsar", "rabbitmq", "tansu"])
def test_a_container_mode_that_exists_is_not_listed_as_missing(kind: str) -> None:
    page = DOCS / f"{kind}.md"
    offered = bool(brokers.get(kind).container_nodes)
    text = page.read_text(encoding="utf-8").lower()
    if offered:
        assert "container mode" not in _not_implemented(page), page
        assert "containers.md" in text, f"{page} should link the container reference"
