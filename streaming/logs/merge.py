"""Reading the coordinator lines of broker log files: KeptLines reads one file or a slice of it in
chunks (the replay's read tasks, streaming/spark/sources/replay_files.py), LogMergeCursor merges
several files by header time (the Spark-free replay, streaming/app/local.py, that the tests
compare the query with)."""
from __future__ import annotations

import heapq
import json
import os
import re
from typing import NamedTuple

from streaming.logs.envelope import (
    EMBEDDED_HEADER_RE, ENVELOPE_AUTO, MESSAGE_FIELDS, first_line, generic_json_fields, is_json_row,
    json_layout_fields
)
from streaming.logs.header import PREFIXED_JSON_RE, read_header
from streaming.logs.layout import (
    BROKER_LINE_MARKERS, COORDINATOR_LOGGER_MARKERS, COORDINATOR_PREFIX_MARKERS, ENTRY_START, HEADER_RE,
    KEPT_LINE_MARKERS, MAX_WRAPPED_LINES, NOT_CONTINUING, is_continuation
)
from streaming.logs.timeutil import header_timestamp_ms, log4j_to_epoch_ms, to_epoch_ms_or_none, zone
from streaming.rows import END_OF_INPUT_TS_MS

# Every coordinator marker (COORDINATOR_LOGGER_MARKERS) contains this core: one bytes.find pass
# finds candidate lines, which are then checked against the markers themselves.
_MARKER_CORE = b"kafka.coordinator."
# Each marker as (bytes before the core, bytes after it), checked in place around a core hit.
_MARKER_PARTS = tuple((m.encode()[:m.encode().index(_MARKER_CORE)],
                       m.encode()[m.encode().index(_MARKER_CORE) + len(_MARKER_CORE):])
                      for m in COORDINATOR_LOGGER_MARKERS)
CHUNK_BYTES = 8 << 20
# Files whose loggers are not named in full (e.g. Strimzi's `%c{1}`): every line that contains one
# of COORDINATOR_MARKERS (short class names, message prefixes) or BROKER_LINE_MARKERS is kept. One
# regex pass per chunk.
_ANY_MARKER = re.compile(b"|".join(re.escape(m.encode()) for m in KEPT_LINE_MARKERS))
# The broker lines the monitor reads (streaming/logs/brokers.py) are rare: each marker is searched
# for once per chunk position it can next be at (KeptLines._broker_hit), beside the core search.
_BROKER_MARKERS = tuple(m.encode() for m in BROKER_LINE_MARKERS)
# The first lines of every file are emitted whatever they hold: the parse step reads their layout
# (which the monitor reports per source) even when the file has no coordinator line at all.
SAMPLE_LINES = 20
# The lines right after a kept line that start no entry of their own and are no stack trace are
# kept too, up to this many: the rest of a message that continues over lines (a wrapped paste:
# streaming/logs/wrapped.py joins it back; the lines before a coordinator name that begin its
# entry are kept as well, _lead).
FOLLOW_LINES = MAX_WRAPPED_LINES - 1
_ENTRY_START = re.compile(ENTRY_START.encode())
_NOT_A_FOLLOWER = re.compile(NOT_CONTINUING.encode())
# How many lines from the top of a file decide whether it names loggers in full (file_shape).
SNIFF_LINES = 200
_SNIFF_BYTES = 256 << 10


_PREFIX_CORE = b"[Group"
_PREFIXES = tuple(m.encode() for m in COORDINATOR_PREFIX_MARKERS)


def _prefix_hit(buf: bytes, at: int, stop: int) -> int:
    """Index of the first coordinator prefix (`[GroupCoordinator 1]: `, ...) in buf[at:stop], or -1."""
    while True:
        hit = buf.find(_PREFIX_CORE, at, stop)
        if hit < 0 or any(buf.startswith(p, hit) for p in _PREFIXES):
            return hit
        at = hit + 1


def _doc(text: str) -> dict | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _message_line(doc: dict) -> str | None:
    message = next((doc[f] for f in MESSAGE_FIELDS if isinstance(doc.get(f), str)), None)
    return None if message is None else first_line(message)


def _plain_ts(line: str, tz) -> int | None:
    ts = header_timestamp_ms(line, tz)
    if ts is not None or line[:1] in ("\t", " ", ""):
        return ts
    prefixed = PREFIXED_JSON_RE.match(line)
    if prefixed is not None:
        doc = _doc(prefixed.group(1))
        if doc is not None:
            return _json_ts(doc, tz, nested=True)
    header = read_header(line)
    return None if header is None else to_epoch_ms_or_none(header.ts, tz)


