"""JSON-lines outputs of a run: rebalances, member removals, final group state, quarantine."""
from __future__ import annotations

import json
import os
from typing import Any, Iterable

REBALANCES = "rebalances.jsonl"
REMOVALS = "member_removals.jsonl"
GROUPS = "groups.jsonl"
QUARANTINE = "quarantine.jsonl"
ANOMALIES = "anomalies.jsonl"
CLOCK_SKEW = "clock_skew.jsonl"


def _null_last(value: Any) -> tuple:
    return (value is None, value if value is not None else 0)


def rebalance_sort_key(r: dict) -> tuple:
    return (r["cluster"], r["group"], _null_last(r.get("started_at_ms")),
            _null_last(r.get("generation")), _null_last(r.get("completed_at_ms")))


def removal_sort_key(r: dict) -> tuple:
    return (r["cluster"], r["group"], r["removed_at_ms"], r["member_id"], r["cause"])


def write_jsonl(path: str, records: Iterable[dict]) -> int:
    """Write atomically (temp file + rename) so a reader never sees half a file."""
    tmp = f"{path}.tmp"
    count = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
            count += 1
    os.replace(tmp, path)
    return count
