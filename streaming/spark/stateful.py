"""The applyInPandasWithState adapter: Spark's per-group call -> state/machine.py.

Events are held in the group's state until the watermark passes them, then applied in
(ts_ms, source_rank, source_id, seq) order, so the result does not depend on how the input was
cut into micro-batches or which source arrived first. The event-time timeout is set to the
oldest held event (or the machine's next deadline) so the group is called again when the
watermark moves even if no new row arrives for it.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Iterator

import pandas as pd

from state import events as E
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.machine.core import GroupStateMachine, snapshot
from state.model import DEAD, GroupModel
from streaming.spark.schema import EVENT_COLUMNS, QUARANTINE_GROUP, STATS_GROUP, STATS_KIND

OUT_SNAPSHOT = "snapshot"
OUT_QUARANTINE = "quarantine"
# Every call reports the batch watermark: the driver's cross-group correlator (state/correlate.py)
# learns event-time progress from it.
OUT_CLOCK = "clock"
OUTPUT_COLUMNS = ["kind", "cluster", "group", "ts_ms", "record_json"]

_TS = EVENT_COLUMNS.index("ts_ms")


def _clean(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):   # numpy scalar
        value = value.item()
    return value


def row_to_event(row: list) -> E.Event:
    r = dict(zip(EVENT_COLUMNS, row))
    return E.Event(
        group=r["group"], ts_ms=int(r["ts_ms"]), source=r["source"], source_id=r["source_id"],
        seq=int(r["seq"]), kind=r["kind"],
        broker=None if r["broker"] is None else int(r["broker"]),
        generation=None if r["generation"] is None else int(r["generation"]),
        member_id=r["member_id"], reason=r["reason"],
        data=json.loads(r["data_json"]) if r["data_json"] else {}, cluster=r["cluster"],
    )


def _rows(pdfs: Iterator[pd.DataFrame]) -> list[list]:
    rows: list[list] = []
    for pdf in pdfs:
        for values in pdf[EVENT_COLUMNS].itertuples(index=False, name=None):
            rows.append([_clean(v) for v in values])
    return rows


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)


def group_selected(group: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    """Allow/deny patterns (re.search, like Spark's rlike); empty allow = every group."""
    if allow and not any(re.search(p, group) for p in allow):
        return False
    return not any(re.search(p, group) for p in deny)


def _clock_row(cluster: str, state) -> tuple:
    watermark = state.getCurrentWatermarkMs()
    return (OUT_CLOCK, cluster, None, watermark, _dump({"watermark_ms": watermark}))


def process_group(key: tuple, pdfs: Iterator[pd.DataFrame], state,
                  group_allow: tuple[str, ...] = (), group_deny: tuple[str, ...] = (),
                  diagnosis: DiagnosisSettings = DEFAULT_SETTINGS) -> Iterator[pd.DataFrame]:
    cluster, group = key
    if group is None or (group != QUARANTINE_GROUP and (group_allow or group_deny)
                         and not group_selected(group, group_allow, group_deny)):
        # End-of-input markers and groups the configuration leaves out: they only moved the
        # watermark on their way here. No output, no state.
        for _ in pdfs:
            pass
        yield pd.DataFrame.from_records([_clock_row(cluster, state)], columns=OUTPUT_COLUMNS)
        return
    incoming = _rows(pdfs)
    out: list[tuple] = [_clock_row(cluster, state)]
    if group in (QUARANTINE_GROUP, STATS_GROUP):
        # Quarantine and decode-health rows need no order or state: straight to the output.
        kind = OUT_QUARANTINE if group == QUARANTINE_GROUP else STATS_KIND
        for row in incoming:
            record = json.loads(row[EVENT_COLUMNS.index("data_json")])
            if kind == STATS_KIND:
                record["cluster"] = cluster
            out.append((kind, cluster, None, int(row[_TS]), _dump(record)))
        yield pd.DataFrame.from_records(out, columns=OUTPUT_COLUMNS)
        return

    if state.exists:
        model_json, held_json = state.get
        model = GroupModel.from_json(model_json)
        held = json.loads(held_json)
    else:
        model, held = GroupModel(cluster=cluster, group=group), []
    held.extend(incoming)
    watermark = state.getCurrentWatermarkMs()
    ready = [r for r in held if r[_TS] <= watermark]
    waiting = [r for r in held if r[_TS] > watermark]

    machine = GroupStateMachine(model, diagnosis)
    events = sorted((row_to_event(r) for r in ready), key=E.Event.sort_key)
    for ev in events:
        machine.apply(ev)
    machine.advance_to(watermark)
    for kind, record in machine.outputs + machine.observations:
        ts = record.get("ended_at_ms") or record.get("removed_at_ms") or record.get("ts_ms") \
            or record.get("started_at_ms")
        out.append((kind, cluster, group, ts, _dump(record)))
    if events or machine.outputs:
        out.append((OUT_SNAPSHOT, cluster, group, model.last_event_ms, _dump(snapshot(model))))

    deadlines = [min(r[_TS] for r in waiting)] if waiting else []
    machine_deadline = machine.next_deadline_ms()
    if machine_deadline is not None:
        deadlines.append(machine_deadline)
    if not deadlines and model.state == DEAD:
        state.remove()   # a dead group keeps no state; a new group with its id starts fresh
    else:
        state.update((model.to_json(), _dump(waiting)))
        if deadlines:
            state.setTimeoutTimestamp(max(min(deadlines), watermark + 1))
    yield pd.DataFrame.from_records(out, columns=OUTPUT_COLUMNS)
