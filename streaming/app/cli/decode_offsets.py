"""`rebalance-monitor decode-offsets`: one JSON object per `__consumer_offsets` record (no Spark)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from streaming.app.probe import InputError, check_inputs
from streaming.offsets.decoder import decode_record
from streaming.offsets.dump import iter_jsonl_dump
from streaming.offsets.segments import SegmentRecord, SegmentStats, is_segment_input, iter_offsets_dir
from streaming.offsets.wire import DecodeError
from streaming.quarantine import Quarantined


def add_parser(sub: Any) -> None:
    p = sub.add_parser("decode-offsets", help="decode __consumer_offsets records (JSONL dump or segment "
                                              "directory), one JSON object per record")
    p.add_argument("path", nargs="+", metavar="PATH",
                   help="JSONL dump, __consumer_offsets-N dir, parent dir or .log file")
    p.set_defaults(func=run)


def _decoded_doc(partition: int, offset: int, timestamp: int, key: bytes | None, value: bytes | None
                 ) -> tuple[dict[str, Any], bool]:
    doc: dict[str, Any] = {"partition": partition, "offset": offset, "timestamp": timestamp}
    try:
        doc.update(decode_record(key, value))
        return doc, True
    except DecodeError as exc:
        doc["error"] = str(exc)
        return doc, False


def _decode_segments(path: str, out: Any) -> tuple[int, int]:
    decoded = failed = 0
    stats = SegmentStats()
    for item in iter_offsets_dir(path, stats):
        if isinstance(item, SegmentRecord):
            doc, ok = _decoded_doc(item.partition, item.offset, item.timestamp, item.key, item.value)
            decoded += ok
            failed += not ok
            out.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
        else:
            out.write(json.dumps({"file": path, "quarantined": item.to_dict()}) + "\n")
            failed += 1
    print(f"decode-offsets: {path}: {stats.batches} batches, {stats.records} records, "
          f"{stats.control_batches} control batches, {stats.aborted_records} aborted records, "
          f"{stats.duplicate_replica_records} records already read from another replica, "
          f"{stats.quarantined} quarantined", file=sys.stderr)
    return decoded, failed


def _decode_dump(path: str, out: Any) -> tuple[int, int]:
    decoded = failed = 0
    for line_no, dumped in iter_jsonl_dump(path):
        if isinstance(dumped, Quarantined):
            out.write(json.dumps({"file": path, "line": line_no, "quarantined": dumped.to_dict()}) + "\n")
            failed += 1
            continue
        doc, ok = _decoded_doc(dumped["partition"], dumped["offset"], dumped["timestamp"], dumped["key"],
                               dumped["value"])
        decoded += ok
        failed += not ok
        out.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
    return decoded, failed


def run(args: argparse.Namespace) -> int:
    """One JSON object per record, the same for a JSONL dump and for segment files: a segment
    directory prints partition by partition in offset order (transactional records at their
    COMMIT marker); a dump prints in its own line order. Exit 0 when every record decoded, 1 when
    some failed (each is printed with its error), 2 when nothing could be decoded."""
    missing = [p for p in args.path if not os.path.exists(p)]
    if missing:
        raise InputError("\n".join(f"{p}: no such file or directory" for p in missing))
    _, paths = check_inputs("decode-offsets", offsets=args.path)
    decoded = failed = 0
    for path in paths:
        ok, bad = (_decode_segments if is_segment_input(path) else _decode_dump)(path, sys.stdout)
        if len(paths) > 1:
            print(f"decode-offsets: {path}: {ok} decoded, {bad} failed", file=sys.stderr)
        decoded, failed = decoded + ok, failed + bad
    print(f"decode-offsets: {decoded} decoded, {failed} failed", file=sys.stderr)
    if failed and not decoded:
        raise InputError(f"no record could be decoded ({failed} failed; each is printed with its error)")
    return 1 if failed else 0
