"""loopback."""
