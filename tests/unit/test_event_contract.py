"""The event row (streaming/rows.EVENT_COLUMNS_SPEC, by position: what the Spark steps write) and
the state machine's event (state/events.Event, by name) describe the same fields: a field added to
one and not the other fails here, not in a replay (issue 29)."""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from state import events as E
from streaming.rows import EVENT_COLUMNS, EVENT_COLUMNS_SPEC, row_to_event

# Columns that carry an Event field under another name or form.
RENAMED = {"data_json": "data"}


def test_every_event_column_is_an_event_field_and_back():
    fields = {f.name for f in dataclasses.fields(E.Event)}
    columns = {RENAMED.get(c, c) for c in EVENT_COLUMNS}
    assert columns == fields, (columns ^ fields)


def test_nullable_columns_are_the_optional_fields():
    optional = {f.name for f in dataclasses.fields(E.Event)
                if f.default is None or f.default_factory is not dataclasses.MISSING}
    nullable = {RENAMED.get(c.name, c.name) for c in EVENT_COLUMNS_SPEC if c.nullable}
    # `group` is null only on markers and statistics rows, which never become Events; `cluster` has a
    # default for tests but every row carries one
    assert nullable - {"group"} == optional - {"cluster"}


def test_a_row_becomes_the_event_with_every_field():
    values: dict[str, Any] = {"cluster": "c", "group": "g", "ts_ms": 5, "source": "log", "source_id": "s", "seq": 7,
              "kind": E.MEMBER_LEFT, "broker": 2, "generation": 3, "member_id": "m", "reason": "r",
              "data_json": json.dumps({"client_reason": "x"})}
    event = row_to_event([values[c] for c in EVENT_COLUMNS])
    assert dataclasses.asdict(event) == {RENAMED.get(k, k): (json.loads(v) if k == "data_json" else v)
                                         for k, v in values.items()}


def test_the_machine_never_changes_an_events_data():
    """Rows hand their data dict to the event as it is (rows.row_to_event, no copy), and the live
    view applies held rows that are stored again after it: the state machine must only read event
    data. Every event of both captures, through one run of the machine, keeps its data intact."""
    import copy
    from state.diagnosis.rules import DEFAULT_SETTINGS
    from state.machine import run_turn
    from state.model import GroupModel
    from streaming.app.local import capture_events
    from tests.support.capture_expectations import capture_inputs
    for capture in ("kafka-2.7", "kafka-4.0"):
        events = sorted(capture_events(*capture_inputs(capture)), key=lambda e: e.sort_key())
        before = copy.deepcopy([e.data for e in events])
        by_group: dict[str, list[E.Event]] = {}
        for e in events:
            by_group.setdefault(e.group, []).append(e)
        for group, group_events in by_group.items():
            run_turn(GroupModel(cluster="default", group=group), group_events, DEFAULT_SETTINGS, E.END_OF_INPUT_TS_MS)
        assert [e.data for e in events] == before, capture
        assert sum(1 for d in before if d) > 100


def test_a_row_held_before_state_version_4_becomes_the_same_event():
    """Held rows and commit digests written before version 4 carry `data_json` strings; rows now
    carry the dict the packed text gives (rows.PACKED_DATA). Both read the same."""
    from streaming.rows import event_rows_of, pack_event_row, unpack_event_rows
    data = {"commits": [{"offset": 3, "partition": 0, "topic": "t"}]}
    old = ["c", "g", 5, "offsets", "s", 7, E.OFFSET_COMMITS, None, None, None, None, json.dumps(data)]
    [new] = unpack_event_rows("c", "g", [pack_event_row(old)])
    assert new[-1] == data and old[:-1] == new[:-1]
    legacy_fields = {"ts_ms": 5, "source": "offsets", "source_id": "s", "seq": 7, "kind": E.OFFSET_COMMITS,
                     "data_json": json.dumps(data)}
    [legacy] = event_rows_of("c", "g", [legacy_fields])
    assert row_to_event(legacy) == row_to_event(new) == row_to_event(old)
    assert row_to_event(old[:-1] + [None]).data == {}
