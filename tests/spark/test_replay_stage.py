"""The replay's first stage (streaming/spark/replay_stage.py): a one-slice stage keeps the files as
the read wrote them, and its stream yields the same events as a stage cut into many slices."""
from __future__ import annotations

import pytest

from tests.support.capture_expectations import capture_inputs

pytestmark = pytest.mark.spark


def _stage(spark, directory, rows_per_slice):
    from streaming.app.settings.wiring import log_file, offsets_file
    from streaming.spark.query import replay_inputs
    from streaming.spark.replay_stage import read_events_by_kind, stage_events
    logs, offsets = capture_inputs("kafka-2.7")
    log_files, specs, offsets_files, clusters = replay_inputs([log_file(i) for i in logs],
                                                              [offsets_file(i) for i in offsets])
    events = read_events_by_kind(spark, log_files, specs, offsets_files, clusters, 10)
    return {k.kind: k for k in stage_events(spark, events, str(directory), rows_per_slice)}


def _streamed(kind):
    """The event rows the staged stream of `kind` yields over all its slices (no end marker)."""
    from streaming.spark.sources.staged import StagedStreamReader
    reader = StagedStreamReader({"kind": kind.kind, "eventSource": "x", "slices": _json(kind.slices),
                                 "rows": _json(kind.rows), "inputs": str(kind.inputs),
                                 "completeThrough": _json(kind.complete_through)})
    rows = []
    offset = reader.initialOffset()
    while not offset["eof"]:
        end = reader.latestOffset(offset, reader.getDefaultReadLimit())
        for part in reader.partitions(offset, end):
            part.marker_source = ""
            for batch in reader.read(part):
                rows += batch.drop_columns(["complete_through_ms"]).to_pylist()
        offset = end
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def _json(value):
    import json
    return json.dumps(value)


def test_one_slice_streams_what_many_slices_do(spark, tmp_path):
    one = _stage(spark, tmp_path / "one", 10**9)
    many = _stage(spark, tmp_path / "many", 100)
    assert set(one) == set(many) == {"broker_log", "offsets"}
    for kind in one:
        assert len(one[kind].slices) == 1 and len(many[kind].slices) > 3
        assert one[kind].rows == [sum(many[kind].rows)]
        assert one[kind].inputs == many[kind].inputs > 0
        assert one[kind].complete_through == [max(t for t in many[kind].complete_through if t is not None)]
        # the one slice is the read's own files, which hold its end-of-input count rows
        assert all("/events/" in path for path in one[kind].slices[0])
        streamed = _streamed(one[kind])
        assert len(streamed) == one[kind].rows[0] and all(r["kind"] != "end_of_input" for r in streamed)
        assert streamed == _streamed(many[kind])
