"""Durable event sink: the records of each micro-batch in files named by batch id.

foreachBatch can run a batch again after a crash (Spark replays the last planned batch from the
checkpoint). Writing `<kind>/batch-<id>.jsonl` through a temporary file and a rename makes the
second run replace the first, so every record is in the sink exactly once across restarts.

Reading the sink back (`records`) is how a restarted monitor rebuilds its counters and histograms
to what an uninterrupted run would show.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Optional

from sinks.files import write_jsonl

KINDS = {"rebalance": "rebalances", "removal": "member_removals", "quarantine": "quarantine",
         "anomaly": "anomalies", "clock_skew": "clock_skew", "decode_stats": "decode_stats"}


class EventSink:
    def __init__(self, directory: str):
        self.root = Path(directory)
        for sub in KINDS.values():
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def write_batch(self, batch_id: int, records: dict[str, list[dict]]) -> None:
        for kind, sub in KINDS.items():
            rows = records.get(kind) or []
            path = self.root / sub / f"batch-{batch_id:012d}.jsonl"
            if rows:
                write_jsonl(str(path), rows)
            elif path.exists():
                path.unlink()   # a re-run that produced nothing leaves nothing behind

    def last_batch_id(self) -> int:
        """Highest batch id with a file in the sink (-1 when empty)."""
        ids = [int(p.stem.split("-", 1)[1]) for sub in KINDS.values()
               for p in (self.root / sub).glob("batch-*.jsonl")]
        return max(ids, default=-1)

    def records(self, kind: str) -> Iterator[dict]:
        """Every record of one kind, in batch order."""
        for path in sorted((self.root / KINDS[kind]).glob("batch-*.jsonl")):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        yield json.loads(line)


class GroupStateFile:
    """The latest snapshot of every group, rewritten after each batch (atomically).

    After a restart the gauges come back from it before the first batch runs; Spark's own state
    store holds the authoritative state, this file only feeds /metrics early.
    """

    def __init__(self, path: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def save(self, batch_id: int, snapshots: dict[tuple[str, str], dict],
             correlator: Optional[dict] = None) -> None:
        """`correlator`: the driver's pending cross-group state (state/correlate.py), saved in the
        same atomic write so a restart neither loses nor repeats held removal records."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"batch_id": batch_id, "groups": list(snapshots.values()),
                       "correlator": correlator}, handle, separators=(",", ":"), sort_keys=True)
        os.replace(tmp, self.path)

    def load_extra(self) -> Optional[dict]:
        """The correlator state saved with the last batch (None when absent)."""
        if not self.path.exists():
            return None
        with open(self.path, encoding="utf-8") as handle:
            return json.load(handle).get("correlator")

    def load(self) -> tuple[int, list[dict]]:
        if not self.path.exists():
            return -1, []
        with open(self.path, encoding="utf-8") as handle:
            doc = json.load(handle)
        return int(doc.get("batch_id", -1)), list(doc.get("groups") or [])
