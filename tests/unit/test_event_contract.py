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
    # `group` is null only on end-of-input markers, which never become Events; `cluster` has a
    # default for tests but every row carries one
    assert nullable - {"group"} == optional - {"cluster"}


def test_a_row_becomes_the_event_with_every_field():
    values: dict[str, Any] = {"cluster": "c", "group": "g", "ts_ms": 5, "source": "log", "source_id": "s", "seq": 7,
              "kind": E.MEMBER_LEFT, "broker": 2, "generation": 3, "member_id": "m", "reason": "r",
              "data_json": json.dumps({"client_reason": "x"})}
    event = row_to_event([values[c] for c in EVENT_COLUMNS])
    assert dataclasses.asdict(event) == {RENAMED.get(k, k): (json.loads(v) if k == "data_json" else v)
                                         for k, v in values.items()}
