"""The words every layer shares, declared once at the bottom floor: the metrics' name prefix,
the input kinds (the metrics' `source` label, the sources' offsets, the observed metrics), the
classes a log line is counted in, and the layout name of lines in no layout the monitor reads.

The other shared words have their own modules on this floor: the end-of-input time and the
event kinds (state/events.py), the quarantine reasons (state/quarantine_reasons.py), the output
kinds (state/outputs.py).
"""
from __future__ import annotations

METRIC_PREFIX = "rebalance_monitor"

SOURCE_KIND_LOG = "broker_log"
SOURCE_KIND_OFFSETS = "offsets"

# rebalance_monitor_log_lines_total{class} (docs/metrics.md); streaming/logs/step.py maps each
# parse outcome to one of them.
LINE_CLASSES = ("coordinator", "broker", "not_coordinator", "unknown_template", "unknown_layout", "unparseable")
UNKNOWN_LAYOUT = "unknown"