def _json_ts(doc: dict, tz, nested: bool) -> int | None:
    fields = json_layout_fields(doc)
    if fields is not None:
        return to_epoch_ms_or_none(fields.ts, tz)
    message = _message_line(doc)
    if message is None:
        return None
    if nested and message[:1] == "{":
        inner = _doc(message)
        ts = None if inner is None else _json_ts(inner, tz, nested=False)
    else:
        ts = _plain_ts(message, tz)
    if ts is None and not is_continuation(message):
        # an entry's message without a time of its own: a generic JSON document's (envelope.py)
        generic = generic_json_fields(doc)
        ts = None if generic is None else to_epoch_ms_or_none(generic.ts, tz)
    return ts


def line_ts(line: str, tz, json_row: bool) -> int | None:
    """The time of a line in any layout: its header time, the time of the log4j line inside a
    JSON envelope row, or a JSON layout's time field (also behind transport prefixes or inside a
    shipper's message); None for a line without one."""
    if not json_row:
        return _plain_ts(line, tz)
    m = EMBEDDED_HEADER_RE.search(line)
    if m is not None:
        try:
            return log4j_to_epoch_ms(m.group(1), tz)
        except ValueError:
            return None
    doc = _doc(line)
    return None if doc is None else _json_ts(doc, tz, nested=True)


def _logger_of(line: str, json_row: bool) -> str | None:
    if not json_row:
        m = HEADER_RE.match(line)
        if m is not None:
            return m.group(4)
        prefixed = PREFIXED_JSON_RE.match(line)
        if prefixed is None:
            header = read_header(line, generic=False)
            return None if header is None else header.logger
        line = prefixed.group(1)
    doc = _doc(line)
    if doc is None:
        return None
    fields = json_layout_fields(doc)
    if fields is not None:
        return fields.logger
    message = _message_line(doc)
    if message is None:
        return None
    logger = _logger_of(message, message[:1] == "{")
    if logger is None:
        generic = generic_json_fields(doc)
        logger = None if generic is None else generic.logger
    return logger


class FileShape(NamedTuple):
    """What the top of a log file says about how to find its coordinator lines (file_shape)."""
    full_names: bool    # loggers named in full: one fast search for the full coordinator names
    wrapped: bool       # entries continue over lines that are no stack trace: a wrapped paste


def file_shape(path: str, envelope: str) -> FileShape:
    """Do the first SNIFF_LINES lines of the file with a readable layout all name their logger in
    full? Then only lines with a full coordinator logger name (COORDINATOR_LOGGER_MARKERS) can be
    coordinator lines, which one fast search finds; otherwise (short names, or no layout read)
    the reader keeps every line with any coordinator marker. Does the top of the file (its first
    256 KiB: all of a paste) hold an entry continued over lines that are no stack trace or dump?
    Then a wrap may have cut a logger name in two, and the reader also looks for the coordinators'
    message prefixes (_prefix_hit), a second pass over every byte. Decided per file, from its top."""
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    lines = head.split(b"\n")
    if len(head) == _SNIFF_BYTES:
        lines.pop()                           # cut by the read
    full_names = seen = False
    for raw in lines[:SNIFF_LINES]:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        logger = _logger_of(line, is_json_row(line, envelope))
        if logger is None:
            continue
        if "." not in logger:
            break
        seen = True
    else:
        full_names = seen
    return FileShape(full_names, _continued_entry(lines))


# A whole logger name alone on a line: the end of a message that ended with a newline (Kafka's
# ` (kafka.zk.KafkaZkClient)` after a znode's stat), or a wrap before an intact name, which the
# search for the full names finds anyway.
_LOGGER_ALONE = re.compile(rb"\s*\([\w$.]+\)\s*$")


def _continued_entry(lines: list[bytes]) -> bool:
    """Does a line that starts an entry go on over a line that is no stack trace, blank or indented
    dump line, or logger name alone (_LOGGER_ALONE)?"""
    continues = False             # may the line before continue (start) an entry
    for raw in lines:
        follows = _NOT_A_FOLLOWER.match(raw) is None
        if follows and continues and _LOGGER_ALONE.match(raw) is None:
            return True
        continues = follows or _ENTRY_START.match(raw) is not None
    return False


