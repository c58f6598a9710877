"""The broker-log replay reader (streaming/logs/merge.py LogMergeCursor).

It reads files in large chunks and decodes only lines that contain a coordinator marker (and the
first SAMPLE_LINES lines of each file, for the layout report). These tests compare it with a
reference that reads every line one by one (iter_log_file), gives each line its header time or
the time of the header line before it, merges the files by time and then keeps the sample and
marker lines: the rows, their line numbers and times, and the count of lines read must be the
same, whatever the chunk size and however the input is cut into batches.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streaming.logs import merge
from streaming.logs.envelope import EMBEDDED_HEADER_RE, is_json_row
from streaming.logs.files import iter_log_file
from streaming.logs.layout import (
    BROKER_LINE_MARKERS, COORDINATOR_LOGGER_MARKERS, COORDINATOR_MARKERS, COORDINATOR_PREFIX_MARKERS
)
from streaming.logs.layout import ENTRY_START, NOT_CONTINUING
from streaming.logs.timeutil import UTC, header_timestamp_ms, log4j_to_epoch_ms
from streaming.rows import END_OF_INPUT_TS_MS
from tests.support.capture_expectations import FIXTURES
from tests.support.log_rewrite import pasted, read_lines, write

CAPTURE_LOGS = sorted(str(p) for c in ("kafka-2.7", "kafka-4.0") for p in FIXTURES.glob(f"{c}/*.log"))
GC = "kafka.coordinator.group.GroupCoordinator"


def _ts(line: str, envelope: str):
    if is_json_row(line, envelope):
        m = EMBEDDED_HEADER_RE.search(line)
        if m:
            return log4j_to_epoch_ms(m.group(1), UTC)
    elif header_timestamp_ms(line, UTC) is not None:
        return header_timestamp_ms(line, UTC)
    return merge.line_ts(line, UTC, is_json_row(line, envelope))   # other layouts


def _marked(line: str, shape: merge.FileShape) -> bool:
    if not shape.full_names:
        markers = COORDINATOR_MARKERS
    else:
        markers = COORDINATOR_LOGGER_MARKERS + (COORDINATOR_PREFIX_MARKERS if shape.wrapped else ())
    # and the broker lines read for broker deaths (streaming/logs/brokers.py), in every shape
    return any(m in line for m in markers + BROKER_LINE_MARKERS)


ENTRY = re.compile(ENTRY_START)
NOT_CONTINUING_RE = re.compile(NOT_CONTINUING)


def _kept_lines(lines: list[str], shape: merge.FileShape) -> list[bool]:
    """Which lines the reader keeps, line by line: the sample, the marked lines, the lines after a
    kept one that may continue it (at most FOLLOW_LINES), and for a marked line that starts no entry,
    the lines back to its entry's first line (not before the last kept line)."""
    kept = [False] * len(lines)
    follow, floor, i = 0, 0, 0
    while i < len(lines):
        line = lines[i]
        if i < merge.SAMPLE_LINES:
            kept[i], follow, floor, i = True, merge.FOLLOW_LINES, i + 1, i + 1
            continue
        if follow and not NOT_CONTINUING_RE.match(line):
            kept[i], follow, floor, i = True, follow - 1, i + 1, i + 1
            continue
        follow = 0
        if not _marked(line, shape):
            i += 1
            continue
        head = i
        if not NOT_CONTINUING_RE.match(line):
            for k in range(i - 1, max(floor, i - merge.FOLLOW_LINES) - 1, -1):
                if ENTRY.match(lines[k]):
                    head = k
                    break
                if NOT_CONTINUING_RE.match(lines[k]):
                    break
        kept[head], follow, floor, i = True, merge.FOLLOW_LINES, head + 1, head + 1
    return kept


def reference(files: list[dict], keep_all: bool = False) -> tuple[list, int]:
    """Every line read one by one, merged by time (one head per file), then filtered."""
    per_file = []
    total = 0
    for f in files:
        rows, last = [], None
        shape = merge.file_shape(f["path"], f.get("envelope", "auto"))
        lines = list(iter_log_file(f["path"]))
        for (seq, line), kept in zip(lines, _kept_lines([line for _, line in lines], shape)):
            ts = _ts(line, f.get("envelope", "auto"))
            ts = ts if ts is not None else (last if last is not None else 1)
            last = ts
            rows.append((ts, seq, line, kept))
        per_file.append(rows)
        total += len(rows)
    heads = [0] * len(files)
    merged = []
    while True:
        best = None
        for i, rows in enumerate(per_file):
            if heads[i] < len(rows) and (best is None or rows[heads[i]][0] < per_file[best][heads[best]][0]):
                best = i
        if best is None:
            break
        ts, seq, line, kept = per_file[best][heads[best]]
        heads[best] += 1
        if keep_all or kept:
            merged.append((files[best]["source_id"], seq, line, ts, False))
    return merged + [("end-of-input", 0, None, END_OF_INPUT_TS_MS, True)], total


