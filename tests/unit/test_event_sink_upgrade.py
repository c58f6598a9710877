"""Records an older version wrote into the event sink read back in today's shape (checkpoints and
event sinks survive upgrades; the Spark test resumes a real checkpoint of 2a45599)."""
from __future__ import annotations

import json

from sinks.files import RECORD_FILES, EventSink
from state.outputs import ADDED_FIELDS, OutputKind


def test_a_rebalance_record_written_before_assigned_at_ms_and_trigger_final_reads_back_with_them(tmp_path):
    old = {"cluster": "c", "group": "g", "protocol": "classic", "generation": 1, "outcome": "stable"}
    folder = tmp_path / RECORD_FILES[OutputKind.REBALANCE]
    folder.mkdir(parents=True)
    (folder / "batch-00000000000000000003.jsonl").write_text(json.dumps(old) + "\n")
    removal = tmp_path / RECORD_FILES[OutputKind.REMOVAL]
    removal.mkdir(parents=True)
    (removal / "batch-00000000000000000003.jsonl").write_text(json.dumps({"member_id": "m"}) + "\n")
    sink = EventSink(str(tmp_path))
    assert list(sink.records(OutputKind.REBALANCE)) == [{**old, "assigned_at_ms": None, "trigger_final": True}]
    assert list(sink.records(OutputKind.REMOVAL)) == [{"member_id": "m"}]
    assert set(ADDED_FIELDS) <= set(RECORD_FILES)
