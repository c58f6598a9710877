"""The applyInPandasWithState adapter: Spark's per-group call -> state/machine.

Events are held in the group's state until the watermark passes them, then applied in
(ts_ms, source_rank, source_id, seq) order, so the result does not depend on how the input was
cut into micro-batches or which source arrived first. The event-time timeout is set to the
oldest held event (or the machine's next deadline) so the group is called again when the
watermark moves even if no new row arrives for it.

The state is the group's model as versioned JSON (state/model.py) and the held event rows. The
groups of a cluster share QueryOptions.state_buckets keys (process_bucket: the state of a bucket
holds each of its groups' model, held rows and timeout); checkpoints written before keep one key
per group (process_group). Both give each group the same turn (_step_group).
The snapshot row of each touched group is its live view (state/live.py): the held events applied
to a copy of the model, so /metrics shows them in the batch that read them; records stay final.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from state import events as E
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.machine import GroupStateMachine
from state.model import DEAD, GroupModel, pack, unpack
from state.live import live_snapshot
from state.outputs import OutputKind
from streaming.rows import (
    END_OF_INPUT_TS_MS, EVENT_DATA, EVENT_KIND, EVENT_TS, LOG_STATS_GROUP, OUTPUT_COLUMNS, PACKED_EVENT,
    QUARANTINE_GROUP, STATS_GROUP, row_to_event, unpack_event_rows
)
from streaming.spark.worker_gc import freeze_worker_heap

_PASS_THROUGH = {QUARANTINE_GROUP: OutputKind.QUARANTINE, STATS_GROUP: OutputKind.DECODE_STATS,
                 LOG_STATS_GROUP: OutputKind.LOG_STATS}


def _rows(cluster: str, group: str, pdfs: Iterator[pd.DataFrame]) -> list[list[Any]]:
    """The event rows of the call (STATE_INPUT_COLUMNS frames: the packed column holds each row)."""
    rows: list[list[Any]] = []
    for pdf in pdfs:
        rows.extend(unpack_event_rows(cluster, group, pdf[PACKED_EVENT].tolist()))
    return rows


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)


def group_selected(group: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    """Allow/deny patterns (re.search, like Spark's rlike); empty allow = every group."""
    if allow and not any(re.search(p, group) for p in allow):
        return False
    return not any(re.search(p, group) for p in deny)


def _clock_row(cluster: str, watermark: int) -> tuple:
    """Every call reports the batch watermark: the driver's cross-group correlator
    (state/diagnosis/correlate.py) learns event-time progress from it."""
    return (str(OutputKind.CLOCK), cluster, None, watermark, _dump({"watermark_ms": watermark}))


_OUTPUT_INDEX = pd.Index(OUTPUT_COLUMNS)


def _frame(rows: list[tuple]) -> pd.DataFrame:
    """One object block, as it is: DataFrame.from_records inferred a dtype per column and built
    the column index, for every call (11 % of the stateful step; Arrow takes the ints and None
    as they are)."""
    block = np.empty((len(rows), len(OUTPUT_COLUMNS)), dtype=object)
    for i, row in enumerate(rows):
        block[i] = row
    return pd.DataFrame(block, columns=_OUTPUT_INDEX, copy=False)


def _pass_through(cluster: str, group: str, incoming: list[list[Any]], out: list[tuple]) -> None:
    """Quarantine, decode-health and log-source rows need no order or state: straight to the output."""
    kind = _PASS_THROUGH[group]
    for row in incoming:
        record = json.loads(row[EVENT_DATA])
        if kind != OutputKind.QUARANTINE:
            record["cluster"] = cluster
        out.append((str(kind), cluster, None, int(row[EVENT_TS]), _dump(record)))


# A group whose last applied events were offset commits only gets no snapshot for them (commits
# change no gauge); it is called once more, with this timeout, when a replay's end-of-input marker
# moves the watermark to END_OF_INPUT_TS_MS, so the final snapshot (groups.jsonl) has its commit
# counters. A live watermark never gets there.
FINAL_SNAPSHOT_TS_MS = END_OF_INPUT_TS_MS - 365 * 86_400_000
_COMMIT_KINDS = frozenset({E.OFFSET_COMMIT})


def _run_machine(cluster: str, group: str, ready: list[list[Any]], waiting: list[list[Any]], watermark: int,
                 model: GroupModel, diagnosis: DiagnosisSettings, out: list[tuple],
                 new_rows: bool, live_view: bool = True) -> tuple[GroupStateMachine, bool]:
    """The final path (events the watermark passed -> records), then the group's snapshot: the
    live view (state/live.py), i.e. the final model with the still-held events applied to a copy,
    whenever anything but commits changed for the group in this batch (new rows, applied events,
    records). Without `live_view` (a replay) the snapshot is the final model alone, sent when
    applied events or records changed it. Returns the machine and whether commits changed the
    model without a snapshot."""
    machine = GroupStateMachine(model, diagnosis)
    events = sorted((row_to_event(r) for r in ready), key=E.Event.sort_key)
    for ev in events:
        machine.apply(ev)
    machine.advance_to(watermark)
    for kind, record in machine.outputs + machine.observations:
        ts = record.get("ended_at_ms") or record.get("removed_at_ms") or record.get("ts_ms") \
            or record.get("started_at_ms")
        out.append((str(kind), cluster, group, ts, _dump(record)))
    changed = machine.outputs or (live_view and new_rows) or any(ev.kind not in _COMMIT_KINDS for ev in events)
    if changed or watermark >= FINAL_SNAPSHOT_TS_MS:
        view = live_snapshot(model, (row_to_event(r) for r in waiting) if live_view else (), diagnosis, watermark)
        out.append((str(OutputKind.SNAPSHOT), cluster, group, view["last_event_ms"], _dump(view)))
        return machine, False
    return machine, bool(events)


def _skipped(group: str | None, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    """End-of-input markers and groups the configuration leaves out: they only moved the watermark
    on their way here. No output, no state."""
    return group is None or (group != QUARANTINE_GROUP and bool(allow or deny)
                             and not group_selected(group, allow, deny))


def _step_group(cluster: str, group: str, incoming: list[list[Any]], stored: tuple | None, watermark: int,
                diagnosis: DiagnosisSettings, live_view: bool, out: list[tuple]) -> tuple[tuple | None, int | None]:
    """One group's turn: its held rows plus `incoming`, the watermark -> outputs appended to `out`.
    Returns the group's new stored state (None: drop it) and its event-time timeout (None: none)."""
    if stored is not None:
        model_json, held_json = stored
        model = GroupModel.from_json(model_json)
        held = json.loads(unpack(held_json))
    else:
        model, held = GroupModel(cluster=cluster, group=group), []
    held.extend(incoming)
    ready = [r for r in held if r[EVENT_TS] <= watermark]
    waiting = [r for r in held if r[EVENT_TS] > watermark]
    new_rows = any(r[EVENT_KIND] not in _COMMIT_KINDS for r in incoming)
    machine, unsent_commits = _run_machine(cluster, group, ready, waiting, watermark, model, diagnosis, out,
                                           new_rows, live_view)

    deadlines = [min(r[EVENT_TS] for r in waiting)] if waiting else []
    machine_deadline = machine.next_deadline_ms()
    if machine_deadline is not None:
        deadlines.append(machine_deadline)
    if unsent_commits and not deadlines:
        deadlines.append(FINAL_SNAPSHOT_TS_MS)
    if not deadlines and model.state == DEAD:
        return None, None   # a dead group keeps no state; a new group with its id starts fresh
    stored = (model.to_json(), pack(_dump(waiting)) if waiting else "[]")
    return stored, (max(min(deadlines), watermark + 1) if deadlines else None)


def process_group(key: tuple, pdfs: Iterator[pd.DataFrame], state: Any,
                  group_allow: tuple[str, ...] = (), group_deny: tuple[str, ...] = (),
                  diagnosis: DiagnosisSettings = DEFAULT_SETTINGS, live_view: bool = True) -> Iterator[pd.DataFrame]:
    """One group per call (the key is (cluster, group)): checkpoints written before state buckets."""
    freeze_worker_heap()
    cluster, group = key
    watermark = state.getCurrentWatermarkMs()
    out: list[tuple] = [_clock_row(cluster, watermark)]
    if _skipped(group, group_allow, group_deny):
        for _ in pdfs:
            pass
        yield _frame(out)
        return
    incoming = _rows(cluster, group, pdfs)
    if group in _PASS_THROUGH:
        _pass_through(cluster, group, incoming, out)
        yield _frame(out)
        return
    stored, timeout = _step_group(cluster, group, incoming, state.get if state.exists else None, watermark,
                                  diagnosis, live_view, out)
    if stored is None:
        state.remove()
    else:
        state.update(stored)
        if timeout is not None:
            state.setTimeoutTimestamp(timeout)
    yield _frame(out)


def process_bucket(key: tuple, pdfs: Iterator[pd.DataFrame], state: Any,
                   group_allow: tuple[str, ...] = (), group_deny: tuple[str, ...] = (),
                   diagnosis: DiagnosisSettings = DEFAULT_SETTINGS, live_view: bool = True) -> Iterator[pd.DataFrame]:
    """The groups of one state bucket per call (the key is (cluster, bucket); the columns are
    streaming/rows.py bucketed_input_columns): PySpark's own cost per call (each column and the
    state to pandas and back) is paid per bucket, not per group. Each group takes the same turn
    as in process_group: the groups with rows, then every other group whose own timeout the
    watermark has passed (the rule Spark applies to a key: set and below the watermark); the
    bucket's timeout is the earliest of its groups'."""
    freeze_worker_heap()
    cluster = key[0]
    watermark = state.getCurrentWatermarkMs()
    out: list[tuple] = [_clock_row(cluster, watermark)]
    texts: dict[str, list[str]] = {}
    for pdf in pdfs:
        for group, text in zip(pdf["group"].tolist(), pdf[PACKED_EVENT].tolist()):
            if not _skipped(group, group_allow, group_deny):
                texts.setdefault(group, []).append(text)
    groups = bucket_groups(state.get[0]) if state.exists else {}
    for group, group_texts in texts.items():
        incoming = unpack_event_rows(cluster, group, group_texts)
        if group in _PASS_THROUGH:
            _pass_through(cluster, group, incoming, out)
            continue
        entry = groups.get(group)
        _keep(groups, group, _step_group(cluster, group, incoming, tuple(entry[:2]) if entry else None, watermark,
                                         diagnosis, live_view, out))
    for group, entry in list(groups.items()):
        if group not in texts and entry[2] is not None and entry[2] < watermark:
            _keep(groups, group, _step_group(cluster, group, [], (entry[0], entry[1]), watermark,
                                             diagnosis, live_view, out))
    if not groups:
        state.remove()
    else:
        state.update((bucket_json(groups),))
        timeouts = [entry[2] for entry in groups.values() if entry[2] is not None]
        if timeouts:
            state.setTimeoutTimestamp(min(timeouts))
    yield _frame(out)


# The stored form of a bucket (STATE_SCHEMA_BUCKETED): {"v": 1, "groups": {group: [model_json,
# held_json, timeout_ms or null]}}; model_json carries its own version (state/model.py).
BUCKET_STATE_VERSION = 1


def bucket_groups(text: str) -> dict[str, list[Any]]:
    raw = json.loads(text)
    if raw.get("v", 1) > BUCKET_STATE_VERSION:
        raise ValueError(f"state bucket of version {raw['v']} was written by a newer release "
                         f"(this one reads version {BUCKET_STATE_VERSION})")
    return raw["groups"]


def bucket_json(groups: dict[str, list[Any]]) -> str:
    return json.dumps({"v": BUCKET_STATE_VERSION, "groups": groups}, separators=(",", ":"))


def _keep(groups: dict[str, list[Any]], group: str, turn: tuple[tuple | None, int | None]) -> None:
    stored, timeout = turn
    if stored is None:
        groups.pop(group, None)
    else:
        groups[group] = [stored[0], stored[1], timeout]
