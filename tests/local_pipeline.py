"""The same parse -> order -> state machine path as the Spark job, in plain Python.

Used to cross-check the streaming query: whatever Spark does with batches and watermarks, its
records must equal these.
"""
from __future__ import annotations

from streaming.logs.step import decode_offsets_rows, log_spec, parse_log_rows, unwrap_rows
from streaming.spark.sources.replay import LogMergeCursor, OffsetsRowReader, file_source_ids, offsets_input_kind
from streaming.spark.stateful import row_to_event
from state.local import run_events


def capture_rows(logs, offsets) -> list:
    """The parsed event rows (quarantine rows included) of log and offsets file inputs."""
    event_rows = []
    source_ids = file_source_ids([(i.cluster, i.path) for i in list(logs) + list(offsets)])
    if logs:
        files = [{"path": i.path, "source_id": sid, "tz": i.broker_timezone, "envelope": i.envelope}
                 for i, sid in zip(logs, source_ids)]
        cursor = LogMergeCursor(files)
        rows, _ = cursor.advance(cursor.initial(), 10**12)
        specs = {f["source_id"]: log_spec(i) for f, i in zip(files, logs)}
        event_rows += parse_log_rows(unwrap_rows(rows, specs), specs)
    if offsets:
        files = [{"path": i.path, "source_id": sid, "kind": offsets_input_kind(i.path)}
                 for i, sid in zip(offsets, source_ids[len(logs):])]
        reader = OffsetsRowReader(files)
        rows = reader.rows(0, len(reader))
        event_rows += decode_offsets_rows(rows, {f["source_id"]: i.cluster for f, i in zip(files, offsets)})
    return event_rows


def capture_events(logs, offsets) -> list:
    """The state machine's events of log and offsets file inputs (quarantined inputs left out)."""
    return [row_to_event(list(r)) for r in capture_rows(logs, offsets) if r[6] != "quarantine"]


def run_local(logs, offsets, settings=None) -> dict[str, list]:
    event_rows = capture_rows(logs, offsets)
    events = [row_to_event(list(r)) for r in event_rows if r[6] != "quarantine"]
    out = run_events(events) if settings is None else run_events(events, settings)
    out["quarantine"] = [r for r in event_rows if r[6] == "quarantine"]
    return out
