"""The summary section fits the terminal's width, as pytest's own lines do (issue 23,
item 8): its lines were 160-220 characters and wrapped in a 120-column terminal."""

import pytest

from pytest_brokerperf.testing.loopback import LOOPBACK_CONFTEST

TEST = """
import pytest
from pytest_brokerperf import TailRead

@pytest.mark.tailread
def test_a_tail_read_with_a_long_name_as_users_write_them(brokerperf):
    brokerperf.run(TailRead(message_size=128, rate=200), check=False)
"""


@pytest.mark.parametrize("columns", [120, 100])
def test_summary_lines_fit_the_terminal(pytester: pytest.Pytester,
                                        monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    pytester.makeconftest(LOOPBACK_CONFTEST)
    pytester.makepyfile(test_scn=TEST)
    result = pytester.runpytest_subprocess(
        "--brokerperf-duration=1", "--brokerperf-warmup=0.5", "--brokerperf-period=0.5",
        "--brokerperf-calibration=off", "--brokerperf-inconclusive=warn",
        f"--brokerperf-results={pytester.path / 'res'}", "-p", "no:cacheprovider")
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "brokerperf summary" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("results written to"))
    summary = lines[start:end + 1]
    assert max(len(line) for line in summary) <= columns, "\n".join(summary)
    assert any("test_a_tail_read_with_a_long_name_as_users_write_them[kafka]" in line
               for line in summary)
