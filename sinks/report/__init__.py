"""`rebalance-monitor report`: one self-contained HTML page of a replay's outputs or of the live
service's event sink: a fleet timeline, per group a timeline of its rebalances (phase bars,
generations, members, removals by root cause) beside its diagnosis table.

data.py reads and filters the records, svg.py draws, page.py assembles the page.
"""
from __future__ import annotations

import os
from pathlib import Path

from sinks.report.data import Filters, Report, ReportInputError, StormRules, build, build_from
from sinks.report.page import render

__all__ = ["DEFAULT_MAX_GROUPS", "Filters", "Report", "ReportInputError", "StormRules", "build", "build_from", "render",
           "write_report"]

# Groups drawn by default (`report --max-groups`, and the report a replay writes): a page of
# 10,000 group sections is 87 MB that no browser opens, and took a 10,000-group replay 5.7 s.
DEFAULT_MAX_GROUPS = 200


def write_report(paths: list[Path], output: Path, filters: Filters | None = None,
                 storm_rules: StormRules | None = None, max_groups: int | None = None,
                 records: list[tuple[dict[str, list[dict]], list[dict]]] | None = None) -> Report:
    """Build the report of `paths` and write it to `output` atomically (temp file + rename).
    `records`: each path's (records per kind, snapshots) when the caller holds them (not read)."""
    if records is None:
        report = build(paths, filters, storm_rules, max_groups)
    else:
        report = build_from([(p, *r) for p, r in zip(paths, records, strict=True)], filters, storm_rules, max_groups)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(render(report), encoding="utf-8")
    os.replace(tmp, output)
    return report
