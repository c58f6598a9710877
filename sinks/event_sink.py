"""The live service's durable event sink (`events_dir`): records per micro-batch, rolled into
larger files once their batches are committed, kept by age and size, and a snapshot of the
counters and histograms so a restart reads only what came after it.

Layout, one folder per record kind (sinks/files.py RECORD_FILES):

    <kind>/batch-<id>.jsonl           a part: one micro-batch's records, written through a temp file
                                      and a rename. foreachBatch may run the last batch again after a
                                      crash; the re-run replaces the part, so each record is here once.
    <kind>/rolled-<first>-<last>.jsonl  the parts of batches first..last (ids, inclusive) in batch
                                      order; for the statistics kinds their totals instead (one record
                                      per cluster, or per cluster and log source). Its mtime is that of
                                      its newest part (retention by age).
    <kind>/unreadable-<first>-<last>.txt  lines of those parts that were not JSON objects, kept for a look
    counters.json                     the snapshot (streaming/app/restart.py; sinks/metrics_state.py)

A roll writes the rolled file, then deletes its parts. A crash in between leaves parts that a
rolled file covers: readers skip them and the next start deletes them, so a record is read once
whichever step a crash interrupts. Temp files (`*.tmp`) are a crash's leftovers: deleted at start.
Any other file is left alone, with one warning.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sinks.files import RECORD_FILES, replace_atomically, write_jsonl, write_records
from sinks.health import DecodeCounts, LogSourceLines
from state.outputs import STATISTICS_KINDS, OutputKind, upgrade_record

LOG = logging.getLogger("rebalance_monitor.events")
PART = re.compile(r"batch-(\d+)\.jsonl")
ROLLED = re.compile(r"rolled-(\d+)-(\d+)\.jsonl")
UNREADABLE = re.compile(r"unreadable-(\d+)-(\d+)\.txt")
COUNTERS_FILE = "counters.json"
# A kind's parts are rolled once the oldest is this old, or once they hold this many bytes; a
# rolled file holds at most about ROLL_BYTES (an old sink's parts roll into several).
ROLL_SECONDS = 3600.0
ROLL_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class SinkFile:
    """A part (first == last) or a rolled file of one kind."""
    path: Path
    first: int
    last: int
    size: int
    mtime: float
    rolled: bool


def sink_files(root: Path, kind: str) -> list[SinkFile]:
    """The files of one kind a reader reads, in batch order: rolled files, and the parts no rolled
    file covers. Reads names only (no file is opened); `report` and restore both use it."""
    rolled, parts, _ = _scan(root / RECORD_FILES[kind])
    return _readable(rolled, parts)


def _readable(rolled: list[SinkFile], parts: list[SinkFile]) -> list[SinkFile]:
    spans = [(r.first, r.last) for r in rolled]
    return sorted(rolled + [p for p in parts if not _covered(p.first, spans)], key=lambda f: f.first)


def _covered(batch_id: int, spans: list[tuple[int, int]]) -> bool:
    return any(first <= batch_id <= last for first, last in spans)


def _scan(folder: Path) -> tuple[list[SinkFile], list[SinkFile], list[Path]]:
    """(rolled files, parts, other files) of one kind's folder, by name."""
    rolled: list[SinkFile] = []
    parts: list[SinkFile] = []
    other: list[Path] = []
    if not folder.is_dir():
        return rolled, parts, other
    with os.scandir(folder) as entries:
        for entry in entries:
            if (m := PART.fullmatch(entry.name)) or (m := ROLLED.fullmatch(entry.name)):
                try:
                    st = entry.stat()
                except FileNotFoundError:        # deleted by a roll since the listing
                    continue
                first = int(m.group(1))
                last = int(m.group(2)) if m.re is ROLLED else first
                (rolled if m.re is ROLLED else parts).append(
                    SinkFile(Path(entry.path), first, last, st.st_size, st.st_mtime, m.re is ROLLED))
            elif UNREADABLE.fullmatch(entry.name) is None:
                other.append(Path(entry.path))
    return sorted(rolled, key=lambda f: f.first), sorted(parts, key=lambda f: f.first), other


