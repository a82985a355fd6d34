"""pytest hooks of pytest-brokerperf (placeholder until the plugin module lands)."""
