"""The replay without Spark: the same read -> parse/decode -> order -> state machine path as the
streaming query, in plain Python (state/local.py runs the machine).

Used to cross-check the streaming query: whatever Spark does with batches and watermarks, its
records must equal these.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from state import events as E
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.local import run_events
from state.outputs import OutputKind
from streaming.inputs import file_source_ids
from streaming.logs.broker_config import consumer_session_timeout_ms
from streaming.logs.merge import LogMergeCursor
from streaming.logs.step import LogSourceSpec, parse_log_rows, unwrap_rows
from streaming.offsets.reader import OffsetsRowReader, offsets_input_kind
from streaming.offsets.per_record import decode_offsets_rows
from streaming.rows import EVENT_KIND, row_to_event

QUARANTINE = str(OutputKind.QUARANTINE)


def capture_rows(logs: Sequence[Any], offsets: Sequence[Any]) -> list[tuple]:
    """The parsed event rows (quarantine rows included) of log and offsets file inputs
    (streaming.app.settings LogInput / OffsetsInput)."""
    event_rows: list[tuple] = []
    source_ids = file_source_ids([(i.cluster, i.path) for i in list(logs) + list(offsets)])
    if logs:
        files = [{"path": i.path, "source_id": sid, "tz": i.broker_timezone, "envelope": i.envelope}
                 for i, sid in zip(logs, source_ids)]
        cursor = LogMergeCursor(files)
        rows, _ = cursor.advance(cursor.initial(), 10**12)
        specs = {f["source_id"]: LogSourceSpec.of(i) for f, i in zip(files, logs)}
        event_rows += parse_log_rows(unwrap_rows(rows, specs), specs)
    if offsets:
        files = [{"path": i.path, "source_id": sid, "kind": offsets_input_kind(i.path)}
                 for i, sid in zip(offsets, source_ids[len(logs):])]
        reader = OffsetsRowReader(files)
        rows = reader.rows(0, len(reader))
        event_rows += decode_offsets_rows(rows, {f["source_id"]: i.cluster for f, i in zip(files, offsets)})
    return event_rows


def capture_events(logs: Sequence[Any], offsets: Sequence[Any]) -> list[E.Event]:
    """The state machine's events of log and offsets file inputs (quarantined inputs left out)."""
    return [row_to_event(list(r)) for r in capture_rows(logs, offsets) if r[EVENT_KIND] != QUARANTINE]


def run_local(logs: Sequence[Any], offsets: Sequence[Any],
              settings: DiagnosisSettings | None = None) -> dict[str, list[Any]]:
    """Records per output kind (and "quarantine": the quarantined input rows)."""
    if settings is None:     # the defaults, with what the brokers' start-up lines say (as replay does)
        found = consumer_session_timeout_ms([i.path for i in logs])
        settings = (DEFAULT_SETTINGS if found is None
                    else replace(DEFAULT_SETTINGS, consumer_session_timeout_ms=found[0]))
    event_rows = capture_rows(logs, offsets)
    events = [row_to_event(list(r)) for r in event_rows if r[EVENT_KIND] != QUARANTINE]
    out: dict[str, list[Any]] = dict(run_events(events, settings))
    out[QUARANTINE] = [r for r in event_rows if r[EVENT_KIND] == QUARANTINE]
    return out
