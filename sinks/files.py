"""JSON-lines outputs: a replay's files and the live service's group state file. One table says
which output kind goes to which file (a replay's file, the event sink's folder: sinks/event_sink.py).
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
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
    OutputKind.REBALANCE_COST: "rebalance_costs",     # `run`, a replay with end offsets (state/rebalance_cost.py)
    OutputKind.CATCH_UP: "rebalance_catch_ups",       # `run` only (state/rebalance_cost.py)
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
    OutputKind.REBALANCE_COST: lambda c: (c["cluster"], c["group"], _null_last(c.get("started_at_ms")),
                                          _null_last(c.get("generation"))),
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


# The state file's schema version: 1 (before 2026-11-27) had no version key; 2 adds it; 3 keeps
# the same document and adds the change journal beside it (`<name>.changes.jsonl`), which an older
# release would not read. A release that changes the shape (the snapshots, the correlator's state
# or the journal's lines) bumps it and reads every older version.
STATE_FILE_VERSION = 3
VERSION_KEY = "schema_version"
_HEAD_VERSION = re.compile(rb'\s*\{\s*"schema_version"\s*:\s*(\d+)')
# A journal smaller than this is never compacted: rewriting a small file saves nothing.
MIN_COMPACT_BYTES = 64 * 1024


class StateFileError(ValueError):
    """A state file this release cannot read (written by a newer one, or not JSON)."""


@dataclass
class SavedState:
    """What the state file and its journal hold after the last batch that wrote them."""
    batch_id: int = -1
    groups: dict[tuple[str, str], dict] = field(default_factory=dict)
    correlator: dict | None = None
    timeouts: dict[str, int] = field(default_factory=dict)


class GroupStateFile:
    """The latest snapshot of every group, the correlator's held removals and the state keys'
    timeouts, saved after each batch.

    Saved as changes: a batch appends one journal line with the groups and timeouts it changed
    (and the correlator's state, which is small), so its cost is what changed, not the number of
    groups. When the journal has grown past the file, the file is rewritten whole (atomically)
    and the journal starts empty: bytes written stay within about twice the changes, and a restart
    reads at most about twice the file. The first save of a process, and the first after a failed
    write, rewrites the file, so a torn journal line (a crash, a full disk) is never appended to.

    After a restart the gauges come back from it before the first batch runs; Spark's own state
    store holds the authoritative state, this file only feeds /metrics early. The correlator's
    state (state/diagnosis/correlate.py) is authoritative: a restart resumes its held removals.
    """

    def __init__(self, path: str, min_compact_bytes: int = MIN_COMPACT_BYTES,
                 parse: Callable[[bytes], Any] = json.loads):
        """`parse`: the JSON parser of its file and lines (`run` gives streaming.rows.loads_json:
        a restart parses the whole file, 147 MB of 267,000 groups in the soak, in 1.4 s against
        json's 2.0 s). Read as bytes: a line torn inside a character ends the journal too."""
        self.path = Path(path)
        self.parse = parse
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.journal_path = self.path.with_name(f"{self.path.stem}.changes.jsonl")
        self.min_compact_bytes = min_compact_bytes
        self._file_bytes = 0
        self._journal_bytes = 0
        self._rewrite = True            # first save of this process: the whole file

    def check_version(self) -> None:
        """The file's version from its first bytes (the key written first), before it is read:
        `run` refuses a newer release's file before it serves /metrics, and reads the file after."""
        try:
            with open(self.path, "rb") as handle:
                head = _HEAD_VERSION.match(handle.read(256))
        except FileNotFoundError:
            return
        if head is not None and int(head.group(1)) > STATE_FILE_VERSION:
            raise StateFileError(self._newer(int(head.group(1))))

    def _newer(self, version: object) -> str:
        return (f"{self.path}: state file version {version} was written by a newer release "
                f"(this one reads versions 1-{STATE_FILE_VERSION})")

    def _read(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            with open(self.path, "rb") as handle:
                doc = self.parse(handle.read())
        except ValueError as exc:
            raise StateFileError(f"{self.path}: not a state file of this monitor ({exc})") from None
        version = doc.get(VERSION_KEY, 1) if isinstance(doc, dict) else None
        if not isinstance(version, int) or version > STATE_FILE_VERSION:
            raise StateFileError(self._newer(version))
        return doc

    def read(self) -> SavedState:
        """The file, then its journal's lines of later batches in order. A line that does not
        parse ends the journal: it can only be the last one, torn by a crash or a full disk, and its
        batch was not committed (Spark runs it again)."""
        doc = self._read()
        if doc is None:
            return SavedState()
        timeouts = doc.get("timeouts")
        saved = SavedState(int(doc.get("batch_id", -1)),
                           {(g["cluster"], g["group"]): g for g in doc.get("groups") or []},
                           doc.get("correlator"),
                           {str(k): int(v) for k, v in timeouts.items()} if isinstance(timeouts, dict) else {})
        for change in self._journal():
            if int(change["batch_id"]) <= saved.batch_id:
                continue            # written before the file's last rewrite
            saved.batch_id = int(change["batch_id"])
            for snapshot in change.get("groups") or []:
                saved.groups[(snapshot["cluster"], snapshot["group"])] = snapshot
            for cluster, group in change.get("forgotten") or []:
                saved.groups.pop((cluster, group), None)
            saved.correlator = change.get("correlator")
            for key, timeout in (change.get("timeouts") or {}).items():
                if timeout is None:
                    saved.timeouts.pop(key, None)
                else:
                    saved.timeouts[key] = int(timeout)
        return saved

    def _journal(self) -> Iterator[dict]:
        try:
            handle = open(self.journal_path, "rb")
        except FileNotFoundError:
            return
        with handle:
            for line in handle:
                try:
                    change = self.parse(line)
                    int(change["batch_id"])
                except (ValueError, TypeError, KeyError):
                    return
                yield change

    def save(self, batch_id: int, snapshots: dict[tuple[str, str], dict],
             correlator: dict | None = None, timeouts: dict[str, int] | None = None,
             changed_groups: Iterable[tuple[str, str]] | None = None,
             changed_timeouts: Iterable[str] | None = None) -> None:
        """`correlator`: the driver's pending cross-group state (state/diagnosis/correlate.py), saved in the
        same write so a restart neither loses nor repeats held removal records; `timeouts`:
        the state keys' event-time timeouts, which plan the quiet sources' markers after a restart.
        `changed_groups` and `changed_timeouts`: the keys this batch changed (a group absent from
        `snapshots` was forgotten); without them the whole file is written."""
        timeouts = timeouts or {}
        if self._rewrite or changed_groups is None or changed_timeouts is None:
            self._write_file(batch_id, snapshots, correlator, timeouts)
            return
        groups, forgotten = [], []
        for key in changed_groups:
            if key in snapshots:
                groups.append(snapshots[key])
            else:
                forgotten.append(list(key))
        line = _RECORD_JSON({"batch_id": batch_id, "groups": groups, "forgotten": forgotten,
                             "correlator": correlator,
                             "timeouts": {key: timeouts.get(key) for key in changed_timeouts}}) + "\n"
        self._rewrite = True            # until the line is whole: a failed append leaves it torn
        with open(self.journal_path, "a", encoding="utf-8") as handle:
            handle.write(line)
        self._rewrite = False
        self._journal_bytes += len(line)
        if self._journal_bytes > max(self._file_bytes, self.min_compact_bytes):
            self._write_file(batch_id, snapshots, correlator, timeouts)

    def _write_file(self, batch_id: int, snapshots: dict[tuple[str, str], dict],
                    correlator: dict | None, timeouts: dict[str, int]) -> None:
        """The whole state (temp file + rename), then an empty journal. A crash between the two
        leaves journal lines of batches the file holds: read() skips them."""
        self._rewrite = True
        text = _RECORD_JSON({VERSION_KEY: STATE_FILE_VERSION, "batch_id": batch_id,
                             "groups": list(snapshots.values()), "correlator": correlator, "timeouts": timeouts})
        replace_atomically(self.path, lambda handle: handle.write(text), tmp=self.path.with_suffix(".tmp"))
        with open(self.journal_path, "w", encoding="utf-8"):
            pass
        self._file_bytes, self._journal_bytes = len(text), 0
        self._rewrite = False
