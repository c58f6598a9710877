"""Rebuild tests/data/coordinator_templates.jsonl and tests/data/rebalance_reasons.jsonl.

The command line of scripts/coordinator_templates/ (see the package's docstring): build the rows,
print the counts per release line, then write the files or (--check) compare them."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scripts.coordinator_templates.releases import _vkey
from scripts.coordinator_templates.rows import build

ROOT = Path(__file__).resolve().parents[2]   # the repository
OUT_TEMPLATES = ROOT / "tests" / "data" / "coordinator_templates.jsonl"
OUT_REASONS = ROOT / "tests" / "data" / "rebalance_reasons.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--offline", action="store_true", help="do not run mvn; use the cache only")
    ap.add_argument("--check", action="store_true", help="exit 1 if the output files would change")
    args = ap.parse_args(argv)
    templates, reasons, counts, problems = build(args.offline)
    print(f"{'line':<7} {'release':<9} {'INFO+':>6} {'DEBUG kept':>10} {'all calls':>9}")
    for minor in sorted(counts, key=_vkey):
        c = counts[minor]
        print(f"{minor:<7} {c['version']:<9} {c['info_plus']:>6} {c['debug']:>10} {c['calls_all_levels']:>9}")
    print(f"rows: {templates.count(chr(10))} templates, {reasons.count(chr(10))} rebalance reasons")
    for p in problems:
        print("note:", p, file=sys.stderr)
    if args.check:
        same = (OUT_TEMPLATES.exists() and OUT_TEMPLATES.read_text() == templates
                and OUT_REASONS.exists() and OUT_REASONS.read_text() == reasons)
        print("up to date" if same else "would change")
        return 0 if same else 1
    OUT_TEMPLATES.parent.mkdir(parents=True, exist_ok=True)
    OUT_TEMPLATES.write_text(templates)
    OUT_REASONS.write_text(reasons)
    print(f"wrote {OUT_TEMPLATES.relative_to(ROOT)} and {OUT_REASONS.relative_to(ROOT)}")
    return 0
