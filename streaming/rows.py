"""The row contracts of the pipeline, in one place: raw inputs, events, outputs.

Every stage hands rows to the next in the column order declared here, and nowhere else:
the pure-Python readers and parse/decode steps (streaming/logs, streaming/offsets) build tuples
and Arrow batches with these builders, and the Spark glue derives its schemas from these
declarations (streaming/spark/schema.py). The meaning of each event column: docs/event-model.md.
No pyspark here.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic_core import from_json as _from_json

from state import events as E
from state.outputs import OutputKind
from streaming.quarantine import Quarantined

# Replay end-of-input marker time (state.events): moves each source's watermark past every real
# event so held events are flushed.
END_OF_INPUT_TS_MS = E.END_OF_INPUT_TS_MS
# The watermark after it is 2099-12-31 minus the lateness (Spark's progress reports print it).
END_OF_INPUT_WATERMARK_YEAR = "2099"
# A group whose last applied events were offset commits only gets no snapshot for them (commits
# change no gauge); it is called once more, with this timeout, when a replay's end-of-input marker
# moves the watermark to END_OF_INPUT_TS_MS, so the final snapshot (groups.jsonl) has its commit
# counters. A live watermark never gets there: such a timeout is no live deadline.
FINAL_SNAPSHOT_TS_MS = END_OF_INPUT_TS_MS - 365 * 86_400_000
# Spark's observed metrics of each source's event rows (spark/steps.py `observed`), as its progress
# reports name them (app/batch_report.py reads them): `source_<kind>`, with these fields.
OBSERVED_SOURCE_PREFIX = "source_"
OBSERVED_NEWEST, OBSERVED_OLDEST = "newest_event_ms", "oldest_event_ms"
# The statistics rows of each source's steps (stats_row, log_stats_row), as the same observed
# metrics carry them: their data_json texts, listed (app/batch_report.py reads them).
OBSERVED_STATISTICS = "statistics"
QUARANTINE_GROUP = "\u0000quarantine"   # state key of quarantine rows (no Kafka group id)

_ARROW = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "bool": pa.bool_(),
          "binary": pa.binary()}


@dataclass(frozen=True)
class Column:
    name: str
    type: str          # string | long | int | bool | binary
    nullable: bool


def columns(*specs: str) -> tuple[Column, ...]:
    """Columns from "name type" specs; a trailing "?" on the type makes the column nullable."""
    out = []
    for spec in specs:
        name, kind = spec.split()
        out.append(Column(name, kind.rstrip("?"), kind.endswith("?")))
    return tuple(out)


RAW_LOG_COLUMNS = columns(
    "source_id string",      # "<cluster>:<file name>" / topic-partition
    "seq long",              # 1-based line number / offset
    "line string?",
    "ts_hint_ms long?",      # last header time seen in this source
    "eof bool",
)
RAW_OFFSETS_COLUMNS = columns(
    "source_id string",
    "seq long",              # dump line number (replay) / offset
    "partition int?",
    "offset long?",
    "timestamp_ms long?",
    "key binary?",
    "value binary?",
    "error string?",         # malformed dump line / unusable batch: why
    "eof bool",
    "error_reason string?",  # with error: the quarantine reason (malformed_dump_line, ...)
)
EVENT_COLUMNS_SPEC = columns(
    "cluster string",
    "group string?",         # null only on end-of-input markers
    "ts_ms long",            # event time, epoch ms UTC
    "source string",         # "log" | "offsets"
    "source_id string",
    "seq long",
    "kind string",           # state/events.py kinds, or "quarantine"
    "broker int?",
    "generation int?",
    "member_id string?",
    "reason string?",
    "data_json string?",     # kind-specific fields as JSON
)
OUTPUT_COLUMNS_SPEC = columns(
    "kind string",           # state.outputs.OutputKind
    "cluster string?",
    "group string?",
    "ts_ms long?",
    "record_json string",
)

RAW_OFFSETS_NAMES = [c.name for c in RAW_OFFSETS_COLUMNS]
EVENT_COLUMNS = [c.name for c in EVENT_COLUMNS_SPEC]
OUTPUT_COLUMNS = [c.name for c in OUTPUT_COLUMNS_SPEC]
EVENT_TS = EVENT_COLUMNS.index("ts_ms")
EVENT_KIND = EVENT_COLUMNS.index("kind")
EVENT_BROKER = EVENT_COLUMNS.index("broker")
EVENT_DATA = EVENT_COLUMNS.index("data_json")

# The stateful step's input (streaming/spark/steps.py group_state_machine): the key columns, and
# the rest of each event row as one JSON object, as Spark's to_json(struct(...)) writes it (null
# fields left out); Spark adds event_time, which its event-time timeout needs. PySpark turns every
# column of every group into a pandas Series before the call: two columns instead of eleven take
# most of the per-group cost of a call away (issue 15).
STATE_INPUT_KEYS = ("cluster", "group")
PACKED_EVENT = "event_json"
PACKED_FIELDS = EVENT_COLUMNS[len(STATE_INPUT_KEYS):]
STATE_INPUT_COLUMNS = [*STATE_INPUT_KEYS, PACKED_EVENT]
assert EVENT_COLUMNS[:len(STATE_INPUT_KEYS)] == list(STATE_INPUT_KEYS)
# Names of a packed event's fields the stateful step reads without unpacking the row.
PACKED_TS, PACKED_KIND = "ts_ms", "kind"
assert {PACKED_TS, PACKED_KIND} <= set(PACKED_FIELDS)
# The event's data travels in the packed text as a JSON object under PACKED_DATA, spliced in by
# the JVM (steps.py packed_event_column), so one json.loads gives the whole row: as a string field
# it was decoded twice, the second time per event in the step (13 µs against 8 µs for an
# auto-commit of 10 partitions). In a row the data is then a dict; rows and commit digests held in
# state written before state version 4 keep the `data_json` string (LEGACY_PACKED_DATA), and
# every reader takes both (packed_data, event_data).
PACKED_DATA, LEGACY_PACKED_DATA = "data", "data_json"
PLAIN_PACKED_FIELDS = PACKED_FIELDS[:-1]
assert PACKED_FIELDS[-1] == LEGACY_PACKED_DATA and EVENT_COLUMNS[-1] == LEGACY_PACKED_DATA

# A replay's staged rows (streaming/spark/sources/staged.py) also carry the event time through
# which their micro-batch holds every event of every source (replay_stage.py StagedKind), so the
# stateful step applies those events in that batch instead of holding them for the next batch's
# watermark. Live rows have no such column.
COMPLETE_THROUGH = "complete_through_ms"
STAGED_EVENT_COLUMNS_SPEC = (*EVENT_COLUMNS_SPEC, *columns(f"{COMPLETE_THROUGH} long?"))

# With state buckets (streaming/spark/stateful.py process_bucket) the key is the cluster and the
# bucket of the group (a hash of its id, modulo the bucket count), and the group is a column. The
# key column's name carries the bucket count, so a checkpoint's own state schema says which layout
# and count wrote it (streaming/spark/state_layout.py).
STATE_BUCKET_PREFIX = "state_bucket_of_"


def state_bucket_column(buckets: int) -> str:
    return f"{STATE_BUCKET_PREFIX}{buckets}"


def bucketed_input_columns(buckets: int) -> list[str]:
    return ["cluster", state_bucket_column(buckets), "group", PACKED_EVENT]


def arrow_schema(columns: Sequence[Column], nullable: bool = False) -> pa.Schema:
    """The Arrow schema of a row contract; `nullable` marks every field nullable (the batches the
    Python steps build: Spark checks the declared nullability on its side)."""
    return pa.schema([pa.field(c.name, _ARROW[c.type], nullable or c.nullable) for c in columns])


EVENT_ARROW_SCHEMA = arrow_schema(EVENT_COLUMNS_SPEC, nullable=True)
# Event rows as a Data Source yields them (the replay's staged slices): nullability as declared.
EVENT_SOURCE_ARROW_SCHEMA = arrow_schema(EVENT_COLUMNS_SPEC)
RAW_LOG_ARROW_SCHEMA = arrow_schema(RAW_LOG_COLUMNS)
RAW_OFFSETS_ARROW_SCHEMA = arrow_schema(RAW_OFFSETS_COLUMNS)

# json.dumps with arguments builds a new encoder per call; one shared encoder is ~1.5x faster.
DATA_JSON = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str).encode


# ----------------------------------------------------------------------------- event rows
def event_row(ev: E.Event) -> tuple:
    return (ev.cluster, ev.group, int(ev.ts_ms), ev.source, ev.source_id, int(ev.seq), ev.kind,
            ev.broker, ev.generation, ev.member_id, ev.reason,
            DATA_JSON(ev.data) if ev.data else None)


def quarantine_row(q: Quarantined, cluster: str, ts_hint_ms: int | None, host: str | None = None,
                   extra: dict | None = None) -> tuple:
    """An input that could not be used, as an event row keyed by QUARANTINE_GROUP: it travels with
    the data, is counted and lands in quarantine.jsonl."""
    ts = q.ts_ms if q.ts_ms is not None else (ts_hint_ms if ts_hint_ms is not None else 1)
    record = {"cluster": cluster, **q.to_dict(), "ts_ms": ts, **(extra or {})}
    if host is not None:
        record["host"] = host
    return (cluster, QUARANTINE_GROUP, int(ts), q.source, q.source_id, int(q.seq), str(OutputKind.QUARANTINE),
            None, None, None, q.reason, json.dumps(record, separators=(",", ":"), default=str))


def is_missing(value: Any) -> bool:
    """None, pandas' NA, or the NaN pandas puts in a numeric column for null.

    pandas is not imported by this module: the replay sources' driver-side readers import it in a
    fresh process per query, where importing pandas costs more than reading a small input. pd.NA
    can only be here if pandas is loaded already."""
    if value is None:
        return True
    if isinstance(value, float):
        return value != value
    pandas = sys.modules.get("pandas")
    return pandas is not None and value is pandas.NA


def marker_row(source: str, ts_ms: int | None, source_id: str = "marker", seq: int = 0) -> tuple:
    """A row that only moves its source's watermark: the replay's end of input (far future) or a
    live source's "caught up at wall-clock time T" tick. It reaches the stateful step under a
    null group and is ignored there. The replay's file reads end with one per read, its source id
    and, as `seq`, the input lines or records the read took (streaming/spark/replay_stage.py)."""
    ts = END_OF_INPUT_TS_MS if ts_ms is None or is_missing(ts_ms) else int(ts_ms)
    return ("", None, ts, source, source_id, int(seq), E.END_OF_INPUT, None, None, None, None, None)


# Statistics rows (state/outputs.py STATISTICS_KINDS: decode health, log-source line counts)
# belong to no group: like a marker they only move their source's watermark through the stateful
# step, which skips them; Spark's observed metrics take their data to the driver in the batch's
# progress report (spark/steps.py `observed`).


def stats_row(cluster: str, ts_ms: int, counts: dict) -> tuple:
    """One decode-health row: counts {(key_version, value_version, outcome): n}."""
    payload = {"cluster": cluster, "counts": sorted([k[0], k[1], k[2], n] for k, n in counts.items())}
    return (cluster, None, int(ts_ms), E.SOURCE_OFFSETS, "decode-stats", 0, str(OutputKind.DECODE_STATS),
            None, None, None, None, json.dumps(payload, separators=(",", ":")))


def log_stats_row(cluster: str, source: str, ts_ms: int, layouts: dict, classes: dict) -> tuple:
    """One log-source row of a parse task: lines by layout and by class (streaming/logs/step.py)."""
    payload = {"cluster": cluster, "source": source, "layouts": layouts, "classes": classes}
    return (cluster, None, int(ts_ms), E.SOURCE_LOG, "log-stats", 0, str(OutputKind.LOG_STATS),
            None, None, None, None, json.dumps(payload, separators=(",", ":"), sort_keys=True))


def loads_json(text: str | bytes) -> Any:
    """json.loads of the texts the pipeline makes itself (packed event rows, bucket lines, output
    records), by pydantic_core's parser: 1.3x faster on a 10-partition commit pack and 2-3x on a
    log event's row or an output record (docs/benchmarks.md). What it refuses goes to json.loads:
    Python's encoder writes a lone surrogate escape for text that came in as undecodable bytes,
    which pydantic_core's parser rejects; and garbage gets json.loads' own error."""
    try:
        return _from_json(text)
    except ValueError:
        return json.loads(text)


def event_data(value: Any) -> dict[str, Any]:
    """An event row's data: a dict (packed rows since state version 4), a JSON string (event rows
    as the steps build them, rows held before version 4) or None (no data)."""
    if isinstance(value, dict):
        return value
    return loads_json(value) if value else {}


def packed_data(fields: dict[str, Any]) -> Any:
    """The data of packed fields as they hold it: the object (PACKED_DATA), or the string of a
    commit digest held before state version 4 (LEGACY_PACKED_DATA), or None."""
    return fields.get(PACKED_DATA) or fields.get(LEGACY_PACKED_DATA)


def packed_fields(row: Sequence[Any]) -> dict[str, Any]:
    """An event row's packed fields, as the parsed PACKED_EVENT text has them: null fields left
    out, the data as an object under PACKED_DATA."""
    fields = {name: value for name, value in zip(PLAIN_PACKED_FIELDS, row[len(STATE_INPUT_KEYS):-1])
              if value is not None}
    if row[-1]:
        fields[PACKED_DATA] = event_data(row[-1])
    return fields


def pack_event_row(row: Sequence[Any]) -> str:
    """An event row's PACKED_EVENT text, as the JVM builds it (tests drive the stateful step with it)."""
    return json.dumps(packed_fields(row), separators=(",", ":"))


