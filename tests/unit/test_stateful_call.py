"""process_group, the applyInPandasWithState function, with a stand-in for Spark's GroupState:
a group whose applied events are only offset commits sends no snapshot (issue 15, item 1), and
still has an exact final snapshot when a replay's end-of-input watermark arrives."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from state import events as E
from state.outputs import OutputKind
from streaming.rows import EVENT_COLUMNS, FINAL_SNAPSHOT_TS_MS, STATE_INPUT_COLUMNS, event_row, pack_event_row
from streaming.spark.stateful import _rows, process_group


class FakeState:
    """The part of pyspark's GroupState process_group uses."""

    def __init__(self, watermark: int) -> None:
        self.watermark = watermark
        self.value: tuple | None = None
        self.timeout: int | None = None

    exists = property(lambda self: self.value is not None)
    get = property(lambda self: self.value)

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark

    def update(self, value: tuple) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutTimestamp(self, ts: int) -> None:
        self.timeout = ts


def _frame(events: list[E.Event]) -> pd.DataFrame:
    rows = [event_row(ev) for ev in events]
    return pd.DataFrame.from_records([(r[0], r[1], pack_event_row(r)) for r in rows], columns=STATE_INPUT_COLUMNS)


def _call(state: FakeState, events: list[E.Event]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for frame in process_group(("c", "g"), iter([_frame(events)] if events else []), state):
        for kind, record in zip(frame["kind"], frame["record_json"]):
            out.setdefault(kind, []).append(json.loads(record))
    return out


def _commit(ts: int, partition: int, count: int = 3) -> E.Event:
    return E.Event(group="g", ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="__consumer_offsets-1", seq=ts,
                   kind=E.OFFSET_COMMIT, cluster="c",
                   data={"topic": "t", "partition": partition, "offset": ts, "commit_ts_ms": ts, "count": count})


def _metadata(ts: int) -> E.Event:
    return E.Event(group="g", ts_ms=ts, source=E.SOURCE_OFFSETS, source_id="__consumer_offsets-1", seq=ts,
                   kind=E.GROUP_METADATA, generation=1, cluster="c",
                   data={"protocol_type": "consumer", "protocol": "range", "leader": "m1", "current_state_ts_ms": ts,
                         "members": [{"member_id": "m1", "client_id": "c1", "client_host": "/h",
                                      "session_timeout_ms": 10_000, "rebalance_timeout_ms": 60_000,
                                      "partitions": ["t:0"]}]})


def test_commit_only_calls_send_no_snapshot_until_the_final_watermark():
    state = FakeState(watermark=10_000)
    first = _call(state, [_metadata(1_000), _commit(2_000, 0)])
    assert [s["commits_total"] for s in first[OutputKind.SNAPSHOT]] == [3]

    second = _call(state, [_commit(3_000, 0), _commit(4_000, 1, count=2)])
    assert OutputKind.SNAPSHOT not in second and list(second) == [OutputKind.CLOCK]
    assert state.timeout == FINAL_SNAPSHOT_TS_MS        # called again at the end of a replay

    state.watermark = FINAL_SNAPSHOT_TS_MS + 1          # the replay's end-of-input marker
    final = _call(state, [])
    [snap] = final[OutputKind.SNAPSHOT]
    assert (snap["commits_total"], snap["last_commit_ms"], snap["state"]) == (8, 4_000, "Stable")


def test_a_state_changing_event_still_sends_a_snapshot():
    state = FakeState(watermark=10_000)
    _call(state, [_metadata(1_000)])
    out = _call(state, [_commit(3_000, 0), _metadata(4_000)])
    assert [s["commits_total"] for s in out[OutputKind.SNAPSHOT]] == [3]


def test_packed_rows_come_back_as_event_rows_with_nulls_as_none():
    """The JVM leaves null fields out of the packed JSON (to_json); they come back as None, and
    integers as Python ints; the data comes back as the object (rows.PACKED_DATA), not its text."""
    events = [_commit(5, 0), _metadata(6)]
    rows = _rows("c", "g", iter([_frame(events[:1]), _frame(events[1:])]))
    assert rows == [[*event_row(ev)[:-1], ev.data] for ev in events]
    assert rows[0][EVENT_COLUMNS.index("broker")] is None and rows[0][EVENT_COLUMNS.index("generation")] is None
    assert '"broker"' not in pack_event_row(event_row(events[0]))
    assert all(type(v) is not np.float64 for row in rows for v in row)

