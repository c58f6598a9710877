"""Drive the stateful step (`streaming.spark.stateful.process_group`) without Spark.

`StatefulDriver` does what Spark's applyInPandasWithState does around the function in a
micro-batch: it groups the batch's event rows by (cluster, group), drops rows at or below the
watermark (late rows), calls the function for each group with rows and for each group whose
event-time timeout the watermark has passed, keeps the state, and moves the watermark after the
batch to the newest event time minus the lateness. Tests use it to check what the function emits
batch by batch (the live view) in milliseconds instead of starting a query.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from streaming.rows import COMPLETE_THROUGH, STATE_INPUT_COLUMNS, bucketed_input_columns, event_row, pack_event_row


@dataclass
class FakeGroupState:
    """The part of pyspark's GroupState the function uses."""
    watermark_ms: int
    value: tuple | None = None
    timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value

    def remove(self) -> None:
        self.value, self.timeout_ms = None, None

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def setTimeoutTimestamp(self, ts_ms: int) -> None:
        self.timeout_ms = ts_ms


@dataclass
class StatefulDriver:
    """`buckets` > 0: the bucketed layout (process_bucket, keys (cluster, crc32(group) % buckets));
    0: one key per group (process_group)."""
    lateness_ms: int
    watermark_ms: int = 0
    newest_ms: int = 0
    states: dict[tuple, FakeGroupState] = field(default_factory=dict)
    late_rows: int = 0
    buckets: int = 0
    # A replay's staged batches: each batch's rows say it is complete through its newest event
    # (streaming/rows.py COMPLETE_THROUGH; bucketed layout only, as in the query).
    complete_through: bool = False

    def _key(self, row: tuple) -> tuple:
        if not self.buckets:
            return (row[0], row[1])
        return (row[0], zlib.crc32((row[1] or "").encode()) % self.buckets)

    def _frame(self, key: tuple, rows: list[tuple], through: int | None) -> pd.DataFrame:
        if not self.buckets:
            return pd.DataFrame.from_records([(r[0], r[1], pack_event_row(r)) for r in rows],
                                             columns=STATE_INPUT_COLUMNS)
        frame = pd.DataFrame.from_records([(r[0], key[1], r[1], pack_event_row(r)) for r in rows],
                                          columns=bucketed_input_columns(self.buckets))
        if self.complete_through:
            frame[COMPLETE_THROUGH] = through
        return frame

    def batch(self, events: list, function=None) -> list[tuple[str, dict[str, Any]]]:
        """One micro-batch of Events (or event rows); returns its output (kind, record) pairs."""
        from streaming.spark.stateful import process_bucket, process_group
        function = function or (process_bucket if self.buckets else process_group)
        rows = [e if isinstance(e, tuple) else event_row(e) for e in events]
        through = max((r[2] for r in rows), default=None)
        by_key: dict[tuple, list[tuple]] = {}
        for r in rows:
            if r[2] <= self.watermark_ms:
                self.late_rows += 1
                continue
            by_key.setdefault(self._key(r), []).append(r)
        due = [k for k, s in self.states.items() if s.exists and s.timeout_ms is not None
               and s.timeout_ms < self.watermark_ms and k not in by_key]     # Spark's rule
        out: list[tuple[str, dict[str, Any]]] = []
        for key in list(by_key) + due:
            state = self.states.setdefault(key, FakeGroupState(self.watermark_ms))
            state.watermark_ms = self.watermark_ms
            state.timeout_ms = None      # Spark resets a key's timeout on every call
            frames = [self._frame(key, by_key[key], through)] if key in by_key else []
            for frame in function(key, iter(frames), state):
                for kind, _cluster, _group, _ts, record_json in frame.itertuples(index=False, name=None):
                    out.append((kind, json.loads(record_json)))
        if rows:
            self.newest_ms = max(self.newest_ms, max(r[2] for r in rows))
        self.watermark_ms = max(self.watermark_ms, self.newest_ms - self.lateness_ms)
        return out

    def tick(self, now_ms: int) -> list[tuple[str, dict[str, Any]]]:
        """A caught-up source's wall-clock marker: the watermark moves to now - lateness."""
        self.newest_ms = max(self.newest_ms, now_ms)
        return self.batch([])