def event_rows_of(cluster: str, group: str, fields: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """Packed fields of one group (parsed PACKED_EVENT texts, or commit digests held before state
    version 4 with LEGACY_PACKED_DATA) -> event rows in EVENT_COLUMNS order."""
    return [[cluster, group, *[f.get(name) for name in PLAIN_PACKED_FIELDS], packed_data(f)] for f in fields]


def unpack_event_rows(cluster: str, group: str, texts: Sequence[str]) -> list[list[Any]]:
    """PACKED_EVENT texts of one group -> event rows in EVENT_COLUMNS order."""
    loads = loads_json
    return event_rows_of(cluster, group, [loads(text) for text in texts])


def row_to_event(row: Sequence[Any]) -> E.Event:
    # Unpacked by position (EVENT_COLUMNS order, checked at import): a dict of the row per event
    # was a tenth of the stateful step's own time in a large replay.
    # The data dict is the row's own (no copy): the machine reads event data and never changes it.
    cluster, group, ts_ms, source, source_id, seq, kind, broker, generation, member_id, reason, data = row
    return E.Event(
        group=group, ts_ms=int(ts_ms), source=source, source_id=source_id, seq=int(seq), kind=kind,
        broker=None if broker is None else int(broker), generation=None if generation is None else int(generation),
        member_id=member_id, reason=reason, data=event_data(data), cluster=cluster,
    )


assert EVENT_COLUMNS == ["cluster", "group", "ts_ms", "source", "source_id", "seq", "kind", "broker", "generation",
                         "member_id", "reason", "data_json"]


# ----------------------------------------------------------------------------- event batches
def repeated(text: str, n: int) -> pa.Array:
    """A string array of n copies of `text`, built from its buffers (pa.array over a NumPy object
    array converts every element)."""
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def event_batch(n: int, **columns: Any) -> pa.RecordBatch:
    """An event batch of n rows from columns given by name (EVENT_COLUMNS): an Arrow or NumPy
    array, a string repeated on every row, or nothing (null)."""
    unknown = set(columns) - set(EVENT_COLUMNS)
    if unknown:
        raise ValueError(f"not event columns: {sorted(unknown)}")
    arrays = []
    for field in EVENT_ARROW_SCHEMA:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, str):
            arrays.append(repeated(value, n))
        elif isinstance(value, np.ndarray):
            arrays.append(pa.array(value, field.type))
        else:
            arrays.append(value if value.type == field.type else value.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=EVENT_ARROW_SCHEMA)


def rows_to_arrow(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Raw rows (tuples in the schema's order) as one Arrow batch."""
    columns: list[Any] = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.RecordBatch.from_arrays([pa.array(list(c), f.type) for c, f in zip(columns, schema)], schema=schema)
