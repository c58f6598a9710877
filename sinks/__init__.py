"""Where the monitor's outputs go: Prometheus metrics and JSON-lines event files."""
