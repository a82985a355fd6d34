"""The project's own test machinery, not shipped in the wheel:
proxies, synthetic records, containers, Chromium."""