def read_lines(path: Path) -> Iterator[tuple[int, str, dict | None]]:
    """(line number, text, the JSON object or None when the line is not one) of a sink file."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            yield number, text, record if isinstance(record, dict) else None


def statistics_totals(kind: str, records: Iterable[dict]) -> list[dict]:
    """The totals of statistics records (decode_stats per cluster, log_stats per cluster and
    source): what they add to the counters, in one record each."""
    if kind == OutputKind.DECODE_STATS:
        decode: dict[str, dict[tuple[str, str, str], int]] = {}
        for record in records:
            counts = DecodeCounts.of(record)
            sums = decode.setdefault(counts.cluster, {})
            for k, v, outcome, n in counts.counts:
                sums[(k, v, outcome)] = sums.get((k, v, outcome), 0) + n
        return [DecodeCounts(c, tuple((*key, n) for key, n in sorted(s.items()))).record()
                for c, s in sorted(decode.items())]
    lines: dict[tuple[str, str], tuple[dict[str, int], dict[str, int]]] = {}
    for record in records:
        one = LogSourceLines.of(record)
        layouts, classes = lines.setdefault((one.cluster, one.source), ({}, {}))
        for into, add in ((layouts, one.layouts), (classes, one.classes)):
            for name, n in add.items():
                into[name] = into.get(name, 0) + n
    return [LogSourceLines(c, s, dict(sorted(lay.items())), dict(sorted(cls.items()))).record()
            for (c, s), (lay, cls) in sorted(lines.items())]


class EventSink:
    """The sink of `run`. The batch thread writes output records, rolls and keeps retention; the
    progress listener's thread writes the statistics parts: the index of files is under a lock."""

    def __init__(self, directory: str, retention_days: float | None = None, max_bytes: int | None = None,
                 roll_seconds: float = ROLL_SECONDS, roll_bytes: int = ROLL_BYTES,
                 clock: Any = time.time) -> None:
        self.root = Path(directory)
        self.retention_days = retention_days
        self.max_bytes = max_bytes
        self.roll_seconds = roll_seconds
        self.roll_bytes = roll_bytes
        self.clock = clock
        self.unreadable_lines = 0        # lines skipped by records() (not JSON objects)
        self._lock = threading.Lock()
        self._parts: dict[str, dict[int, SinkFile]] = {}
        self._rolled: dict[str, list[SinkFile]] = {}
        for kind, sub in RECORD_FILES.items():
            (self.root / sub).mkdir(parents=True, exist_ok=True)
            self._open_kind(kind)

    def _open_kind(self, kind: str) -> None:
        """Index one kind's files; delete a crash's leftovers (temp files, parts a rolled file covers)."""
        folder = self.root / RECORD_FILES[kind]
        rolled, parts, other = _scan(folder)
        spans = [(r.first, r.last) for r in rolled]
        for part in parts:
            if _covered(part.first, spans):
                part.path.unlink(missing_ok=True)        # rolled before a crash, not yet deleted
        for path in other:
            if path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)
            else:
                LOG.warning("events_dir: %s is not a file of the event sink; left alone and not read", path)
        self._rolled[kind] = rolled
        self._parts[kind] = {p.first: p for p in parts if not _covered(p.first, spans)}

    # ------------------------------------------------------------------ writing
    def write_batch(self, batch_id: int, records: dict[str, list[dict]], kinds: Iterable[str] = tuple(RECORD_FILES)
                    ) -> None:
        """The batch's records of `kinds`: its output rows' (foreachBatch), or the statistics its
        progress report carries (streaming/app/collector.py), which come after them.

        Every kind's temp file is written before any is renamed: a write that fails (a full
        disk) leaves none of the batch's new parts behind, so a restart never counts part of a
        batch as in the sink (streaming/app/restart.py) and then the rest of it not at all."""
        written: list[tuple[str, Path, Path]] = []      # (kind, temp file, part)
        empty: list[tuple[str, Path]] = []
        try:
            for kind in kinds:
                rows = records.get(kind) or []
                path = self.root / RECORD_FILES[kind] / f"batch-{batch_id:012d}.jsonl"
                if not rows:
                    empty.append((kind, path))
                    continue
                tmp = path.with_name(path.name + ".tmp")
                written.append((kind, tmp, path))
                with open(tmp, "w", encoding="utf-8") as handle:
                    write_records(handle, rows)
        except BaseException:
            for _, tmp, _ in written:
                tmp.unlink(missing_ok=True)
            raise
        for kind, tmp, path in written:
            os.replace(tmp, path)
            st = path.stat()
            with self._lock:
                self._parts[kind][batch_id] = SinkFile(path, batch_id, batch_id, st.st_size, st.st_mtime, False)
        for kind, path in empty:
            path.unlink(missing_ok=True)   # a re-run that produced nothing leaves nothing behind
            with self._lock:
                self._parts[kind].pop(batch_id, None)

    def last_batch_id(self, kinds: Iterable[str] | None = None) -> int:
        """Highest batch id with a record (of `kinds`, default all) in the sink (-1 when none),
        from the index."""
        with self._lock:
            chosen = set(self._parts) if kinds is None else set(kinds)
            ids = [max(parts) for kind, parts in self._parts.items() if parts and kind in chosen]
            ids += [rolled[-1].last for kind, rolled in self._rolled.items() if rolled and kind in chosen]
        return max(ids, default=-1)

    # ------------------------------------------------------------------ reading
    def files(self, kind: str) -> list[SinkFile]:
        with self._lock:
            return _readable(list(self._rolled[kind]), list(self._parts[kind].values()))

    def records(self, kind: str, after: int = -1, through: int | None = None) -> Iterator[dict]:
        """The records of one kind in batch order, of the files after batch `after` (and through
        `through`). A rolled file is read whole: the counters' snapshot is never inside one
        (RunCollector.maintain_sink writes it before it rolls). A line that is not a JSON object
        is skipped with a warning naming it (counted in `unreadable_lines`)."""
        for f in self.files(kind):
            if f.last <= after or (through is not None and f.first > through):
                continue
            if f.first <= after:
                LOG.warning("events_dir: %s spans batch %d of the counters' snapshot; not read again", f.path, after)
                continue
            try:
                lines = list(read_lines(f.path))
            except FileNotFoundError:           # retention or a roll removed it since the listing
                continue
            for number, _, record in lines:
                if record is None:
                    self.unreadable_lines += 1
                    LOG.warning("events_dir: %s:%d is not a JSON object; skipped", f.path, number)
                    continue
                yield upgrade_record(kind, record)

    # ------------------------------------------------------------------ rolling and retention
    def roll_due(self, now: float | None = None) -> bool:
        """A kind's parts are old or big enough to roll (ROLL_SECONDS, ROLL_BYTES)."""
        now = self.clock() if now is None else now
        with self._lock:
            for parts in self._parts.values():
                if parts and (now - min(p.mtime for p in parts.values()) >= self.roll_seconds
                              or sum(p.size for p in parts.values()) >= self.roll_bytes):
                    return True
        return False

    def roll(self, through: dict[str, int]) -> int:
        """Roll each kind's parts of batches up to `through[kind]` (committed, counted in the
        snapshot) into rolled files of about ROLL_BYTES; returns the rolled files written."""
        written = 0
        for kind, last in through.items():
            with self._lock:
                parts = sorted((p for p in self._parts[kind].values() if p.first <= last), key=lambda p: p.first)
            chunk: list[SinkFile] = []
            for part in parts:
                chunk.append(part)
                if sum(p.size for p in chunk) >= self.roll_bytes:
                    written += self._roll_chunk(kind, chunk)
                    chunk = []
            if chunk:
                written += self._roll_chunk(kind, chunk)
        return written

    def _roll_chunk(self, kind: str, parts: list[SinkFile]) -> int:
        first, last = parts[0].first, parts[-1].last
        folder = self.root / RECORD_FILES[kind]
        good: list[str] = []
        bad: list[str] = []
        for part in parts:
            for number, text, record in read_lines(part.path):
                line = text if text.endswith("\n") else text + "\n"
                (good if record is not None else bad).append(line if record is not None
                                                            else f"{part.path.name}:{number}: {line}")
        if bad:
            LOG.warning("events_dir: %d lines of %s batch-%d..%d are not JSON objects; kept in %s", len(bad),
                        RECORD_FILES[kind], first, last, folder / f"unreadable-{first:012d}-{last:012d}.txt")
            _write_text(folder / f"unreadable-{first:012d}-{last:012d}.txt", bad)
        path = folder / f"rolled-{first:012d}-{last:012d}.jsonl"
        if kind in STATISTICS_KINDS:
            write_jsonl(str(path), statistics_totals(kind, (json.loads(t) for t in good)))
        else:
            _write_text(path, good)
        mtime = max(p.mtime for p in parts)
        os.utime(path, (mtime, mtime))
        rolled = SinkFile(path, first, last, path.stat().st_size, mtime, True)
        with self._lock:
            self._rolled[kind] = sorted(self._rolled[kind] + [rolled], key=lambda f: f.first)
            for part in parts:
                self._parts[kind].pop(part.first, None)
        for part in parts:              # the rolled file is in place: its parts are covered
            part.path.unlink(missing_ok=True)
        return 1

    def enforce_retention(self, now: float | None = None) -> list[Path]:
        """Delete rolled files older than the retention, then the oldest until the sink is within
        `max_bytes`; parts (not rolled yet) are never deleted. Returns the files deleted."""
        now = self.clock() if now is None else now
        with self._lock:
            rolled = sorted(((kind, f) for kind, files in self._rolled.items() for f in files),
                            key=lambda kf: (kf[1].mtime, kf[1].first))
            total = self._bytes_locked()
        doomed: list[tuple[str, SinkFile]] = []
        for kind, f in rolled:
            too_old = self.retention_days is not None and now - f.mtime > self.retention_days * 86400
            too_big = self.max_bytes is not None and total > self.max_bytes
            if not (too_old or too_big):
                break
            doomed.append((kind, f))
            total -= f.size
        for kind, f in doomed:
            f.path.unlink(missing_ok=True)
            (f.path.parent / f"unreadable-{f.first:012d}-{f.last:012d}.txt").unlink(missing_ok=True)
            with self._lock:
                self._rolled[kind] = [r for r in self._rolled[kind] if r.path != f.path]
        return [f.path for _, f in doomed]

    def _bytes_locked(self) -> int:
        return (sum(f.size for files in self._rolled.values() for f in files)
                + sum(p.size for parts in self._parts.values() for p in parts.values()))

    def usage(self) -> tuple[int, int]:
        """(bytes, files) of the records in the sink (rolled files and parts)."""
        with self._lock:
            files = sum(len(f) for f in self._rolled.values()) + sum(len(p) for p in self._parts.values())
            return self._bytes_locked(), files

    # ------------------------------------------------------------------ the counters' snapshot
    def save_counters(self, snapshot: dict[str, Any]) -> None:
        """Atomically: a reader sees the previous snapshot or this one."""
        path = self.root / COUNTERS_FILE
        replace_atomically(path, lambda handle: json.dump(snapshot, handle, separators=(",", ":"), sort_keys=True),
                           tmp=path.with_suffix(".tmp"))

    def load_counters(self) -> dict[str, Any] | None:
        """The snapshot, or None (none yet: a sink written before snapshots existed)."""
        path = self.root / COUNTERS_FILE
        try:
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle)
        except FileNotFoundError:
            return None
        except ValueError as exc:
            raise SinkError(f"{path}: not a counters snapshot of this monitor ({exc})") from None
        if not isinstance(doc, dict):
            raise SinkError(f"{path}: not a counters snapshot of this monitor (not a JSON object)")
        return doc


class SinkError(ValueError):
    """A file of the sink this release cannot use (its message names it)."""


def _write_text(path: Path, lines: list[str]) -> None:
    replace_atomically(path, lambda handle: handle.writelines(lines))
