"""Load held: a tail read at a moderate fixed rate for ten minutes under
``--brokerperf-profile=standard`` (60 s under ``smoke``, the default profile), failing
when a generator worker's or a local broker process's memory (RSS), open files or
threads grow without bound.

Run: ``pytest scenarios -m soak --broker=kafka --brokerperf-profile=standard``. The
rule, its thresholds and the record's ``soak`` block: docs/reference/soak.md.
"""

import pytest

from pytest_brokerperf import Soak


@pytest.mark.soak
def test_soak(brokerperf):
    brokerperf.run(Soak())
