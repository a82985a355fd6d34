"""Test helpers for pytest-brokerperf and its users (e.g. :mod:`.delayproxy`)."""
