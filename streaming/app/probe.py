"""What an input file holds, from its first MiB, checked before a command reads it: a wrong
or empty input is one message naming the file, what was expected and what was found, not a
Spark start that reads nothing and exits 0.

Kinds: `empty`, `binary` (NUL bytes or mostly not UTF-8; gzip and segment files named as such),
`offsets_dump` (JSON lines with partition/offset/timestamp/key_b64/value_b64), `broker_log`
(a line that the log reader reads in one of its layouts, `streaming.logs.header.read_header`:
Kafka's default `[date] LEVEL message (logger)`, Strimzi's, Confluent's, container prefixes, ...;
or JSON documents of a log shipper with a message/log/msg field), `json` (other JSON
documents), `text` (anything else).

The check uses the reader's own layout detection, so a file the reader reads is never refused
(any log4j line counts, not only coordinator lines: a real server.log opens with hundreds of
start-up lines), and the sample is a MiB so that a file that opens with other output (a JVM
banner, a shell's) is still seen for what it is.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from streaming.logs.envelope import MESSAGE_FIELDS
from streaming.logs.header import read_header
from streaming.logs.layout import HEADER_RE
from streaming.offsets.segments import SEGMENT_FILE, is_segment_input

SAMPLE_BYTES = 1024 * 1024
SAMPLE_JSON_LINES = 200          # JSON documents parsed at most (a plain line is read until one fits)
EMPTY, BINARY, OFFSETS_DUMP, BROKER_LOG, JSON_DOCS, TEXT = "empty", "binary", "offsets_dump", "broker_log", "json", \
    "text"
LOG_EXAMPLE = "[2024-05-01 12:00:00,123] INFO message (logger)"
DUMP_FIELDS = "partition, offset, timestamp, key_b64, value_b64"


@dataclass(frozen=True)
class Probe:
    kind: str
    found: str        # what the file holds, for messages ("binary data (gzip)", "log4j lines", ...)


def _first_line(lines: list[str]) -> str:
    line = next((x for x in lines if x.strip()), "")
    return line if len(line) <= 80 else line[:77] + "..."


def _binary(path: str, sample: bytes) -> Probe | None:
    if sample[:2] == b"\x1f\x8b":
        return Probe(BINARY, "gzip-compressed data (decompress it first, e.g. with zcat)")
    if sample[:4] == b"\x28\xb5\x2f\xfd":
        return Probe(BINARY, "zstd-compressed data (decompress it first)")
    text = sample.decode("utf-8", errors="replace")
    if b"\x00" in sample or text.count("\ufffd") > len(text) // 10:
        if SEGMENT_FILE.match(os.path.basename(path)):
            return Probe(BINARY, "binary data (a __consumer_offsets segment file, by its name)")
        return Probe(BINARY, "binary data")
    return None


def _json_kind(doc: object) -> str:
    if isinstance(doc, dict) and "key_b64" in doc and "partition" in doc:
        return OFFSETS_DUMP
    if isinstance(doc, dict) and any(isinstance(doc.get(f), str) for f in MESSAGE_FIELDS):
        return BROKER_LOG
    return JSON_DOCS


def probe(path: str) -> Probe:
    """What `path` holds (a file; directories are offsets inputs, checked by the segment reader)."""
    with open(path, "rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
        whole = len(sample) < SAMPLE_BYTES
    if not sample.strip():
        return Probe(EMPTY, "an empty file" if not sample else "only blank lines")
    found = _binary(path, sample)
    if found:
        return found
    lines = sample.decode("utf-8", errors="replace").splitlines()
    if not whole and len(lines) > 1:
        lines = lines[:-1]          # the last line may be cut
    lines = [x for x in lines if x.strip()]
    kinds = set()
    json_docs = 0
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith("{"):
            if json_docs == SAMPLE_JSON_LINES:
                continue
            json_docs += 1
            try:
                kinds.add(_json_kind(json.loads(stripped)))
            except ValueError:
                kinds.add(TEXT)
        elif HEADER_RE.match(line) or read_header(line) is not None:
            kinds.add(BROKER_LOG)
            break
    if BROKER_LOG in kinds:
        return Probe(BROKER_LOG, "broker log lines")
    if OFFSETS_DUMP in kinds:
        return Probe(OFFSETS_DUMP, f"a __consumer_offsets dump (JSON lines with {DUMP_FIELDS})")
    if JSON_DOCS in kinds:
        return Probe(JSON_DOCS, f"JSON documents without a {'/'.join(MESSAGE_FIELDS)} field or {DUMP_FIELDS} "
                                f"(first line: {_first_line(lines)!r})")
    return Probe(TEXT, f"text without a log4j line of a known layout (first line: {_first_line(lines)!r})")


class InputError(Exception):
    """Nothing usable to read: one line per input at fault (the CLI exits 2)."""


def broker_log_problem(path: str, found: Probe) -> str | None:
    """None when `path` can be read as a broker log; else why not (what was expected, found)."""
    if found.kind == BROKER_LOG:
        return None
    hint = ""
    if found.kind == OFFSETS_DUMP or (found.kind == BINARY and "segment" in found.found):
        hint = "; give it to decode-offsets or replay --offsets"
    return f"{path}: not a broker log: expected log4j lines like {LOG_EXAMPLE!r} (or another layout of " \
           f"docs/broker-logs.md) or log-shipper JSON documents, found {found.found}{hint}"


def offsets_problem(path: str, found: Probe) -> str | None:
    """None when `path` can be read as a `__consumer_offsets` dump; else why not."""
    if found.kind == OFFSETS_DUMP:
        return None
    hint = "; give it to parse-logs or replay --broker-log" if found.kind == BROKER_LOG else ""
    return f"{path}: not a __consumer_offsets dump: expected JSON lines with {DUMP_FIELDS} (or a segment " \
           f"directory or .log file), found {found.found}{hint}"


def check_inputs(command: str, logs: Sequence[str] = (), offsets: Sequence[str] = ()
                 ) -> tuple[list[str], list[str]]:
    """The inputs worth reading, (logs, offsets), before any is read. An input of the wrong kind
    is an InputError listing every such file (nothing is read); an empty one is skipped with a
    note on stderr, and InputError says so when nothing is left."""
    problems, notes = [], []
    keep: tuple[list[str], list[str]] = ([], [])
    for paths, out, problem_of in ((logs, keep[0], broker_log_problem), (offsets, keep[1], offsets_problem)):
        for path in paths:
            if problem_of is offsets_problem and is_segment_input(path):   # the reader checks each batch
                out.append(path)
                continue
            try:
                found = probe(path)
            except OSError as exc:
                problems.append(f"{path}: cannot read it: {exc.strerror or exc}")
                continue
            if found.kind == EMPTY:
                notes.append(f"{path}: nothing to read: {found.found}")
                continue
            problem = problem_of(path, found)
            if problem:
                problems.append(problem)
            else:
                out.append(path)
    if problems:
        raise InputError("\n".join(problems))
    if not keep[0] and not keep[1]:
        raise InputError("\n".join(notes) if notes else "no input given")
    for note in notes:
        print(f"{command}: {note}; skipped", file=sys.stderr)
    return keep
