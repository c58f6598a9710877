"""Records an older version wrote into the event sink read back in today's shape (checkpoints and
event sinks survive upgrades; the Spark test resumes a real checkpoint of 2a45599)."""
from __future__ import annotations

import json

import pytest

from sinks.event_sink import EventSink
from sinks.files import RECORD_FILES
from state.outputs import ADDED_FIELDS, OutputKind


def test_a_rebalance_record_written_before_assigned_at_ms_trigger_final_and_impact_reads_back_with_them(tmp_path):
    old = {"cluster": "c", "group": "g", "protocol": "classic", "generation": 1, "outcome": "stable"}
    folder = tmp_path / RECORD_FILES[OutputKind.REBALANCE]
    folder.mkdir(parents=True)
    (folder / "batch-00000000000000000003.jsonl").write_text(json.dumps(old) + "\n")
    removal = tmp_path / RECORD_FILES[OutputKind.REMOVAL]
    removal.mkdir(parents=True)
    (removal / "batch-00000000000000000003.jsonl").write_text(json.dumps({"member_id": "m"}) + "\n")
    sink = EventSink(str(tmp_path))
    from state.impact import IMPACT_FIELDS
    impact = {**dict.fromkeys(IMPACT_FIELDS), "impact_unknown_reason": "written by a release that did not measure the impact"}
    assert list(sink.records(OutputKind.REBALANCE)) == [{**old, "assigned_at_ms": None, "trigger_final": True, **impact}]
    assert list(sink.records(OutputKind.REMOVAL)) == [{
        "member_id": "m", "partition_seconds_stopped": None, "root_cause_confidence": None,
        "root_cause_confidence_reason": None, "group_root_cause": None, "host_members": None}]
    assert set(ADDED_FIELDS) <= set(RECORD_FILES)


def test_the_group_state_file_is_versioned_and_an_unversioned_one_loads(tmp_path):
    from sinks.files import STATE_FILE_VERSION, GroupStateFile, StateFileError
    path = tmp_path / "groups.json"
    state = GroupStateFile(str(path))
    state.save(4, {("c", "g"): {"cluster": "c", "group": "g"}}, {"pending": [], "recent": [], "clock_ms": 9})
    assert json.loads(path.read_text())["schema_version"] == STATE_FILE_VERSION == 3
    saved = state.read()
    assert (saved.batch_id, list(saved.groups.values())) == (4, [{"cluster": "c", "group": "g"}])
    # version 2: the same document without a journal beside it
    path.write_text(json.dumps({"schema_version": 2, "batch_id": 6, "groups": [{"cluster": "c", "group": "h"}],
                                "correlator": None, "timeouts": {"c\t1": 5}}))
    state.journal_path.unlink()
    saved = state.read()
    assert (saved.batch_id, list(saved.groups.values())) == (6, [{"cluster": "c", "group": "h"}])
    assert saved.timeouts == {"c\t1": 5}
    # version 1: the same document without the key (tests/fixtures/checkpoint-v1 holds a real one)
    path.write_text(json.dumps({"batch_id": 3, "groups": [], "correlator": {"pending": [], "clock_ms": 1}}))
    saved = state.read()
    assert (saved.batch_id, list(saved.groups.values())) == (3, [])
    assert saved.correlator == {"pending": [], "clock_ms": 1}
    path.write_text(json.dumps({"schema_version": 4, "batch_id": 5, "groups": []}))
    with pytest.raises(StateFileError, match=f"{path}: state file version 4 was written by a newer release "
                                             r"\(this one reads versions 1-3\)"):
        state.read()
    path.write_text("{half")
    with pytest.raises(StateFileError, match="not a state file of this monitor"):
        state.read()
