"""The reporting pipeline: many runs' ``results.jsonl`` → tables, charts and CI verdicts.

A PySpark job (:mod:`.spark`) reads one or more result directories with an explicit
schema, upgrades and de-duplicates the records, and aggregates them per matrix cell
(broker × scenario × parameters × durability × fault × environment label), merging the
recorded sparse histograms with native Spark operations. Gates (:mod:`.gates`, pure
Python) compare a run with a baseline; :mod:`.render` writes Markdown, CSV and a
self-contained HTML page.

Nothing here is imported by the pytest plugin's load path: pyspark and matplotlib are
imported only when a report is asked for (``brokerperf report``,
``--brokerperf-report``), so their start-up cost is paid only then.
"""

from __future__ import annotations

__all__: list[str] = []