def read_all(files: list[dict], batch: int, keep_all: bool = False) -> tuple[list, dict]:
    cursor = merge.LogMergeCursor(files, keep_all=keep_all)
    offset, rows = cursor.initial(), []
    while not offset["eof"]:
        got, offset = cursor.advance(offset, batch)
        assert len(got) <= batch
        rows += got
    return rows, offset


def _files(paths, envelope="auto"):
    return [{"path": p, "source_id": f"c:{Path(p).name}", "tz": "UTC", "envelope": envelope} for p in paths]


@pytest.fixture
def awkward_logs(tmp_path: Path) -> list[str]:
    """Two small logs with everything that makes line reading hard."""
    a = tmp_path / "a.log"
    a.write_bytes(
        b"headerless preamble mentioning kafka.coordinator.group.GroupCoordinator\n"
        b"[2024-03-01 10:00:00,000] INFO [GroupCoordinator 1]: Starting up. (" + GC.encode() + b")\n"
        b"[2024-03-01 10:00:01,000] ERROR [GroupCoordinator 1]: boom (" + GC.encode() + b")\r\n"
        b"java.lang.IllegalStateException: x\n"
        b"\tat kafka.coordinator.group.GroupCoordinator.handleJoinGroup(GroupCoordinator.scala:1)\n"
        b"[2024-03-01 10:00:01,500] INFO unrelated \xff\xfe bad utf-8 (kafka.server.KafkaServer)\n"
        b"[2024-03-01 10:00:02,000] INFO transaction (kafka.coordinator.transaction.TransactionCoordinator)\n"
        + b"x" * 300 + b" kafka.coordinator.group. long headerless line\n"
        b"[2024-03-01 10:00:05,000] INFO [GroupCoordinator 1]: Shutting down. (" + GC.encode() + b")")
    b = tmp_path / "b.json"
    doc = {"message": f"[2024-03-01 10:00:01,200] INFO [GroupCoordinator 2]: Startup complete. ({GC})\nmore",
           "host": {"name": "broker-2"}}
    b.write_text("\n".join([
        json.dumps({"message": "[2024-03-01 10:00:00,500] INFO unrelated (kafka.server.KafkaServer)"}),
        json.dumps(doc),
        json.dumps({"log": "\tat kafka.coordinator.group.GroupMetadataManager.x(GroupMetadataManager.scala:9)\n"}),
        "{not json but names org.apache.kafka.coordinator.group.GroupMetadataManager",
        json.dumps({"log": f"[2024-03-01 10:00:03,000] INFO [GroupCoordinator 2]: Shutting down. ({GC})\n"}),
    ]) + "\n")
    return [str(a), str(b)]


