"""JSON-lines outputs: a replay's files and the live service's group state file. One table says
which output kind goes to which file (a replay's file, the event sink's folder: sinks/event_sink.py).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from state.outputs import OutputKind

# Output kind -> the name of its records: replay file `<name>.jsonl`, event sink folder `<name>/`.
RECORD_FILES: dict[str, str] = {
    OutputKind.REBALANCE: "rebalances",
    OutputKind.REMOVAL: "member_removals",
    OutputKind.REBALANCE_TRIGGER: "rebalance_triggers",
    OutputKind.QUARANTINE: "quarantine",
    OutputKind.ANOMALY: "anomalies",
    OutputKind.CLOCK_SKEW: "clock_skew",
    OutputKind.DECODE_STATS: "decode_stats",
    OutputKind.LOG_STATS: "log_stats",
}
GROUPS_FILE = "groups.jsonl"       # replay: the final snapshot of every group
METRICS_FILE = "metrics.prom"      # replay: the registry at the end of the run


def replay_file(kind: str) -> str:
    return f"{RECORD_FILES[kind]}.jsonl"


def _null_last(value: Any) -> tuple:
    return (value is None, value if value is not None else 0)


# The order of each replay file's records (deterministic, whatever the batching).
SORT_KEYS = {
    OutputKind.REBALANCE: lambda r: (r["cluster"], r["group"], _null_last(r.get("started_at_ms")),
                                     _null_last(r.get("generation")), _null_last(r.get("completed_at_ms"))),
    OutputKind.REMOVAL: lambda r: (r["cluster"], r["group"], r["removed_at_ms"], r["member_id"], r["cause"]),
    OutputKind.REBALANCE_TRIGGER: lambda r: (r["cluster"], r["group"], _null_last(r.get("started_at_ms")),
                                             _null_last(r.get("generation")), r.get("trigger_member") or ""),
    OutputKind.QUARANTINE: lambda q: (q.get("cluster") or "", q["source_id"], q["seq"]),
    OutputKind.ANOMALY: lambda a: (a["cluster"], a["group"], a["ts_ms"], a["seq"]),
    OutputKind.CLOCK_SKEW: lambda c: (c["cluster"], c["source"], c["log_ts_ms"], c["group"], c["pair"],
                                      c["generation"]),
}


# json.dumps with arguments builds an encoder per call; one shared encoder writes the same text.
_RECORD_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def replace_atomically(path: str | Path, write: Callable[[TextIO], Any], tmp: str | Path | None = None) -> Any:
    """`write` the file through a temp file and a rename, so a reader sees the old file or the
    whole new one. A failed write (a full disk) removes its temp file: half a file is neither
    left to be read nor keeps the space it took. Returns what `write` returned."""
    tmp = tmp if tmp is not None else f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            result = write(handle)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return result


def write_records(handle: TextIO, records: Iterable[dict]) -> int:
    """Records as JSON lines into an open file; returns how many."""
    encode = _RECORD_JSON
    count = 0
    for record in records:
        handle.write(encode(record) + "\n")
        count += 1
    return count


def write_jsonl(path: str, records: Iterable[dict]) -> int:
    """Write atomically (temp file + rename) so a reader never sees half a file."""
    return replace_atomically(path, lambda handle: write_records(handle, records))


# The state file's schema version: 1 (before 2026-11-27) had no version key; 2 adds it and
# nothing else. A release that changes the file's shape (its snapshots or the correlator's
# state) bumps it and reads every older version.
STATE_FILE_VERSION = 2
VERSION_KEY = "schema_version"


class StateFileError(ValueError):
    """A state file this release cannot read (written by a newer one, or not JSON)."""


class GroupStateFile:
    """The latest snapshot of every group and the correlator's held removals, rewritten after
    each batch (atomically).

    After a restart the gauges come back from it before the first batch runs; Spark's own state
    store holds the authoritative state, this file only feeds /metrics early. The correlator's
    state (state/diagnosis/correlate.py) is authoritative: a restart resumes its held removals.
    """

    def __init__(self, path: str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _read(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            with open(self.path, encoding="utf-8") as handle:
                doc = json.load(handle)
        except ValueError as exc:
            raise StateFileError(f"{self.path}: not a state file of this monitor ({exc})") from None
        version = doc.get(VERSION_KEY, 1) if isinstance(doc, dict) else None
        if not isinstance(version, int) or version > STATE_FILE_VERSION:
            raise StateFileError(f"{self.path}: state file version {version} was written by a newer release "
                                 f"(this one reads versions 1-{STATE_FILE_VERSION})")
        return doc

    def save(self, batch_id: int, snapshots: dict[tuple[str, str], dict],
             correlator: dict | None = None, timeouts: dict[str, int] | None = None) -> None:
        """`correlator`: the driver's pending cross-group state (state/diagnosis/correlate.py), saved in the
        same atomic write so a restart neither loses nor repeats held removal records; `timeouts`:
        the state keys' event-time timeouts, which plan the quiet sources' markers after a restart."""
        doc = {VERSION_KEY: STATE_FILE_VERSION, "batch_id": batch_id, "groups": list(snapshots.values()),
               "correlator": correlator, "timeouts": timeouts or {}}
        replace_atomically(self.path, lambda handle: json.dump(doc, handle, separators=(",", ":"), sort_keys=True),
                           tmp=self.path.with_suffix(".tmp"))

    def load_timeouts(self) -> dict[str, int]:
        """The state keys' timeouts saved with the last batch (empty when absent: older files)."""
        doc = self._read()
        timeouts = None if doc is None else doc.get("timeouts")
        return {str(k): int(v) for k, v in timeouts.items()} if isinstance(timeouts, dict) else {}

    def load_extra(self) -> dict | None:
        """The correlator state saved with the last batch (None when absent)."""
        doc = self._read()
        return None if doc is None else doc.get("correlator")

    def load(self) -> tuple[int, list[dict]]:
        doc = self._read()
        if doc is None:
            return -1, []
        return int(doc.get("batch_id", -1)), list(doc.get("groups") or [])