class KeptLines:
    """The lines of one file that may be group-coordinator lines, read in large chunks.

    Only lines containing a coordinator marker are decoded (or every line with keep_all); the
    rest are counted with bytes.count and skipped. Each kept line gets its header time, or, for
    a line without a header, the time of the nearest header line before it in the file (1 before
    the first header), exactly as if every line had been read.
    """

    def __init__(self, path: str, pos: int, line_no: int, carry_ts: int | None, tz, envelope: str,
                 keep_all: bool = False, full_names: bool = True, end: int | None = None, follow: int = 0,
                 wrapped: bool = True):
        self.handle = open(path, "rb")
        self.handle.seek(pos)
        self.limit = end            # read up to this file offset (a line start), or to the end
        self.tz, self.envelope, self.keep_all, self.full_names = tz, envelope, keep_all, full_names
        self.wrapped = wrapped      # look for coordinator prefixes too (FileShape.wrapped)
        self.buf = b""
        self.end = 0                # buf[:end] is the current chunk (whole lines); the rest is reread
        self.buf_pos = pos          # file offset of buf[0]
        self.cursor = 0             # index in buf of the first line not yet counted
        self.line_no = line_no      # lines counted up to buf_pos + cursor
        self.carry_ts = carry_ts    # header time in force at buf[0]
        self.mark = (0, carry_ts)   # (index, time of the nearest header line starting before index)
        self.eof = False
        self.follow = follow        # lines after the last kept one that may still continue it
        self.floor = 0              # index in buf after the last line emitted (a lead goes no further back)
        self.followed = False       # the line _next_hit found is such a line
        # Per broker marker, and for the coordinator markers: the index in buf of the next
        # occurrence at or after the last search (end of chunk: none before it), -1 before the
        # first search of a buffer (_next_hit, _broker_hit).
        self.broker_next = [-1] * len(_BROKER_MARKERS)
        self.coordinator_next = -1

    def close(self) -> None:
        self.handle.close()

    def _refill(self) -> bool:
        """Next chunk, cut after its last newline. The current buffer must be fully counted. The
        last lines after the last one emitted (at most FOLLOW_LINES) stay in front of the new
        chunk, counted already, so that a lead (_lead) finds the same lines whatever the chunks."""
        if self.end:
            self.carry_ts = self._header_ts_before(self.end)
        carried = b""
        if self.end and not self.keep_all:
            keep_from = self.end
            for _ in range(FOLLOW_LINES):
                if keep_from <= self.floor:
                    break
                keep_from = self.buf.rfind(b"\n", 0, keep_from - 1) + 1
            keep_from = max(keep_from, self.floor)
            carried = self.buf[keep_from:self.end]
        self.buf_pos += self.end - len(carried)
        self.buf, self.cursor, self.end, self.floor = carried, len(carried), len(carried), 0
        self.broker_next, self.coordinator_next = [-1] * len(_BROKER_MARKERS), -1
        self.mark = (len(carried), self.carry_ts)
        if self.eof:
            return False
        data_pos = self.buf_pos
        # The carried lines are read again with the chunk (from the page cache): cheaper than
        # copying the chunk behind them.
        self.handle.seek(data_pos)
        fresh = len(carried)                  # data[fresh:] is new
        data = self.handle.read(self._allowed(fresh + CHUNK_BYTES))
        if len(data) <= fresh:
            self.eof = True
            return False
        cut = data.rfind(b"\n", fresh)
        while cut < 0:                        # a line longer than a chunk: keep reading
            more = self.handle.read(self._allowed(CHUNK_BYTES))
            if not more:                      # last line without a newline
                data += b"\n"
                self.eof = True
                cut = len(data) - 1
                break
            data += more
            cut = data.rfind(b"\n", fresh)
        if not self.eof:
            self.handle.seek(data_pos + cut + 1)
        # Searches are bounded by `end`: the bytes after the cut are read again with the next chunk.
        self.buf = data
        self.end = cut + 1
        return True

    def _allowed(self, size: int) -> int:
        return size if self.limit is None else max(0, min(size, self.limit - self.handle.tell()))

    def _header_ts_before(self, index: int) -> int | None:
        """Time of the nearest header line that starts before `index` (a line start) in buf.

        Scans backwards line by line down to the last position already answered (`mark`), so the
        scans of one buffer cost O(buffer) in total.
        """
        mark_index, mark_ts = self.mark
        end = index
        result = mark_ts
        while end > mark_index:
            start = self.buf.rfind(b"\n", 0, end - 1) + 1
            if start < mark_index:
                break
            line = self.buf[start:end].decode("utf-8", errors="replace").rstrip("\r\n")
            ts = line_ts(line, self.tz, is_json_row(line, self.envelope))
            if ts is not None:
                result = ts
                break
            end = start
        self.mark = (index, result)
        return result

    def _next_hit(self) -> int:
        """Index of a byte inside the next line (from cursor) to keep, or -1 if none in buf."""
        if self.keep_all or self.line_no < SAMPLE_LINES:
            return self.cursor if self.cursor < self.end else -1
        buf, at, end_of_chunk = self.buf, self.cursor, self.end
        if self.follow and at < end_of_chunk:
            if _NOT_A_FOLLOWER.match(buf, at) is None:
                self.follow -= 1
                self.followed = True
                return at
            self.follow = 0
        self.followed = False
        if not self.full_names:
            m = _ANY_MARKER.search(buf, at, end_of_chunk)
            return -1 if m is None else self._lead(m.start())
        start = at
        hit = self.coordinator_next
        if hit < at:
            # searched once per position: a broker line kept before it does not search it again
            while True:
                hit = buf.find(_MARKER_CORE, at, end_of_chunk)
                if hit < 0:
                    break
                if self._is_marker(hit):
                    break
                at = hit + 1          # e.g. kafka.coordinator.transaction.*: not a group coordinator
            self.coordinator_next = hit if hit >= 0 else end_of_chunk
        if hit >= end_of_chunk:
            hit = -1
        broker = self._broker_hit(start, hit if hit >= 0 else end_of_chunk)
        if broker >= 0:
            hit = broker
        # A coordinator prefix before it: a line whose logger name a wrap cut in two (wrapped.py).
        if self.wrapped:
            prefix = _prefix_hit(buf, start, hit if hit >= 0 else end_of_chunk)
            if prefix >= 0:
                return self._lead(prefix)
        return -1 if hit < 0 else self._lead(hit)

    def _broker_hit(self, at: int, stop: int) -> int:
        """Index of the first broker-line marker in buf[at:stop], or -1."""
        best = -1
        nexts, buf, end_of_chunk = self.broker_next, self.buf, self.end
        for i, marker in enumerate(_BROKER_MARKERS):
            pos = nexts[i]
            if pos < at:
                found = buf.find(marker, at, end_of_chunk)
                pos = nexts[i] = found if found >= 0 else end_of_chunk
            if pos < stop and (best < 0 or pos < best):
                best = pos
        return best

    def _is_marker(self, hit: int) -> bool:
        """Is the core found at `hit` part of a group-coordinator logger name?"""
        buf, after_core = self.buf, hit + len(_MARKER_CORE)
        for before, after in _MARKER_PARTS:
            if buf.startswith(after, after_core) and (
                    not before or (hit >= len(before) and buf.startswith(before, hit - len(before)))):
                return True
        return False

    def _lead(self, hit: int) -> int:
        """`hit`, or the first line of its entry when the line of `hit` starts none (a wrapped
        message whose coordinator name comes in a later line): at most FOLLOW_LINES lines back,
        through lines that may continue an entry (the lines up to `hit` are then kept as
        followers). Lines before the cursor may be taken (skipped, counted), not lines before
        `floor` (emitted)."""
        buf, floor = self.buf, self.floor
        at = buf.rfind(b"\n", 0, hit) + 1
        if _NOT_A_FOLLOWER.match(buf, at):      # starts an entry, or a stack trace
            return hit
        for _ in range(FOLLOW_LINES):
            if at <= floor:
                return hit
            at = buf.rfind(b"\n", 0, at - 1) + 1
            if at < floor:
                return hit
            if _ENTRY_START.match(buf, at):
                return at
            if _NOT_A_FOLLOWER.match(buf, at):
                return hit
        return hit

    def next(self) -> tuple[int, int, str, int, int] | None:
        """(ts_ms, line number, line, file offset after the line, lines after it that may still
        continue it: `follow` of a reader resuming there) of the next kept line, or None."""
        while True:
            hit = self._next_hit()
            if hit >= 0:
                break
            self.line_no += self.buf.count(b"\n", self.cursor, self.end)
            self.cursor = self.end
            if not self._refill():
                return None
        buf = self.buf
        start = buf.rfind(b"\n", 0, hit) + 1
        end = buf.find(b"\n", hit)
        if not self.followed:
            self.follow = FOLLOW_LINES
        if start < self.cursor:     # a lead into lines counted already (_lead)
            self.line_no -= buf.count(b"\n", start, self.cursor)
        else:
            self.line_no += buf.count(b"\n", self.cursor, start)
        self.line_no += 1
        self.cursor = self.floor = end + 1
        line = buf[start:end].decode("utf-8", errors="replace").rstrip("\r\n")
        ts = line_ts(line, self.tz, is_json_row(line, self.envelope))
        if ts is None:
            ts = self._header_ts_before(start)
            if ts is None:
                # Lines before the first header get 1 ms, not 0: the first batch's watermark
                # is 0 and Spark drops rows at or below it.
                ts = 1
        else:
            self.mark = (self.cursor, ts)
        return ts, self.line_no, line, self.buf_pos + self.cursor, self.follow

    def count_rest(self) -> int:
        """Count the lines left in the file (consumes it); returns the final line number."""
        while True:
            self.line_no += self.buf.count(b"\n", self.cursor, self.end)
            self.cursor = self.end
            if not self._refill():
                return self.line_no