@pytest.mark.parametrize("chunk", [16, 64, 4096, merge.CHUNK_BYTES])
def test_same_rows_as_reading_every_line(monkeypatch, awkward_logs, chunk):
    monkeypatch.setattr(merge, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(merge, "SAMPLE_LINES", 0)
    files = _files(awkward_logs)
    expected, total = reference(files)
    for batch in (1, 2, 3, 1000):
        rows, end = read_all(files, batch)
        assert rows == expected, (chunk, batch)
        assert end["lines"] == total == 14
    # the marker-free lines are never emitted unless a marked line continues their entry (line 8,
    # headerless, may continue line 7); the continuation lines with a marker are, with the time of
    # their entry; the line before the first header gets 1 ms
    seqs = {(r[0], r[1]): r[3] for r in expected if not r[4]}
    assert ("c:a.log", 6) not in seqs and seqs[("c:a.log", 7)] == seqs[("c:a.log", 8)]
    assert seqs[("c:a.log", 1)] == 1
    assert seqs[("c:a.log", 5)] == seqs[("c:a.log", 3)]
    assert seqs[("c:b.json", 3)] == seqs[("c:b.json", 2)]


@pytest.mark.parametrize("chunk", [16, 4096])
def test_first_lines_are_emitted_as_layout_sample(monkeypatch, awkward_logs, chunk):
    monkeypatch.setattr(merge, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(merge, "SAMPLE_LINES", 6)
    files = _files(awkward_logs)
    expected, total = reference(files)
    for batch in (1, 3, 1000):
        rows, end = read_all(files, batch)
        assert rows == expected, (chunk, batch)
    kept = {(r[0], r[1]) for r in expected if not r[4]}
    assert ("c:a.log", 6) in kept and ("c:a.log", 7) in kept and ("c:a.log", 9) in kept   # sampled / lead of 8


@pytest.mark.parametrize("chunk", [16, 64, 4096, merge.CHUNK_BYTES])
def test_wrapped_entries_are_kept_whole_whatever_the_chunks(monkeypatch, tmp_path, chunk):
    """Pasted logs (log_rewrite.pasted: coordinator lines wrapped, hard and soft): the reader keeps
    every line of a wrapped coordinator entry, the lines before its coordinator name included, the
    same way for every chunk size and batch."""
    monkeypatch.setattr(merge, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(merge, "SAMPLE_LINES", 0)
    sources = [p for v in ("kafka-2.8.2", "kafka-4.4.0") for p in sorted((FIXTURES / "layouts" / v).glob("broker*-default.log"))]
    paths = [write(tmp_path / f"{p.parent.name}-{p.name}", pasted(read_lines(p))) for p in sources]
    files = _files(paths)
    # a paste with wrapped entries (the one 4.4.0 log without coordinator lines has none): the
    # reader also looks for message prefixes there (merge.FileShape)
    assert [merge.file_shape(p, "auto") for p in paths] == [
        (True, pasted(read_lines(p)) != read_lines(p)) for p in sources] != [(True, False)] * len(paths)
    expected, _ = reference(files)
    for batch in (1, 7, 1000):
        rows, _ = read_all(files, batch)
        assert rows == expected, (chunk, batch)
    kept = {(r[0], r[1]): r[2] for r in expected if not r[4]}
    # a wrap of "Preparing to rebalance" whose logger name falls in the last piece: every piece kept
    pieces = [(k, line) for k, line in kept.items() if "Preparing to rebalance" in line]
    assert pieces
    for (source, seq), _ in pieces:
        following = [kept.get((source, seq + n)) for n in (1, 2)]
        assert following[0] is not None, (source, seq)


def test_keep_all_reads_every_line(monkeypatch, awkward_logs):
    monkeypatch.setattr(merge, "CHUNK_BYTES", 64)
    files = _files(awkward_logs)
    expected, total = reference(files, keep_all=True)
    rows, end = read_all(files, 5, keep_all=True)
    assert rows == expected and len(rows) == total + 1


def test_captures_in_small_batches_equal_one_pass():
    files = _files(CAPTURE_LOGS)
    expected, total = reference(files)
    rows, end = read_all(files, 97)
    assert rows == expected
    assert end["lines"] == total == 6679
    # the capture logs name their loggers in full: their coordinator lines plus 20 sample lines each,
    # and their broker lines read for broker deaths. The config dumps at their top continue over
    # lines, but dump lines are no wrap.
    assert all(merge.file_shape(f["path"], "auto") == (True, False) for f in files)
    broker_lines = sum(1 for f in files for seq, line in iter_log_file(f["path"])
                       if seq > merge.SAMPLE_LINES and any(m in line for m in BROKER_LINE_MARKERS)
                       and not any(m in line for m in COORDINATOR_LOGGER_MARKERS))
    assert broker_lines > 0
    assert len(rows) - 1 == sum(1 for r in expected if not r[4]) == 1319 + broker_lines + sum(
        1 for f in files for seq, line in iter_log_file(f["path"])
        if seq <= merge.SAMPLE_LINES and not any(m in line for m in COORDINATOR_LOGGER_MARKERS))


@pytest.mark.parametrize("slice_bytes", [1 << 30, 50_000, 97])
@pytest.mark.parametrize("logs", ["awkward", "captures"])
def test_the_replays_read_tasks_keep_each_files_lines_and_count_them(awkward_logs, logs, slice_bytes):
    """The replay's read stage reads a file in one task, or a large file in slices cut at line
    starts (sources/replay_files.py): the rows of a file's tasks, in order, are the reference's rows
    of that file (times of lines without a header included), and their count rows add up to the
    file's lines."""
    from streaming.spark.sources.replay_files import plan_log_reads, read_log_file
    files = _files(awkward_logs if logs == "awkward" else CAPTURE_LOGS)
    expected, total = reference(files)
    reads = plan_log_reads(files, slice_bytes)
    if slice_bytes == 97 or (slice_bytes == 50_000 and logs == "captures"):
        assert len(reads) > 3 * len(files)     # really cut
    counted = 0
    for f in files:
        kept: list = []
        for r in (r for r in reads if r.source_id == f["source_id"]):
            *rows, last = read_log_file(r)
            kept += rows
            assert last[0] == r.source_id and last[4] is True and last[3] == END_OF_INPUT_TS_MS
            counted += last[1]
        assert kept == [row for row in expected if row[0] == f["source_id"]]
    assert counted == total
