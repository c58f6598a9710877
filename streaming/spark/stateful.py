"""The applyInPandasWithState adapter: Spark's per-group call -> state/machine.

Events are held in the group's state until the watermark passes them, then applied in
(ts_ms, source_rank, source_id, seq) order, so the result does not depend on how the input was
cut into micro-batches or which source arrived first. (A line of a layout that writes whole
seconds waits, with every event from its second on, until the watermark has passed its second:
state/event_order.py places it among that second's offsets records.) The event-time timeout is set to the
oldest held event (or the machine's next deadline) so the group is called again when the
watermark moves even if no new row arrives for it.

The state is the group's model as versioned JSON (state/model.py) and the held event rows. The
groups of a cluster share QueryOptions.state_buckets keys (process_bucket: the state of a bucket
holds each of its groups' model, held rows and timeout); checkpoints written before keep one key
per group (process_group). Both give each group the same turn (_step_group).
The snapshot row of each touched group is its live view (state/live_view.py): the held events applied
to a copy of the model, so /metrics shows them in the batch that read them; records stay final.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from state import events as E
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.machine import GroupStateMachine, run_turn
from state.model import DEAD, GroupModel, pack, unpack
from state.live_view import live_snapshot
from state.commit_digest import CommitDigest
from state.diagnosis.brokers import broker_record
from state.outputs import OutputKind
from streaming.rows import (
    COMPLETE_THROUGH, DATA_JSON, EVENT_BROKER, EVENT_DATA, EVENT_KIND, EVENT_TS, FINAL_SNAPSHOT_TS_MS,
    OUTPUT_COLUMNS, PACKED_EVENT, PACKED_KIND, PACKED_TS, QUARANTINE_GROUP, event_data, event_rows_of,
    loads_json, pack_event_row, packed_data, row_to_event, unpack_event_rows
)
from streaming.spark.state_bucket import Bucket, BucketEntry, WaitingCommit
from streaming.spark.worker_gc import freeze_worker_heap


def _rows(cluster: str, group: str, pdfs: Iterator[pd.DataFrame]) -> list[list[Any]]:
    """The event rows of the call (STATE_INPUT_COLUMNS frames: the packed column holds each row)."""
    rows: list[list[Any]] = []
    for pdf in pdfs:
        rows.extend(unpack_event_rows(cluster, group, pdf[PACKED_EVENT].tolist()))
    return rows


# Records, snapshots and held rows as JSON: rows.py's one shared encoder (json.dumps with
# arguments builds an encoder per call).
_dump = DATA_JSON


def group_selected(group: str, allow: tuple[str, ...], deny: tuple[str, ...]) -> bool:
    """Allow/deny patterns (re.search, like Spark's rlike); empty allow = every group."""
    if allow and not any(re.search(p, group) for p in allow):
        return False
    return not any(re.search(p, group) for p in deny)


def _clock_row(cluster: str, watermark: int, turns: int, folds: int = 0, key: str | None = None,
               timeout: int | None = None) -> tuple:
    """Every call reports the batch watermark: the driver's cross-group correlator
    (state/diagnosis/correlate.py) learns event-time progress from it. With it, how many groups
    took a state-machine turn and how many only folded commits (the health counters), and the
    state key's event-time timeout after the call (null: none), from which the driver plans the
    quiet sources' markers (sources/markers.py)."""
    record = {"watermark_ms": watermark, "turns": turns, "folds": folds, "cluster": cluster, "key": key,
              "timeout_ms": timeout}
    return (str(OutputKind.CLOCK), cluster, None, watermark, _dump(record))


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
    """Quarantine rows and broker events need no order or state: straight to the output (broker
    events to the driver's correlator, state/diagnosis/brokers.py)."""
    if group == E.BROKER_EVENTS_GROUP:
        for row in incoming:
            record = broker_record(cluster, int(row[EVENT_TS]), row[EVENT_KIND], row[EVENT_BROKER],
                                   event_data(row[EVENT_DATA]))
            out.append((str(OutputKind.BROKER_EVENT), cluster, None, record["ts_ms"], _dump(record)))
        return
    for row in incoming:
        out.append((str(OutputKind.QUARANTINE), cluster, None, int(row[EVENT_TS]), _dump(event_data(row[EVENT_DATA]))))


PASSED_THROUGH = (QUARANTINE_GROUP, E.BROKER_EVENTS_GROUP)


_COMMIT_KINDS = frozenset({E.OFFSET_COMMIT, E.OFFSET_COMMITS})
_OFFSET_KINDS = _COMMIT_KINDS | {E.OFFSET_TOMBSTONE}


def committed_offsets_row(cluster: str, group: str, events: Iterable[tuple[Any, Any, Any]]) -> tuple | None:
    """`run`'s committed half of the lag (state/lag.py): of a call's (kind, data, ts_ms) events,
    the group's newest committed offset per partition (by commit time; a tombstone's offset
    null), one COMMITTED_OFFSETS row, or None without offset events. As read, before the
    watermark: lag is about now, not final. Bounded by the group's partitions per batch."""
    offset_events = [(kind, event_data(data), int(ts)) for kind, data, ts in events if kind in _OFFSET_KINDS]
    if not offset_events:
        return None
    # (topic, partition) -> (commit time, 1 for a commit / 0 for a tombstone, offset or -1): max wins
    newest: dict[tuple[str, int], tuple[int, int, int]] = {}
    for kind, data, ts in offset_events:
        if kind == E.OFFSET_COMMITS:
            entries: Iterable[Any] = ((e[0], e[1], e[2], e[3] if len(e) > 3 else None)
                                      for e in data.get("commits") or ())
        else:
            entries = ((data.get("topic"), data.get("partition"),
                        None if kind == E.OFFSET_TOMBSTONE else data.get("offset"), data.get("commit_ts_ms")),)
        for topic, partition, offset, commit_ts in entries:
            if topic is None or partition is None:
                continue
            order = (int(commit_ts or ts), 0, -1) if offset is None else (int(commit_ts or ts), 1, int(offset))
            key = (topic, int(partition))
            if order >= newest.get(key, order):
                newest[key] = order
    offsets = [[topic, partition, offset if live else None, commit_ts]
               for (topic, partition), (commit_ts, live, offset) in sorted(newest.items())]
    record = {"cluster": cluster, "group": group, "offsets": offsets}
    return (str(OutputKind.COMMITTED_OFFSETS), cluster, group, max(ts for _, _, ts in offset_events), _dump(record))


def _run_machine(cluster: str, group: str, ready: list[list[Any]], waiting: list[list[Any]], watermark: int,
                 model: GroupModel, diagnosis: DiagnosisSettings, out: list[tuple],
                 new_rows: bool, live_view: bool = True) -> tuple[GroupStateMachine, bool]:
    """The final path (events the watermark passed -> records), then the group's snapshot: the
    live view (state/live_view.py), i.e. the final model with the still-held events applied to a copy,
    whenever anything but commits changed for the group in this batch (new rows, applied events,
    records). Without `live_view` (a replay) the snapshot is the final model alone, sent when
    applied events or records changed it. Returns the machine and whether commits changed the
    model without a snapshot."""
    events = [row_to_event(r) for r in ready]
    machine = run_turn(model, events, diagnosis, watermark)
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
    """End-of-input markers, statistics rows (rows.py) and groups the configuration leaves out:
    they only moved the watermark on their way here. No output, no state."""
    return group is None or (group not in PASSED_THROUGH and bool(allow or deny)
                             and not group_selected(group, allow, deny))


def _span_end(row: list[Any]) -> int:
    """The last millisecond of a held row's time: its time, or for a line of a layout without
    milliseconds (data[TS_PRECISION]) the end of its second."""
    data = row[EVENT_DATA]
    if not data or (isinstance(data, str) and E.TS_PRECISION not in data):
        return int(row[EVENT_TS])
    precision = event_data(data).get(E.TS_PRECISION)
    return int(row[EVENT_TS]) + (int(precision) - 1 if precision else 0)


def _ready_rows(held: list[list[Any]], watermark: int) -> tuple[list[list[Any]], list[list[Any]]]:
    """The held rows the watermark has passed, and the rest. A whole-second line waits until the
    watermark has passed its second, and every row of that second or later with it: the machine
    places its lines among the second's records (state/event_order.py), which must all be there,
    whatever the batches."""
    ends = [_span_end(r) for r in held]
    incomplete = [r[EVENT_TS] for r, end in zip(held, ends) if end > watermark]
    cut = min(incomplete) if incomplete else None
    ready: list[list[Any]] = []
    waiting: list[list[Any]] = []
    for r, end in zip(held, ends):
        (ready if end <= watermark and (cut is None or r[EVENT_TS] < cut) else waiting).append(r)
    return ready, waiting


def _ready_at(waiting: list[list[Any]], watermark: int) -> int | None:
    """The watermark at which the first waiting row can go (rows held behind a whole-second line
    go with it)."""
    return min((end for end in map(_span_end, waiting) if end > watermark), default=None)


def _step_group(cluster: str, group: str, incoming: list[list[Any]], stored: BucketEntry | None, watermark: int,
                diagnosis: DiagnosisSettings, live_view: bool, out: list[tuple],
                may_fold: bool = False) -> BucketEntry | None:
    """One group's turn: its held rows plus `incoming`, the watermark -> outputs appended to `out`.
    The stored entry's commit digest (the commits folded without a turn since the last one) is
    merged first. `may_fold` (the bucketed layout): a group that has seen the offsets source keeps
    its waiting commits in a new digest instead of its held rows, so they set no timer and later
    commits can fold. Returns the group's new entry (None: drop it), with its event-time timeout
    (None: none) and its new digest (None when the group may not fold)."""
    if stored is not None:
        model = GroupModel.from_json(stored.model_json)
        held = loads_json(unpack(stored.held_json))
        held.extend(_merge_digest(model, stored, cluster, group))
    else:
        model, held = GroupModel(cluster=cluster, group=group), []
    held.extend(incoming)
    ready, waiting = _ready_rows(held, watermark)
    # A group seen for the first time gets a snapshot, whatever its rows: one that only commits
    # (assign() consumers) then has gauges, and its lag a series (sinks/lag_gauges.py).
    new_rows = stored is None or any(r[EVENT_KIND] not in _COMMIT_KINDS for r in incoming)
    machine, unsent_commits = _run_machine(cluster, group, ready, waiting, watermark, model, diagnosis, out,
                                           new_rows, live_view)

    new_digest: CommitDigest | None = None
    waiting_commits: list[WaitingCommit] = []
    if may_fold and model.state != DEAD and (E.SOURCE_OFFSETS in model.seen_sources or not model.generation_checks):
        new_digest = CommitDigest()
        commits = [r for r in waiting if r[EVENT_KIND] in _COMMIT_KINDS]
        if commits:
            waiting_commits = [[int(r[EVENT_TS]), pack_event_row(r)] for r in commits]
            waiting = [r for r in waiting if r[EVENT_KIND] not in _COMMIT_KINDS]
            unsent_commits = True
    # Spark calls a key when the watermark is above its timeout, and a held event is ready when the
    # watermark reaches it: its timer is one below it, so it is applied in the first batch that
    # can (not only when some other timer of the group happens to call it then).
    wake = _ready_at(waiting, watermark)
    deadlines = [wake - 1] if wake is not None else []
    machine_deadline = machine.next_deadline_ms()
    if machine_deadline is not None:
        deadlines.append(machine_deadline)
    if unsent_commits and not deadlines:
        deadlines.append(FINAL_SNAPSHOT_TS_MS)
    if not deadlines and model.state == DEAD:
        return None   # a dead group keeps no state; a new group with its id starts fresh
    return BucketEntry(model.to_json(), pack(_dump(waiting)) if waiting else "[]",
                       max(min(deadlines), watermark + 1) if deadlines else None, new_digest, waiting_commits)


def process_group(key: tuple, pdfs: Iterator[pd.DataFrame], state: Any,
                  group_allow: tuple[str, ...] = (), group_deny: tuple[str, ...] = (),
                  diagnosis: DiagnosisSettings = DEFAULT_SETTINGS, live_view: bool = True,
                  committed_offsets: bool = False) -> Iterator[pd.DataFrame]:
    """One group per call (the key is (cluster, group)): checkpoints written before state buckets.
    `committed_offsets` (run): each group's COMMITTED_OFFSETS row too (committed_offsets_row)."""
    freeze_worker_heap()
    cluster, group = key
    watermark = state.getCurrentWatermarkMs()
    out: list[tuple] = [_clock_row(cluster, watermark, 0)]
    if _skipped(group, group_allow, group_deny):
        for _ in pdfs:
            pass
        yield _frame(out)
        return
    incoming = _rows(cluster, group, pdfs)
    if group in PASSED_THROUGH:
        _pass_through(cluster, group, incoming, out)
        yield _frame(out)
        return
    if committed_offsets and (row := committed_offsets_row(
            cluster, group, ((r[EVENT_KIND], r[EVENT_DATA], r[EVENT_TS]) for r in incoming))) is not None:
        out.append(row)
    entry = _step_group(cluster, group, incoming, BucketEntry(*state.get) if state.exists else None, watermark,
                        diagnosis, live_view, out)
    timeout = None if entry is None else entry.timeout_ms
    if entry is None:
        state.remove()
    else:
        state.update((entry.model_json, entry.held_json))
        if timeout is not None:
            state.setTimeoutTimestamp(timeout)
    out[0] = _clock_row(cluster, watermark, 1, key=group, timeout=timeout)
    yield _frame(out)


def process_bucket(key: tuple, pdfs: Iterator[pd.DataFrame], state: Any,
                   group_allow: tuple[str, ...] = (), group_deny: tuple[str, ...] = (),
                   diagnosis: DiagnosisSettings = DEFAULT_SETTINGS, live_view: bool = True,
                   committed_offsets: bool = False) -> Iterator[pd.DataFrame]:
    """The groups of one state bucket per call (the key is (cluster, bucket); the columns are
    streaming/rows.py bucketed_input_columns): PySpark's own cost per call (each column and the
    state to pandas and back) is paid per bucket, not per group. A group whose rows are all offset
    commits, and that has nothing due, folds them into its commit digest without a turn
    (fold_commits); every other group with rows, then every group whose own timeout the watermark
    has passed (the rule Spark applies to a key: set and below the watermark), takes the turn
    process_group gives it. The bucket's timeout is the earliest of its groups'. The clock row
    counts the turns and the folds (docs/design.md, "Commits without a turn"). `committed_offsets`
    (run): each group's COMMITTED_OFFSETS row too (committed_offsets_row), folded or not."""
    freeze_worker_heap()
    cluster = key[0]
    watermark = state.getCurrentWatermarkMs()
    out: list[tuple] = []
    texts: dict[str, list[str]] = {}
    for pdf in pdfs:
        for group, text in zip(pdf["group"].tolist(), pdf[PACKED_EVENT].tolist()):
            if not _skipped(group, group_allow, group_deny):
                texts.setdefault(group, []).append(text)
        watermark = max(watermark, _complete_through(pdf))
    bucket = Bucket.load(state.get[0]) if state.exists else Bucket()
    turns = folds = 0
    loads = loads_json
    for group, group_texts in texts.items():
        fields = [loads(text) for text in group_texts]
        if group in PASSED_THROUGH:
            _pass_through(cluster, group, event_rows_of(cluster, group, fields), out)
            continue
        if committed_offsets and (row := committed_offsets_row(
                cluster, group, ((f.get(PACKED_KIND), packed_data(f), f.get(PACKED_TS)) for f in fields))) is not None:
            out.append(row)
        entry = bucket.get(group)
        if entry is not None and fold_commits(entry, fields, group_texts, watermark):
            bucket.put(group, entry)
            folds += 1
            continue
        turns += 1
        _keep(bucket, group, _step_group(cluster, group, event_rows_of(cluster, group, fields),
                                         entry, watermark, diagnosis, live_view, out, True))
    for group in bucket.due(watermark, skip=texts):
        turns += 1
        _keep(bucket, group, _step_group(cluster, group, [], bucket.get(group), watermark,
                                         diagnosis, live_view, out, True))
    earliest = None
    if not bucket:
        state.remove()
    else:
        state.update((bucket.text(),))
        earliest = bucket.earliest_timeout()
        if earliest is not None:
            state.setTimeoutTimestamp(earliest)
    out.insert(0, _clock_row(cluster, watermark, turns, folds, key=str(key[1]), timeout=earliest))
    yield _frame(out)


def _complete_through(pdf: pd.DataFrame) -> int:
    """A replay batch's COMPLETE_THROUGH (streaming/rows.py): every event at or before it, of
    every source, is in this batch or was in an earlier one, so it serves as the watermark: the
    batch's events are applied now, not held for the next batch's. The timeouts set from it are
    above it, so Spark's own watermark calls the bucket again only once past it. -1: none."""
    if COMPLETE_THROUGH not in pdf.columns or not len(pdf):
        return -1
    through = pdf[COMPLETE_THROUGH].max()
    return -1 if pd.isna(through) else int(through)


def _keep(bucket: Bucket, group: str, entry: BucketEntry | None) -> None:
    if entry is None:
        bucket.drop(group)
    else:
        bucket.put(group, entry)


# ---------------------------------------------------------------- commits without a turn
# A group's commit digest (BucketEntry.digest, state/commit_digest.py; None: the group may not fold:
# it is Dead, or a log/offsets cross-check of a generation waits for the offsets source, which a
# commit would bring: crosscheck.both_sources). Its offset commits wait in the entry
# (waiting_commits), not among its held rows, so they set no timer; those the watermark has passed
# fold into the digest, which commutes as the machine's own fold does. The group's next turn merges
# the digest into the model before any of its own events, all of which are later than the
# watermark at the fold (fold_commits says why).

def fold_commits(entry: BucketEntry, fields: list[dict[str, Any]], texts: list[str], watermark: int) -> bool:
    """Fold a group's incoming rows into its commit digest instead of giving it a turn, when that
    is the same as the turn: every row is an offset commit, the group may fold (its model has seen
    the offsets source), and nothing of the group is due (its timeout, which is at or below its
    oldest held event and its machine's next deadline, is above the watermark). Then the turn
    would apply only commits older than anything still held, before every deadline: they emit
    nothing (commits change no gauge, so they send no snapshot either) and only the commit fields
    of the model change. False: the group takes its turn. `texts`: the rows' packed texts, which
    `fields` are decoded from (kept as they came until they fold: state_bucket.WaitingCommit)."""
    timeout = entry.timeout_ms
    if entry.digest is None or (timeout is not None and timeout <= watermark):
        return False
    if any(f.get(PACKED_KIND) not in _COMMIT_KINDS for f in fields):
        return False
    entry.waiting_commits.extend([f[PACKED_TS], text] for f, text in zip(fields, texts))
    _fold_passed(entry, entry.digest, watermark)
    if timeout is None:
        # The replay's end-of-input watermark then gives the group the turn that merges the digest
        # and sends its final snapshot (FINAL_SNAPSHOT_TS_MS); a live watermark never gets there.
        entry.timeout_ms = FINAL_SNAPSHOT_TS_MS
    return True


def _fold_passed(entry: BucketEntry, digest: CommitDigest, watermark: int) -> None:
    """Fold the entry's waiting commits that the watermark has passed into its digest."""
    still = []
    for waiting in entry.waiting_commits:
        ts, text = waiting
        if ts > watermark:
            still.append(waiting)
        else:
            f = loads_json(text)
            digest.fold(f[PACKED_KIND], event_data(packed_data(f)), int(ts))
    entry.waiting_commits = still


def _merge_digest(model: GroupModel, entry: BucketEntry, cluster: str, group: str) -> list[list[Any]]:
    """The entry's folded commits into the model; returns the event rows of its commits still
    waiting for the watermark, to hold like any other row."""
    if entry.digest is None:
        return []
    entry.digest.merge_into(model)
    return event_rows_of(cluster, group, [loads_json(text) for _, text in entry.waiting_commits])


def settled_group_state(cluster: str, group: str, entry: BucketEntry, watermark: int | None = None) -> tuple[str, str]:
    """A bucket entry's (model_json, held_json) with its digest merged: what the group's next turn
    starts from, and what one key per group stores once the watermark (if given) has reached the
    group's waiting commits (there each commit has its own timer; here they fold at the next visit)."""
    digest = entry.digest
    if digest is None or (not entry.waiting_commits and digest.newest_event_ms is None):
        return entry.model_json, entry.held_json
    if watermark is not None:
        entry = copy.deepcopy(entry)
        assert entry.digest is not None
        _fold_passed(entry, entry.digest, watermark)
    model = GroupModel.from_json(entry.model_json)
    held = loads_json(unpack(entry.held_json)) + _merge_digest(model, entry, cluster, group)
    return model.to_json(), pack(_dump(held)) if held else "[]"
