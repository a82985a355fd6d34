"""The shipped scenario suite (installed as ``pytest_brokerperf.suite``)."""