class LogMergeCursor:
    """Merges several log files by header time, emitting only lines that may be coordinator lines
    (and the first SAMPLE_LINES lines of each file, for the layout report).

    Each batch is the next `max_rows` kept lines in event-time order across all files (a k-way
    merge). A line without a header (stack trace, multi-line config dump) keeps the time of the
    header line before it in the same file, so it stays right behind its entry. Lines without a
    coordinator marker are counted (offset field `lines`, which the driver reports as input rows)
    but never decoded or emitted: the JVM filter would drop them anyway.
    """

    def __init__(self, files: list[dict], keep_all: bool = False):
        self.files = files
        self.zones = [zone(f.get("tz") or "UTC") for f in files]
        self.envelopes = [f.get("envelope") or ENVELOPE_AUTO for f in files]
        self.keep_all = keep_all
        self.shapes = [file_shape(f["path"], e) for f, e in zip(files, self.envelopes)]

    def initial(self) -> dict:
        n = len(self.files)
        return {"source": "broker_log", "pos": [0] * n, "seq": [0] * n, "last_ts": [None] * n, "follow": [0] * n,
                "lines": 0, "emitted": 0, "eof": False}

    def advance(self, start: dict, max_rows: int) -> tuple[list, dict]:
        pos, seq, last_ts = list(start["pos"]), list(start["seq"]), list(start["last_ts"])
        follow = list(start.get("follow") or [0] * len(pos))
        lines = int(start.get("lines", 0))
        rows: list = []
        if start["eof"]:
            return rows, start
        scanners = [KeptLines(f["path"], pos[i], seq[i], last_ts[i], self.zones[i], self.envelopes[i], self.keep_all,
                              self.shapes[i].full_names, follow=follow[i], wrapped=self.shapes[i].wrapped)
                    for i, f in enumerate(self.files)]
        try:
            heap: list = []
            for i, scanner in enumerate(scanners):
                item = scanner.next()
                if item is not None:
                    heap.append((item[0], i, item))
            heapq.heapify(heap)
            while heap and len(rows) < max_rows:
                ts, i, (_, line_no, line, after, follow[i]) = heapq.heappop(heap)
                lines += line_no - seq[i]
                pos[i], seq[i], last_ts[i] = after, line_no, ts
                rows.append((self.files[i]["source_id"], line_no, line, ts, False))
                item = scanners[i].next()
                if item is not None:
                    heapq.heappush(heap, (item[0], i, item))
            eof = False
            if not heap and len(rows) < max_rows:
                for i, scanner in enumerate(scanners):   # the lines after the last kept line
                    total = scanner.count_rest()
                    lines += total - seq[i]
                    seq[i] = total
                    pos[i] = os.path.getsize(self.files[i]["path"])
                rows.append(("end-of-input", 0, None, END_OF_INPUT_TS_MS, True))
                eof = True
        finally:
            for scanner in scanners:
                scanner.close()
        return rows, {"source": "broker_log", "pos": pos, "seq": seq, "last_ts": last_ts, "follow": follow,
                      "lines": lines, "emitted": start["emitted"] + len(rows), "eof": eof}
